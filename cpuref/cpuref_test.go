package cpuref_test

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/internal/floats"
	"github.com/puremetal/puremetal/internal/golden"
)

// refBound bounds the distance between Reference32 and Oracle64, relative
// to the largest magnitude. Every output and every state update of the
// float32 reference goes through a length-D_k float32 sum, whose worst-case
// rounding error is about D_k * 2^-24 of the sum of its terms' magnitudes:
// 7.6e-6 at D_k = 128. The recurrence does not amplify old errors (alpha
// <= 1 and, with |k| = 1 and beta in (0, 1), I - beta k k^T has norm <= 1),
// so the bound does not grow with n_tokens; 1e-5 rounds the worst case up.
// Observed: at most about 1.1e-6 over the shapes below. The undecayed-delta
// bug and a wrong head map both land above 1e-2.
const refBound = spec.TolF32

func params(dk, dv, nk, nv, nt, ns int, m spec.HeadMap, scale float32) spec.Params {
	return spec.Params{
		Shape:   spec.Shape{DK: dk, DV: dv, NKHeads: nk, NVHeads: nv, NTokens: nt, NSeqs: ns},
		HeadMap: m,
		QScale:  scale,
	}
}

// must returns r, or ends the test with err.
func must[R any](t *testing.T, r R, err error) R {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func random(t *testing.T, p spec.Params, seed uint64) cpuref.Inputs {
	t.Helper()
	in, err := cpuref.RandomInputs(p, seed)
	return must(t, in, err)
}

func run32(t *testing.T, p spec.Params, in cpuref.Inputs, capture bool) cpuref.Result {
	t.Helper()
	r, err := cpuref.Reference32(p, in, capture)
	return must(t, r, err)
}

func run64(t *testing.T, p spec.Params, in cpuref.Inputs, capture bool) cpuref.Result64 {
	t.Helper()
	r, err := cpuref.Oracle64(p, in, capture)
	return must(t, r, err)
}

// bitsEqual and bitsEqual64 compare bit patterns.
var bitsEqual, bitsEqual64 = floats.Equal, floats.Equal64

// checkRefused checks that Reference32 and Oracle64, with capture off and
// on, all refuse p and in with an error that mentions every one of wants.
func checkRefused(t *testing.T, name string, p spec.Params, in cpuref.Inputs, wants ...string) {
	t.Helper()
	for _, capture := range []bool{false, true} {
		_, err := cpuref.Reference32(p, in, capture)
		checkError(t, fmt.Sprintf("%s: Reference32 (capture %v)", name, capture), err, wants...)
		_, err = cpuref.Oracle64(p, in, capture)
		checkError(t, fmt.Sprintf("%s: Oracle64 (capture %v)", name, capture), err, wants...)
	}
}

// checkError checks that err is an error that mentions every one of wants.
func checkError(t *testing.T, what string, err error, wants ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error, want one mentioning %q", what, wants)
		return
	}
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: error %q does not mention %q", what, err, w)
		}
	}
}

// gather copies, for every sequence s in seqs and token t < nt, the block of
// per-token elements (width elements per token) of x laid out as
// [width, n_tokens, n_seqs].
func gather(x []float32, width, ntAll int, seqs []int, nt int) []float32 {
	var y []float32
	for _, s := range seqs {
		off := s * ntAll * width
		y = append(y, x[off:off+nt*width]...)
	}
	return y
}

// subset returns the parameters and inputs of the sequences seqs, each cut
// to its first nt tokens.
func subset(p spec.Params, in cpuref.Inputs, seqs []int, nt int) (spec.Params, cpuref.Inputs) {
	q := p
	q.NTokens, q.NSeqs = nt, len(seqs)
	st := p.DK * p.DV * p.NVHeads
	var state []float32
	for _, s := range seqs {
		state = append(state, in.StateIn[s*st:(s+1)*st]...)
	}
	return q, cpuref.Inputs{
		Q:       gather(in.Q, p.DK*p.NKHeads, p.NTokens, seqs, nt),
		K:       gather(in.K, p.DK*p.NKHeads, p.NTokens, seqs, nt),
		V:       gather(in.V, p.DV*p.NVHeads, p.NTokens, seqs, nt),
		G:       gather(in.G, p.NVHeads, p.NTokens, seqs, nt),
		Beta:    gather(in.Beta, p.NVHeads, p.NTokens, seqs, nt),
		StateIn: state,
	}
}

