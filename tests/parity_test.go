package tests

import (
	"fmt"
	"math"
	"testing"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/internal/floats"
)

// parityCase is one configuration of the parity suite, with the seed of
// its random inputs.
type parityCase struct {
	name string
	p    spec.Params
	seed uint64
}

func (c parityCase) subtest() string { return c.name }

// parityCases spans every NSG (D_k = 32, 64, 128), both head mappings,
// 1, 2 and 5 tokens, 1 and 3 sequences, and no q scale or 1/sqrt(D_k). Two
// key heads and six value heads make the block and tiled mappings differ
// (r = 3); D_v = 20 is a multiple of every NSG and small enough for the
// float64 oracle.
func parityCases() []parityCase {
	var cases []parityCase
	seed := uint64(0x5eed0000)
	for _, dk := range []int{32, 64, 128} {
		for _, hm := range []spec.HeadMap{spec.Block, spec.Tiled} {
			for _, nt := range []int{1, 2, 5} {
				for _, ns := range []int{1, 3} {
					for _, scale := range []float32{0, float32(1 / math.Sqrt(float64(dk)))} {
						seed++
						p := spec.Params{
							Shape:   spec.Shape{DK: dk, DV: 20, NKHeads: 2, NVHeads: 6, NTokens: nt, NSeqs: ns},
							HeadMap: hm, QScale: scale,
						}
						scaleName := "noscale"
						if scale != 0 {
							scaleName = "scaled"
						}
						cases = append(cases, parityCase{
							name: fmt.Sprintf("dk%d_%v_t%d_s%d_%s", dk, hm, nt, ns, scaleName),
							p:    p, seed: seed,
						})
					}
				}
			}
		}
	}
	return cases
}

func (c parityCase) references(t *testing.T) *references {
	t.Helper()
	return referencesOf(t, "parity/"+c.name, c.p, func() cpuref.Inputs {
		in, err := cpuref.RandomInputs(c.p, c.seed)
		if err != nil {
			t.Fatal(err)
		}
		return in
	})
}

// TestEmulatedParity runs the parity suite on the emulated device, in the
// forward, the shuffled and the reverse scheduling order.
func TestEmulatedParity(t *testing.T) { onEmulatedIn(t, allOrders, parity) }

// TestMetalParity runs the parity suite on the system's GPU (a Mac; it
// skips elsewhere): go test ./tests/ -run Metal -v
func TestMetalParity(t *testing.T) { onMetal(t, parity) }

// parity runs the kernels of kernelsFor on every case of parityCases
// (prefill, chunked, the decode family and, at two tokens or more, the
// decode kernel itself) and checks:
//
//   - each kernel against Reference32 (1e-5) and Oracle64 (1e-4): output,
//     state_out and, for capture, the state after every token; every
//     element written;
//   - state_in and state_out as one buffer give the same bytes as two;
//   - decode (the automatic choice), seq, legacy and capture give the same
//     bytes, and so does the decode kernel itself at two tokens or more
//     (decode_kernel, which the automatic choice leaves to seq there);
//     capture's last slot is state_out's bytes, and slot t is the
//     state_out of a run over the first t+1 tokens, byte for byte;
//   - for one sequence, a capture buffer longer than the draft gets the
//     same slots and nothing beyond them;
//   - prefill and decode agree within the float32 bound;
//   - on the emulated device, every scheduling order gives the same bytes,
//     and each state cell is read and written exactly
//     once per dispatch, and capture stores one state per token.
var parity = eachCase(parityCases, parityCaseRun)

func parityCaseRun(t *testing.T, r *rig, c parityCase) {
	ref := c.references(t)
	p := c.p
	kerns, res := r.runKernelsFor(t, c.name, p, ref, checkAgainstReferences)
	for _, k := range kerns {
		r.checkInPlace(t, c.name, job{kern: k, p: p, in: ref.in}, res[k.name])
	}

	// Capture: slot t is the state after t+1 tokens, as a run over those
	// tokens alone leaves it (the last slot: runKernelsFor).
	capt := res[kCapture.name]
	r.checkPrefixSlots(t, kCapture.name, kLegacy, p, ref.in, capt)

	// One sequence: a capture buffer pre-allocated for a longer draft.
	if p.NSeqs == 1 {
		const extra = 3
		long := r.run(t, job{kern: kCapture, p: p, in: ref.in, captureSlots: p.NTokens + extra})
		head := stateSize(p)
		n := p.NTokens * head
		checkSameBytes(t, "capture into a longer buffer: the draft's slots", p.State, long.capture[:n*p.State.Size()], capt.capture)
		checkSameBytes(t, "capture into a longer buffer: state_out", p.State, long.stateOut, capt.stateOut)
		if got := floats.Unwritten(long.Capture[n:]); got != extra*head {
			t.Errorf("capture into a longer buffer: %d of the %d elements past the draft were written", extra*head-got, extra*head)
		}
		if long.Counters != nil {
			checkTraffic(t, "capture into a longer buffer", kCapture, p, *long.Counters, false)
		}
	}

	// Prefill and decode: different kernels, the same recurrence.
	pre, dec := res[kPrefill.name], res[kDecode.name]
	checkBound(t, "prefill vs decode: output", cpuref.MaxRelErr(pre.Output, dec.Output), boundRef32)
	checkBound(t, "prefill vs decode: state_out", cpuref.MaxRelErr(pre.StateOut, dec.StateOut), boundRef32)
}

// checkAgainstReferences checks a kernel's results against both CPU
// references, and that every element was written.
func checkAgainstReferences(t *testing.T, name string, p spec.Params, o outcome, ref *references) {
	t.Helper()
	checkWritten(t, name+": output", o.Output)
	checkWritten(t, name+": state_out", o.StateOut)
	checkBound(t, name+": output vs Reference32", cpuref.MaxRelErr(o.Output, ref.r32.Output), boundRef32)
	checkBound(t, name+": state_out vs Reference32", cpuref.MaxRelErr(o.StateOut, ref.r32.StateOut), boundRef32)
	checkBound(t, name+": output vs Oracle64", cpuref.MaxRelErr64(o.Output, ref.o64.Output), boundOracle64)
	checkBound(t, name+": state_out vs Oracle64", cpuref.MaxRelErr64(o.StateOut, ref.o64.StateOut), boundOracle64)
	if o.Capture != nil {
		checkWritten(t, name+": capture", o.Capture)
		checkBound(t, name+": capture vs Reference32", cpuref.MaxRelErr(o.Capture, ref.r32.Capture), boundRef32)
		checkBound(t, name+": capture vs Oracle64", cpuref.MaxRelErr64(o.Capture, ref.o64.Capture), boundOracle64)
	}
}
