package tests

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/gdn"
	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/kernels"
)

// servingCase is a batch of sequences in slots of a state pool, with
// packed tokens for the kernels that take them (SPEC section 11).
type servingCase struct {
	name    string
	kern    kernel
	p       spec.Params
	in      cpuref.Inputs
	inPlace bool // StateOut is StateIn: the pool updated in place
}

// packs reports whether the kernel takes packed sequences (cu_seqlens).
func packs(k kernel) bool {
	switch k.name {
	case "prefill", "chunked", "seq", "capture", kPackedSeq.name, kPackedCapture.name, kBlocked.name:
		return true
	}
	return false
}

// servingCases draws, for every kernel, batches with random slot
// permutations of a larger pool with padding among them, and for the
// kernels that take them packed sequences of random lengths (and of
// lengths 0, 1 and more); the pool updated in place and into another
// pool. The kernels of one row per SIMD-group (and the automatic choices)
// run at D_k 32 and 64, D_v 8; the packed kernels at D_k 64 and 128, D_v
// 32.
func servingCases(t *testing.T) []servingCase {
	var cases []servingCase
	rng := rand.New(rand.NewPCG(0x5e7e, 11))
	type layout struct {
		kerns []kernel
		dks   [2]int
		dv    int
	}
	for _, l := range []layout{{allKernels, [2]int{32, 64}, 8}, {[]kernel{kPacked, kPackedSeq, kPackedCapture, kBlocked}, [2]int{64, 128}, 32}} {
		for _, k := range l.kerns {
			cases = append(cases, servingCasesOf(t, rng, k, l.dks, l.dv)...)
		}
	}
	return cases
}

// servingCasesOf draws the serving cases of one kernel at D_k dks[0] and
// dks[1] and D_v dv.
func servingCasesOf(t *testing.T, rng *rand.Rand, k kernel, dks [2]int, dv int) []servingCase {
	var cases []servingCase
	for i, dk := range dks {
		for _, varlen := range []bool{false, true} {
			if varlen && !packs(k) {
				continue
			}
			hm := []spec.HeadMap{spec.Block, spec.Tiled}[i]
			p := spec.Params{
				Shape:   spec.Shape{DK: dk, DV: dv, NKHeads: 1, NVHeads: 2, NTokens: 1 + rng.IntN(3), NSeqs: 5, NSlots: 7, Varlen: varlen},
				HeadMap: hm, QScale: float32(1 / math.Sqrt(float64(dk))),
			}
			if k.name == "decode" || k.name == "legacy" || k.name == kPacked.name {
				p.NTokens = 1 // the decode kernel's one token (legacy: any)
			}
			if varlen {
				p.NTokens = 9
			}
			in, err := cpuref.RandomInputs(p, rng.Uint64())
			if err != nil {
				t.Fatal(err)
			}
			in.Slots[rng.IntN(p.NSeqs)] = -1 // padding
			name := fmt.Sprintf("%s_dk%d_%v_t%d_pool", k.name, dk, hm, p.NTokens)
			if varlen {
				name += "_varlen"
			}
			// Into another pool with the lengths RandomInputs drew;
			// in place with lengths 2, 0, 1, 4 and 2.
			cases = append(cases, servingCase{name + "_twopools", k, p, in, false})
			if varlen {
				in.CuSeqlens = []int32{0, 2, 2, 3, 7, 9}
			}
			cases = append(cases, servingCase{name + "_inplace", k, p, in, true})
		}
	}
	// Every type combination with the whole fused step: packed where
	// the kernel takes it, in place.
	for _, a := range kernels.ElemTypes {
		for _, st := range kernels.ElemTypes {
			p := spec.Params{
				Shape:   spec.Shape{DK: dks[0], DV: dv, NKHeads: 1, NVHeads: 2, NTokens: 2, NSeqs: 4, NSlots: 6, Varlen: packs(k)},
				HeadMap: spec.Tiled, QScale: 0.25,
				Activation: a, State: st, Fused: spec.FusedAll,
			}
			if k.name == "decode" || k.name == kPacked.name {
				p.NTokens = 1
			}
			if packs(k) {
				p.NTokens = 6
			}
			in := typedInputs(t, p, rng.Uint64(), false)
			in.Slots[rng.IntN(p.NSeqs)] = -1
			if packs(k) {
				in.CuSeqlens = []int32{0, 1, 1, 4, 6} // lengths 1, 0, 3, 2
			}
			cases = append(cases, servingCase{fmt.Sprintf("%s_%v_%v_fused_pool", k.name, a, st), k, p, in, true})
		}
	}
	return cases
}

// job is the dispatch of c, with the slot index and cu_seqlens in shared
// buffers or, when private is set, copied to private ones, which
// validation cannot read.
func (c servingCase) job(private bool) job {
	return job{kern: c.kern, p: c.p, in: c.in, inPlace: c.inPlace, private: private}
}

// untouched reports whether b still holds the poison of type t
// (poisonBytes).
func untouched(t spec.ElemType, b []byte) bool {
	want := make([]byte, len(b))
	poisonBytes(t, want)
	return bytes.Equal(b, want)
}