// undecayedDelta is the recurrence with the known bug SPEC section 1 warns
// about: delta computed from the state before the decay,
// delta_i = beta (v_i - sum_j S_old[i][j] k_j), then S = alpha S_old + delta k^T.
// Tests use it to show that they can tell it from the real recurrence.
func undecayedDelta(p spec.Params, in cpuref.Inputs) cpuref.Result {
	dk, dv, nk, nv, nt := p.DK, p.DV, p.NKHeads, p.NVHeads, p.NTokens
	res := cpuref.Result{Output: make([]float32, p.VLen()), StateOut: slices.Clone(in.StateIn)}
	for s := 0; s < p.NSeqs; s++ {
		for h := 0; h < nv; h++ {
			kh := p.HeadMap.KeyHead(h, nk, nv)
			S := res.StateOut[(s*nv+h)*dv*dk : (s*nv+h+1)*dv*dk]
			for t := 0; t < nt; t++ {
				qk := ((s*nt+t)*nk + kh) * dk
				vo := ((s*nt+t)*nv + h) * dv
				gi := (s*nt+t)*nv + h
				alpha := float32(math.Exp(-float64(in.G[gi])))
				for i := 0; i < dv; i++ {
					row := S[i*dk : (i+1)*dk]
					var sk float32
					for j := range row {
						sk += row[j] * in.K[qk+j]
					}
					delta := in.Beta[gi] * (in.V[vo+i] - sk)
					var sq float32
					for j := range row {
						row[j] = alpha*row[j] + delta*in.K[qk+j]
						sq += row[j] * in.Q[qk+j]
					}
					res.Output[vo+i] = p.Scale() * sq
				}
			}
		}
	}
	return res
}

// TestReferenceMatchesOracle compares the two independent references on
// random model-like inputs over a spread of shapes, both head maps, q scale
// off and on, several tokens and sequences.
func TestReferenceMatchesOracle(t *testing.T) {
	shapes := []spec.Params{
		params(2, 2, 1, 1, 1, 1, spec.Block, 0),
		params(4, 3, 1, 2, 9, 2, spec.Tiled, 0.5),
		params(8, 16, 2, 4, 33, 1, spec.Block, 0),
		params(16, 8, 2, 6, 5, 3, spec.Tiled, 0.25),
		params(32, 32, 3, 6, 64, 2, spec.Block, float32(1/math.Sqrt(32))),
		params(64, 64, 2, 4, 5, 1, spec.Tiled, 0.125),
		params(128, 128, 1, 2, 1, 1, spec.Block, float32(1/math.Sqrt(128))),
		params(128, 128, 2, 2, 16, 1, spec.Tiled, 0),
		params(128, 96, 1, 1, 3, 2, spec.Block, 0.1),
	}
	for i, p := range shapes {
		in := random(t, p, uint64(100+i))
		r := run32(t, p, in, true)
		o := run64(t, p, in, true)
		eo := cpuref.MaxRelErr64(r.Output, o.Output)
		es := cpuref.MaxRelErr64(r.StateOut, o.StateOut)
		ec := cpuref.MaxRelErr64(r.Capture, o.Capture)
		t.Logf("%v %v scale %v: output %.3g state %.3g capture %.3g", p.Shape, p.HeadMap, p.QScale, eo, es, ec)
		if !(eo <= refBound && es <= refBound && ec <= refBound) {
			t.Errorf("%v %v: Reference32 vs Oracle64 output %.3g state %.3g capture %.3g > %g", p.Shape, p.HeadMap, eo, es, ec, refBound)
		}
		// The comparison can fail: the undecayed-delta variant does.
		if e := cpuref.MaxRelErr64(undecayedDelta(p, in).Output, o.Output); p.NTokens > 1 && !(e > 100*refBound) {
			t.Errorf("%v: undecayed-delta variant within %.3g of the oracle: the comparison cannot tell it apart", p.Shape, e)
		}
	}
}

// TestHandComputed runs D_k = D_v = 2, one head, two tokens, worked out by
// hand (S has rows i, columns j; state layout is row-major):
//
//	S0 = [[1, 0], [0, 2]], scale 0.5
//
//	token 0: g = 0 -> alpha = 1; k = (1, 0), v = (3, 4), beta = 0.5, q = (0, 1)
//	  S k    = (1, 0)
//	  delta  = 0.5 * ((3, 4) - (1, 0))         = (1, 2)
//	  S     += delta k^T                      = [[2, 0], [2, 2]]
//	  out    = 0.5 * S q = 0.5 * (0, 2)       = (0, 1)
//
//	token 1: g = ln 2 -> alpha = 0.5; k = (0.6, 0.8), v = (1, -1), beta = 0.25, q = (1, 0)
//	  S      = 0.5 S                          = [[1, 0], [1, 1]]
//	  S k    = (0.6, 1.4)
//	  delta  = 0.25 * ((1, -1) - (0.6, 1.4))  = (0.1, -0.6)
//	  S     += delta k^T = [[1 + 0.06, 0.08], [1 - 0.36, 1 - 0.48]]
//	                                          = [[1.06, 0.08], [0.64, 0.52]]
//	  out    = 0.5 * S q = 0.5 * (1.06, 0.64) = (0.53, 0.32)
//
// Matrix form check of token 1: I - 0.25 k k^T = [[0.91, -0.12], [-0.12, 0.84]];
// 0.5 S0' (I - ...) = [[0.91, -0.12], [0.79, 0.72]] with S0' = [[2, 0], [2, 2]];
// plus 0.25 v k^T = [[0.15, 0.2], [-0.15, -0.2]] gives [[1.06, 0.08], [0.64, 0.52]].
func TestHandComputed(t *testing.T) {
	p := params(2, 2, 1, 1, 2, 1, spec.Block, 0.5)
	in := cpuref.Inputs{
		Q:       []float32{0, 1, 1, 0},
		K:       []float32{1, 0, 0.6, 0.8},
		V:       []float32{3, 4, 1, -1},
		G:       []float32{0, float32(math.Ln2)},
		Beta:    []float32{0.5, 0.25},
		StateIn: []float32{1, 0, 0, 2},
	}
	wantOut := []float32{0, 1, 0.53, 0.32}
	wantState := []float32{1.06, 0.08, 0.64, 0.52}
	wantCapture := []float32{2, 0, 2, 2, 1.06, 0.08, 0.64, 0.52}

	// The inputs 0.6, 0.8 and ln 2 are not exact in float32; a few ulps of
	// the largest value (4) cover the rounding.
	const bound = 1e-6
	r := run32(t, p, in, true)
	o := run64(t, p, in, true).Float32()
	for _, x := range []struct {
		name      string
		got, want []float32
	}{
		{"Reference32 output", r.Output, wantOut},
		{"Reference32 state_out", r.StateOut, wantState},
		{"Reference32 capture", r.Capture, wantCapture},
		{"Oracle64 output", o.Output, wantOut},
		{"Oracle64 state_out", o.StateOut, wantState},
		{"Oracle64 capture", o.Capture, wantCapture},
	} {
		if e := cpuref.MaxRelErr(x.got, x.want); !(e <= bound) {
			t.Errorf("%s = %v, want %v (error %.3g)", x.name, x.got, x.want, e)
		}
	}
	// Token 0 involves only exact values: it must come out exact.
	if !bitsEqual(r.Output[:2], wantOut[:2]) || !bitsEqual(r.Capture[:4], wantCapture[:4]) {
		t.Errorf("token 0: output %v state %v, want exactly %v %v", r.Output[:2], r.Capture[:4], wantOut[:2], wantCapture[:4])
	}
}

