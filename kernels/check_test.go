// Checks of a kernel run against the CPU references, each other and the
// emulator's memory counters, and the parity matrix they run on.

package kernels

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/emu/msl"
)

// Error bounds, relative to the largest magnitude (cpuref.MaxRelErr).
const (
	boundRef32    = 1e-5 // against cpuref.Reference32
	boundOracle64 = 1e-4 // against cpuref.Oracle64
	// boundGolden is the bound against HF transformers' float32 results
	// and the float64 loop of the golden vectors: different summation
	// orders of a correct float32 implementation land near 3e-7.
	boundGolden = 1e-6
)

// Buffer binding indices of SPEC section 4.
const (
	bindStateIn  = 5
	bindOutput   = 6
	bindStateOut = 7
	bindCapture  = 9
)

// parityCase is one configuration of the parity matrix, with the seed of its
// random inputs.
type parityCase struct {
	p    cpuref.Params
	seed uint64
}

// name describes the case for a subtest.
func (c parityCase) name() string {
	return fmt.Sprintf("%v/%v/scale=%g", c.p.Shape, c.p.HeadMap, c.p.QScale)
}

// parityCases is the parity matrix: D_k 32, 64 and 128 (NSG 1, 2, 4), both head
// mappings, 1, 2 and 5 tokens, 1 and 3 sequences, without q scale and with
// 1/sqrt(D_k); D_v = 12 rows, 2 key heads, 6 value heads.
func parityCases() []parityCase {
	var cases []parityCase
	seed := uint64(100)
	for _, dk := range []int{32, 64, 128} {
		for _, hm := range []cpuref.HeadMap{cpuref.Block, cpuref.Tiled} {
			for _, nt := range []int{1, 2, 5} {
				for _, ns := range []int{1, 3} {
					for _, scale := range []float32{0, float32(1 / math.Sqrt(float64(dk)))} {
						seed++
						cases = append(cases, parityCase{
							p: cpuref.Params{
								Shape:   cpuref.Shape{DK: dk, DV: 12, NKHeads: 2, NVHeads: 6, NTokens: nt, NSeqs: ns},
								HeadMap: hm, QScale: scale,
							},
							seed: seed,
						})
					}
				}
			}
		}
	}
	return cases
}

// references are a case's inputs and both references' results, capture
// included.
type references struct {
	In     cpuref.Inputs
	Ref    cpuref.Result
	Oracle cpuref.Result64
}

// compute draws the case's inputs and runs both references.
func (c parityCase) compute(t testing.TB) references {
	t.Helper()
	in, err := cpuref.RandomInputs(c.p, c.seed)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := cpuref.Reference32(c.p, in, true)
	if err != nil {
		t.Fatal(err)
	}
	ora, err := cpuref.Oracle64(c.p, in, true)
	if err != nil {
		t.Fatal(err)
	}
	return references{In: in, Ref: ref, Oracle: ora}
}

// checkClose checks got against both references within the bounds.
func checkClose(t testing.TB, what string, got, ref []float32, oracle []float64) {
	t.Helper()
	if e := cpuref.MaxRelErr(got, ref); !(e <= boundRef32) {
		t.Errorf("%s: relative error %.3g against Reference32, bound %g", what, e, boundRef32)
	}
	if e := cpuref.MaxRelErr64(got, oracle); !(e <= boundOracle64) {
		t.Errorf("%s: relative error %.3g against Oracle64, bound %g", what, e, boundOracle64)
	}
}

// runResult is what one kernel run produced.
type runResult struct {
	Output, State []float32
	Capture       []float32 // nil unless a capture kernel ran
	Counters      msl.Counters
}

// allBytes returns the output and the state as bytes, for bit-identity.
func (r runResult) allBytes() []byte { return append(f32Bytes(r.Output), f32Bytes(r.State)...) }

// checkAgainst compares a run with the references: output and state, and
// the capture (each token's state, the last token's slot of every sequence
// byte-identical to the state, nothing written past the draft).
func (r runResult) checkAgainst(t testing.TB, what string, p cpuref.Params, refs references) {
	t.Helper()
	checkClose(t, what+" output", r.Output, refs.Ref.Output, refs.Oracle.Output)
	checkClose(t, what+" state", r.State, refs.Ref.StateOut, refs.Oracle.StateOut)
	if r.Capture == nil {
		return
	}
	n := p.CaptureLen()
	if len(r.Capture) < n {
		t.Errorf("%s: capture of %d elements, want at least %d", what, len(r.Capture), n)
		return
	}
	checkClose(t, what+" capture", r.Capture[:n], refs.Ref.Capture, refs.Oracle.Capture)
	per := p.StateLen() / p.NSeqs
	for s := 0; s < p.NSeqs; s++ {
		last := r.Capture[(s*p.NTokens+p.NTokens-1)*per:][:per]
		if !bytes.Equal(f32Bytes(last), f32Bytes(r.State[s*per:][:per])) {
			t.Errorf("%s: capture slot of token %d, sequence %d is not byte-identical to state_out", what, p.NTokens-1, s)
		}
	}
	for i, x := range r.Capture[n:] {
		if !math.IsNaN(float64(x)) {
			t.Errorf("%s: capture element %d, past the draft, was written", what, n+i)
			break
		}
	}
}

// checkTraffic checks the emulator's byte counters of a run: every state
// cell read once and written once per dispatch, whatever n_tokens is; each
// output written once; a capture kernel writes one state per token. With
// inPlace, state_in and state_out are one buffer, charged to index 5.
func (r runResult) checkTraffic(t testing.TB, what string, p cpuref.Params, capture, inPlace bool) {
	t.Helper()
	c := r.Counters
	state := uint64(4 * p.StateLen())
	out := bindStateOut
	if inPlace {
		out = bindStateIn // an access is charged to the lowest binding that holds it
	}
	var wantCapture uint64
	if capture {
		wantCapture = uint64(p.NTokens) * state
	}
	type check struct {
		name      string
		got, want uint64
	}
	checks := []check{
		{"state loaded", c.Loaded[bindStateIn], state},
		{"state stored", c.Stored[out], state},
		{"output stored", c.Stored[bindOutput], uint64(4 * p.VLen())},
		{"capture stored", c.Stored[bindCapture], wantCapture},
	}
	if !inPlace {
		checks = append(checks, check{"state_out loaded", c.Loaded[bindStateOut], 0}, check{"state_in stored", c.Stored[bindStateIn], 0})
	}
	for _, k := range checks {
		if k.got != k.want {
			t.Errorf("%s: %s %d bytes, want %d", what, k.name, k.got, k.want)
		}
	}
}

// f32Bytes returns x as little-endian bytes.
func f32Bytes(x []float32) []byte {
	b := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}
