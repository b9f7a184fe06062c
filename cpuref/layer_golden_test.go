package cpuref_test

import (
	"math"
	"testing"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/internal/golden"
)

// TestGoldenLayer runs both references through every case of the layer set
// step by step, each carrying its own recurrent state and conv state from
// step to step as generation does: the core output and the recurrent state
// within SPEC section 9's bounds of the truth, the conv state equal to it
// (it holds copies of inputs), and with 16-bit activations Reference32 no
// farther from the truth than HF's forward.
func TestGoldenLayer(t *testing.T) {
	for _, c := range golden.LoadLayerSet(t) {
		t.Run(c.Name, func(t *testing.T) {
			p0 := c.Steps[0].Params
			state32 := make([]float32, p0.StateLen())
			conv32 := make([]float32, p0.ConvStateLen())
			state64 := make([]float32, p0.StateLen())
			conv64 := make([]float32, p0.ConvStateLen())
			for i, s := range c.Steps {
				p := s.Params
				ref, err := cpuref.Reference32(p, c.Inputs(i, state32, conv32), false)
				if err != nil {
					t.Fatal(err)
				}
				ora, err := cpuref.Oracle64(p, c.Inputs(i, state64, conv64), false)
				if err != nil {
					t.Fatal(err)
				}
				o32 := ora.Float32()
				state32, conv32 = ref.StateOut, ref.ConvState
				state64, conv64 = o32.StateOut, o32.ConvState

				check := func(what string, e, bound float64) {
					t.Helper()
					t.Logf("s%d %-32s %.3g (bound %.3g)", i, what, e, bound)
					if !(e <= bound) {
						t.Errorf("step %d: %s: relative error %.3g > %.3g", i, what, e, bound)
					}
				}
				// The truth is saved as float32: 2^-24 relative, and the
				// oracle's carried state is rounded to float32 as well.
				check("Oracle64 core vs truth", cpuref.MaxRelErr64(s.CoreF64, ora.Output), 1e-6)
				check("Oracle64 state vs truth", cpuref.MaxRelErr64(s.StateF64, ora.StateOut), 1e-6)
				check("Oracle64 conv_state vs truth", cpuref.MaxRelErr64(s.ConvStateF64, ora.ConvState), 0)

				refCore := cpuref.MaxRelErr(ref.Output, s.CoreF64)
				hfCore := cpuref.MaxRelErr(s.CoreHF, s.CoreF64)
				check("Reference32 core vs truth", refCore, fusedOutputBound[p.Activation])
				check("Reference32 state vs truth", cpuref.MaxRelErr(ref.StateOut, s.StateF64), fusedStateBound)
				check("Reference32 conv_state vs truth", cpuref.MaxRelErr(ref.ConvState, s.ConvStateF64), 0)
				t.Logf("s%d %-32s %.3g", i, "HF core vs truth", hfCore)
				if p.Activation != spec.F32 && !(refCore <= hfCore) {
					t.Errorf("step %d: Reference32's core is %.3g from the truth, HF's %.3g", i, refCore, hfCore)
				}
			}
		})
	}
}

// TestGoldenLayerProjections runs the whole layer on the CPU: the
// projections from the stored hidden states with Qwen3-Next's row mapping
// (they match the stored projections up to one rounding of the type in a
// few elements: the producer's sums run in another order), Reference32's
// core on them with both caches carried, and out_proj, against out_f64.
func TestGoldenLayerProjections(t *testing.T) {
	for _, c := range golden.LoadLayerSet(t) {
		t.Run(c.Name, func(t *testing.T) {
			p0 := c.Steps[0].Params
			state := make([]float32, p0.StateLen())
			conv := make([]float32, p0.ConvStateLen())
			for i, s := range c.Steps {
				mixed, z, a, b, err := c.Project(i)
				if err != nil {
					t.Fatal(err)
				}
				for _, x := range []struct {
					name      string
					got, want []float32
				}{{"mixed_qkv", mixed, s.MixedQKV}, {"z", z, s.Z}, {"a", a, s.A}, {"b", b, s.B}} {
					e := cpuref.MaxRelErr(x.got, x.want)
					bound := 2 * ulpRel(s.Params.Activation)
					t.Logf("s%d projection %-9s vs stored %.3g", i, x.name, e)
					if !(e <= bound) {
						t.Errorf("step %d: projection %s is %.3g from the stored one (bound %.3g): row mapping wrong?", i, x.name, e, bound)
					}
				}
				in := c.Inputs(i, state, conv)
				in.MixedQKV, in.Z, in.G, in.Beta = mixed, z, a, b
				ref, err := cpuref.Reference32(s.Params, in, false)
				if err != nil {
					t.Fatal(err)
				}
				state, conv = ref.StateOut, ref.ConvState
				out := c.Out(ref.Output)
				e := maxRelErr64(out, s.OutF64)
				hf := cpuref.MaxRelErr(s.OutHF, s.OutF64)
				t.Logf("s%d out vs out_f64 %.3g (HF %.3g)", i, e, hf)
				if bound := 2 * fusedOutputBound[s.Params.Activation]; !(e <= bound) {
					t.Errorf("step %d: out is %.3g from out_f64, bound %.3g", i, e, bound)
				}
			}
		})
	}
}

// ulpRel is the spacing of a type's values relative to a magnitude: 2^-23
// (f32), 2^-10 (f16), 2^-7 (bf16).
func ulpRel(t spec.ElemType) float64 {
	switch t {
	case spec.F16:
		return 0x1p-10
	case spec.BF16:
		return 0x1p-7
	}
	return 0x1p-23
}

func maxRelErr64(got []float64, want []float32) float64 {
	if len(got) != len(want) {
		return math.Inf(1)
	}
	g := make([]float32, len(got))
	for i, v := range got {
		g[i] = float32(v)
	}
	return cpuref.MaxRelErr(g, want)
}
