package gdn

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/mtl"
)

// coreArgs returns valid arguments of the core kernel for s with the
// whole Qwen core, activation type a and an f32 state.
func (fb fakeBuffers) coreArgs(s Shape, a ElemType) (Params, Buffers, CoreBuffers) {
	p := Params{Shape: s, QScale: 0.125, Activation: a, Fused: FusedAll, Core: QwenCore()}
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
	pg, bg, cg := fb.coreArgs(s, BF16)
	cg.ConvStateOut = cg.ConvStateIn
	if err := ValidateCore(pg, bg, cg); err != nil {
		t.Errorf("in-place conv state with grouped heads refused: %v", err)
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
		{"conv state out over conv state in", func(_ *Params, _ *Buffers, c *CoreBuffers) {
			c.ConvStateOut = View{Buffer: c.ConvStateIn.Buffer, Offset: c.ConvStateIn.Offset + 2, Type: BF16, Len: c.ConvStateOut.Len}
			fb[c.ConvStateIn.Buffer].length = 1 << 20
		}, "CoreBuffers.ConvStateOut"},
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
		pk.Core = QwenCore()
		if err := Validate(k, pk, bk); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "Params.Core") {
			t.Errorf("%s kernel with a core: error %v, want one naming Params.Core", k, err)
		}
	}
}

// TestCoreBytes checks the core parameter block: flags, eps bits, conv_dim.
func TestCoreBytes(t *testing.T) {
	p := Params{Shape: Shape{DK: 64, DV: 32, NKHeads: 1, NVHeads: 2, NTokens: 1, NSeqs: 1},
		Core: Core{Conv: 4, Norm: true, NormGate: GateSigmoid, NormEps: 1e-5}}
	b := coreBytes(p, true, true)
	word := func(i int) uint32 {
		return uint32(b[4*i]) | uint32(b[4*i+1])<<8 | uint32(b[4*i+2])<<16 | uint32(b[4*i+3])<<24
	}
	if got, want := word(0), uint32(coreConv|coreNorm|coreSigmoid|coreCapture|coreGroupedFlag); got != want {
		t.Errorf("flags %#x, want %#x", got, want)
	}
	if got := math.Float32frombits(word(1)); got != 1e-5 {
		t.Errorf("eps %v, want 1e-5", got)
	}
	if got := word(2); got != 2*64+2*32 {
		t.Errorf("conv_dim %d, want %d", got, 2*64+2*32)
	}
	if z := coreBytes(Params{Shape: p.Shape}, false, false); [8]byte(z[:8]) != [8]byte{} {
		t.Errorf("zero core: flags and eps %v, want zeros", z[:8])
	}
}

