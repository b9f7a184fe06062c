package cpuref_test

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/half"
)

// everyFused lists the eight combinations of the fused parts.
func everyFused() []spec.Fused {
	var all []spec.Fused
	for i := range 8 {
		all = append(all, spec.Fused{L2Norm: i&1 != 0, Gate: i&2 != 0, Beta: i&4 != 0})
	}
	return all
}

func fusedName(f spec.Fused) string {
	return fmt.Sprintf("l2norm=%v,gate=%v,beta=%v", f.L2Norm, f.Gate, f.Beta)
}

// plantEdges puts the golden vectors' edge values into fused inputs: the
// first key vector all zeros (the epsilon path, k^ = 0), a = 25 (softplus
// past its threshold) and a = -30, b = +30 and b = -30 (beta saturates).
func plantEdges(p spec.Params, in *cpuref.Inputs) {
	if p.Fused.L2Norm {
		clear(in.K[:p.DK])
	}
	if p.Fused.Gate && len(in.G) >= 2 {
		in.G[0], in.G[1] = 25, -30
	}
	if p.Fused.Beta && len(in.Beta) >= 3 {
		in.Beta[1], in.Beta[2] = 30, -30
	}
}

// byHand32 computes the fused parts of p in float32 as SPEC section 10
// writes them, each elementary function in float64 rounded once, and
// returns inputs for the unfused call.
func byHand32(p spec.Params, in cpuref.Inputs) cpuref.Inputs {
	out := cpuref.Inputs{Q: in.Q, K: in.K, V: in.V, G: in.G, Beta: in.Beta, StateIn: in.StateIn}
	norm := func(x []float32) []float32 {
		y := slices.Clone(x)
		for h := 0; h < len(y); h += p.DK {
			var ss float32
			for j := h; j < h+p.DK; j++ {
				ss += float32(y[j] * y[j])
			}
			r := float32(math.Sqrt(float64(float32(ss + float32(1e-6)))))
			for j := h; j < h+p.DK; j++ {
				y[j] /= r
			}
		}
		return y
	}
	if p.Fused.L2Norm {
		out.Q, out.K = norm(in.Q), norm(in.K)
	}
	if p.Fused.Gate {
		out.G = make([]float32, len(in.G))
		for i, a := range in.G {
			h := i % p.NVHeads
			x := float32(a + in.DtBias[h])
			sp := x
			if !(x > 20) {
				sp = float32(math.Log1p(math.Exp(float64(x))))
			}
			out.G[i] = float32(float32(math.Exp(float64(in.ALog[h]))) * sp)
		}
	}
	if p.Fused.Beta {
		out.Beta = make([]float32, len(in.Beta))
		for i, b := range in.Beta {
			out.Beta[i] = float32(1 / (1 + math.Exp(-float64(b))))
		}
	}
	return out
}

// unfused returns p without element types or fused parts.
func unfused(p spec.Params) spec.Params {
	p.Activation, p.State, p.Fused = spec.F32, spec.F32, spec.Fused{}
	return p
}

// TestFusedMatchesByHand: with every combination of fused parts, on raw
// inputs with the edge values planted, Reference32 gives the bits of the
// unfused call on the gates and norms computed by hand, and Oracle64 agrees
// with the unfused oracle on them to their float32 rounding.
func TestFusedMatchesByHand(t *testing.T) {
	for _, f := range everyFused() {
		t.Run(fusedName(f), func(t *testing.T) {
			p := params(32, 16, 2, 4, 3, 2, spec.Block, 0.25)
			p.Fused = f
			in := random(t, p, 71)
			plantEdges(p, &in)
			hand := byHand32(p, in)
			got := run32(t, p, in, true)
			want := run32(t, unfused(p), hand, true)
			if !bitsEqual(got.Output, want.Output) || !bitsEqual(got.StateOut, want.StateOut) || !bitsEqual(got.Capture, want.Capture) {
				t.Errorf("Reference32 fused differs from the unfused call on hand-computed inputs: output %.3g, state %.3g",
					cpuref.MaxRelErr(got.Output, want.Output), cpuref.MaxRelErr(got.StateOut, want.StateOut))
			}
			o := run64(t, p, in, true)
			u := run64(t, unfused(p), hand, true)
			// Each hand-computed input carries one float32 rounding (2^-24
			// relative); through the recurrence that stays near 1e-7.
			if e := cpuref.MaxRelErr64(o.Float32().Output, u.Output); e > 1e-6 {
				t.Errorf("Oracle64 fused output %.3g from the unfused oracle on hand-computed inputs", e)
			}
			if e := cpuref.MaxRelErr64(o.Float32().StateOut, u.StateOut); e > 1e-6 {
				t.Errorf("Oracle64 fused state %.3g from the unfused oracle on hand-computed inputs", e)
			}
			if f.L2Norm { // the planted zero key: k^ = 0, so token 0 of head 0 writes nothing new
				if slices.ContainsFunc(hand.K[:p.DK], func(x float32) bool { return x != 0 }) {
					t.Errorf("zero key normalised to %v, want 0", hand.K[:p.DK])
				}
			}
		})
	}
}

