package cpuref_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/gdn/spec"
)

// chunkedBound bounds the distance between Chunked64 and Oracle64, relative
// to the largest magnitude. Both are float64 and exact in exact arithmetic;
// what separates them is rounding, about 2^-53 per operation through a few
// hundred operations per element and a triangular solve whose matrix is
// well conditioned (|k| = 1, beta in (0, 1), decays <= 1): 1e-12 leaves
// three orders of magnitude of room and still fails on any wrong term
// (observed: 4.6e-16).
const chunkedBound = 1e-12

func chunked64(t *testing.T, p spec.Params, in cpuref.Inputs, chunk int) cpuref.Result64 {
	t.Helper()
	r, err := cpuref.Chunked64(p, in, chunk)
	return must(t, r, err)
}

// TestChunked64AgreesWithBothReferences checks the three references
// against each other on random inputs: the chunked float64 form, at chunk
// sizes from 1 (the recurrence in matrix form) to beyond n_tokens (one
// chunk) with a partial last chunk, within chunkedBound of the float64
// oracle, and the float32 reference within refBound of both, for both head
// maps, fused parts off and on.
func TestChunked64AgreesWithBothReferences(t *testing.T) {
	var worst64, worst32 float64
	for _, c := range []struct {
		p    spec.Params
		seed uint64
	}{
		{params(16, 8, 1, 2, 37, 2, spec.Block, 0.25), 1},
		{params(32, 16, 2, 4, 50, 1, spec.Tiled, 0), 2},
		{withFused(params(16, 12, 2, 2, 21, 2, spec.Block, 0.25), spec.FusedAll), 3},
	} {
		in := random(t, c.p, c.seed)
		want := run64(t, c.p, in, false)
		ref32 := run32(t, c.p, in, false)
		for _, chunk := range []int{1, 3, 8, 16, c.p.NTokens, c.p.NTokens + 5} {
			name := fmt.Sprintf("%v fused=%+v chunk=%d", c.p.Shape, c.p.Fused, chunk)
			got := chunked64(t, c.p, in, chunk)
			for _, cmp := range []struct {
				what      string
				got, want []float64
			}{{"output", got.Output, want.Output}, {"state_out", got.StateOut, want.StateOut}} {
				e := relErr64(cmp.got, cmp.want)
				if !(e <= chunkedBound) {
					t.Errorf("%s: %s: Chunked64 vs Oracle64 %.3g, bound %g", name, cmp.what, e, chunkedBound)
				}
				worst64 = max(worst64, e)
			}
			for _, cmp := range []struct {
				what string
				got  []float32
				want []float64
			}{{"output", ref32.Output, got.Output}, {"state_out", ref32.StateOut, got.StateOut}} {
				e := cpuref.MaxRelErr64(cmp.got, cmp.want)
				if !(e <= refBound) {
					t.Errorf("%s: %s: Reference32 vs Chunked64 %.3g, bound %g", name, cmp.what, e, refBound)
				}
				worst32 = max(worst32, e)
			}
		}
	}
	t.Logf("largest error relative to the largest magnitude: Chunked64 vs Oracle64 %.3g, Reference32 vs Chunked64 %.3g", worst64, worst32)
}

// TestChunked64TellsTheUndecayedDelta checks that the chunked form is not
// close to the known bug of SPEC section 1, so that agreeing with it means
// something.
func TestChunked64TellsTheUndecayedDelta(t *testing.T) {
	p := params(16, 8, 1, 2, 40, 1, spec.Block, 0.25)
	in := random(t, p, 7)
	got := chunked64(t, p, in, 16)
	bug := undecayedDelta(p, in)
	if e := cpuref.MaxRelErr64(bug.Output, got.Output); e < 1e-2 {
		t.Errorf("the undecayed-delta recurrence is %.3g from Chunked64, want >= 1e-2", e)
	}
}

