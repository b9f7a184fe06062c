package tests

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/emu/msl"
	"github.com/puremetal/puremetal/gdn"
	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/kernels"
	"github.com/puremetal/puremetal/mtl"
)

// The typed suite: every kernel x activation type x state type x fused
// step on and off x both head maps x NSG 1, 2, 4, against both CPU
// references (SPEC sections 9 and 10).

// Bounds of SPEC section 9 for 16-bit types, relative to the largest
// magnitude of the float64 reference: the output within 2^-8 (bf16) or
// 2^-10 (f16), a 16-bit state within the same bound as its type's output,
// an f32 state within 1e-5.
var bound16 = map[spec.ElemType]float64{spec.BF16: spec.TolBF16, spec.F16: spec.TolF16}

// typeBound returns the bound on a result of type t: SPEC section 9's for
// a 16-bit type, f32 for f32.
func typeBound(t spec.ElemType, f32 float64) float64 {
	if t == spec.F32 {
		return f32
	}
	return bound16[t]
}

// typedCase is one configuration of the typed suite: a name, parameters
// and the seed of its inputs, as a parity case.
type typedCase parityCase

func (c typedCase) subtest() string { return c.name }

// typedCases: 3 activation types x 3 state types x fused all or nothing x
// block and tiled x D_k 32, 64, 128, on two sequences of three tokens, two
// key heads and four value heads (r = 2, so the head maps differ), D_v = 8
// (a multiple of every NSG). Each fused part on its own is added at f32
// and at bf16.
func typedCases() []typedCase {
	var cases []typedCase
	seed := uint64(0x7e9ed000)
	add := func(a, st spec.ElemType, f spec.Fused, hm spec.HeadMap, dk int) {
		seed++
		p := spec.Params{
			Shape:   spec.Shape{DK: dk, DV: 8, NKHeads: 2, NVHeads: 4, NTokens: 3, NSeqs: 2},
			HeadMap: hm, QScale: float32(1 / math.Sqrt(float64(dk))),
			Activation: a, State: st, Fused: f,
		}
		cases = append(cases, typedCase{name: fmt.Sprintf("%v_%v_%s_%v_dk%d", a, st, fusedName(f), hm, dk), p: p, seed: seed})
	}
	for _, a := range kernels.ElemTypes {
		for _, st := range kernels.ElemTypes {
			for _, f := range []spec.Fused{{}, spec.FusedAll} {
				for _, hm := range []spec.HeadMap{spec.Block, spec.Tiled} {
					for _, dk := range []int{32, 64, 128} {
						add(a, st, f, hm, dk)
					}
				}
			}
		}
	}
	for _, a := range []spec.ElemType{spec.F32, spec.BF16} {
		for _, f := range []spec.Fused{{L2Norm: true}, {Gate: true}, {Beta: true}} {
			add(a, spec.F32, f, spec.Tiled, 64)
		}
	}
	return cases
}

func fusedName(f spec.Fused) string {
	switch f {
	case spec.Fused{}:
		return "given"
	case spec.FusedAll:
		return "fused"
	}
	var parts []string
	if f.L2Norm {
		parts = append(parts, "l2norm")
	}
	if f.Gate {
		parts = append(parts, "gate")
	}
	if f.Beta {
		parts = append(parts, "beta")
	}
	return strings.Join(parts, "+")
}

// typedInputs returns cpuref.RandomInputs for p (already rounded to the
// element types, raw q, k, a and b for the parts p fuses), with edge
// values planted when edges is set: the first key vector of the first
// token is zero (k^ = 0 through the epsilon, with the fused norm), one a
// is 25 (softplus past its threshold) and one -30, one b is +30 and one
// -30 (beta saturates). Every planted value is exact in every type.
func typedInputs(t testing.TB, p spec.Params, seed uint64, edges bool) cpuref.Inputs {
	t.Helper()
	in, err := cpuref.RandomInputs(p, seed)
	if err != nil {
		t.Fatal(err)
	}
	if edges {
		if p.Fused.L2Norm {
			clear(in.K[:p.DK])
		}
		if p.Fused.Gate {
			in.G[0], in.G[len(in.G)-1] = 25, -30
		}
		if p.Fused.Beta {
			in.Beta[1%len(in.Beta)], in.Beta[2%len(in.Beta)] = 30, -30
		}
	}
	return in
}

func (c typedCase) references(t *testing.T) *references {
	t.Helper()
	return referencesOf(t, "typed/"+c.name, c.p, func() cpuref.Inputs { return typedInputs(t, c.p, c.seed, true) })
}

func typedName(p spec.Params) string {
	return fmt.Sprintf("%v %v/%v %s %v scale=%g", p.Shape, p.Activation, p.State, fusedName(p.Fused), p.HeadMap, p.QScale)
}