// TestCoreGeometry checks the core dispatcher's choice: one threadgroup
// per value head unless the conv state is updated in place with grouped
// heads, then one per key head with as many of its value heads side by
// side as the pipeline's thread limit takes (a divisor of r), and the
// grouped flag in the core parameters exactly then.
func TestCoreGeometry(t *testing.T) {
	fb := useFakeBuffers(t)
	for _, tc := range []struct {
		name       string
		s          Shape
		inPlace    bool
		maxThreads int
		grid       mtl.Size
		group      mtl.Size
	}{
		{"Qwen3.5 apart", Shape{DK: 128, DV: 128, NKHeads: 16, NVHeads: 32, NTokens: 1, NSeqs: 3}, false, 1024, size(1, 32, 3), size(32, 16, 1)},
		{"Qwen3.5 in place", Shape{DK: 128, DV: 128, NKHeads: 16, NVHeads: 32, NTokens: 1, NSeqs: 3}, true, 1024, size(1, 16, 3), size(32, 32, 1)},
		{"Qwen3.5 in place, 512 threads", Shape{DK: 128, DV: 128, NKHeads: 16, NVHeads: 32, NTokens: 1, NSeqs: 3}, true, 1023, size(1, 16, 3), size(32, 16, 1)},
		{"r 6 in place, 3 per pass", Shape{DK: 64, DV: 64, NKHeads: 2, NVHeads: 12, NTokens: 2, NSeqs: 1}, true, 800, size(1, 2, 1), size(32, 24, 1)},
		{"r 4 in place, D_v 128: 2 per pass (256 rows)", Shape{DK: 128, DV: 128, NKHeads: 1, NVHeads: 4, NTokens: 2, NSeqs: 1}, true, 2048, size(1, 1, 1), size(32, 32, 1)},
		{"mha in place", Shape{DK: 64, DV: 64, NKHeads: 2, NVHeads: 2, NTokens: 1, NSeqs: 1}, true, 1024, size(1, 2, 1), size(32, 8, 1)},
	} {
		p, b, c := fb.coreArgs(tc.s, BF16)
		if tc.inPlace {
			c.ConvStateOut = c.ConvStateIn
		}
		rec := &recorder{}
		kk := &Kernels{pipelines: &fakePipelines{maxThreads: tc.maxThreads}}
		if err := kk.dispatchCore(rec, p, b, c); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		grouped := tc.inPlace && tc.s.NVHeads > tc.s.NKHeads
		var dispatched, flagged bool
		for _, cl := range rec.calls {
			switch cl.method {
			case "DispatchThreadgroups":
				dispatched = true
				if grid, group := cl.args[0].(mtl.Size), cl.args[1].(mtl.Size); grid != tc.grid || group != tc.group {
					t.Errorf("%s: grid %v, group %v; want %v, %v", tc.name, grid, group, tc.grid, tc.group)
				}
			case "SetBytes":
				if cl.args[1].(int) == coreParamsIndex {
					flagged = cl.args[0].([]byte)[0]&coreGroupedFlag != 0
				}
			}
		}
		if !dispatched || flagged != grouped {
			t.Errorf("%s: dispatched %v, grouped flag %v, want grouped %v", tc.name, dispatched, flagged, grouped)
		}
	}
}

