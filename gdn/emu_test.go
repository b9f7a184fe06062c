package gdn_test

// The parity suite through the Metal API: every dispatcher of package gdn
// encodes onto an mtl encoder of the emulated device, and the results are
// compared with the CPU references, with each other, with the golden
// vectors, and with the memory traffic the contract allows.

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/gdn"
	"github.com/puremetal/puremetal/internal/gdncheck"
	"github.com/puremetal/puremetal/internal/golden"
	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/mtl"
)

// dispatcher is one of the Kernels methods.
type dispatcher struct {
	name    string
	capture bool
	encode  func(*gdn.Kernels, *mtl.ComputeCommandEncoder, gdn.Params, gdn.Buffers) error
}

var (
	decodeAuto  = dispatcher{"Decode", false, (*gdn.Kernels).Decode}
	decodeSeq   = dispatcher{"DecodeSeq", false, (*gdn.Kernels).DecodeSeq}
	decodeOld   = dispatcher{"DecodeLegacy", false, (*gdn.Kernels).DecodeLegacy}
	decodeCap   = dispatcher{"DecodeWithCapture", true, (*gdn.Kernels).DecodeWithCapture}
	prefill     = dispatcher{"Prefill", false, (*gdn.Kernels).Prefill}
	decodeGroup = []dispatcher{decodeAuto, decodeSeq, decodeOld, decodeCap}
)

// gpu is an emulated device with its queue and kernels.
type gpu struct {
	dev   *mtl.Device
	queue *mtl.CommandQueue
	k     *gdn.Kernels
}

func newGPU(t *testing.T, opts emu.Options) *gpu {
	t.Helper()
	dev := testdevice.Emulated(t, opts)
	queue, err := dev.NewCommandQueue()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(queue.Release)
	k, err := gdn.New(dev, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Release)
	return &gpu{dev: dev, queue: queue, k: k}
}

func (g *gpu) view(t *testing.T, x []float32) gdn.View {
	t.Helper()
	b, err := g.dev.NewBufferWithBytes(gdncheck.F32Bytes(x), mtl.ResourceStorageModeShared)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Release)
	return gdn.F32View(b, 0, len(x))
}

func (g *gpu) poisoned(t *testing.T, n int) gdn.View {
	t.Helper()
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(math.NaN())
	}
	return g.view(t, x)
}

func read(v gdn.View) []float32 {
	if v.Buffer == nil {
		return nil
	}
	all := mtl.Slice[float32](v.Buffer)
	return append([]float32(nil), all[v.Offset/4:][:v.Len]...)
}

func gdnParams(p cpuref.Params) gdn.Params {
	s := p.Shape
	return gdn.Params{
		Shape:   gdn.Shape{DK: s.DK, DV: s.DV, NKHeads: s.NKHeads, NVHeads: s.NVHeads, NTokens: s.NTokens, NSeqs: s.NSeqs},
		HeadMap: gdn.HeadMap(p.HeadMap),
		QScale:  p.QScale,
	}
}

// run encodes one dispatch with d, runs it and returns what it wrote.
func (g *gpu) run(t *testing.T, d dispatcher, p cpuref.Params, in cpuref.Inputs, inPlace bool, captureSlots int) gdncheck.Result {
	t.Helper()
	b := gdn.Buffers{
		Q: g.view(t, in.Q), K: g.view(t, in.K), V: g.view(t, in.V),
		G: g.view(t, in.G), Beta: g.view(t, in.Beta),
		StateIn: g.view(t, in.StateIn),
		Output:  g.poisoned(t, p.VLen()),
	}
	b.StateOut = g.poisoned(t, p.StateLen())
	if inPlace {
		b.StateOut = b.StateIn
	}
	if d.capture {
		b.Capture = g.poisoned(t, captureSlots*p.StateLen())
	}
	cb, err := g.queue.CommandBuffer()
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Release()
	enc, err := cb.ComputeCommandEncoder()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.encode(g.k, enc, gdnParams(p), b); err != nil {
		t.Fatalf("%s: %v", d.name, err)
	}
	if err := enc.EndEncoding(); err != nil {
		t.Fatalf("%s: encoder: %v", d.name, err)
	}
	cb.Commit()
	cb.WaitUntilCompleted()
	if st := cb.Status(); st != mtl.CommandBufferStatusCompleted {
		t.Fatalf("%s: command buffer %v: %v", d.name, st, cb.Error())
	}
	counters, err := emu.DispatchCounters(cb)
	if err != nil || len(counters) != 1 {
		t.Fatalf("%s: %d dispatch counters, %v", d.name, len(counters), err)
	}
	return gdncheck.Result{Output: read(b.Output), State: read(b.StateOut), Capture: read(b.Capture), Counters: counters[0]}
}

