package tests

import (
	"testing"
	"time"

	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/gdn"
	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/kernels"
	"github.com/puremetal/puremetal/mtl"
)

// stepLayers is the number of Gated DeltaNet layers of the decode step the
// host-cost measurements encode into one command buffer.
const stepLayers = 32

// decodeStep is one decode step of a stepLayers-layer model on the
// emulated device: each layer's parameters and buffers (a state of its
// own, in place; activations shared), and the same messages for sending
// directly through mtl.
type decodeStep struct {
	r      *rig
	p      gdn.Params
	layers []gdn.Buffers
	// what gdn sends, for the direct encoding: the pipeline state, buffers
	// 0-13, the parameters
	pso     *mtl.ComputePipelineState
	bufs    [][]*mtl.Buffer
	offsets []int
	params  []byte
}

func newDecodeStep(tb testing.TB, act spec.ElemType) *decodeStep {
	r := newRig(tb, testdevice.Emulated(tb, emu.Options{}), true)
	p := spec.Params{
		Shape:      spec.Shape{DK: 128, DV: 128, NKHeads: 16, NVHeads: 32, NTokens: 1, NSeqs: 1},
		QScale:     0.0883883476,
		Activation: act, State: spec.F32, Fused: spec.FusedAll,
	}
	shared := gdn.Buffers{
		Q: r.poisonedTyped(tb, act, p.QKLen()), K: r.poisonedTyped(tb, act, p.QKLen()), V: r.poisonedTyped(tb, act, p.VLen()),
		G: r.poisonedTyped(tb, act, p.GateLen()), Beta: r.poisonedTyped(tb, act, p.GateLen()), Output: r.poisonedTyped(tb, act, p.VLen()),
	}
	s := &decodeStep{r: r, p: p, offsets: make([]int, 14), params: paramBytes(p)}
	pso, err := r.reg.Pipeline(r.dev, kernels.DecodePackedOf(act, spec.F32, 4))
	if err != nil {
		tb.Fatal(err)
	}
	s.pso = pso
	for range stepLayers {
		b := shared
		b.StateIn = r.poisonedTyped(tb, spec.F32, p.StateLen())
		b.StateOut = b.StateIn
		b.ALog, b.DtBias = r.poisonedTyped(tb, spec.F32, p.NVHeads), r.poisonedTyped(tb, spec.F32, p.NVHeads)
		s.layers = append(s.layers, b)
		s.bufs = append(s.bufs, []*mtl.Buffer{b.Q.Buffer, b.K.Buffer, b.V.Buffer, b.G.Buffer, b.Beta.Buffer,
			b.StateIn.Buffer, b.Output.Buffer, b.StateOut.Buffer, b.Q.Buffer, b.G.Buffer, b.ALog.Buffer, b.DtBias.Buffer,
			b.G.Buffer, b.G.Buffer})
	}
	return s
}

// viaGDN encodes every layer's dispatch with gdn.Kernels.Decode.
func (s *decodeStep) viaGDN(tb testing.TB, enc *mtl.ComputeCommandEncoder) {
	for l := range s.layers {
		if err := s.r.k.Decode(enc, s.p, s.layers[l]); err != nil {
			tb.Fatal(err)
		}
	}
}

// direct sends the same messages through mtl, without gdn: the emulated
// device's (and mtl's) own cost.
func (s *decodeStep) direct(enc *mtl.ComputeCommandEncoder) {
	grid, group := mtl.Size{Width: 4, Height: 32, Depth: 1}, mtl.Size{Width: 32, Height: 4, Depth: 1}
	for l := range s.layers {
		enc.SetComputePipelineState(s.pso)
		enc.SetBuffers(s.bufs[l], s.offsets, 0)
		enc.SetBytes(s.params, 8)
		enc.DispatchThreadgroups(grid, group)
	}
}