// TestLargeGateErasesPast: at g = 1000, alpha = exp(-1000) underflows to
// exactly 0 in float32 and float64, so the state before that token is
// forgotten: S = beta v k^T and out = scale beta (k.q) v. Two runs with
// different initial states and different earlier tokens must then agree
// bit for bit from that token on.
func TestLargeGateErasesPast(t *testing.T) {
	p := params(16, 8, 2, 4, 6, 2, spec.Tiled, 0.25)
	const reset = 3 // the token with the huge gate
	a := random(t, p, 1)
	b := random(t, p, 2) // another history and another initial state
	for s := 0; s < p.NSeqs; s++ {
		// b keeps its own tokens before `reset` and takes a's from `reset` on.
		for _, x := range []struct {
			dst, src []float32
			width    int
		}{
			{b.Q, a.Q, p.DK * p.NKHeads}, {b.K, a.K, p.DK * p.NKHeads},
			{b.V, a.V, p.DV * p.NVHeads}, {b.G, a.G, p.NVHeads}, {b.Beta, a.Beta, p.NVHeads},
		} {
			from, to := reset*x.width, p.NTokens*x.width
			base := s * p.NTokens * x.width
			copy(x.dst[base+from:base+to], x.src[base+from:base+to])
		}
		for h := 0; h < p.NVHeads; h++ {
			i := (s*p.NTokens+reset)*p.NVHeads + h
			a.G[i], b.G[i] = 1000, 1000
		}
	}
	if bitsEqual(a.StateIn, b.StateIn) {
		t.Fatal("the two runs must start from different states")
	}
	ra, rb := run32(t, p, a, false), run32(t, p, b, false)
	oa, ob := run64(t, p, a, false), run64(t, p, b, false)
	vw := p.DV * p.NVHeads
	for s := 0; s < p.NSeqs; s++ {
		lo, hi := (s*p.NTokens)*vw, (s*p.NTokens+reset)*vw
		end := (s + 1) * p.NTokens * vw
		if bitsEqual(ra.Output[lo:hi], rb.Output[lo:hi]) {
			t.Errorf("seq %d: outputs before the reset agree: the histories do not differ", s)
		}
		if !bitsEqual(ra.Output[hi:end], rb.Output[hi:end]) {
			t.Errorf("seq %d: Reference32 outputs from token %d on depend on the past", s, reset)
		}
		if !bitsEqual64(oa.Output[hi:end], ob.Output[hi:end]) {
			t.Errorf("seq %d: Oracle64 outputs from token %d on depend on the past", s, reset)
		}
	}
	if !bitsEqual(ra.StateOut, rb.StateOut) || !bitsEqual64(oa.StateOut, ob.StateOut) {
		t.Error("final states depend on the past")
	}
	// At the reset token itself out = scale beta (k.q) v.
	for s := 0; s < p.NSeqs; s++ {
		for h := 0; h < p.NVHeads; h++ {
			kh := p.HeadMap.KeyHead(h, p.NKHeads, p.NVHeads)
			qk := ((s*p.NTokens+reset)*p.NKHeads + kh) * p.DK
			var kq float64
			for j := 0; j < p.DK; j++ {
				kq += float64(a.K[qk+j]) * float64(a.Q[qk+j])
			}
			gi := (s*p.NTokens+reset)*p.NVHeads + h
			vo := gi * p.DV
			for i := 0; i < p.DV; i++ {
				want := float64(p.QScale) * float64(a.Beta[gi]) * kq * float64(a.V[vo+i])
				if d := math.Abs(float64(ra.Output[vo+i]) - want); d > 1e-6 {
					t.Fatalf("seq %d head %d row %d: out %v, want scale*beta*(k.q)*v = %v", s, h, i, ra.Output[vo+i], want)
				}
			}
		}
	}
}

