package tests

import (
	"fmt"
	"math"
	"testing"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/gdn"
	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/kernels"
	"github.com/puremetal/puremetal/mtl"
)

// forced returns the dispatcher that encodes kern whatever the shape would
// get from the automatic choices (gdn.Kernels.Encode).
func forced(kern gdn.Kernel) method {
	return func(k *gdn.Kernels, enc *mtl.ComputeCommandEncoder, p gdn.Params, b gdn.Buffers) error {
		return k.Encode(enc, kern, p, b)
	}
}

// The kernels of the packed layout, each forced, and the kernels of one
// row per SIMD-group (or per thread, prefill) they are compared with, also
// forced: the automatic choices pick the packed ones at these shapes.
var (
	kPacked        = kernel{"packed", forced(gdn.KernelDecodePacked), false}
	kPackedSeq     = kernel{"packed_seq", forced(gdn.KernelDecodePackedSeq), false}
	kPackedCapture = kernel{"packed_capture", forced(gdn.KernelDecodePackedCapture), true}
	kBlocked       = kernel{"blocked", forced(gdn.KernelPrefillBlocked), false}

	kOneRowDecode  = kernel{"decode (one row per SIMD-group)", forced(gdn.KernelDecode), false}
	kOneRowSeq     = kernel{"seq (one row per SIMD-group)", forced(gdn.KernelDecodeSeq), false}
	kOneRowCapture = kernel{"capture (one row per SIMD-group)", forced(gdn.KernelDecodeCapture), true}

	packedFamily = []kernel{kPacked, kPackedSeq, kPackedCapture}
)

// packedCases: every activation type x state type x fused step all or
// nothing x block and tiled x D_k 64 and 128, on two sequences of three
// tokens, two key heads and four value heads, D_v = 32 (one threadgroup
// of 32 rows); and, for a few type combinations, D_v = 64 (two
// threadgroups) and windows of 37 tokens (two full blocks of the blocked
// prefill and a partial one).
func packedCases() []typedCase {
	var cases []typedCase
	seed := uint64(0xbac4ed00)
	add := func(a, st spec.ElemType, f spec.Fused, hm spec.HeadMap, dk, dv, nt int) {
		seed++
		p := spec.Params{
			Shape:   spec.Shape{DK: dk, DV: dv, NKHeads: 2, NVHeads: 4, NTokens: nt, NSeqs: 2},
			HeadMap: hm, QScale: float32(1 / math.Sqrt(float64(dk))),
			Activation: a, State: st, Fused: f,
		}
		cases = append(cases, typedCase{name: fmt.Sprintf("packed_%v_%v_%s_%v_dk%d_dv%d_t%d", a, st, fusedName(f), hm, dk, dv, nt), p: p, seed: seed})
	}
	for _, a := range kernels.ElemTypes {
		for _, st := range kernels.ElemTypes {
			for _, f := range []spec.Fused{{}, spec.FusedAll} {
				for _, hm := range []spec.HeadMap{spec.Block, spec.Tiled} {
					for _, dk := range []int{64, 128} {
						add(a, st, f, hm, dk, 32, 3)
					}
				}
			}
		}
	}
	add(spec.F32, spec.F32, spec.Fused{}, spec.Block, 128, 64, 37)
	add(spec.BF16, spec.F32, spec.FusedAll, spec.Tiled, 128, 64, 37)
	add(spec.F16, spec.BF16, spec.Fused{L2Norm: true}, spec.Block, 64, 64, 37)
	return cases
}

// TestEmulatedPackedParity runs the packed suite on the emulated device in
// each of typedRuns (both scheduling orders, bf16 by hand), every run's
// bytes compared with the first's.
func TestEmulatedPackedParity(t *testing.T) { onEmulatedRuns(t, typedRuns, packedParity) }

// TestMetalPackedParity runs the packed suite on the system's GPU (a Mac;
// it skips elsewhere).
func TestMetalPackedParity(t *testing.T) { onMetal(t, packedParity) }