// encoder returns a compute command encoder of a new command buffer, which
// is ended and released (never committed: nothing runs) by done.
func (s *decodeStep) encoder(tb testing.TB) (enc *mtl.ComputeCommandEncoder, done func()) {
	cb, err := s.r.queue.CommandBuffer()
	if err != nil {
		tb.Fatal(err)
	}
	enc, err = cb.ComputeCommandEncoder()
	if err != nil {
		tb.Fatal(err)
	}
	return enc, func() {
		if err := enc.EndEncoding(); err != nil {
			tb.Fatal(err)
		}
		cb.Release()
	}
}

// TestEmulatedDecodeStepHostCost encodes a 32-layer decode step (Qwen3.5
// layers, bf16, the fused step: the packed decode kernel) into one command
// buffer and checks gdn's host cost: at most 4 messages per dispatch (3
// once the pipeline state is set: it changes only with the kernel), the
// same messages the direct encoding sends, and no allocation of gdn's own
// (the emulated device's, which the direct encoding makes too, aside).
func TestEmulatedDecodeStepHostCost(t *testing.T) {
	s := newDecodeStep(t, spec.BF16)
	enc, done := s.encoder(t)
	s.viaGDN(t, enc)
	viaGDN := enc.Sends()
	done()
	enc, done = s.encoder(t)
	s.direct(enc)
	direct := enc.Sends()
	done()
	if viaGDN > 4*stepLayers || viaGDN != direct {
		t.Errorf("%d layers: %d messages through gdn (%.2f per dispatch), %d sent directly; want at most 4 per dispatch and the same",
			stepLayers, viaGDN, float64(viaGDN)/stepLayers, direct)
	}
	t.Logf("%d layers: %d messages, %.3g per dispatch", stepLayers, viaGDN, float64(viaGDN)/stepLayers)

	allocs := func(encode func(enc *mtl.ComputeCommandEncoder)) float64 {
		enc, done := s.encoder(t)
		defer done()
		return testing.AllocsPerRun(20, func() { encode(enc) }) / stepLayers
	}
	g, d := allocs(func(enc *mtl.ComputeCommandEncoder) { s.viaGDN(t, enc) }), allocs(s.direct)
	if g > d {
		t.Errorf("%.2f allocations per dispatch through gdn, %.2f sending the same directly: gdn allocates", g, d)
	}
	t.Logf("allocations per dispatch: %.2f through gdn, %.2f direct (the emulated device's own)", g, d)
}

// BenchmarkEmulatedDecodeStepHostCost measures the host cost of encoding a
// 32-layer decode step (one command buffer, one dispatch per layer, the
// pipeline state set once) on the emulated device, per dispatch: ns
// through gdn, ns sending the same messages directly (the emulated
// device's callbacks and mtl), their difference (gdn's own: validation,
// kernel choice, pipeline lookup, argument packing), each the median over
// the rounds, and messages sent.
//
//	go test ./tests -run '^$' -bench DecodeStepHostCost
func BenchmarkEmulatedDecodeStepHostCost(b *testing.B) {
	for _, act := range []spec.ElemType{spec.BF16, spec.F32} {
		b.Run(act.String(), func(b *testing.B) {
			s := newDecodeStep(b, act)
			var viaGDN, direct, diff []float64 // ns per dispatch, each round
			sends := 0
			for b.Loop() {
				enc, done := s.encoder(b)
				t0 := time.Now()
				s.viaGDN(b, enc)
				g := float64(time.Since(t0).Nanoseconds()) / stepLayers
				sends += enc.Sends()
				done()
				enc, done = s.encoder(b)
				t0 = time.Now()
				s.direct(enc)
				d := float64(time.Since(t0).Nanoseconds()) / stepLayers
				done()
				viaGDN, direct, diff = append(viaGDN, g), append(direct, d), append(diff, g-d)
			}
			n := float64(b.N * stepLayers)
			// medians: the emulated device's callbacks dominate and vary
			b.ReportMetric(median(viaGDN), "ns/dispatch")
			b.ReportMetric(median(direct), "direct-ns/dispatch")
			b.ReportMetric(median(diff), "gdn-ns/dispatch")
			b.ReportMetric(float64(sends)/n, "sends/dispatch")
		})
	}
}
