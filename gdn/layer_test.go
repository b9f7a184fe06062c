package gdn

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/gdn/spec"
)

// coreArgs returns valid arguments of the core kernel for s with the
// whole Qwen core, activation type a and an f32 state.
func (fb fakeBuffers) coreArgs(s Shape, a ElemType) (Params, Buffers, CoreBuffers) {
	p := Params{Shape: s, QScale: 0.125, Activation: a, Fused: FusedAll, Core: QwenCore}
	b := Buffers{
		G: fb.typedView(a, s.GateLen()), Beta: fb.typedView(a, s.GateLen()),
		StateIn: fb.typedView(F32, s.StateLen()), StateOut: fb.typedView(F32, s.StateLen()),
		Output: fb.typedView(a, s.VLen()), ALog: fb.view(s.NVHeads), DtBias: fb.view(s.NVHeads),
	}
	c := CoreBuffers{
		MixedQKV: fb.typedView(a, s.MixedLen()), ConvWeight: fb.typedView(a, p.ConvWeightLen()),
		ConvStateIn: fb.typedView(a, p.ConvStateLen()), ConvStateOut: fb.typedView(a, p.ConvStateLen()),
		Z: fb.typedView(a, s.ZLen()), NormWeight: fb.typedView(a, s.DV),
	}
	return p, b, c
}