// typedErrors collects the largest errors against the float64 reference
// per type combination, fused step and kernel group, for the table the
// suite logs.
var typedErrors struct {
	sync.Mutex
	m map[string]*[8]float64 // prefill output, state, decode family output, state; then the same against Reference32
}

func recordTypedError(p spec.Params, prefill bool, out, state, out32, state32 float64) {
	typedErrors.Lock()
	defer typedErrors.Unlock()
	if typedErrors.m == nil {
		typedErrors.m = map[string]*[8]float64{}
	}
	key := fmt.Sprintf("%-4v %-4v %s", p.Activation, p.State, fusedName(p.Fused))
	e := typedErrors.m[key]
	if e == nil {
		e = new([8]float64)
		typedErrors.m[key] = e
	}
	i := 2
	if prefill {
		i = 0
	}
	e[i], e[i+1] = max(e[i], out), max(e[i+1], state)
	e[i+4], e[i+5] = max(e[i+4], out32), max(e[i+5], state32)
}

// typedRuns are the typed suite's runs on the emulated device: both
// scheduling orders of testdevice.Orders with bf16 converted by hand (MSL
// 3.0), and the forward order with MSL's bfloat (3.1). Every run's bytes
// are compared with the first's: the two bf16 paths round alike.
var typedRuns = []emuRun{
	{opts: testdevice.Orders[0], lang: mtl.LanguageVersion3_0},
	{opts: testdevice.Orders[1], lang: mtl.LanguageVersion3_0},
	{opts: testdevice.Orders[0], lang: mtl.LanguageVersion3_1},
}

// TestEmulatedTypedParity runs the typed suite on the emulated device in
// each of typedRuns, every run's bytes compared with the first's, and logs
// the largest errors against the float64 reference per type combination.
func TestEmulatedTypedParity(t *testing.T) {
	onEmulatedRuns(t, typedRuns, typedParity)
	typedErrors.Lock()
	defer typedErrors.Unlock()
	keys := make([]string, 0, len(typedErrors.m))
	for k := range typedErrors.m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	t.Logf("largest error relative to the largest magnitude, against Oracle64 (float64) | against Reference32 (float32, rounded as the kernels round):")
	t.Logf("%-20s %9s %9s %9s %9s | %9s %9s %9s %9s", "act  state step", "prefill o", "prefill S", "decode o", "decode S", "prefill o", "prefill S", "decode o", "decode S")
	for _, k := range keys {
		e := typedErrors.m[k]
		t.Logf("%-20s %9.3g %9.3g %9.3g %9.3g | %9.3g %9.3g %9.3g %9.3g", k, e[0], e[1], e[2], e[3], e[4], e[5], e[6], e[7])
	}
}

// TestMetalTypedParity runs the typed suite on the system's GPU (a Mac; it
// skips elsewhere), with bf16 converted by hand (MSL 3.0) and, where the
// kernels use MSL's bfloat (macOS 14 on Apple silicon, see
// kernels.LanguageVersion), with bfloat; the second run's bytes are
// compared with the first's.
func TestMetalTypedParity(t *testing.T) {
	dev := testdevice.Metal(t)
	langs := []mtl.LanguageVersion{mtl.LanguageVersion3_0}
	if v := kernels.LanguageVersion(dev); v != mtl.LanguageVersion3_0 {
		langs = append(langs, v)
	}
	for _, lang := range langs {
		t.Run(fmt.Sprintf("msl%d.%d", lang>>16, lang&0xffff), func(t *testing.T) {
			typedParity(t, newRigWith(t, dev, false, kernels.NewRegistryWithLanguage(lang)))
		})
	}
}

// typedParity runs every kernel on every case of typedCases and checks:
//
//   - output, state_out and capture against Oracle64 (a float64 loop over
//     the same rounded inputs) within SPEC section 9's bounds, and against
//     Reference32 (float32, rounded to the types as the kernels round)
//     within 1e-5 where the type is f32 and that bound otherwise; every
//     element written;
//   - decode (the automatic choice: seq at three tokens), the decode
//     kernel itself, seq, legacy and capture give the same bytes; capture's
//     last slot is state_out's bytes; state in place gives the same bytes;
//   - the same bytes in every run on one device: every scheduling order,
//     bf16 by hand and as MSL's bfloat;
//   - the state read once and written once in its own type's bytes, the
//     output written once, capture one state per token (SPEC section 8;
//     the fused parts add no state traffic).
var typedParity = eachCase(typedCases, typedCaseRun)