// TestBetaZeroOnlyDecays: with beta = 0 the delta term vanishes and each
// token only multiplies the state by alpha. Both references must give
// S_t = alpha_t * S_{t-1} exactly, element by element (one rounding, the
// same multiply), and out_t = scale S_t q_t.
func TestBetaZeroOnlyDecays(t *testing.T) {
	p := params(8, 4, 1, 2, 4, 2, spec.Block, 0.5)
	in := random(t, p, 7)
	clear(in.Beta)
	r := run32(t, p, in, true)
	o := run64(t, p, in, true)
	st := p.DK * p.DV
	for s := 0; s < p.NSeqs; s++ {
		for h := 0; h < p.NVHeads; h++ {
			prev32 := in.StateIn[(s*p.NVHeads+h)*st : (s*p.NVHeads+h+1)*st]
			prev64 := make([]float64, st)
			for i, x := range prev32 {
				prev64[i] = float64(x)
			}
			for tok := 0; tok < p.NTokens; tok++ {
				g := float64(in.G[(s*p.NTokens+tok)*p.NVHeads+h])
				c := ((s*p.NTokens+tok)*p.NVHeads + h) * st
				a32, a64 := float32(math.Exp(-g)), math.Exp(-g)
				for i := 0; i < st; i++ {
					if want := a32 * prev32[i]; math.Float32bits(r.Capture[c+i]) != math.Float32bits(want) {
						t.Fatalf("Reference32 seq %d head %d token %d cell %d: %v, want alpha*S = %v", s, h, tok, i, r.Capture[c+i], want)
					}
					if want := a64 * prev64[i]; o.Capture[c+i] != want {
						t.Fatalf("Oracle64 seq %d head %d token %d cell %d: %v, want alpha*S = %v", s, h, tok, i, o.Capture[c+i], want)
					}
				}
				prev32, prev64 = r.Capture[c:c+st], o.Capture[c:c+st]
			}
		}
	}
	if e := cpuref.MaxRelErr64(r.Output, o.Output); !(e <= refBound) {
		t.Errorf("outputs differ by %.3g", e)
	}
}

// TestDecayBeforeDelta pins the order of decay and delta. With beta = 1
// and |k| = 1 the delta rule stores v at key k exactly: after the token,
// S k = alpha S k + (v - alpha S k)(k.k) = v. Computing delta from the
// undecayed state instead leaves S k = v - (1 - alpha) S_old k.
func TestDecayBeforeDelta(t *testing.T) {
	p := params(32, 16, 1, 2, 4, 1, spec.Block, 0)
	in := random(t, p, 11)
	for i := range in.Beta {
		in.Beta[i] = 1
	}
	for i := range in.G {
		in.G[i] = 0.7 // alpha = 0.5: a strong decay makes the order matter
	}
	// S k - v after each token, relative to max |v|, for a capture and the
	// inputs.
	residual := func(capture []float32) float64 {
		var worst, vmax float64
		for tok := 0; tok < p.NTokens; tok++ {
			for h := 0; h < p.NVHeads; h++ {
				kh := p.HeadMap.KeyHead(h, p.NKHeads, p.NVHeads)
				k := in.K[(tok*p.NKHeads+kh)*p.DK:]
				v := in.V[(tok*p.NVHeads+h)*p.DV:]
				S := capture[(tok*p.NVHeads+h)*p.DV*p.DK:]
				for i := 0; i < p.DV; i++ {
					var sk float64
					for j := 0; j < p.DK; j++ {
						sk += float64(S[i*p.DK+j]) * float64(k[j])
					}
					worst = max(worst, math.Abs(sk-float64(v[i])))
					vmax = max(vmax, math.Abs(float64(v[i])))
				}
			}
		}
		return worst / vmax
	}
	// The buggy variant, with capture, one token at a time.
	// (n_seqs = 1, so token tok's elements are contiguous.)
	var buggy []float32
	state := in.StateIn
	step := params(p.DK, p.DV, p.NKHeads, p.NVHeads, 1, 1, p.HeadMap, 0)
	qw, vw, gw := p.DK*p.NKHeads, p.DV*p.NVHeads, p.NVHeads
	for tok := 0; tok < p.NTokens; tok++ {
		tokIn := cpuref.Inputs{
			Q: in.Q[tok*qw : (tok+1)*qw], K: in.K[tok*qw : (tok+1)*qw],
			V: in.V[tok*vw : (tok+1)*vw], G: in.G[tok*gw : (tok+1)*gw],
			Beta: in.Beta[tok*gw : (tok+1)*gw], StateIn: state,
		}
		state = undecayedDelta(step, tokIn).StateOut
		buggy = append(buggy, state...)
	}

	r := run32(t, p, in, true)
	o := run64(t, p, in, true).Float32()
	er, eo, eb := residual(r.Capture), residual(o.Capture), residual(buggy)
	t.Logf("max |S k - v| / max |v| after each token: Reference32 %.3g, Oracle64 %.3g, undecayed delta %.3g", er, eo, eb)
	if !(er <= refBound) || !(eo <= refBound) {
		t.Errorf("the delta rule does not store v at k: residual %.3g (Reference32), %.3g (Oracle64)", er, eo)
	}
	if !(eb > 1e-2) {
		t.Errorf("the undecayed-delta variant passes the property (residual %.3g): the test cannot tell the order", eb)
	}
}