func TestEmulatedServing(t *testing.T) { onEmulated(t, servingSuite) }
func TestMetalServing(t *testing.T)    { onMetal(t, servingSuite) }

// servingSuite runs every serving case on r and checks it against both
// references, against each of its sequences run alone in a dispatch of
// its own (bit-identical), and that padding and unnamed slots are left
// alone.
func servingSuite(t *testing.T, r *rig) {
	for _, c := range servingCases(t) {
		t.Run(c.name, func(t *testing.T) {
			o, err := r.tryRun(t, c.job(false))
			if err != nil {
				t.Fatal(err)
			}
			checkServing(t, r, c, o)
		})
	}
}

func checkServing(t *testing.T, r *rig, c servingCase, o outcome) {
	t.Helper()
	p, in := c.p, c.in
	r32, o64 := bothReferences(t, p, in, c.kern.capture)
	parts, err := cpuref.Split(p, in)
	if err != nil {
		t.Fatal(err)
	}
	a, st := p.Activation, p.State
	outBound, stateBound := typeBound(a, boundOracle64), typeBound(st, boundRef32)
	outBound32, stateBound32 := typeBound(a, boundRef32), typeBound(st, boundRef32)
	sw, vw := p.DK*p.DV*p.NVHeads, p.DV*p.NVHeads
	named := make([]bool, p.NSlots)
	for s, pt := range parts {
		what := fmt.Sprintf("sequence %d (slot %d, tokens [%d, %d))", s, pt.State, pt.Tok0, pt.Tok0+pt.N)
		out := o.Output[pt.Tok0*vw : (pt.Tok0+pt.N)*vw]
		outBytes := o.output[pt.Tok0*vw*a.Size() : (pt.Tok0+pt.N)*vw*a.Size()]
		var capt []float32
		var captBytes []byte
		if c.kern.capture {
			capt = o.Capture[pt.Tok0*sw : (pt.Tok0+pt.N)*sw]
			captBytes = o.capture[pt.Tok0*sw*st.Size() : (pt.Tok0+pt.N)*sw*st.Size()]
		}
		if pt.Skip {
			if !untouched(a, outBytes) || !untouched(st, captBytes) {
				t.Errorf("%s, padding: the kernel wrote its output or capture slots", what)
			}
			continue
		}
		named[pt.State] = true
		got := o.StateOut[pt.State*sw : (pt.State+1)*sw]
		gotBytes := o.stateOut[pt.State*sw*st.Size() : (pt.State+1)*sw*st.Size()]
		if pt.N == 0 { // skipped too: in place its state stays, into another pool nothing is written
			if c.inPlace {
				checkSameBytes(t, what+", empty: its state", st, gotBytes, encode(st, in.StateIn[pt.State*sw:(pt.State+1)*sw]))
			} else if !untouched(st, gotBytes) {
				t.Errorf("%s, empty: its slot of state_out written", what)
			}
			continue
		}
		checkWritten(t, what+": output", out)
		checkWritten(t, what+": state", got)
		checkBound(t, what+": output against Reference32", cpuref.MaxRelErr(out, r32.Output[pt.Tok0*vw:(pt.Tok0+pt.N)*vw]), outBound32)
		checkBound(t, what+": state against Reference32", cpuref.MaxRelErr(got, r32.StateOut[pt.State*sw:(pt.State+1)*sw]), stateBound32)
		checkBound(t, what+": output against Oracle64", cpuref.MaxRelErr64(out, o64.Output[pt.Tok0*vw:(pt.Tok0+pt.N)*vw]), outBound)
		checkBound(t, what+": state against Oracle64", cpuref.MaxRelErr64(got, o64.StateOut[pt.State*sw:(pt.State+1)*sw]), stateBound)
		if c.kern.capture {
			checkWritten(t, what+": capture", capt)
			checkBound(t, what+": capture against Reference32", cpuref.MaxRelErr(capt, r32.Capture[pt.Tok0*sw:(pt.Tok0+pt.N)*sw]), stateBound32)
			checkSameBytes(t, what+": last capture slot and state", st, captBytes[(pt.N-1)*sw*st.Size():], gotBytes)
		}
		// The sequence alone, in a dispatch of its own: the same bytes.
		alone, err := r.tryRun(t, servingCase{kern: c.kern, p: pt.Params, in: pt.Inputs, inPlace: c.inPlace}.job(false))
		if err != nil {
			t.Fatal(err)
		}
		checkSameBytes(t, what+": output against the sequence alone", a, outBytes, alone.output)
		checkSameBytes(t, what+": state against the sequence alone", st, gotBytes, alone.stateOut)
		if c.kern.capture {
			checkSameBytes(t, what+": capture against the sequence alone", st, captBytes, alone.capture)
		}
	}
	for slot, n := range named {
		if n {
			continue
		}
		gotBytes := o.stateOut[slot*sw*st.Size() : (slot+1)*sw*st.Size()]
		if c.inPlace {
			checkSameBytes(t, fmt.Sprintf("slot %d, which no sequence names", slot), st, gotBytes, encode(st, in.StateIn[slot*sw:(slot+1)*sw]))
		} else if !untouched(st, gotBytes) {
			t.Errorf("slot %d, which no sequence names: written", slot)
		}
	}
}