// TestChunked64DecaysUnderflow runs chunks in which the decay products
// underflow: g = 60, 200 and 1e30 on some tokens (exp(-200) is below the
// smallest float64 subnormal once multiplied over a few tokens; 1e30
// makes a naive exp(+sum g) overflow to inf, and inf/inf is NaN). Every
// output and state element must be finite and agree with the float64
// oracle, which multiplies alphas one token at a time.
func TestChunked64DecaysUnderflow(t *testing.T) {
	p := params(16, 8, 1, 2, 40, 1, spec.Block, 0.25)
	in := random(t, p, 11)
	for i := range in.G {
		switch tok := i / p.NVHeads; {
		case tok%7 == 3:
			in.G[i] = 200
		case tok%5 == 1:
			in.G[i] = 60
		case tok == 20:
			in.G[i] = 1e30
		}
	}
	want := run64(t, p, in, false)
	for _, chunk := range []int{8, 16, 40} {
		got := chunked64(t, p, in, chunk)
		for _, cmp := range []struct {
			what      string
			got, want []float64
		}{{"output", got.Output, want.Output}, {"state_out", got.StateOut, want.StateOut}} {
			for i, x := range cmp.got {
				if math.IsNaN(x) || math.IsInf(x, 0) {
					t.Fatalf("chunk %d: %s[%d] = %v", chunk, cmp.what, i, x)
				}
			}
			if e := relErr64(cmp.got, cmp.want); !(e <= chunkedBound) {
				t.Errorf("chunk %d: %s: Chunked64 vs Oracle64 %.3g, bound %g", chunk, cmp.what, e, chunkedBound)
			}
		}
	}
}

// TestChunked64RejectsBadChunk checks that a chunk size below 1 is an
// error.
func TestChunked64RejectsBadChunk(t *testing.T) {
	p := params(16, 8, 1, 1, 4, 1, spec.Block, 0)
	if _, err := cpuref.Chunked64(p, random(t, p, 1), 0); err == nil {
		t.Error("chunk 0: no error")
	}
}

func withFused(p spec.Params, f spec.Fused) spec.Params {
	p.Fused = f
	return p
}

// relErr64 is cpuref.MaxRelErr for two float64 slices.
func relErr64(got, want []float64) float64 {
	if len(got) != len(want) {
		return math.Inf(1)
	}
	var diff, mag float64
	for i := range want {
		d := math.Abs(got[i] - want[i])
		if math.IsNaN(d) {
			return math.Inf(1)
		}
		diff = max(diff, d)
		mag = max(mag, math.Abs(want[i]))
	}
	if mag == 0 {
		return diff
	}
	return diff / mag
}

// TestChunked64Serving runs Chunked64 on batches in state pools and with
// packed variable-length sequences (servingParams, some with padding):
// within chunkedBound of Oracle64, states no sequence names unchanged, and
// each sequence alone (Split) the same bits as in the batch, since its
// chunks start at its own first token however the batch is packed.
func TestChunked64Serving(t *testing.T) {
	for i, p := range servingParams() {
		for seed := range uint64(3) {
			in := random(t, p, 300*uint64(i)+seed)
			if p.NSlots > 0 && seed%2 == 1 {
				in.Slots[0] = -1
			}
			want := run64(t, p, in, false)
			parts, err := cpuref.Split(p, in)
			if err != nil {
				t.Fatal(err)
			}
			for _, chunk := range []int{2, 4} {
				name := fmt.Sprintf("%v seed %d chunk %d", p.Shape, seed, chunk)
				got := chunked64(t, p, in, chunk)
				if e := relErr64(got.Output, want.Output); !(e <= chunkedBound) {
					t.Errorf("%s: output: Chunked64 vs Oracle64 %.3g, bound %g", name, e, chunkedBound)
				}
				if e := relErr64(got.StateOut, want.StateOut); !(e <= chunkedBound) {
					t.Errorf("%s: state_out: Chunked64 vs Oracle64 %.3g, bound %g", name, e, chunkedBound)
				}
				sw, vw := p.DK*p.DV*p.NVHeads, p.DV*p.NVHeads
				for s, pt := range parts {
					if pt.Skip || pt.N == 0 {
						continue
					}
					alone := chunked64(t, pt.Params, pt.Inputs, chunk)
					if !bitsEqual64(got.Output[pt.Tok0*vw:(pt.Tok0+pt.N)*vw], alone.Output) ||
						!bitsEqual64(got.StateOut[pt.State*sw:(pt.State+1)*sw], alone.StateOut) {
						t.Errorf("%s: sequence %d in the batch differs from the sequence alone", name, s)
					}
				}
			}
		}
	}
}