// TestUndecayedDeltaFailsGolden shows that the golden vectors reject the
// undecayed-delta variant, while the references (TestGoldenHF) pass them.
func TestUndecayedDeltaFailsGolden(t *testing.T) {
	for _, c := range golden.LoadAll(t) {
		bug := undecayedDelta(c.Params, c.Inputs)
		eo := cpuref.MaxRelErr(bug.Output, c.Output)
		es := cpuref.MaxRelErr(bug.StateOut, c.StateOut)
		t.Logf("%s: undecayed delta vs HF: output %.3g, state_out %.3g", c.Name, eo, es)
		if !(eo > 1e-3) && !(es > 1e-3) {
			t.Errorf("%s: undecayed-delta variant within %.3g / %.3g of HF: the case cannot tell the order", c.Name, eo, es)
		}
	}
}

// TestHeadMaps checks both mappings against a hand-written table and
// against a direct computation: for every value head, q and k of the key
// head the table names, run as a one-head problem.
func TestHeadMaps(t *testing.T) {
	const nk, nv = 2, 6 // r = 3
	table := map[spec.HeadMap][nv]int{
		spec.Block: {0, 0, 0, 1, 1, 1},
		spec.Tiled: {0, 1, 0, 1, 0, 1},
	}
	outputs := map[spec.HeadMap][]float32{}
	for m, want := range table {
		for h := 0; h < nv; h++ {
			if got := m.KeyHead(h, nk, nv); got != want[h] {
				t.Errorf("%v.KeyHead(%d, %d, %d) = %d, want %d", m, h, nk, nv, got, want[h])
			}
		}
		p := params(8, 4, nk, nv, 3, 2, m, 0.5)
		in := random(t, p, 21) // same inputs for both maps
		r := run32(t, p, in, false)
		o := run64(t, p, in, false)
		outputs[m] = r.Output
		// Direct computation, head by head.
		one := params(p.DK, p.DV, 1, 1, p.NTokens, 1, spec.Block, p.QScale)
		for s := 0; s < p.NSeqs; s++ {
			for h := 0; h < nv; h++ {
				kh := want[h]
				var hin cpuref.Inputs
				for tok := 0; tok < p.NTokens; tok++ {
					qk := ((s*p.NTokens+tok)*nk + kh) * p.DK
					gi := (s*p.NTokens+tok)*nv + h
					hin.Q = append(hin.Q, in.Q[qk:qk+p.DK]...)
					hin.K = append(hin.K, in.K[qk:qk+p.DK]...)
					hin.V = append(hin.V, in.V[gi*p.DV:(gi+1)*p.DV]...)
					hin.G = append(hin.G, in.G[gi])
					hin.Beta = append(hin.Beta, in.Beta[gi])
				}
				st := (s*nv + h) * p.DK * p.DV
				hin.StateIn = in.StateIn[st : st+p.DK*p.DV]
				hr := run32(t, one, hin, false)
				ho := run64(t, one, hin, false)
				for tok := 0; tok < p.NTokens; tok++ {
					vo := ((s*p.NTokens+tok)*nv + h) * p.DV
					if !bitsEqual(r.Output[vo:vo+p.DV], hr.Output[tok*p.DV:(tok+1)*p.DV]) {
						t.Errorf("%v seq %d head %d token %d: Reference32 output differs from the one-head run on key head %d", m, s, h, tok, kh)
					}
					if !bitsEqual64(o.Output[vo:vo+p.DV], ho.Output[tok*p.DV:(tok+1)*p.DV]) {
						t.Errorf("%v seq %d head %d token %d: Oracle64 output differs from the one-head run on key head %d", m, s, h, tok, kh)
					}
				}
				if !bitsEqual(r.StateOut[st:st+p.DK*p.DV], hr.StateOut) {
					t.Errorf("%v seq %d head %d: Reference32 state differs from the one-head run", m, s, h)
				}
			}
		}
	}
	// The two maps agree on heads 0 and 5 (both read key heads 0 and 1)
	// and must differ elsewhere.
	b, tl := outputs[spec.Block], outputs[spec.Tiled]
	const dv = 4
	for h := 0; h < nv; h++ {
		same := bitsEqual(b[h*dv:(h+1)*dv], tl[h*dv:(h+1)*dv])
		if wantSame := table[spec.Block][h] == table[spec.Tiled][h]; same != wantSame {
			t.Errorf("head %d: block and tiled outputs equal = %v, want %v", h, same, wantSame)
		}
	}
}