// TestFusedChangesResults: each fused part on its own changes the result,
// so the tests above could tell a reference that ignored it.
func TestFusedChangesResults(t *testing.T) {
	p := params(16, 8, 1, 2, 2, 1, spec.Block, 0)
	for _, f := range everyFused()[1:] {
		p.Fused = f
		in := random(t, p, 72)
		a := run32(t, p, in, false)
		in.ALog, in.DtBias = nil, nil
		b := run32(t, unfused(p), in, false)
		if e := cpuref.MaxRelErr(a.Output, b.Output); !(e > 1e-2) {
			t.Errorf("%s: fused and unfused readings of the same buffers differ by %.3g only", fusedName(f), e)
		}
	}
}

// TestRoundingPoints: with 16-bit types, one call's output is the float32
// call's output rounded to the activation type, and its state_out and
// capture slots are the float32 call's rounded to the state type, bit for
// bit: nothing else is rounded (not q^ or k^, not the gates, not the state
// between tokens of one call).
func TestRoundingPoints(t *testing.T) {
	types := []spec.ElemType{spec.F32, spec.F16, spec.BF16}
	for _, act := range types {
		for _, st := range types {
			for _, f := range []spec.Fused{{}, spec.FusedAll} {
				name := fmt.Sprintf("A=%v,S=%v,%s", act, st, fusedName(f))
				t.Run(name, func(t *testing.T) {
					p := params(32, 16, 2, 4, 4, 2, spec.Tiled, 0.125)
					p.Activation, p.State, p.Fused = act, st, f
					in := random(t, p, 73)
					plantEdges(p, &in)
					got := run32(t, p, in, true)
					f32 := p
					f32.Activation, f32.State = spec.F32, spec.F32
					want := run32(t, f32, in, true)
					cpuref.Round(act, want.Output)
					cpuref.Round(st, want.StateOut)
					cpuref.Round(st, want.Capture)
					if !bitsEqual(got.Output, want.Output) {
						t.Errorf("output is not the float32 output rounded to %v once (%.3g apart)", act, cpuref.MaxRelErr(got.Output, want.Output))
					}
					if !bitsEqual(got.StateOut, want.StateOut) || !bitsEqual(got.Capture, want.Capture) {
						t.Errorf("state is not the float32 state rounded to %v once per write (%.3g apart)", st, cpuref.MaxRelErr(got.StateOut, want.StateOut))
					}
					for i, x := range got.Output {
						if math.Float32bits(roundTo(act, x)) != math.Float32bits(x) {
							t.Fatalf("output[%d] = %v is not a %v value", i, x, act)
						}
					}
				})
			}
		}
	}
}

func roundTo(t spec.ElemType, x float32) float32 {
	y := []float32{x}
	cpuref.Round(t, y)
	return y[0]
}