// TestValidateCoreOn checks that ValidateCoreOn takes valid core arguments
// for each prefill and refuses, with an error wrapping ErrInvalidArgument
// that names the field, an in-place conv state with grouped heads (saying
// the heads' numbers), a capture buffer, q with the convolution, a
// misaligned state for the blocked kernel, and the decode kernels.
func TestValidateCoreOn(t *testing.T) {
	fb := useFakeBuffers(t)
	for _, k := range []Kernel{KernelPrefillChunked, KernelPrefillBlocked, KernelPrefill} {
		s := Shape{DK: 64, DV: 64, NKHeads: 1, NVHeads: 2, NTokens: 37, NSeqs: 2}
		p, b, c := fb.coreArgs(s, BF16)
		if err := ValidateCoreOn(k, p, b, c); err != nil {
			t.Fatalf("%s: valid core arguments refused: %v", k, err)
		}
		mha := Shape{DK: 64, DV: 64, NKHeads: 2, NVHeads: 2, NTokens: 5, NSeqs: 1}
		pm, bm, cm := fb.coreArgs(mha, F16)
		cm.ConvStateOut = cm.ConvStateIn
		if err := ValidateCoreOn(k, pm, bm, cm); err != nil {
			t.Errorf("%s: in-place conv state without grouped heads refused: %v", k, err)
		}
		for _, tc := range []struct {
			name string
			edit func(p *Params, b *Buffers, c *CoreBuffers)
			want []string
		}{
			{"conv state in place with grouped heads", func(_ *Params, _ *Buffers, c *CoreBuffers) { c.ConvStateOut = c.ConvStateIn },
				[]string{"CoreBuffers.ConvStateOut", "n_v_heads = 2 over n_k_heads = 1", k.String()}},
			{"capture", func(_ *Params, b *Buffers, _ *CoreBuffers) { b.Capture = fb.view(s.CaptureLen()) }, []string{"Capture"}},
			{"q with the convolution", func(_ *Params, b *Buffers, _ *CoreBuffers) { b.Q = fb.typedView(BF16, s.QKLen()) }, []string{"Q"}},
			{"z short", func(_ *Params, _ *Buffers, c *CoreBuffers) { c.Z.Len-- }, []string{"CoreBuffers.Z"}},
			{"eps 0", func(p *Params, _ *Buffers, _ *CoreBuffers) { p.Core.NormEps = 0 }, []string{"Core.NormEps"}},
		} {
			p, b, c := fb.coreArgs(s, BF16)
			tc.edit(&p, &b, &c)
			err := ValidateCoreOn(k, p, b, c)
			if !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("%s, %s: error %v, want one wrapping ErrInvalidArgument", k, tc.name, err)
				continue
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s, %s: error %v, want one naming %s", k, tc.name, err, w)
				}
			}
		}
	}
	s := Shape{DK: 64, DV: 64, NKHeads: 1, NVHeads: 2, NTokens: 3, NSeqs: 1}
	p, b, c := fb.coreArgs(s, F32)
	b.StateOut = View{Buffer: fb.buffer(4*b.StateOut.Len + 4), Offset: 4, Type: F32, Len: b.StateOut.Len}
	if err := ValidateCoreOn(KernelPrefillBlocked, p, b, c); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "StateOut") {
		t.Errorf("blocked, misaligned state: error %v, want one naming StateOut", err)
	}
	if err := ValidateCoreOn(KernelPrefillChunked, p, b, c); err != nil {
		t.Errorf("chunked, state at an offset of one element: %v (the chunked kernel reads it element by element)", err)
	}
	for _, k := range []Kernel{KernelDecode, KernelDecodeSeq, KernelDecodeLegacy, KernelDecodeCapture, KernelDecodePacked, KernelDecodePackedSeq, KernelDecodePackedCapture} {
		p, b, c := fb.coreArgs(s, F32)
		if err := ValidateCoreOn(k, p, b, c); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "kernel") {
			t.Errorf("%s: error %v, want one naming the kernel", k, err)
		}
	}
}

// TestPrefillCoreKernel checks PrefillCore's choice: the chunked kernel
// from ChunkedMinTokens tokens on, the blocked one below where it applies
// (and its state offsets are aligned), the token-by-token one otherwise,
// and PrefillKernel's choice for a zero core.
func TestPrefillCoreKernel(t *testing.T) {
	qwen := Params{Shape: Shape{DK: 128, DV: 128, NKHeads: 16, NVHeads: 32, NTokens: ChunkedMinTokens, NSeqs: 1},
		Activation: BF16, Fused: FusedAll, Core: QwenCore()}
	for _, tc := range []struct {
		name string
		edit func(p *Params, b *Buffers)
		want Kernel
	}{
		{"64 tokens", func(*Params, *Buffers) {}, KernelPrefillChunked},
		{"63 tokens", func(p *Params, _ *Buffers) { p.NTokens = ChunkedMinTokens - 1 }, KernelPrefillBlocked},
		{"63 tokens, state at an odd offset", func(p *Params, b *Buffers) { p.NTokens, b.StateIn.Offset = ChunkedMinTokens-1, 4 }, KernelPrefill},
		{"63 tokens, D_k 96", func(p *Params, _ *Buffers) { p.NTokens, p.DK = ChunkedMinTokens-1, 96 }, KernelPrefill},
		{"63 tokens, D_v 192 (beyond the prefill's 128)", func(p *Params, _ *Buffers) { p.NTokens, p.DV = ChunkedMinTokens-1, 192 }, KernelPrefillBlocked},
		{"zero core, 63 tokens, D_k 96", func(p *Params, _ *Buffers) { p.NTokens, p.DK, p.Core = ChunkedMinTokens-1, 96, Core{} }, KernelPrefill},
	} {
		p, b := qwen, Buffers{}
		tc.edit(&p, &b)
		if got := PrefillCoreKernel(p, b); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