// TestQScale: the scale multiplies the output at write-back and leaves the
// state alone. QScale = 0 and 1 are the same; QScale = s equals float32(s *
// unscaled output) bit for bit; with s a power of two, pre-scaling q
// instead gives the same bits (scaling by 2^n is exact).
func TestQScale(t *testing.T) {
	p0 := params(64, 16, 2, 4, 5, 2, spec.Tiled, 0)
	in := random(t, p0, 31)
	r0 := run32(t, p0, in, false)
	p1 := p0
	p1.QScale = 1
	if r1 := run32(t, p1, in, false); !bitsEqual(r1.Output, r0.Output) {
		t.Error("QScale 1 differs from QScale 0")
	}
	for _, s := range []float32{0.125, float32(1 / math.Sqrt(64)), 0.3} {
		ps := p0
		ps.QScale = s
		rs := run32(t, ps, in, false)
		for i := range rs.Output {
			if want := s * r0.Output[i]; math.Float32bits(rs.Output[i]) != math.Float32bits(want) {
				t.Fatalf("scale %v: output[%d] = %v, want scale * unscaled = %v", s, i, rs.Output[i], want)
			}
		}
		if !bitsEqual(rs.StateOut, r0.StateOut) {
			t.Errorf("scale %v changes the state", s)
		}
		o0 := run64(t, p0, in, false)
		os := run64(t, ps, in, false)
		for i := range os.Output {
			if want := float64(s) * o0.Output[i]; math.Abs(os.Output[i]-want) > 1e-15 {
				t.Fatalf("Oracle64 scale %v: output[%d] = %v, want %v", s, i, os.Output[i], want)
			}
		}
	}
	// Pre-scaled q with QScale 0 against QScale 0.125 (a power of two).
	pre := in
	pre.Q = slices.Clone(in.Q)
	for i := range pre.Q {
		pre.Q[i] *= 0.125
	}
	ps := p0
	ps.QScale = 0.125
	if a, b := run32(t, p0, pre, false), run32(t, ps, in, false); !bitsEqual(a.Output, b.Output) {
		t.Error("q pre-scaled by 1/8 differs from QScale = 1/8")
	}
}

// TestCapture: the last slot equals StateOut bit for bit, each slot t
// equals the final state of the run cut to t+1 tokens, and asking for a
// capture changes nothing else.
func TestCapture(t *testing.T) {
	p := params(16, 8, 2, 4, 5, 3, spec.Block, 0.25)
	in := random(t, p, 41)
	r := run32(t, p, in, true)
	o := run64(t, p, in, true)
	if len(r.Capture) != p.CaptureLen() || len(o.Capture) != p.CaptureLen() {
		t.Fatalf("capture lengths %d, %d, want %d", len(r.Capture), len(o.Capture), p.CaptureLen())
	}
	plain := run32(t, p, in, false)
	if plain.Capture != nil {
		t.Error("capture returned without being asked for")
	}
	if !bitsEqual(plain.Output, r.Output) || !bitsEqual(plain.StateOut, r.StateOut) {
		t.Error("capture changes the output or the state")
	}
	st := p.DK * p.DV * p.NVHeads
	slot := func(x []float32, s, tok int) []float32 {
		return x[(s*p.NTokens+tok)*st : (s*p.NTokens+tok+1)*st]
	}
	slot64 := func(x []float64, s, tok int) []float64 {
		return x[(s*p.NTokens+tok)*st : (s*p.NTokens+tok+1)*st]
	}
	for s := 0; s < p.NSeqs; s++ {
		if !bitsEqual(slot(r.Capture, s, p.NTokens-1), r.StateOut[s*st:(s+1)*st]) {
			t.Errorf("seq %d: Reference32 last capture slot differs from state_out", s)
		}
		if !bitsEqual64(slot64(o.Capture, s, p.NTokens-1), o.StateOut[s*st:(s+1)*st]) {
			t.Errorf("seq %d: Oracle64 last capture slot differs from state_out", s)
		}
		for tok := 0; tok < p.NTokens; tok++ {
			pc, ic := subset(p, in, []int{s}, tok+1)
			rc := run32(t, pc, ic, false)
			oc := run64(t, pc, ic, false)
			if !bitsEqual(slot(r.Capture, s, tok), rc.StateOut) {
				t.Errorf("seq %d token %d: Reference32 capture differs from the run cut to %d tokens", s, tok, tok+1)
			}
			if !bitsEqual64(slot64(o.Capture, s, tok), oc.StateOut) {
				t.Errorf("seq %d token %d: Oracle64 capture differs from the run cut to %d tokens", s, tok, tok+1)
			}
			if tok > 0 && bitsEqual(slot(r.Capture, s, tok), slot(r.Capture, s, tok-1)) {
				t.Errorf("seq %d token %d: state did not change", s, tok)
			}
		}
	}
}

