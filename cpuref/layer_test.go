package cpuref_test

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/gdn/spec"
)

// coreParams are layer-core calls: every part on and off, both gates,
// every activation type, GQA both ways, with state pools (padding among
// them) and packed sequences (short ones among them).
func coreParams() []spec.Params {
	sig := spec.Core{Conv: 4, Norm: true, NormGate: spec.GateSigmoid, NormEps: 1e-5}
	return []spec.Params{
		{Shape: spec.Shape{DK: 8, DV: 4, NKHeads: 1, NVHeads: 2, NTokens: 5, NSeqs: 2}, QScale: 0.5, Fused: spec.FusedAll, Core: spec.QwenCore()},
		{Shape: spec.Shape{DK: 8, DV: 8, NKHeads: 2, NVHeads: 4, NTokens: 3, NSeqs: 3, NSlots: 5}, HeadMap: spec.Tiled, Fused: spec.FusedAll, Core: sig, Activation: spec.BF16},
		{Shape: spec.Shape{DK: 8, DV: 4, NKHeads: 1, NVHeads: 3, NTokens: 9, NSeqs: 4, Varlen: true}, Fused: spec.FusedAll, Core: spec.Core{Conv: 4}, Activation: spec.F16},
		{Shape: spec.Shape{DK: 16, DV: 8, NKHeads: 2, NVHeads: 2, NTokens: 7, NSeqs: 5, NSlots: 3, Varlen: true}, Fused: spec.FusedAll, Core: spec.QwenCore(), Activation: spec.BF16, State: spec.F16},
		{Shape: spec.Shape{DK: 8, DV: 8, NKHeads: 1, NVHeads: 1, NTokens: 2, NSeqs: 2}, Fused: spec.FusedAll, Core: spec.Core{Norm: true, NormEps: 1e-6}},
	}
}

// TestCoreReferencesAgree checks Reference32 against Oracle64 on layer-core
// calls: output within SPEC section 9's bound of its type, an f32 state
// within 1e-5 (a 16-bit one within the output's bound), the conv state
// equal (it holds copies of inputs).
func TestCoreReferencesAgree(t *testing.T) {
	for i, p := range coreParams() {
		for seed := range uint64(3) {
			name := fmt.Sprintf("%v %+v %v seed %d", p.Shape, p.Core, p.Activation, seed)
			in := random(t, p, 10*uint64(i)+seed)
			r32, err := cpuref.Reference32(p, in, true)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			r64, err := cpuref.Oracle64(p, in, true)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			stateBound := 1e-5
			if p.State != spec.F32 {
				stateBound = fusedOutputBound[p.State]
			}
			if e := cpuref.MaxRelErr64(r32.Output, r64.Output); !(e <= fusedOutputBound[p.Activation]) {
				t.Errorf("%s: output %.3g from the oracle", name, e)
			}
			if e := cpuref.MaxRelErr64(r32.StateOut, r64.StateOut); !(e <= stateBound) {
				t.Errorf("%s: state %.3g from the oracle", name, e)
			}
			if p.Core.Conv > 0 && !slices.Equal(r32.ConvState, r64.Float32().ConvState) {
				t.Errorf("%s: conv states differ", name)
			}
			if (r32.ConvState != nil) != (p.Core.Conv > 0) {
				t.Errorf("%s: conv state present %v, convolution %v", name, r32.ConvState != nil, p.Core.Conv > 0)
			}
		}
	}
}

// TestConvStateShift checks the conv state each sequence leaves against
// its definition, written here apart from the references: the newest K-1
// inputs of old state followed by the sequence's tokens, so a sequence of
// fewer than K-1 tokens keeps part of its old state and an empty one all
// of it; padding and unnamed slots keep theirs.
func TestConvStateShift(t *testing.T) {
	p := spec.Params{Shape: spec.Shape{DK: 8, DV: 4, NKHeads: 1, NVHeads: 2, NTokens: 7, NSeqs: 5, NSlots: 7, Varlen: true},
		Fused: spec.FusedAll, Core: spec.QwenCore()}
	in := random(t, p, 7)
	in.CuSeqlens = []int32{0, 0, 1, 3, 3, 7} // lengths 0, 1, 2, 0, 4
	in.Slots = []int32{4, 0, 6, -1, 2}
	res, err := cpuref.Reference32(p, in, false)
	if err != nil {
		t.Fatal(err)
	}
	cd, km1 := p.ConvDim(), p.Core.Conv-1
	want := slices.Clone(in.ConvState)
	for s, slot := range in.Slots {
		if slot < 0 {
			continue
		}
		old := in.ConvState[int(slot)*km1*cd : (int(slot)+1)*km1*cd]
		window := slices.Clone(old)
		window = append(window, in.MixedQKV[int(in.CuSeqlens[s])*cd:int(in.CuSeqlens[s+1])*cd]...)
		copy(want[int(slot)*km1*cd:], window[len(window)-km1*cd:])
	}
	if !slices.Equal(res.ConvState, want) {
		t.Errorf("conv state after the call differs from the newest K-1 inputs of each sequence")
	}
}

