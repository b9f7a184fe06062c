package tests

import (
	"fmt"
	"testing"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/gdn"
	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/internal/golden"
)

// coreGoldenJobs are the ways the golden core tests run the layer core,
// every step of every case (the prefill, then each one-token decode):
// one dispatch of gdn.Kernels.DecodeCore per step, and the chunked, the blocked
// (on the cases it takes, D_k 64 or 128) and the token-by-token prefill
// with the core (gdn.Kernels.EncodeCore).
var coreGoldenJobs = []struct {
	name string
	job  coreJob
}{
	{"Core", coreJob{}},
	{"Chunked", coreJob{family: true, on: gdn.KernelPrefillChunked}},
	{"Blocked", coreJob{family: true, on: gdn.KernelPrefillBlocked}},
	{"Prefill", coreJob{family: true, on: gdn.KernelPrefill}},
}

// TestEmulatedCoreGolden runs the layer core in each of coreGoldenJobs on
// every case of the layer set on the emulated device, step by step with
// both caches carried, in the forward order.
func TestEmulatedCoreGolden(t *testing.T) {
	cases := golden.LoadLayerSet(t)
	for _, j := range coreGoldenJobs {
		t.Run(j.name, func(t *testing.T) {
			onEmulatedIn(t, allOrders[:1], func(t *testing.T, r *rig) { coreGoldenSuite(t, r, cases, j.job) })
		})
	}
}

// TestMetalCoreGolden runs the same on the system's GPU (a Mac; it skips
// elsewhere).
func TestMetalCoreGolden(t *testing.T) {
	cases := golden.LoadLayerSet(t)
	onMetal(t, func(t *testing.T, r *rig) {
		for _, j := range coreGoldenJobs {
			coreGoldenSuite(t, r, cases, j.job)
		}
	})
}

// coreGoldenSuite checks, per case and per step, the core output, the
// recurrent state and the conv state against the truth within SPEC
// section 9's bounds (the conv state exactly: it holds inputs), no farther
// from the truth than HF's forward with 16-bit activations; and, as the
// layer-level test, the whole layer: the projections computed on the CPU
// from the stored hidden states and weights with Qwen3-Next's row mapping
// (golden.LayerCase.Project), the core on the device with its own caches,
// out_proj on the CPU, against out_f64. The core kernel takes D_k 64 and
// 128; a case of another D_k is refused by validation, which the suite
// checks, and has no kernel run. via says the kernel: zero for
// gdn.Kernels.DecodeCore, or a family and its kernel (coreJob.family, on).
func coreGoldenSuite(t *testing.T, r *rig, cases []golden.LayerCase, via coreJob) {
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			p0 := c.Steps[0].Params
			entry := gdn.DecodeCoreEntryPoint
			if via.family {
				entry = func(p spec.Params) (string, error) { return gdn.EntryPoint(via.on, p) }
			}
			if _, err := entry(p0); err != nil {
				t.Logf("D_k = %d: the kernel does not take it (%v)", p0.DK, err)
				return
			}
			for _, layer := range []bool{false, true} {
				state := make([]float32, p0.StateLen())
				conv := make([]float32, p0.ConvStateLen())
				for i, s := range c.Steps {
					p := s.Params
					in := c.Inputs(i, state, conv)
					if layer {
						mixed, z, a, b, err := c.Project(i)
						if err != nil {
							t.Fatal(err)
						}
						in.MixedQKV, in.Z, in.G, in.Beta = mixed, z, a, b
					}
					j := via
					j.p, j.in = p, in
					o, err := r.runCore(t, j)
					if err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
					state, conv = o.StateOut, o.ConvState
					checkWritten(t, fmt.Sprintf("s%d core", i), o.Output)
					eCore := cpuref.MaxRelErr(o.Output, s.CoreF64)
					eState := cpuref.MaxRelErr(o.StateOut, s.StateF64)
					eConv := cpuref.MaxRelErr(o.ConvState, s.ConvStateF64)
					hfCore := cpuref.MaxRelErr(s.CoreHF, s.CoreF64)
					hfState := cpuref.MaxRelErr(s.StateHF, s.StateF64)
					if !layer {
						checkBound(t, fmt.Sprintf("s%d core vs truth", i), eCore, fusedGoldenOutput[p.Activation])
						checkBound(t, fmt.Sprintf("s%d state vs truth", i), eState, fusedGoldenState)
						checkBound(t, fmt.Sprintf("s%d conv state vs truth", i), eConv, 0)
						if p.Activation != spec.F32 && (eCore > hfCore || eState > hfState) {
							t.Errorf("s%d: farther from the truth than HF: core %.3g vs %.3g, state %.3g vs %.3g", i, eCore, hfCore, eState, hfState)
						}
						t.Logf("s%d core: core %.3g, state %.3g, conv state %.3g | HF core %.3g, state %.3g", i, eCore, eState, eConv, hfCore, hfState)
						continue
					}
					out := c.Out(o.Output)
					got := make([]float32, len(out))
					for j, v := range out {
						got[j] = float32(v)
					}
					eOut := cpuref.MaxRelErr(got, s.OutF64)
					hfOut := cpuref.MaxRelErr(s.OutHF, s.OutF64)
					// out_proj sums n_v_heads D_v products of the rounded
					// core: its error is the core's, at most twice the
					// core's bound relative to the largest output.
					checkBound(t, fmt.Sprintf("s%d layer out vs out_f64", i), eOut, 2*fusedGoldenOutput[p.Activation])
					t.Logf("s%d layer: out %.3g (HF %.3g), core %.3g, state %.3g, conv state %.3g", i, eOut, hfOut, eCore, eState, eConv)
				}
			}
		})
	}
}
