package model

import (
	"path/filepath"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/internal/golden"
	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/mtl"
)

// decodeRig loads a golden case and returns a session with a slot whose
// prompt is prefilled and the decode pass of its next token, encoded once
// (so that its pipelines exist and the device's recording storage has
// grown to a step's size).
func decodeRig(t testing.TB, dev *mtl.Device, name string) (*Session, pass) {
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
	encodeStep(t, s, p)
	return s, p
}

// encodeStep encodes the decode pass p into a new command buffer, as a
// decode step does, and returns the host allocations of the encoding
// alone (every layer's dispatches, the lm_head and the sampler; not the
// command buffer's creation, endEncoding or commit) and the encoder's
// messages. The command buffer is released uncommitted.
func encodeStep(t testing.TB, s *Session, p pass) (mallocs uint64, sends int) {
	t.Helper()
	cb, err := s.queue.CommandBuffer()
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Release()
	enc, err := cb.ComputeCommandEncoder()
	if err != nil {
		t.Fatal(err)
	}
	defer enc.EndEncoding()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err = s.encode(enc, p)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	return after.Mallocs - before.Mallocs, enc.Sends()
}

// checkEncodingAllocates checks that encoding a decode step allocates
// nothing on the host once the pipelines exist, over several steps each
// in a command buffer of its own. The collector is off while it counts: a
// collection empties the sync.Pools that the send path (purego's call
// arguments, mtl's encoder scratch) takes from, and the next send refills
// them once, an allocation per collection, not per step.
func checkEncodingAllocates(t *testing.T, dev *mtl.Device, name string) {
	s, p := decodeRig(t, dev, name)
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	encodeStep(t, s, p) // refill the pools a collection may have emptied
	const steps = 5
	var total uint64
	var sends int
	for range steps {
		m, n := encodeStep(t, s, p)
		total, sends = total+m, n
	}
	t.Logf("%d allocations in %d decode steps of %d encoder messages each", total, steps, sends)
	if total != 0 {
		t.Errorf("encoding a decode step allocates: %d times in %d steps", total, steps)
	}
}

var allocCases = []string{"qwen3next_moe_mlx4", "qwen35_dense_bf16", "qwen3_dense_bf16"}

// TestDecodeEncodingAllocates checks on Metal that encoding a whole decode
// step allocates nothing on the host, on each architecture of the golden
// set.
func TestDecodeEncodingAllocates(t *testing.T) {
	dev := testdevice.Metal(t)
	for _, name := range allocCases {
		t.Run(name, func(t *testing.T) { checkEncodingAllocates(t, dev, name) })
	}
}

// TestDecodeEncodingAllocatesEmulated checks the same on the emulated
// device, whose compute encoders record their messages in C and whose
// command buffers reuse their queue's recording storage.
func TestDecodeEncodingAllocatesEmulated(t *testing.T) {
	dev := testdevice.Emulated(t, emu.Options{})
	for _, name := range allocCases {
		t.Run(name, func(t *testing.T) { checkEncodingAllocates(t, dev, name) })
	}
}

// BenchmarkEncodeDecodeStep measures the host's cost of encoding one
// decode step of the whole model into a command buffer of its own (no
// GPU work is committed), reported per step and per encoder message.
func BenchmarkEncodeDecodeStep(b *testing.B) {
	s, p := decodeRig(b, testdevice.Emulated(b, emu.Options{}), "qwen3next_moe_mlx4")
	var sends int
	var spent time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		_, sends = encodeStep(b, s, p)
		spent += time.Since(start)
	}
	us := float64(spent.Nanoseconds()) / 1e3 / float64(b.N)
	b.ReportMetric(us, "µs/step")
	b.ReportMetric(us/float64(sends), "µs/send")
	b.ReportMetric(float64(sends), "sends/step")
}