// TestSequencesIndependent: every sequence of a batch gives the bits it
// gives alone, and changing one sequence's inputs leaves the others alone.
func TestSequencesIndependent(t *testing.T) {
	p := params(8, 8, 1, 3, 4, 3, spec.Tiled, 0.5)
	in := random(t, p, 51)
	r := run32(t, p, in, false)
	o := run64(t, p, in, false)
	vs, st := p.DV*p.NVHeads*p.NTokens, p.DK*p.DV*p.NVHeads
	for s := 0; s < p.NSeqs; s++ {
		ps, is := subset(p, in, []int{s}, p.NTokens)
		rs, os := run32(t, ps, is, false), run64(t, ps, is, false)
		if !bitsEqual(r.Output[s*vs:(s+1)*vs], rs.Output) || !bitsEqual(r.StateOut[s*st:(s+1)*st], rs.StateOut) {
			t.Errorf("seq %d: Reference32 batch result differs from the sequence alone", s)
		}
		if !bitsEqual64(o.Output[s*vs:(s+1)*vs], os.Output) || !bitsEqual64(o.StateOut[s*st:(s+1)*st], os.StateOut) {
			t.Errorf("seq %d: Oracle64 batch result differs from the sequence alone", s)
		}
	}
	// Change sequence 1 only.
	other := random(t, p, 52)
	mod := subsetReplace(p, in, other, 1)
	rm := run32(t, p, mod, false)
	for s := 0; s < p.NSeqs; s++ {
		same := bitsEqual(r.Output[s*vs:(s+1)*vs], rm.Output[s*vs:(s+1)*vs])
		if same != (s != 1) {
			t.Errorf("seq %d: output unchanged = %v after changing sequence 1", s, same)
		}
	}
}

// subsetReplace returns a copy of in whose sequence s comes from other.
func subsetReplace(p spec.Params, in, other cpuref.Inputs, s int) cpuref.Inputs {
	out := cpuref.Inputs{}
	for _, x := range []struct {
		dst        *[]float32
		src, from  []float32
		perSeqSize int
	}{
		{&out.Q, in.Q, other.Q, p.DK * p.NKHeads * p.NTokens},
		{&out.K, in.K, other.K, p.DK * p.NKHeads * p.NTokens},
		{&out.V, in.V, other.V, p.DV * p.NVHeads * p.NTokens},
		{&out.G, in.G, other.G, p.NVHeads * p.NTokens},
		{&out.Beta, in.Beta, other.Beta, p.NVHeads * p.NTokens},
		{&out.StateIn, in.StateIn, other.StateIn, p.DK * p.DV * p.NVHeads},
	} {
		*x.dst = slices.Clone(x.src)
		copy((*x.dst)[s*x.perSeqSize:(s+1)*x.perSeqSize], x.from[s*x.perSeqSize:])
	}
	return out
}

// TestValidation: every bad argument is an error that names it and its
// numbers, from both references and from RandomInputs; nothing panics.
func TestValidation(t *testing.T) {
	good := params(4, 2, 1, 2, 3, 2, spec.Block, 0.5)
	in := random(t, good, 61)
	bad := []struct {
		name  string
		p     spec.Params
		edit  func(*cpuref.Inputs)
		wants []string
	}{
		{"zero D_k", params(0, 2, 1, 2, 3, 2, 0, 0), nil, []string{"Shape.DK: 0"}},
		{"negative D_v", params(4, -2, 1, 2, 3, 2, 0, 0), nil, []string{"Shape.DV: -2"}},
		{"zero n_k_heads", params(4, 2, 0, 2, 3, 2, 0, 0), nil, []string{"Shape.NKHeads: 0"}},
		{"zero n_v_heads", params(4, 2, 1, 0, 3, 2, 0, 0), nil, []string{"Shape.NVHeads: 0"}},
		{"zero n_tokens", params(4, 2, 1, 2, 0, 2, 0, 0), nil, []string{"Shape.NTokens: 0"}},
		{"zero n_seqs", params(4, 2, 1, 2, 3, 0, 0, 0), nil, []string{"Shape.NSeqs: 0"}},
		{"heads not a multiple", params(4, 2, 2, 3, 3, 2, 0, 0), nil, []string{"Shape.NVHeads: 3", "Shape.NKHeads = 2"}},
		{"overflow", params(1<<20, 1<<20, 1, 1<<20, 1<<20, 1, 0, 0), nil, []string{"overflow"}},
		{"head map", params(4, 2, 1, 2, 3, 2, 2, 0), nil, []string{"HeadMap: 2"}},
		{"NaN scale", params(4, 2, 1, 2, 3, 2, 0, float32(math.NaN())), nil, []string{"QScale: NaN"}},
		{"Inf scale", params(4, 2, 1, 2, 3, 2, 0, float32(math.Inf(1))), nil, []string{"QScale: +Inf"}},
		{"short q", good, func(x *cpuref.Inputs) { x.Q = x.Q[1:] }, []string{"q has 23", "24"}},
		{"long k", good, func(x *cpuref.Inputs) { x.K = append(x.K, 0) }, []string{"k has 25", "24"}},
		{"short v", good, func(x *cpuref.Inputs) { x.V = x.V[:5] }, []string{"v has 5", "24"}},
		{"missing g", good, func(x *cpuref.Inputs) { x.G = nil }, []string{"g has 0", "12"}},
		{"short beta", good, func(x *cpuref.Inputs) { x.Beta = x.Beta[2:] }, []string{"beta has 10", "12"}},
		{"short state", good, func(x *cpuref.Inputs) { x.StateIn = x.StateIn[:31] }, []string{"state_in has 31", "32"}},
	}
	for _, c := range bad {
		x := in
		if c.edit != nil {
			c.edit(&x)
		}
		checkRefused(t, c.name, c.p, x, c.wants...)
		if c.edit == nil {
			_, err := cpuref.RandomInputs(c.p, 1)
			checkError(t, c.name+": RandomInputs", err, c.wants...)
		}
	}
	if _, err := cpuref.Reference32(good, in, true); err != nil {
		t.Errorf("valid call: %v", err)
	}
}

