package cpuref_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/internal/floats"
)

// servingParams are batches in a state pool and with packed tokens: more
// slots than sequences, more sequences than slots (padding), both, and a
// fused 16-bit case.
func servingParams() []spec.Params {
	ps := []spec.Params{
		{Shape: spec.Shape{DK: 8, DV: 4, NKHeads: 1, NVHeads: 2, NTokens: 3, NSeqs: 3, NSlots: 5}, QScale: 0.5},
		{Shape: spec.Shape{DK: 8, DV: 4, NKHeads: 2, NVHeads: 4, NTokens: 9, NSeqs: 4, Varlen: true}, HeadMap: spec.Tiled},
		{Shape: spec.Shape{DK: 8, DV: 8, NKHeads: 1, NVHeads: 2, NTokens: 7, NSeqs: 5, NSlots: 3, Varlen: true}},
		{Shape: spec.Shape{DK: 16, DV: 8, NKHeads: 1, NVHeads: 2, NTokens: 6, NSeqs: 3, NSlots: 6, Varlen: true},
			Activation: spec.BF16, State: spec.F16, Fused: spec.FusedAll, QScale: 0.25},
	}
	return ps
}

// TestBatchIsItsSequences checks both references on batches against the
// definition of a batch: each sequence run alone from its own state gives,
// bit for bit, that sequence's outputs, capture slots and state; skipped
// sequences write nothing; states no sequence names keep state_in.
func TestBatchIsItsSequences(t *testing.T) {
	for i, p := range servingParams() {
		for seed := range uint64(4) {
			in := random(t, p, 100*uint64(i)+seed)
			if p.NSlots > 0 && seed%2 == 1 {
				in.Slots[0] = -1 // padding among real slots
			}
			got32 := run32(t, p, in, true)
			got64 := run64(t, p, in, true)
			parts, err := cpuref.Split(p, in)
			if err != nil {
				t.Fatal(err)
			}
			sw := p.DK * p.DV * p.NVHeads
			vw := p.DV * p.NVHeads
			written := make([]bool, p.States())
			for s, pt := range parts {
				name := fmt.Sprintf("%v seed %d sequence %d", p.Shape, seed, s)
				if st, t0, n, skip := where(p, in, s); pt.State != st || pt.Tok0 != t0 || pt.N != n || pt.Skip != skip {
					t.Fatalf("%s: Split says state %d, tokens [%d, +%d), skip %v; want %d, [%d, +%d), %v", name, pt.State, pt.Tok0, pt.N, pt.Skip, st, t0, n, skip)
				}
				outs := got32.Output[pt.Tok0*vw : (pt.Tok0+pt.N)*vw]
				caps := got32.Capture[pt.Tok0*sw : (pt.Tok0+pt.N)*sw]
				if pt.Skip || pt.N == 0 {
					if slices.ContainsFunc(outs, func(x float32) bool { return x != 0 }) || slices.ContainsFunc(caps, func(x float32) bool { return x != 0 }) {
						t.Errorf("%s: skipped or empty, but it has outputs or capture slots", name)
					}
					continue
				}
				written[pt.State] = true
				alone32 := run32(t, pt.Params, pt.Inputs, true)
				alone64 := run64(t, pt.Params, pt.Inputs, true)
				if !floats.Equal(outs, alone32.Output) || !floats.Equal(caps, alone32.Capture) ||
					!floats.Equal(got32.StateOut[pt.State*sw:(pt.State+1)*sw], alone32.StateOut) {
					t.Errorf("%s: Reference32 in the batch differs from the sequence alone", name)
				}
				if !floats.Equal64(got64.Output[pt.Tok0*vw:(pt.Tok0+pt.N)*vw], alone64.Output) ||
					!floats.Equal64(got64.Capture[pt.Tok0*sw:(pt.Tok0+pt.N)*sw], alone64.Capture) ||
					!floats.Equal64(got64.StateOut[pt.State*sw:(pt.State+1)*sw], alone64.StateOut) {
					t.Errorf("%s: Oracle64 in the batch differs from the sequence alone", name)
				}
			}
			for st, w := range written {
				if w {
					continue
				}
				want := in.StateIn[st*sw : (st+1)*sw]
				if !floats.Equal(got32.StateOut[st*sw:(st+1)*sw], want) {
					t.Errorf("%v: state %d, which no sequence names, changed in Reference32", p.Shape, st)
				}
				for j, x := range got64.StateOut[st*sw : (st+1)*sw] {
					if x != float64(want[j]) {
						t.Errorf("%v: state %d, which no sequence names, changed in Oracle64", p.Shape, st)
						break
					}
				}
			}
		}
	}
}