func typedCaseRun(t *testing.T, r *rig, c typedCase) {
	ref := c.references(t)
	_, res := r.runKernelsFor(t, c.name, c.p, ref, checkTypedAgainstReferences)
	r.checkInPlace(t, c.name, job{kern: kDecode, p: c.p, in: ref.in}, res[kDecode.name])
}

// checkTypedAgainstReferences checks one kernel's results against both
// references and that every element was written.
func checkTypedAgainstReferences(t *testing.T, name string, p spec.Params, o outcome, ref *references) {
	t.Helper()
	checkWritten(t, name+": output", o.Output)
	checkWritten(t, name+": state_out", o.StateOut)
	outBound, stateBound := typeBound(p.Activation, boundOracle64), typeBound(p.State, boundRef32)
	eOut := cpuref.MaxRelErr64(o.Output, ref.o64.Output)
	eState := cpuref.MaxRelErr64(o.StateOut, ref.o64.StateOut)
	checkBound(t, name+": output vs Oracle64", eOut, outBound)
	checkBound(t, name+": state_out vs Oracle64", eState, stateBound)
	// Reference32 rounds the output and the state to their types as the
	// kernels do: 1e-5 where the type is f32, else one rounding apart.
	outBound32, stateBound32 := typeBound(p.Activation, boundRef32), typeBound(p.State, boundRef32)
	eOut32 := cpuref.MaxRelErr(o.Output, ref.r32.Output)
	eState32 := cpuref.MaxRelErr(o.StateOut, ref.r32.StateOut)
	checkBound(t, name+": output vs Reference32", eOut32, outBound32)
	checkBound(t, name+": state_out vs Reference32", eState32, stateBound32)
	if o.Capture != nil {
		checkWritten(t, name+": capture", o.Capture)
		checkBound(t, name+": capture vs Oracle64", cpuref.MaxRelErr64(o.Capture, ref.o64.Capture), stateBound)
		checkBound(t, name+": capture vs Reference32", cpuref.MaxRelErr(o.Capture, ref.r32.Capture), stateBound32)
	}
	if name != kChunked.name { // the chunked suite logs its own table
		recordTypedError(p, name == kPrefill.name, eOut, eState, eOut32, eState32)
	}
}

// TestEmulatedTypedDecodeStepTraffic measures, from the emulator's
// counters, the bytes one decode step of one Qwen3.5-sized layer (D_k =
// D_v = 128, 16 key heads, 32 value heads, one token) moves for every
// activation type, state type and fused step, with the decode and the
// prefill kernel. The state terms must equal SPEC section 8's floor in the
// state's own type (n_v_heads * 128 * 128 * size * 2: halved for a 16-bit
// state), and the fused step must move exactly what the given step moves
// plus the A_log and dt_bias reads: the L2 norm, the gate and beta add no
// traffic of their own. The table is logged.
func TestEmulatedTypedDecodeStepTraffic(t *testing.T) {
	onEmulatedIn(t, allOrders[:1], func(t *testing.T, r *rig) {
		t.Logf("%-7s %-4s %-5s %-6s %12s %12s %8s %12s", "kernel", "act", "state", "step", "total bytes", "state bytes", "x floor", "floor")
		for _, k := range []kernel{kDecode, kPrefill} {
			for _, a := range kernels.ElemTypes {
				for _, st := range kernels.ElemTypes {
					var given msl.Counters
					for _, f := range []spec.Fused{{}, spec.FusedAll} {
						p := spec.Params{
							Shape:      spec.Shape{DK: 128, DV: 128, NKHeads: 16, NVHeads: 32, NTokens: 1, NSeqs: 1},
							QScale:     0.0883883476,
							Activation: a, State: st, Fused: f,
						}
						c := *r.run(t, job{kern: k, p: p, in: typedInputs(t, p, 0x7aff1c, true)}).Counters
						floor := uint64(32 * 128 * 128 * st.Size() * 2)
						stateBytes := c.Loaded[bindStateIn] + c.Stored[bindStateOut]
						name := fmt.Sprintf("%s %v/%v %s", k.name, a, st, fusedName(f))
						if stateBytes != floor {
							t.Errorf("%s: state_in loaded %d + state_out stored %d = %d bytes, want the floor %d",
								name, c.Loaded[bindStateIn], c.Stored[bindStateOut], stateBytes, floor)
						}
						total := totalBytes(c)
						t.Logf("%-7s %-4v %-5v %-6s %12d %12d %8.3f %12d", k.name, a, st, fusedName(f), total, stateBytes, float64(total)/float64(floor), floor)
						if f == (spec.Fused{}) {
							given = c
							continue
						}
						consts := 2 * 4 * threadsOf(c)
						if totalBytes(given)+consts != total {
							t.Errorf("%s: %d bytes, want the given step's %d + %d of A_log and dt_bias", name, total, totalBytes(given), consts)
						}
						for i := range bindStateOut + 1 {
							if c.Loaded[i] != given.Loaded[i] || c.Stored[i] != given.Stored[i] {
								t.Errorf("%s: binding %d loaded %d, stored %d bytes; the given step %d, %d", name, i, c.Loaded[i], c.Stored[i], given.Loaded[i], given.Stored[i])
							}
						}
					}
				}
			}
		}
	})
}