// TestEmulatedServingStateTraffic checks, from the emulator's counters,
// that a dispatch over a pool reads and writes the state of every
// sequence it runs exactly once, and nothing of padding, of empty
// sequences or of the slots no sequence names: state_in loads and
// state_out stores are one state per running sequence.
func TestEmulatedServingStateTraffic(t *testing.T) {
	onEmulated(t, func(t *testing.T, r *rig) {
		for _, c := range servingCases(t) {
			if c.inPlace { // in place, the stores are charged to state_in's binding
				continue
			}
			t.Run(c.name, func(t *testing.T) {
				o, err := r.tryRun(t, c.job(false))
				if err != nil {
					t.Fatal(err)
				}
				parts, err := cpuref.Split(c.p, c.in)
				if err != nil {
					t.Fatal(err)
				}
				running := 0
				for _, pt := range parts {
					if !pt.Skip && pt.N > 0 {
						running++
					}
				}
				want := uint64(running * c.p.DK * c.p.DV * c.p.NVHeads * c.p.State.Size())
				if got := o.Counters.Loaded[bindStateIn]; got != want {
					t.Errorf("state_in loaded %d bytes, want %d: one state for each of the %d running sequences", got, want, running)
				}
				if got := o.Counters.Stored[bindStateOut]; got != want {
					t.Errorf("state_out stored %d bytes, want %d: one state for each of the %d running sequences", got, want, running)
				}
			})
		}
	})
}

// TestEmulatedServingPrivateIndices checks what the kernels guarantee when
// validation cannot read the slot index and cu_seqlens (private storage):
// a slot beyond the pool and a broken cu_seqlens range are skipped, never
// dereferenced, and the other sequences are unaffected. The emulated
// device fails the command buffer on any access outside a buffer.
func TestEmulatedServingPrivateIndices(t *testing.T) {
	onEmulated(t, func(t *testing.T, r *rig) {
		for _, c := range servingCases(t) {
			if !c.inPlace || c.p.NSeqs != 5 { // the f32 cases, whose lengths it edits
				continue
			}
			c.in.Slots = append([]int32(nil), c.in.Slots...)
			bad := 0
			for c.in.Slots[bad] < 0 {
				bad++
			}
			c.in.Slots[bad] = int32(c.p.NSlots) + 1000 // beyond the pool
			want := c.in
			if c.p.Varlen {
				// Sequence 4 ends past the tokens: skipped. What the
				// references see: sequence 4 padded.
				c.in.CuSeqlens = []int32{0, 2, 2, 3, 7, 1 << 30}
				want.Slots = append([]int32(nil), c.in.Slots...)
				want.Slots[4] = -1
			}
			t.Run(c.name, func(t *testing.T) {
				o, err := r.tryRun(t, c.job(true))
				if err != nil {
					t.Fatal(err)
				}
				checkServing(t, r, servingCase{c.name, c.kern, c.p, want, c.inPlace}, o)
			})
		}
	})
}

// TestEmulatedServingRejects checks, through the dispatchers on a device,
// that shared slot indices naming one state twice or a slot beyond the
// pool, and a cu_seqlens that does not end at n_tokens, are errors that
// name them, and that nothing runs.
func TestEmulatedServingRejects(t *testing.T) {
	onEmulated(t, func(t *testing.T, r *rig) {
		for _, c := range servingCases(t)[:6] { // prefill: per sequence and packed
			for _, e := range []struct {
				name string
				edit func(in *cpuref.Inputs)
				want string
			}{
				{"repeated slot", func(in *cpuref.Inputs) { in.Slots = []int32{3, 1, 4, 1, 5} }, "sequences 1 and 3 both name slot 1"},
				{"slot beyond the pool", func(in *cpuref.Inputs) { in.Slots = []int32{3, 1, 7, 2, 5} }, "sequence 2 names slot 7"},
				{"cu_seqlens short of the tokens", func(in *cpuref.Inputs) { in.CuSeqlens = []int32{0, 2, 2, 3, 7, 8} }, "cu_seqlens[5] = 8, must be Shape.NTokens = 9"},
			} {
				if strings.HasPrefix(e.name, "cu_seqlens") && !c.p.Varlen {
					continue
				}
				in := c.in
				e.edit(&in)
				_, err := r.tryRun(t, servingCase{c.name, c.kern, c.p, in, c.inPlace}.job(false))
				if !errors.Is(err, gdn.ErrInvalidArgument) || !strings.Contains(err.Error(), e.want) {
					t.Errorf("%s, %s: error %v, want one wrapping gdn.ErrInvalidArgument that says %q", c.name, e.name, err, e.want)
				}
			}
		}
	})
}