// TestRoundUsesHalf: Round is package half's narrowing, widened back.
func TestRoundUsesHalf(t *testing.T) {
	x := []float32{1.0 / 3, -70000, 1e-8, 65519, float32(math.Inf(1))}
	for _, c := range []struct {
		t    spec.ElemType
		want func(float32) float32
	}{
		{spec.F32, func(x float32) float32 { return x }},
		{spec.F16, func(x float32) float32 { return half.ToFloat16(x).Float32() }},
		{spec.BF16, func(x float32) float32 { return half.ToBFloat16(x).Float32() }},
	} {
		y := slices.Clone(x)
		cpuref.Round(c.t, y)
		for i := range x {
			if w := c.want(x[i]); math.Float32bits(y[i]) != math.Float32bits(w) {
				t.Errorf("Round(%v, %v) = %v, want %v", c.t, x[i], y[i], w)
			}
		}
	}
}

// TestTypedMatchesOracle: Reference32 with 16-bit types against the
// float64 oracle on the same rounded inputs, within SPEC section 9's
// bounds: the output within 2^-8 (bf16) or 2^-10 (f16) of the largest
// output magnitude, an f32 state within 1e-5, a 16-bit state within its
// type's output bound (one call: the state is rounded once).
func TestTypedMatchesOracle(t *testing.T) {
	bound := map[spec.ElemType]float64{spec.F32: refBound, spec.F16: spec.TolF16, spec.BF16: spec.TolBF16}
	types := []spec.ElemType{spec.F32, spec.F16, spec.BF16}
	for _, act := range types {
		for _, st := range types {
			for _, f := range []spec.Fused{{}, spec.FusedAll} {
				t.Run(fmt.Sprintf("A=%v,S=%v,%s", act, st, fusedName(f)), func(t *testing.T) {
					p := params(128, 64, 2, 4, 1, 2, spec.Block, 0.0883883)
					p.Activation, p.State, p.Fused = act, st, f
					in := random(t, p, 74)
					got := run32(t, p, in, false)
					want := run64(t, p, in, false)
					eo := cpuref.MaxRelErr64(got.Output, want.Output)
					es := cpuref.MaxRelErr64(got.StateOut, want.StateOut)
					t.Logf("output %.3g, state %.3g", eo, es)
					if !(eo <= bound[act]) {
						t.Errorf("output %.3g from the oracle, bound %.3g", eo, bound[act])
					}
					if !(es <= bound[st]) {
						t.Errorf("state %.3g from the oracle, bound %.3g", es, bound[st])
					}
				})
			}
		}
	}
}

// TestTypedValidation: values that are not of the declared type, and
// layer constants where the gate is not fused or missing where it is, are
// errors naming the buffer, the element and the types.
func TestTypedValidation(t *testing.T) {
	p := params(8, 4, 1, 2, 2, 1, spec.Block, 0)
	p.Activation, p.State, p.Fused = spec.BF16, spec.F16, spec.FusedAll
	good := random(t, p, 75)
	if _, err := cpuref.Reference32(p, good, false); err != nil {
		t.Fatalf("valid call: %v", err)
	}
	cases := []struct {
		name  string
		p     spec.Params
		edit  func(*cpuref.Inputs)
		wants []string
	}{
		{"q not bf16", p, func(x *cpuref.Inputs) { x.Q[3] = 0.1 }, []string{"q[3] = 0.1", "Params.Activation = bf16"}},
		{"v not bf16", p, func(x *cpuref.Inputs) { x.V[5] = 1.001 }, []string{"v[5] = 1.001", "bf16"}},
		{"a not bf16", p, func(x *cpuref.Inputs) { x.G[1] = 0.3 }, []string{"a (in g)[1] = 0.3", "bf16"}},
		{"b not bf16", p, func(x *cpuref.Inputs) { x.Beta[2] = 0.3 }, []string{"b (in beta)[2] = 0.3"}},
		{"state not f16", p, func(x *cpuref.Inputs) { x.StateIn[7] = 1e-9 }, []string{"state_in[7] = 1e-09", "Params.State = f16"}},
		{"short A_log", p, func(x *cpuref.Inputs) { x.ALog = x.ALog[:1] }, []string{"A_log has 1", "n_v_heads = 2"}},
		{"missing dt_bias", p, func(x *cpuref.Inputs) { x.DtBias = nil }, []string{"dt_bias has 0", "n_v_heads = 2"}},
		{"A_log unfused", unfused(p), func(x *cpuref.Inputs) { x.DtBias = nil }, []string{"A_log has 2", "Fused.Gate is off"}},
		{"bad type", spec.Params{Shape: p.Shape, State: 7}, nil, []string{"State", "ElemType(7)"}},
	}
	for _, c := range cases {
		x := good
		x.Q, x.V, x.G, x.Beta, x.StateIn = slices.Clone(x.Q), slices.Clone(x.V), slices.Clone(x.G), slices.Clone(x.Beta), slices.Clone(x.StateIn)
		if c.edit != nil {
			c.edit(&x)
		}
		checkRefused(t, c.name, c.p, x, c.wants...)
	}
}