// packedParity runs the packed kernels and their one-row counterparts on
// every case of packedCases and checks:
//
//   - every packed kernel against Oracle64 within SPEC section 9's bounds
//     and, where the written type is f32, against Reference32 within 1e-5;
//     every element written (outputs poisoned first); capture's every slot;
//   - packed, packed_seq and packed_capture give the same bytes, capture's
//     last slot is state_out's bytes and slot t the state_out of a run
//     over the first t+1 tokens, and the state in place gives the same
//     bytes as two buffers;
//   - the packed decode family against the decode kernels of one row per
//     SIMD-group, and the blocked prefill against the original prefill,
//     within the float32 bound at f32 and the type's bound otherwise;
//   - the automatic choices (Decode, DecodeWithCapture, Prefill) run the
//     packed kernels here: the same bytes;
//   - the same bytes in every scheduling order;
//   - the state read once and written once, the output written once,
//     capture one state per token, A_log and dt_bias once per thread.
var packedParity = eachCase(packedCases, packedCaseRun)

func packedCaseRun(t *testing.T, r *rig, c typedCase) {
	ref := c.references(t)
	p := c.p
	res := r.runEach(t, c.name, p, ref, append(packedFamily, kBlocked), checkTypedAgainstReferences)

	// One layout, one result: byte for byte.
	packed := res[kPacked.name]
	for _, k := range []kernel{kPackedSeq, kPackedCapture} {
		checkSameResults(t, k.name+" vs packed", p, res[k.name], packed)
	}
	capt := res[kPackedCapture.name]
	checkLastSlotBytes(t, kPackedCapture.name, p, capt)
	// Slot t is the state after t+1 tokens, as a run over those tokens
	// alone leaves it (the short windows only).
	if p.NTokens <= 3 {
		r.checkPrefixSlots(t, kPackedCapture.name, kPacked, p, ref.in, capt)
	}
	for _, k := range []kernel{kPacked, kPackedSeq, kBlocked} {
		r.checkInPlace(t, c.name, job{kern: k, p: p, in: ref.in}, res[k.name])
	}

	// The automatic choices run the packed kernels at these shapes.
	for _, c := range []struct {
		auto, want kernel
	}{{kDecode, kPackedSeq}, {kCapture, kPackedCapture}, {kPrefill, kBlocked}} {
		o := r.run(t, job{kern: c.auto, p: p, in: ref.in})
		checkSameResults(t, c.auto.name+" (automatic) vs "+c.want.name, p, o, res[c.want.name])
	}

	// Against the other layout: the same recurrence, other summation orders.
	outBound, stateBound := typeBound(p.Activation, boundRef32), typeBound(p.State, boundRef32)
	for _, c := range []struct{ mine, theirs kernel }{
		{kPacked, kOneRowDecode}, {kPackedSeq, kOneRowSeq}, {kPackedCapture, kOneRowCapture}, {kBlocked, kRecurrent},
	} {
		o := r.run(t, job{kern: c.theirs, p: p, in: ref.in})
		m := res[c.mine.name]
		checkBound(t, c.mine.name+" vs "+c.theirs.name+": output", cpuref.MaxRelErr(m.Output, o.Output), outBound)
		checkBound(t, c.mine.name+" vs "+c.theirs.name+": state_out", cpuref.MaxRelErr(m.StateOut, o.StateOut), stateBound)
		if m.Capture != nil {
			checkBound(t, c.mine.name+" vs "+c.theirs.name+": capture", cpuref.MaxRelErr(m.Capture, o.Capture), stateBound)
		}
	}
}

// packedShape reports whether the packed kernels take the shape: D_k 64
// or 128, D_v a multiple of 32.
func packedShape(s spec.Shape) bool { return (s.DK == 64 || s.DK == 128) && s.DV%32 == 0 }