// TestRandomInputs checks the generator against the distribution it
// documents.
func TestRandomInputs(t *testing.T) {
	p := params(64, 32, 2, 4, 16, 2, spec.Block, 0)
	a, b := random(t, p, 5), random(t, p, 5)
	c := random(t, p, 6)
	for name, pair := range map[string][3][]float32{
		"q": {a.Q, b.Q, c.Q}, "k": {a.K, b.K, c.K}, "v": {a.V, b.V, c.V},
		"g": {a.G, b.G, c.G}, "beta": {a.Beta, b.Beta, c.Beta}, "state_in": {a.StateIn, b.StateIn, c.StateIn},
	} {
		if !bitsEqual(pair[0], pair[1]) {
			t.Errorf("%s: same seed, different values", name)
		}
		if bitsEqual(pair[0], pair[2]) {
			t.Errorf("%s: different seeds, same values", name)
		}
		for i, x := range pair[0] {
			if x == 0 || math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				t.Fatalf("%s[%d] = %v", name, i, x)
			}
		}
	}
	for _, x := range [][]float32{a.Q, a.K} {
		for h := 0; h < len(x); h += p.DK {
			var n float64
			for _, v := range x[h : h+p.DK] {
				n += float64(v) * float64(v)
			}
			if math.Abs(n-1) > 1e-5 {
				t.Fatalf("head at %d: |x|^2 = %v, want 1", h, n)
			}
		}
	}
	for i, g := range a.G {
		if g < 0 {
			t.Fatalf("g[%d] = %v < 0", i, g)
		}
		if a.Beta[i] <= 0 || a.Beta[i] >= 1 {
			t.Fatalf("beta[%d] = %v outside (0, 1)", i, a.Beta[i])
		}
	}
	sd := func(x []float32) float64 {
		var s, s2 float64
		for _, v := range x {
			s += float64(v)
			s2 += float64(v) * float64(v)
		}
		m := s / float64(len(x))
		return math.Sqrt(s2/float64(len(x)) - m*m)
	}
	if s := sd(a.V); math.Abs(s-1) > 0.05 {
		t.Errorf("v standard deviation %v, want 1", s)
	}
	if s := sd(a.StateIn); math.Abs(s-0.1) > 0.005 {
		t.Errorf("state_in standard deviation %v, want 0.1", s)
	}
}

func TestMaxRelErr(t *testing.T) {
	inf := math.Inf(1)
	nan := float32(math.NaN())
	for _, c := range []struct {
		got, want []float32
		err       float64
	}{
		{[]float32{1, 2, -4}, []float32{1, 2, -4}, 0},
		{[]float32{1.5, 2, -4}, []float32{1, 2, -4}, 0.5 / 4}, // divided by the largest |want|, not by |want_0|
		{[]float32{0, 0.25}, []float32{0, 0}, 0.25},           // all-zero want: absolute
		{[]float32{1, nan}, []float32{1, 2}, inf},
		{[]float32{1}, []float32{1, 2}, inf},
	} {
		if e := cpuref.MaxRelErr(c.got, c.want); e != c.err {
			t.Errorf("MaxRelErr(%v, %v) = %v, want %v", c.got, c.want, e, c.err)
		}
		w64 := make([]float64, len(c.want))
		for i, v := range c.want {
			w64[i] = float64(v)
		}
		if e := cpuref.MaxRelErr64(c.got, w64); e != c.err {
			t.Errorf("MaxRelErr64(%v, %v) = %v, want %v", c.got, w64, e, c.err)
		}
	}
}

func TestHeadMapNames(t *testing.T) {
	for _, m := range []spec.HeadMap{spec.Block, spec.Tiled} {
		got, err := spec.ParseHeadMap(m.String())
		if err != nil || got != m {
			t.Errorf("ParseHeadMap(%q) = %v, %v", m.String(), got, err)
		}
	}
	var zero spec.HeadMap
	if zero != spec.Block {
		t.Error("the zero HeadMap is not spec.Block")
	}
	_, err := spec.ParseHeadMap("interleaved")
	checkError(t, "ParseHeadMap(interleaved)", err, "interleaved")
	if s := spec.HeadMap(7).String(); s != "HeadMap(7)" {
		t.Errorf("HeadMap(7).String() = %q", s)
	}
}
