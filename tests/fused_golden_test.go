package tests

import (
	"fmt"
	"testing"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/internal/golden"
)

// Bounds of the fused golden cases against the float64 truth, relative to
// the largest magnitude (the set's README, SPEC section 9): the output per
// activation type, an f32 state.
var (
	fusedGoldenOutput = map[spec.ElemType]float64{spec.F32: spec.TolF32Output, spec.F16: spec.TolF16, spec.BF16: spec.TolBF16}
	fusedGoldenState  = spec.TolF32
)

// TestEmulatedFusedGolden runs the fused step (L2 norm, gate and beta in
// the kernel) on HF transformers' Qwen3-Next cases on the emulated device,
// in the forward order (the typed suite compares the scheduling orders).
func TestEmulatedFusedGolden(t *testing.T) {
	cases := golden.LoadSet(t, golden.FusedSubdir)
	onEmulatedIn(t, allOrders[:1], func(t *testing.T, r *rig) { fusedGoldenSuite(t, r, cases) })
}

// TestMetalFusedGolden runs the same on the system's GPU (a Mac; it skips
// elsewhere).
func TestMetalFusedGolden(t *testing.T) {
	cases := golden.LoadSet(t, golden.FusedSubdir)
	onMetal(t, func(t *testing.T, r *rig) { fusedGoldenSuite(t, r, cases) })
}

// fusedGoldenSuite runs every kernel, one dispatch each, on every case of
// the fused-step set, from the raw q, k, a and b the layer hands over, and
// checks output, state_out and the state after every token (where the
// case has it) against the float64 truth within the set's bounds, and
// that no kernel's output or state is farther from the truth than HF's.
func fusedGoldenSuite(t *testing.T, r *rig, cases []golden.Case) {
	for _, gc := range cases {
		t.Run(gc.Name, func(t *testing.T) {
			p := gc.Params
			kerns := r.kernelsFor(p)
			hfOut := cpuref.MaxRelErr(gc.Output, gc.OutputF64)
			hfState := cpuref.MaxRelErr(gc.StateOut, gc.StateOutF64)
			for _, k := range kerns {
				o := r.run(t, job{kern: k, p: p, in: gc.Inputs})
				eOut := cpuref.MaxRelErr(o.Output, gc.OutputF64)
				eState := cpuref.MaxRelErr(o.StateOut, gc.StateOutF64)
				checkWritten(t, k.name+": output", o.Output)
				checkWritten(t, k.name+": state_out", o.StateOut)
				checkBound(t, k.name+": output vs truth", eOut, fusedGoldenOutput[p.Activation])
				checkBound(t, k.name+": state_out vs truth", eState, fusedGoldenState)
				line := fmt.Sprintf("%-13s output %.3g, state %.3g", k.name, eOut, eState)
				if k.capture && gc.CaptureF64 != nil {
					e := cpuref.MaxRelErr(o.Capture, gc.CaptureF64)
					checkBound(t, k.name+": capture vs truth", e, fusedGoldenState)
					line += fmt.Sprintf(", capture %.3g", e)
				}
				if p.Activation != spec.F32 && (eOut > hfOut || eState > hfState) {
					t.Errorf("%s: farther from the truth than HF: output %.3g vs %.3g, state %.3g vs %.3g", k.name, eOut, hfOut, eState, hfState)
				}
				t.Log(line)
			}
			t.Logf("%-13s output %.3g, state %.3g", "HF", hfOut, hfState)
		})
	}
}
