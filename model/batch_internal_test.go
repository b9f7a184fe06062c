package model

import (
	"fmt"
	"runtime/debug"
	"testing"
	"time"

	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/tensor"
)

// batchRig loads a golden case (decodeRig) and returns a session with rows sequences
// prefilled, the passes of one Batcher step (a decode pass of those rows,
// each sampled with its own settings, and a prefill chunk of another
// sequence) and an open encoder (committed never) on which they were
// encoded once, so that their pipelines exist.
func batchRig(t testing.TB, dev *mtl.Device, name string, rows int) (*Session, []pass, *mtl.ComputeCommandEncoder) {
	s0, _ := decodeRig(t, dev, name) // the model
	const chunk = 8
	s, err := s0.m.newSession(rows + 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Release)
	cb, err := s.queue.CommandBuffer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cb.Release) // never committed
	enc, err := cb.ComputeCommandEncoder()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { enc.EndEncoding() })
	in, out := s.newView(tensor.U32, rows+1), s.newView(tensor.U32, rows+1)
	dec := inputs{s.newView(tensor.U32, rows), s.newView(tensor.I32, rows), s.newView(tensor.I32, rows), s.newView(tensor.I32, rows)}
	pre := inputs{s.newView(tensor.U32, chunk), s.newView(tensor.I32, chunk), s.newView(tensor.I32, 1), s.newView(tensor.I32, 1)}
	if s.err != nil {
		t.Fatal(s.err)
	}
	p := make([]int32, chunk)
	for i := range p {
		p[i] = int32(i * 37 % s.m.Config.VocabSize)
	}
	slots, io := make([]int, rows), make([]rowIO, rows)
	for i := range rows {
		if slots[i], err = s.Acquire(); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Prefill(slots[i], p[:1+i%len(p)], nil); err != nil {
			t.Fatal(err)
		}
		sp := Sampling{Temperature: 1, TopK: 20, Seed: uint64(i)}.params()
		sp.Step = 1
		io[i] = rowIO{in: row(in, slots[i], 1), out: row(out, slots[i], 1), sample: sp}
	}
	dec.fill(nil, slots, s.lens)
	joining, err := s.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	pre.fill(p, []int{joining}, s.lens)
	passes := []pass{
		{n: chunk, seqs: 1, lastOnly: true, in: pre},
		{n: rows, seqs: rows, decode: true, in: dec, rows: io},
	}
	encodeAll(t, s, enc, passes)
	return s, passes, enc
}

func encodeAll(t testing.TB, s *Session, enc *mtl.ComputeCommandEncoder, passes []pass) {
	for _, p := range passes {
		if err := s.encode(enc, p); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBatchStepEncodingAllocates checks that encoding a Batcher's step
// (a prefill chunk and a decode pass of 12 rows, each embedded and
// sampled by its own dispatches, the products in matvec groups)
// allocates nothing on the host once the pipelines exist, on the emulated
// device and, on a Mac, on Metal (the collector off while counting, as
// in checkEncodingAllocates).
func TestBatchStepEncodingAllocates(t *testing.T) {
	t.Run("emulated", func(t *testing.T) {
		checkBatchStepAllocates(t, testdevice.Emulated(t, emu.Options{}), "qwen3_dense_bf16")
	})
	t.Run("metal", func(t *testing.T) {
		dev := testdevice.Metal(t)
		for _, name := range []string{"qwen35_dense_bf16", "qwen3_dense_bf16"} {
			t.Run(name, func(t *testing.T) { checkBatchStepAllocates(t, dev, name) })
		}
	})
}

func checkBatchStepAllocates(t *testing.T, dev *mtl.Device, name string) {
	s, passes, enc := batchRig(t, dev, name, 12)
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	encodeAll(t, s, enc, passes) // refill the pools a collection may have emptied
	before := enc.Sends()
	allocs := testing.AllocsPerRun(3, func() { encodeAll(t, s, enc, passes) })
	t.Logf("%v allocations per batched step of %d encoder calls", allocs, (enc.Sends()-before)/4)
	if allocs != 0 {
		t.Errorf("encoding a batched step allocates %v times", allocs)
	}
}

// BenchmarkEncodeBatchStep measures the host's cost of encoding one
// Batcher step of the tiny model (a prefill chunk of 8 tokens and a
// decode pass of rows rows; no GPU work is committed), per step and per
// encoder call.
func BenchmarkEncodeBatchStep(b *testing.B) {
	dev := testdevice.Emulated(b, emu.Options{})
	for _, rows := range []int{1, 8, 16} {
		b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) {
			s, passes, enc := batchRig(b, dev, "qwen3_dense_bf16", rows)
			before := enc.Sends()
			encodeAll(b, s, enc, passes)
			perStep := enc.Sends() - before
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				encodeAll(b, s, enc, passes)
			}
			us := float64(time.Since(start).Microseconds()) / float64(b.N)
			b.ReportMetric(us, "µs/step")
			b.ReportMetric(float64(perStep), "sends/step")
			b.ReportMetric(us/float64(perStep), "µs/send")
		})
	}
}