// TestCoreConvOutput checks one convolution output against the formula
// evaluated here: token 0 of a sequence reads all K-1 inputs of its conv
// state, token 1 one fewer.
func TestCoreConvOutput(t *testing.T) {
	p := spec.Params{Shape: spec.Shape{DK: 8, DV: 8, NKHeads: 1, NVHeads: 1, NTokens: 2, NSeqs: 1},
		Fused: spec.Fused{}, Core: spec.Core{Conv: 4}}
	in := random(t, p, 3)
	// With beta = 0 the state never changes, so output = S u_q with the
	// state set to the identity on row 0 picks the convolved q channel 0.
	for i := range in.StateIn {
		in.StateIn[i] = 0
	}
	in.StateIn[0] = 1 // S[0][0]
	for i := range in.G {
		in.G[i], in.Beta[i] = 0, 0
	}
	res, err := cpuref.Oracle64(p, in, false)
	if err != nil {
		t.Fatal(err)
	}
	cd := p.ConvDim()
	x := func(t int) float64 { // channel 0 at token t
		if t < 0 {
			return float64(in.ConvState[(3+t)*cd])
		}
		return float64(in.MixedQKV[t*cd])
	}
	for tok := 0; tok < 2; tok++ {
		var c float64
		for j := 0; j < 4; j++ {
			c += float64(in.ConvWeight[j]) * x(tok-3+j)
		}
		u := c / (1 + math.Exp(-c))
		if got := res.Output[tok*p.DV]; math.Abs(got-u) > 1e-12*math.Max(1, math.Abs(u)) {
			t.Errorf("token %d: output %v, want silu(conv) of q channel 0 = %v", tok, got, u)
		}
	}
}

// TestCoreBatchIsItsSequences checks that a layer-core batch is its
// sequences run alone (cpuref.Split), bit for bit, outputs, states and
// conv states.
func TestCoreBatchIsItsSequences(t *testing.T) {
	for i, p := range coreParams() {
		in := random(t, p, 50+uint64(i))
		all, err := cpuref.Reference32(p, in, false)
		if err != nil {
			t.Fatal(err)
		}
		parts, err := cpuref.Split(p, in)
		if err != nil {
			t.Fatal(err)
		}
		vw, sw := p.DV*p.NVHeads, p.DK*p.DV*p.NVHeads
		cw := p.ConvDim() * (p.Core.Conv - 1)
		for s, pt := range parts {
			if pt.Skip || pt.N == 0 {
				continue
			}
			one, err := cpuref.Reference32(pt.Params, pt.Inputs, false)
			if err != nil {
				t.Fatalf("sequence %d: %v", s, err)
			}
			if !slices.Equal(one.Output, all.Output[pt.Tok0*vw:(pt.Tok0+pt.N)*vw]) ||
				!slices.Equal(one.StateOut, all.StateOut[pt.State*sw:(pt.State+1)*sw]) {
				t.Errorf("%v sequence %d: alone differs from the batch", p.Shape, s)
			}
			if p.Core.Conv > 0 && !slices.Equal(one.ConvState, all.ConvState[pt.State*cw:(pt.State+1)*cw]) {
				t.Errorf("%v sequence %d: conv state alone differs from the batch", p.Shape, s)
			}
		}
	}
}

// TestCoreRefusesBadInput checks that the core's parameters and buffers are
// validated with errors naming them.
func TestCoreRefusesBadInput(t *testing.T) {
	p := coreParams()[0]
	good := random(t, p, 1)
	for _, c := range []struct {
		name string
		edit func(*spec.Params, *cpuref.Inputs)
		want string
	}{
		{"conv 3", func(p *spec.Params, _ *cpuref.Inputs) { p.Core.Conv = 3 }, "Core.Conv"},
		{"eps 0", func(p *spec.Params, _ *cpuref.Inputs) { p.Core.NormEps = 0 }, "Core.NormEps"},
		{"eps NaN", func(p *spec.Params, _ *cpuref.Inputs) { p.Core.NormEps = float32(math.NaN()) }, "Core.NormEps"},
		{"gate 7", func(p *spec.Params, _ *cpuref.Inputs) { p.Core.NormGate = 7 }, "Core.NormGate"},
		{"eps without norm", func(p *spec.Params, _ *cpuref.Inputs) { p.Core.Norm = false }, "Core.Norm"},
		{"short mixed_qkv", func(_ *spec.Params, in *cpuref.Inputs) { in.MixedQKV = in.MixedQKV[1:] }, "mixed_qkv"},
		{"short conv state", func(_ *spec.Params, in *cpuref.Inputs) { in.ConvState = in.ConvState[1:] }, "conv_state"},
		{"conv weight", func(_ *spec.Params, in *cpuref.Inputs) { in.ConvWeight = nil }, "conv_weight"},
		{"q with conv", func(_ *spec.Params, in *cpuref.Inputs) { in.Q = make([]float32, 8*10) }, "q"},
		{"short z", func(_ *spec.Params, in *cpuref.Inputs) { in.Z = in.Z[1:] }, "z"},
		{"norm weight", func(_ *spec.Params, in *cpuref.Inputs) { in.NormWeight = in.NormWeight[1:] }, "norm_weight"},
	} {
		p := p
		in := good
		c.edit(&p, &in)
		_, err := cpuref.Reference32(p, in, false)
		_, err64 := cpuref.Oracle64(p, in, false)
		for _, e := range []error{err, err64} {
			var ae *spec.ArgumentError
			if e == nil || !strings.Contains(e.Error(), c.want) {
				t.Errorf("%s: error %v, want one naming %s", c.name, e, c.want)
			} else if strings.HasPrefix(c.want, "Core") && !errors.As(e, &ae) {
				t.Errorf("%s: error %v is no *spec.ArgumentError", c.name, e)
			}
		}
	}
	if _, err := cpuref.Chunked64(p, good, 4); err == nil {
		t.Error("Chunked64 ran a layer core; it runs the recurrence alone")
	}
	if _, err := cpuref.DecodeDrift(p, 1); err == nil {
		t.Error("DecodeDrift ran a layer core; it measures the recurrence alone")
	}
}