// TestEmulatedStateDrift measures how far a state stored in a 16-bit type
// drifts from the float64 reference over 64 tokens decoded one dispatch
// at a time, the state rounded to its type after every token (as a
// serving loop stores it), with bf16 or f16 activations and the fused
// step, on inputs without planted edge values (a state decayed to nearly
// nothing, as a = 25 does, is below f16's range: its relative error says
// nothing about drift). The transition alpha (I - beta k^ k^T) never grows a state (alpha
// <= 1, beta in [0, 1], |k^| <= 1), so each token's rounding adds at most
// half an ulp of the state and the error after n tokens is at most n times
// the one-token bound of SPEC section 9; the test asserts that and logs
// the measured drift at 1, 8 and 64 tokens.
func TestEmulatedStateDrift(t *testing.T) {
	const n = 64
	onEmulatedIn(t, allOrders[:1], func(t *testing.T, r *rig) {
		for _, ty := range [][2]spec.ElemType{{spec.F32, spec.F32}, {spec.BF16, spec.F32}, {spec.BF16, spec.BF16}, {spec.F16, spec.F16}, {spec.BF16, spec.F16}} {
			p := spec.Params{
				Shape:      spec.Shape{DK: 128, DV: 16, NKHeads: 1, NVHeads: 2, NTokens: n, NSeqs: 1},
				QScale:     0.0883883476,
				Activation: ty[0], State: ty[1], Fused: spec.FusedAll,
			}
			in := typedInputs(t, p, 0xd41f7, false)
			o64, err := cpuref.Oracle64(p, in, true)
			if err != nil {
				t.Fatal(err)
			}
			a, st := p.Activation, p.State
			one := p
			one.NTokens = 1
			q, k, v := r.uploadTyped(t, a, in.Q), r.uploadTyped(t, a, in.K), r.uploadTyped(t, a, in.V)
			g, beta := r.uploadTyped(t, a, in.G), r.uploadTyped(t, a, in.Beta)
			aLog, dtBias := r.uploadTyped(t, spec.F32, in.ALog), r.uploadTyped(t, spec.F32, in.DtBias)
			state0 := r.uploadTyped(t, st, in.StateIn)
			out := r.poisonedTyped(t, a, p.VLen())
			states := r.poisonedTyped(t, st, p.CaptureLen()) // the state after every token
			at := func(v gdn.View, tok, per int) gdn.View {
				return gdn.NewView(v.Buffer, v.Offset+tok*per*v.Type.Size(), v.Type, per)
			}
			sl := one.StateLen()
			_, err = r.execute(func(enc *mtl.ComputeCommandEncoder) error {
				for tok := range n {
					b := gdn.Buffers{
						Q: at(q, tok, one.QKLen()), K: at(k, tok, one.QKLen()), V: at(v, tok, one.VLen()),
						G: at(g, tok, one.GateLen()), Beta: at(beta, tok, one.GateLen()),
						StateIn: state0, Output: at(out, tok, one.VLen()), StateOut: at(states, tok, sl),
						ALog: aLog, DtBias: dtBias,
					}
					if tok > 0 {
						b.StateIn = at(states, tok-1, sl)
					}
					if err := r.k.Decode(enc, one, b); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				t.Fatalf("%v/%v: %v", a, st, err)
			}
			got := decode(st, mtl.Slice[byte](states.Buffer))
			unit := typeBound(st, boundRef32)
			var line []string
			for _, tok := range []int{1, 8, n} {
				e := cpuref.MaxRelErr64(got[(tok-1)*sl:tok*sl], o64.Capture[(tok-1)*sl:tok*sl])
				line = append(line, fmt.Sprintf("after %d tokens %.3g", tok, e))
				checkBound(t, fmt.Sprintf("%v/%v state after %d tokens", a, st, tok), e, float64(tok)*unit)
			}
			outBound := typeBound(a, boundOracle64)
			eo := cpuref.MaxRelErr64(decode(a, mtl.Slice[byte](out.Buffer)), o64.Output)
			checkBound(t, fmt.Sprintf("%v/%v outputs of %d tokens", a, st, n), eo, float64(n)*outBound)
			t.Logf("%-4v activations, %-4v state: state error %s (bound per token %.3g); outputs %.3g", a, st, strings.Join(line, ", "), unit, eo)
		}
	})
}