// TestRandomInputsTyped: the raw inputs of the fused parts, rounded to the
// types, from the same draws as the unfused inputs.
func TestRandomInputsTyped(t *testing.T) {
	base := params(64, 16, 2, 4, 8, 2, spec.Block, 0)
	plain := random(t, base, 76)
	p := base
	p.Fused = spec.FusedAll
	raw := random(t, p, 76)
	var unitNorms int
	for h := 0; h < len(raw.Q); h += p.DK {
		var n float64
		for _, v := range raw.Q[h : h+p.DK] {
			n += float64(v) * float64(v)
		}
		if math.Abs(n-1) < 1e-3 {
			unitNorms++
		}
		// Raw q is the draw the unfused q was normalised from.
		r := float32(math.Sqrt(n))
		for j, v := range raw.Q[h : h+p.DK] {
			if d := math.Abs(float64(v/r - plain.Q[h+j])); d > 1e-6 {
				t.Fatalf("q[%d]: raw %v over its norm %v is not the normalised draw %v", h+j, v, r, plain.Q[h+j])
			}
		}
	}
	if unitNorms > 0 {
		t.Errorf("%d raw q heads have unit norm", unitNorms)
	}
	if len(raw.ALog) != p.NVHeads || len(raw.DtBias) != p.NVHeads {
		t.Fatalf("A_log, dt_bias have %d, %d elements, want %d", len(raw.ALog), len(raw.DtBias), p.NVHeads)
	}
	for h, a := range raw.ALog {
		if !(a >= 0 && a <= float32(math.Log(16))) {
			t.Errorf("A_log[%d] = %v outside [0, log 16]", h, a)
		}
	}
	for i, a := range raw.G {
		h := i % p.NVHeads
		g := math.Exp(float64(raw.ALog[h])) * math.Log1p(math.Exp(float64(a+raw.DtBias[h])))
		if math.Abs(g-float64(plain.G[i])) > 1e-5*math.Max(1, g) {
			t.Fatalf("g[%d]: from a = %v, %v; the unfused draw is %v", i, a, g, plain.G[i])
		}
		if beta := 1 / (1 + math.Exp(-float64(raw.Beta[i]))); math.Abs(beta-float64(plain.Beta[i])) > 1e-6 {
			t.Fatalf("beta[%d]: from b = %v, %v; the unfused draw is %v", i, raw.Beta[i], beta, plain.Beta[i])
		}
	}
	for _, act := range []spec.ElemType{spec.F16, spec.BF16} {
		for _, st := range []spec.ElemType{spec.F32, spec.F16, spec.BF16} {
			q := p
			q.Activation, q.State = act, st
			typed := random(t, q, 76)
			for name, pair := range map[string][2][]float32{
				"q": {raw.Q, typed.Q}, "k": {raw.K, typed.K}, "v": {raw.V, typed.V},
				"a": {raw.G, typed.G}, "b": {raw.Beta, typed.Beta},
			} {
				want := slices.Clone(pair[0])
				cpuref.Round(act, want)
				if !bitsEqual(pair[1], want) {
					t.Errorf("A=%v: %s is not the float32 draw rounded to %v", act, name, act)
				}
			}
			want := slices.Clone(raw.StateIn)
			cpuref.Round(st, want)
			if !bitsEqual(typed.StateIn, want) {
				t.Errorf("S=%v: state_in is not the float32 draw rounded to %v", st, st)
			}
			if !bitsEqual(typed.ALog, raw.ALog) || !bitsEqual(typed.DtBias, raw.DtBias) {
				t.Errorf("A=%v: A_log or dt_bias rounded; they stay float32", act)
			}
		}
	}
}
