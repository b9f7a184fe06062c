package model_test

import (
	"testing"

	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/gdn"
	"github.com/puremetal/puremetal/model"
	"github.com/puremetal/puremetal/mtl"
)

// TestDecodeTraffic measures, with the emulator's counters, the bytes one
// decode step moves on three golden models and logs them against the
// floor (Model.DecodeFloor), checking the floor is one: no step moves
// less. The counters charge every load a thread makes, so x re-read by
// each SIMD-group of a matvec and the parameter block every thread reads
// count in full, where a GPU's caches serve them; on these tiny models
// (hidden size 128, 4-bit weights in one) those are of the weights'
// order, so the ratio here is no figure of a real model's (the ops
// package's traffic tests check each kernel's weight bytes exactly).
func TestDecodeTraffic(t *testing.T) {
	for _, name := range []string{"qwen3next_moe_mlx4", "qwen35moe_bf16", "qwen3_dense_bf16"} {
		t.Run(name, func(t *testing.T) {
			s, c := loadSession(t, name, model.Options{MaxLen: 96})
			m := s.Model()
			slot, _ := s.Acquire()
			p := c.Prompts[0]
			if _, err := s.Prefill(slot, p.Prompt, nil); err != nil {
				t.Fatal(err)
			}
			held := s.Len(slot)
			moved := decodeBytes(t, s, slot, p.Tokens[0])
			floor := m.DecodeFloor(held)
			t.Logf("%s: a decode step at %d positions moves %d bytes, floor %d (%.2fx)", name, held, moved, floor, float64(moved)/float64(floor))
			if moved < floor {
				t.Errorf("a decode step moves %d bytes, less than the floor %d: the floor counts something the step does not read", moved, floor)
			}
		})
	}
}

// TestPrefillTraffic measures, with the emulator's counters, the bytes a
// prefill pass of 64 and of 65 tokens moves on the golden Qwen3-Next
// model (3 linear-attention layers of 4), and logs which prefill kernel
// the linear-attention cores ran for the pass's first n-1 tokens
// (gdn.PrefillCoreKernel: the chunked prefill from gdn.ChunkedMinTokens
// tokens on) before the decode core's last token. A pass reads every
// weight it uses at least once, so none moves less than a decode step's
// floor.
func TestPrefillTraffic(t *testing.T) {
	for _, n := range []int{64, 65} {
		s, c := loadSession(t, "qwen3next_dense_bf16", model.Options{MaxLen: 96, Chunk: n})
		m := s.Model()
		slot, _ := s.Acquire()
		moved := passBytes(t, s, func(cb *mtl.CommandBuffer) error { return s.EncodePrefillPass(cb, slot, c.Prompts[1].Prompt[:n]) })
		k := gdn.PrefillCoreKernel(m.LinearParams(n-1, 1), gdn.Buffers{})
		t.Logf("a %d-token prefill pass moves %d bytes (the linear-attention cores: %v for %d tokens, then the decode core for the last)", n, moved, k, n-1)
		if floor := m.DecodeFloor(0); moved < floor {
			t.Errorf("a %d-token prefill pass moves %d bytes, less than a decode step's floor %d", n, moved, floor)
		}
	}
}

// decodeBytes runs one decode step and returns the bytes its dispatches
// loaded and stored.
func decodeBytes(t *testing.T, s *model.Session, slot int, token int32) int64 {
	t.Helper()
	return passBytes(t, s, func(cb *mtl.CommandBuffer) error { return s.EncodeDecode(cb, slot, token) })
}

// passBytes runs the pass encode encodes on a command buffer of its own
// and returns the bytes its dispatches loaded and stored.
func passBytes(t *testing.T, s *model.Session, encode func(*mtl.CommandBuffer) error) int64 {
	t.Helper()
	q, err := s.Model().Device().NewCommandQueue()
	if err != nil {
		t.Fatal(err)
	}
	defer q.Release()
	cb, err := q.CommandBuffer()
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Release()
	if err := encode(cb); err != nil {
		t.Fatal(err)
	}
	cb.Commit()
	cb.WaitUntilCompleted()
	cs, err := emu.DispatchCounters(cb)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, c := range cs {
		for i := range c.Loaded {
			n += int64(c.Loaded[i] + c.Stored[i])
		}
	}
	return n
}