// TestValidateCore checks that ValidateCore takes valid core arguments
// and refuses each broken one with an error wrapping ErrInvalidArgument
// that names the field.
func TestValidateCore(t *testing.T) {
	fb := useFakeBuffers(t)
	s := Shape{DK: 64, DV: 32, NKHeads: 1, NVHeads: 2, NTokens: 3, NSeqs: 2}
	p, b, c := fb.coreArgs(s, BF16)
	if err := ValidateCore(p, b, c); err != nil {
		t.Fatalf("valid core arguments refused: %v", err)
	}
	mha := Shape{DK: 64, DV: 64, NKHeads: 2, NVHeads: 2, NTokens: 1, NSeqs: 1}
	pm, bm, cm := fb.coreArgs(mha, F16)
	cm.ConvStateOut = cm.ConvStateIn
	if err := ValidateCore(pm, bm, cm); err != nil {
		t.Errorf("in-place conv state without grouped heads refused: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(p *Params, b *Buffers, c *CoreBuffers)
		want string
	}{
		{"conv kernel 3", func(p *Params, _ *Buffers, _ *CoreBuffers) { p.Core.Conv = 3 }, "Core.Conv"},
		{"eps 0", func(p *Params, _ *Buffers, _ *CoreBuffers) { p.Core.NormEps = 0 }, "Core.NormEps"},
		{"eps -1", func(p *Params, _ *Buffers, _ *CoreBuffers) { p.Core.NormEps = -1 }, "Core.NormEps"},
		{"eps inf", func(p *Params, _ *Buffers, _ *CoreBuffers) { p.Core.NormEps = float32(math.Inf(1)) }, "Core.NormEps"},
		{"gate 9", func(p *Params, _ *Buffers, _ *CoreBuffers) { p.Core.NormGate = 9 }, "Core.NormGate"},
		{"D_k 96", func(p *Params, _ *Buffers, _ *CoreBuffers) { p.DK = 96 }, "Shape.DK"},
		{"D_v 12", func(p *Params, _ *Buffers, _ *CoreBuffers) { p.DV = 12 }, "Shape.DV"},
		{"D_v 264", func(p *Params, _ *Buffers, _ *CoreBuffers) { p.DV = 264 }, "Shape.DV"},
		{"D_v 16 at D_k 64", func(p *Params, _ *Buffers, _ *CoreBuffers) { p.DV = 16 }, "Shape.DV"},
		{"mixed short", func(_ *Params, _ *Buffers, c *CoreBuffers) { c.MixedQKV.Len-- }, "CoreBuffers.MixedQKV"},
		{"mixed f32", func(_ *Params, _ *Buffers, c *CoreBuffers) { c.MixedQKV = fb.typedView(F32, c.MixedQKV.Len) }, "CoreBuffers.MixedQKV"},
		{"conv weight missing", func(_ *Params, _ *Buffers, c *CoreBuffers) { c.ConvWeight = View{} }, "CoreBuffers.ConvWeight"},
		{"conv state long", func(_ *Params, _ *Buffers, c *CoreBuffers) { c.ConvStateIn.Len++ }, "CoreBuffers.ConvStateIn"},
		{"conv state out f16", func(_ *Params, _ *Buffers, c *CoreBuffers) {
			c.ConvStateOut = fb.typedView(F16, c.ConvStateOut.Len)
		}, "CoreBuffers.ConvStateOut"},
		{"conv state in place with grouped heads", func(_ *Params, _ *Buffers, c *CoreBuffers) { c.ConvStateOut = c.ConvStateIn }, "CoreBuffers.ConvStateOut"},
		{"conv state out over mixed", func(_ *Params, _ *Buffers, c *CoreBuffers) {
			c.ConvStateOut = View{Buffer: c.MixedQKV.Buffer, Type: BF16, Len: c.ConvStateOut.Len}
			fb[c.MixedQKV.Buffer].length = 1 << 20
		}, "CoreBuffers.ConvStateOut"},
		{"output over z", func(_ *Params, b *Buffers, c *CoreBuffers) { b.Output = c.Z }, "Output"},
		{"z short", func(_ *Params, _ *Buffers, c *CoreBuffers) { c.Z.Len-- }, "CoreBuffers.Z"},
		{"norm weight missing", func(_ *Params, _ *Buffers, c *CoreBuffers) { c.NormWeight = View{} }, "CoreBuffers.NormWeight"},
		{"q with the convolution", func(_ *Params, b *Buffers, _ *CoreBuffers) { b.Q = fb.typedView(BF16, s.QKLen()) }, "Q"},
		{"z without the norm", func(p *Params, _ *Buffers, _ *CoreBuffers) { p.Core = spec.Core{Conv: 4} }, "CoreBuffers.Z"},
		{"mixed without the convolution", func(p *Params, _ *Buffers, _ *CoreBuffers) { p.Core.Conv = 0 }, "CoreBuffers.MixedQKV"},
		{"capture short", func(_ *Params, b *Buffers, _ *CoreBuffers) { b.Capture = fb.view(8) }, "Capture"},
		{"state out misaligned", func(_ *Params, b *Buffers, _ *CoreBuffers) {
			b.StateOut = View{Buffer: fb.buffer(4*b.StateOut.Len + 4), Offset: 4, Type: F32, Len: b.StateOut.Len}
		}, "StateOut"},
	} {
		p, b, c := fb.coreArgs(s, BF16)
		tc.edit(&p, &b, &c)
		err := ValidateCore(p, b, c)
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one wrapping ErrInvalidArgument naming %s", tc.name, err, tc.want)
		}
	}
	// Every other kernel refuses a core.
	for _, k := range allKernels {
		pk, bk := fb.typedArgs(k, decodeShape, F32, F32, spec.Fused{})
		pk.Core = QwenCore
		if err := Validate(k, pk, bk); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "Params.Core") {
			t.Errorf("%s kernel with a core: error %v, want one naming Params.Core", k, err)
		}
	}
}

// TestCoreBytes checks the core parameter block: flags, eps bits, conv_dim.
func TestCoreBytes(t *testing.T) {
	p := Params{Shape: Shape{DK: 64, DV: 32, NKHeads: 1, NVHeads: 2, NTokens: 1, NSeqs: 1},
		Core: Core{Conv: 4, Norm: true, NormGate: GateSigmoid, NormEps: 1e-5}}
	b := coreBytes(p, true)
	word := func(i int) uint32 {
		return uint32(b[4*i]) | uint32(b[4*i+1])<<8 | uint32(b[4*i+2])<<16 | uint32(b[4*i+3])<<24
	}
	if got, want := word(0), uint32(coreConv|coreNorm|coreSigmoid|coreCapture); got != want {
		t.Errorf("flags %#x, want %#x", got, want)
	}
	if got := math.Float32frombits(word(1)); got != 1e-5 {
		t.Errorf("eps %v, want 1e-5", got)
	}
	if got := word(2); got != 2*64+2*32 {
		t.Errorf("conv_dim %d, want %d", got, 2*64+2*32)
	}
	if z := coreBytes(Params{Shape: p.Shape}, false); [8]byte(z[:8]) != [8]byte{} {
		t.Errorf("zero core: flags and eps %v, want zeros", z[:8])
	}
}