// where is the contract's answer to where sequence s of a batch lives:
// its state, first token, token count, and whether the kernels skip it.
func where(p spec.Params, in cpuref.Inputs, s int) (state, tok0, n int, skip bool) {
	state, tok0, n = s, s*p.NTokens, p.NTokens
	if p.NSlots > 0 {
		state = int(in.Slots[s])
		skip = state < 0 || state >= p.NSlots
	}
	if p.Varlen {
		tok0, n = int(in.CuSeqlens[s]), int(in.CuSeqlens[s+1]-in.CuSeqlens[s])
	}
	return state, tok0, n, skip
}

// TestRandomServingInputs checks the slots and lengths RandomInputs draws:
// distinct slots of the pool and padding beyond it; lengths that sum to
// the tokens, with empty sequences among them over a few seeds.
func TestRandomServingInputs(t *testing.T) {
	p := spec.Params{Shape: spec.Shape{DK: 4, DV: 4, NKHeads: 1, NVHeads: 1, NTokens: 6, NSeqs: 7, NSlots: 5, Varlen: true}}
	empty := false
	for seed := range uint64(8) {
		in := random(t, p, seed)
		seen := map[int32]bool{}
		for s, slot := range in.Slots {
			switch {
			case s >= p.NSlots && slot != -1:
				t.Errorf("seed %d: slots[%d] = %d, want padding beyond the pool", seed, s, slot)
			case s < p.NSlots && (slot < 0 || int(slot) >= p.NSlots || seen[slot]):
				t.Errorf("seed %d: slots[%d] = %d: outside the pool or repeated (%v)", seed, s, slot, in.Slots)
			}
			seen[slot] = true
		}
		for s := range p.NSeqs {
			empty = empty || in.CuSeqlens[s+1] == in.CuSeqlens[s]
		}
	}
	if !empty {
		t.Error("8 seeds drew no empty sequence")
	}
}

func TestServingInputsRejected(t *testing.T) {
	p := spec.Params{Shape: spec.Shape{DK: 4, DV: 4, NKHeads: 1, NVHeads: 1, NTokens: 5, NSeqs: 3, NSlots: 4, Varlen: true}}
	for _, c := range []struct {
		name string
		edit func(*cpuref.Inputs)
		want string
	}{
		{"repeated slot", func(in *cpuref.Inputs) { in.Slots = []int32{2, 0, 2} }, "slots[2] = 2, already the slot of sequence 0"},
		{"slots short", func(in *cpuref.Inputs) { in.Slots = in.Slots[:2] }, "slots has 2 elements"},
		{"cu_seqlens first", func(in *cpuref.Inputs) { in.CuSeqlens = []int32{1, 2, 3, 5} }, "cu_seqlens[0] = 1"},
		{"cu_seqlens decreasing", func(in *cpuref.Inputs) { in.CuSeqlens = []int32{0, 3, 2, 5} }, "cu_seqlens[2] = 2 is below cu_seqlens[1] = 3"},
		{"cu_seqlens last", func(in *cpuref.Inputs) { in.CuSeqlens = []int32{0, 1, 2, 4} }, "cu_seqlens[3] = 4, must be the 5 tokens"},
		{"no slots with a pool", func(in *cpuref.Inputs) { in.Slots = nil }, "slots has 0 elements"},
	} {
		in := random(t, p, 1)
		c.edit(&in)
		checkRefused(t, c.name, p, in, c.want)
	}
	// A slot beyond the pool is skipped, as the kernels skip it.
	in := random(t, p, 1)
	in.Slots = []int32{3, 9, 0}
	if _, err := cpuref.Reference32(p, in, false); err != nil {
		t.Errorf("slot beyond the pool: %v, want the sequence skipped", err)
	}
}
