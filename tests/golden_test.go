package tests

import (
	"fmt"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/internal/golden"
)

// TestEmulatedGolden runs the golden-vector suite on the emulated device,
// in both scheduling orders.
func TestEmulatedGolden(t *testing.T) {
	cases := golden.LoadAll(t)
	onEmulated(t, func(t *testing.T, r *rig) { goldenSuite(t, r, cases) })
}

// TestMetalGolden runs the golden-vector suite on the system's GPU (a Mac;
// it skips elsewhere): go test ./tests/ -run Metal -v
func TestMetalGolden(t *testing.T) {
	cases := golden.LoadAll(t)
	onMetal(t, func(t *testing.T, r *rig) { goldenSuite(t, r, cases) })
}

// goldenSuite runs every applicable kernel on each of HF transformers'
// Qwen3-Next cases and compares output, state_out and, for the capture
// kernel, the state after every token with HF's float32 results and with
// the producer's float64 loop, within 1e-6 of the largest magnitude.
//
// Prefill (the automatic choice) and the chunked kernel take every case,
// and so does the token-by-token prefill kernel (recurrent) where Prefill
// picks the chunked one. The decode family takes D_k = 32, 64, 128, which
// all six cases have; decode (the automatic choice) is the decode kernel at
// one token and the seq kernel at a window of two or more, and seq, legacy
// and capture are also run at every n_tokens, since each takes any window;
// so is the decode kernel itself (decode_kernel) at two tokens or more.
// Where the packed layout applies (D_k 64 or 128, D_v a multiple of 32)
// the automatic choices (prefill, decode, capture) run the packed kernels,
// so the packed decode and seq kernels, the blocked prefill and the
// kernels of one row per SIMD-group (or thread) are run by name as well.
// The largest error of each kernel over all cases is logged at the end.
func goldenSuite(t *testing.T, r *rig, cases []golden.Case) {
	worst := map[string]float64{}
	for _, gc := range cases {
		t.Run(gc.Name, func(t *testing.T) {
			p := gc.Params
			kerns := r.kernelsFor(p)
			for _, k := range kerns {
				o := r.run(t, job{kern: k, p: p, in: gc.Inputs})
				cmps := []comparison{
					{"output vs HF", o.Output, gc.Output},
					{"state_out vs HF", o.StateOut, gc.StateOut},
					{"output vs float64 loop", o.Output, gc.OutputF64},
					{"state_out vs float64 loop", o.StateOut, gc.StateOutF64},
				}
				if k.capture {
					if gc.Capture != nil {
						cmps = append(cmps, comparison{"capture vs HF", o.Capture, gc.Capture})
					}
					checkLastSlotBytes(t, k.name, p, o)
				}
				var line []string
				for _, c := range cmps {
					e := cpuref.MaxRelErr(c.got, c.want)
					checkBound(t, k.name+": "+c.what, e, boundGolden)
					line = append(line, fmt.Sprintf("%s %.2g", c.what, e))
					key := k.name
					if k.name == kDecode.name {
						key = decodeChoice(p.NTokens)
					}
					worst[key] = max(worst[key], e)
				}
				t.Logf("%-8s %s", k.name, strings.Join(line, ", "))
			}
		})
	}
	for _, k := range []string{"prefill", "chunked", "recurrent", "decode (decode kernel)", "decode (seq kernel)", "seq", "legacy", "capture", "decode_kernel",
		kPacked.name, kPackedSeq.name, kBlocked.name, kRecurrent.name, kOneRowDecode.name, kOneRowCapture.name} {
		if e, ok := worst[k]; ok {
			t.Logf("largest error relative to the largest magnitude, %-22s %.3g (bound %g)", k+":", e, boundGolden)
		}
	}
}

// comparison is a result and the figures it is compared with.
type comparison struct {
	what      string
	got, want []float32
}

// decodeChoice names the kernel gdn.Kernels.Decode runs for n tokens.
func decodeChoice(n int) string {
	if n == 1 {
		return "decode (decode kernel)"
	}
	return "decode (seq kernel)"
}
