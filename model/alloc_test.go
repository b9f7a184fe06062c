package model

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/internal/golden"
	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/mtl"
)

// decodeRig loads a golden case and returns a session with a slot whose
// prompt is prefilled, the decode pass of its next token, and an open
// encoder (committed never) on which the pass was encoded once, so that
// its pipelines exist.
func decodeRig(t testing.TB, dev *mtl.Device, name string) (*Session, pass, *mtl.ComputeCommandEncoder) {
	c, err := golden.LoadModel(filepath.Join(golden.SetDir(t, golden.ModelsSubdir), name))
	if err != nil {
		t.Fatal(err)
	}
	m, err := Load(dev, c.Dir, Options{MaxLen: 64})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Release)
	s, err := m.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Release)
	slot, err := s.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Prefill(slot, c.Prompts[0].Prompt, nil); err != nil {
		t.Fatal(err)
	}
	in := s.s.ring[0]
	in.fill([]int32{c.Prompts[0].Tokens[0]}, []int{slot}, s.lens)
	p := pass{n: 1, seqs: 1, decode: true, in: in}
	p.sample.Tokens = s.s.ring[1].tokens
	cb, err := s.queue.CommandBuffer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cb.Release)
	enc, err := cb.ComputeCommandEncoder()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { enc.EndEncoding() })
	if err := s.encode(enc, p); err != nil {
		t.Fatal(err)
	}
	return s, p, enc
}

// TestDecodeEncodingAllocates checks that encoding a whole decode step
// (every layer's dispatches, the lm_head and the sampler) allocates
// nothing on the host once the pipelines exist, on each architecture of
// the golden set. It runs on Metal: the emulated device implements
// Metal's methods as Go callbacks, which allocate on every call, so there
// the count measures the emulator (TestDecodeEncodingAllocatesEmulated
// logs it).
func TestDecodeEncodingAllocates(t *testing.T) {
	dev := testdevice.Metal(t)
	for _, name := range []string{"qwen3next_moe_mlx4", "qwen35_dense_bf16", "qwen3_dense_bf16"} {
		t.Run(name, func(t *testing.T) {
			s, p, enc := decodeRig(t, dev, name)
			allocs := testing.AllocsPerRun(5, func() {
				if err := s.encode(enc, p); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != 0 {
				t.Errorf("encoding a decode step allocates %v times", allocs)
			}
		})
	}
}

// TestDecodeEncodingAllocatesEmulated logs the allocations of encoding a
// decode step on the emulated device and checks the step encodes.
func TestDecodeEncodingAllocatesEmulated(t *testing.T) {
	s, p, enc := decodeRig(t, testdevice.Emulated(t, emu.Options{}), "qwen3_dense_bf16")
	before := enc.Sends()
	allocs := testing.AllocsPerRun(3, func() {
		if err := s.encode(enc, p); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("emulated device: %v allocations per decode step of %d encoder calls (the emulator's callbacks)", allocs, (enc.Sends()-before)/4)
}

// BenchmarkEncodeDecodeStep measures the host's cost of encoding one
// decode step of the whole model (no GPU work is committed), reported
// per dispatch.
func BenchmarkEncodeDecodeStep(b *testing.B) {
	s, p, enc := decodeRig(b, testdevice.Emulated(b, emu.Options{}), "qwen3next_moe_mlx4")
	before := enc.Sends()
	if err := s.encode(enc, p); err != nil {
		b.Fatal(err)
	}
	perStep := enc.Sends() - before
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if err := s.encode(enc, p); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/float64(b.N), "µs/step")
	b.ReportMetric(float64(perStep), "sends/step")
}
