package cpuref_test

import (
	"math"
	"testing"

	"github.com/puremetal/puremetal/checkpoint"
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

// qwenNextProject computes the projections of step i of c in float64 from
// its hidden states and weights, with Qwen3-Next's rows permuted to the
// core's order, each rounded once to the case's type.
func qwenNextProject(t *testing.T, c golden.LayerCase, i int) (mixed, z, a, b []float32) {
	t.Helper()
	m := c.Meta
	h := checkpoint.Heads{DK: m.DK, DV: m.DV, NKHeads: m.NKHeads, NVHeads: m.NVHeads}
	qkvzRows, err := checkpoint.QKVZRows(h)
	if err != nil {
		t.Fatal(err)
	}
	baRows, err := checkpoint.BARows(h)
	if err != nil {
		t.Fatal(err)
	}
	qkvz, err := checkpoint.Permute(c.InProjQKVZ, m.Hidden, qkvzRows)
	if err != nil {
		t.Fatal(err)
	}
	ba, err := checkpoint.Permute(c.InProjBA, m.Hidden, baRows)
	if err != nil {
		t.Fatal(err)
	}
	s := c.Steps[i]
	act := s.Params.Activation
	xz := matVec(qkvz, m.Hidden, s.Hidden)
	xba := matVec(ba, m.Hidden, s.Hidden)
	cd, nz, nv := m.ConvDim, m.NVHeads*m.DV, m.NVHeads
	tokens := len(s.Hidden) / m.Hidden
	for tok := 0; tok < tokens; tok++ {
		row := xz[tok*(cd+nz) : (tok+1)*(cd+nz)]
		mixed = append(mixed, row[:cd]...)
		z = append(z, row[cd:]...)
		gb := xba[tok*2*nv : (tok+1)*2*nv]
		b = append(b, gb[:nv]...)
		a = append(a, gb[nv:]...)
	}
	for _, x := range [][]float32{mixed, z, a, b} {
		cpuref.Round(act, x)
	}
	return mixed, z, a, b
}

// matVec applies the row-major matrix w (cols columns) to every run of
// cols elements of x, in float64, and returns the products as float32
// (rounded once), token after token.
func matVec(w []float32, cols int, x []float32) []float32 {
	rows := len(w) / cols
	var y []float32
	for t := 0; t+cols <= len(x); t += cols {
		for r := 0; r < rows; r++ {
			var acc float64
			for j := 0; j < cols; j++ {
				acc += float64(w[r*cols+j]) * float64(x[t+j])
			}
			y = append(y, float32(acc))
		}
	}
	return y
}

// outProj applies out_proj ([hidden, n_v_heads D_v]) to every token of the
// core output in float64.
func outProj(w []float32, width int, core []float32) []float64 {
	rows := len(w) / width
	var y []float64
	for t := 0; t+width <= len(core); t += width {
		for r := 0; r < rows; r++ {
			var acc float64
			for j := 0; j < width; j++ {
				acc += float64(w[r*width+j]) * float64(core[t+j])
			}
			y = append(y, acc)
		}
	}
	return y
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
				mixed, z, a, b := qwenNextProject(t, c, i)
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
				out := outProj(c.OutProj, c.Meta.NVHeads*c.Meta.DV, ref.Output)
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
