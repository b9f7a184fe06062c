package cpuref_test

import (
	"fmt"
	"testing"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/gdn/spec"
)

// typeBound is SPEC section 9's bound per type, relative to the largest
// magnitude: 1e-5 for f32, the output bound for a 16-bit type.
var typeBound = map[spec.ElemType]float64{spec.F32: spec.TolF32, spec.F16: spec.TolF16, spec.BF16: spec.TolBF16}

// driftBound bounds a state of each type over 64 decoded tokens against
// the float64 truth, relative to the largest magnitude at each token.
// Each token rounds the state once, at most half a unit in the last place
// (2^-11 relative for f16, 2^-8 for bf16); the decay alpha < 1 and the
// contracting transition I - beta k k^T keep old roundings from adding up,
// so the drift stays a few roundings: measured at most 9.5e-4 (f16) and
// 7.4e-3 (bf16) over three seeds and every activation type at D_k = D_v =
// 128, about 2x to 3x the first token's error. The bounds leave 2x to 4x.
var driftBound = map[spec.ElemType]float64{spec.F32: spec.TolF32, spec.F16: 0x1p-8, spec.BF16: 0x1p-6}

// TestDecodeDrift decodes 64 tokens one call at a time with every
// activation and state type: after the first token a 16-bit state is
// within its type's output bound (SPEC section 9), over all 64 within
// driftBound; the output within its type's bound plus the state's drift.
func TestDecodeDrift(t *testing.T) {
	types := []spec.ElemType{spec.F32, spec.F16, spec.BF16}
	for _, act := range types {
		for _, st := range types {
			t.Run(fmt.Sprintf("A=%v,S=%v", act, st), func(t *testing.T) {
				p := params(128, 128, 1, 2, 64, 1, spec.Block, 0.0883883)
				p.Activation, p.State = act, st
				d, err := cpuref.DecodeDrift(p, 81)
				if err != nil {
					t.Fatal(err)
				}
				if len(d.State) != 64 || len(d.Output) != 64 {
					t.Fatalf("%d state and %d output figures, want 64 each", len(d.State), len(d.Output))
				}
				state, out := d.Max()
				t.Logf("state after token 1 %.3g, over 64 tokens %.3g; output over 64 tokens %.3g", d.State[0], state, out)
				if !(d.State[0] <= typeBound[st]) {
					t.Errorf("state after one token %.3g, bound %.3g", d.State[0], typeBound[st])
				}
				if !(state <= driftBound[st]) {
					t.Errorf("state drift over 64 tokens %.3g, bound %.3g", state, driftBound[st])
				}
				if b := typeBound[act] + driftBound[st]; !(out <= b) {
					t.Errorf("output over 64 tokens %.3g, bound %.3g", out, b)
				}
			})
		}
	}
}

// TestDecodeDriftSeesRounding: a 16-bit state does drift, so the test
// above measures something (an f32 state stays at float32 noise).
func TestDecodeDriftSeesRounding(t *testing.T) {
	p := params(32, 16, 1, 1, 8, 2, spec.Tiled, 0)
	f32, err := cpuref.DecodeDrift(p, 82)
	if err != nil {
		t.Fatal(err)
	}
	p.State = spec.BF16
	bf16, err := cpuref.DecodeDrift(p, 82)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := f32.Max()
	b, _ := bf16.Max()
	if !(a < 1e-6 && b > 1e-4) {
		t.Errorf("largest state error: f32 %.3g, bf16 %.3g; want float32 noise and a visible bf16 rounding", a, b)
	}
	if _, err := cpuref.DecodeDrift(spec.Params{}, 1); err == nil {
		t.Error("DecodeDrift with zero params: no error")
	}
}

// A decode loop of 64 tokens with a 16-bit state, against the float64
// truth: the state is rounded once per token, yet its error stays near
// the first token's.
func ExampleDecodeDrift() {
	for _, st := range []spec.ElemType{spec.F16, spec.BF16} {
		p := spec.Params{
			Shape:  spec.Shape{DK: 64, DV: 64, NKHeads: 1, NVHeads: 1, NTokens: 64, NSeqs: 1},
			QScale: 0.125,
			State:  st,
		}
		d, err := cpuref.DecodeDrift(p, 1)
		if err != nil {
			fmt.Println(err)
			return
		}
		state, _ := d.Max()
		fmt.Printf("state %-4v after token 1: %.1e, largest over 64 tokens: %.1e\n", st, d.State[0], state)
	}
	// Output:
	// state f16  after token 1: 2.5e-04, largest over 64 tokens: 4.4e-04
	// state bf16 after token 1: 2.0e-03, largest over 64 tokens: 3.4e-03
}