// TestParity runs every dispatcher over the parity matrix in two
// scheduling orders against both references; the decode family must be
// bit-identical, capture's last slot byte-identical to the state, the
// in-place update must work, and each state cell must be read and written
// once per dispatch.
func TestParity(t *testing.T) {
	var gpus []*gpu
	for _, opts := range testdevice.Orders {
		gpus = append(gpus, newGPU(t, opts))
	}
	for _, c := range gdncheck.Cases() {
		p := c.Params
		t.Run(c.Name(), func(t *testing.T) {
			refs := c.Compute(t)
			slots := p.NTokens
			if p.NSeqs == 1 {
				slots += 2 // pre-allocated for a longer draft
			}
			var first []byte
			for i, g := range gpus {
				for _, d := range append(decodeGroup, prefill) {
					r := g.run(t, d, p, refs.In, false, slots)
					what := fmt.Sprintf("%s (%v)", d.name, testdevice.Orders[i].Order)
					r.CheckAgainst(t, what, p, refs)
					r.CheckTraffic(t, what, p, d.capture, false)
					if d.name == prefill.name {
						continue
					}
					if first == nil {
						first = r.Bytes()
					} else if !bytes.Equal(r.Bytes(), first) {
						t.Errorf("%s: output and state are not bit-identical to Decode's", what)
					}
				}
			}
			for _, d := range append(decodeGroup, prefill) {
				r := gpus[1].run(t, d, p, refs.In, true, p.NTokens)
				what := d.name + " in place"
				r.CheckAgainst(t, what, p, refs)
				r.CheckTraffic(t, what, p, d.capture, true)
				if d.name != prefill.name && !bytes.Equal(r.Bytes(), first) {
					t.Errorf("%s: not bit-identical to the separate-buffer run", what)
				}
			}
		})
	}
}

// TestGolden runs the dispatchers on HF transformers' Qwen3-Next cases.
func TestGolden(t *testing.T) {
	g := newGPU(t, emu.Options{})
	for _, gc := range golden.LoadAll(t) {
		t.Run(gc.Name, func(t *testing.T) {
			for _, d := range append(decodeGroup, prefill) {
				r := g.run(t, d, gc.Params, gc.Inputs, false, gc.Params.NTokens)
				cmps := []struct {
					what      string
					got, want []float32
				}{
					{"output vs HF", r.Output, gc.Output},
					{"state vs HF", r.State, gc.StateOut},
					{"output vs float64 loop", r.Output, gc.OutputF64},
					{"state vs float64 loop", r.State, gc.StateOutF64},
				}
				if gc.Capture != nil && r.Capture != nil {
					cmps = append(cmps, struct {
						what      string
						got, want []float32
					}{"capture vs HF", r.Capture, gc.Capture})
				}
				for _, c := range cmps {
					if e := cpuref.MaxRelErr(c.got, c.want); !(e <= gdncheck.BoundGolden) {
						t.Errorf("%s: %s: relative error %.3g, bound %g", d.name, c.what, e, gdncheck.BoundGolden)
					}
				}
			}
		})
	}
}

// A rejected dispatch sends nothing to the real encoder.
func TestInvalidSendsNothing(t *testing.T) {
	g := newGPU(t, emu.Options{})
	p := cpuref.Params{Shape: cpuref.Shape{DK: 64, DV: 8, NKHeads: 1, NVHeads: 2, NTokens: 1, NSeqs: 1}}
	in, err := cpuref.RandomInputs(p, 5)
	if err != nil {
		t.Fatal(err)
	}
	b := gdn.Buffers{
		Q: g.view(t, in.Q), K: g.view(t, in.K), V: g.view(t, in.V), G: g.view(t, in.G), Beta: g.view(t, in.Beta),
		StateIn: g.view(t, in.StateIn), Output: g.poisoned(t, p.VLen()), StateOut: g.poisoned(t, p.StateLen()),
	}
	cb, err := g.queue.CommandBuffer()
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Release()
	enc, err := cb.ComputeCommandEncoder()
	if err != nil {
		t.Fatal(err)
	}
	bad := gdnParams(p)
	bad.Shape.DK = 48
	err = g.k.Decode(enc, bad, b)
	if !errors.Is(err, gdn.ErrInvalidArgument) {
		t.Fatalf("D_k 48: %v", err)
	}
	b.Q.Len--
	if err := g.k.Prefill(enc, gdnParams(p), b); !errors.Is(err, gdn.ErrInvalidArgument) {
		t.Fatalf("short Q: %v", err)
	}
	if n := enc.Sends(); n != 0 {
		t.Errorf("%d messages sent to the encoder after rejected dispatches", n)
	}
	if err := enc.EndEncoding(); err != nil {
		t.Errorf("encoder: %v", err)
	}
}
