package tests

import (
	"fmt"
	"testing"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/gdn/spec"
)

// TestEmulatedCoreStructure measures, from the emulator's counters, one
// Qwen3.5-shaped layer (D_k = D_v = 128, 16 key heads, 32 value heads, bf16
// activations, f32 state, one sequence) through the core kernel: a decode
// step and a 64-token prefill, with the core off (the same kernel running
// the fused step alone), with the whole core (convolution and gated norm)
// and its conv state apart (one threadgroup per value head), and with the
// whole core in place (one view for each state: the grouped geometry, one
// threadgroup per key head). It asserts that the recurrent state moves
// exactly SPEC section 8's floor in every run; that the conv state is
// written exactly once, (K-1) conv_dim elements; that it is read, in place,
// exactly (K-1) conv_dim elements and mixed_qkv exactly once, and apart
// (K-1) (r 2 n_k_heads D_k + n_v_heads D_v) elements and mixed_qkv's q and
// k r times (each of the r value heads of a key head reads that key head's
// q and k: 1.5x at r = 2); and what the core adds per token: two
// threadgroup barriers with the convolution and norm (one of them the
// norm's), none without, and three shuffle steps per SIMD-group (8 rows)
// for the norm's sum. The table is logged.
func TestEmulatedCoreStructure(t *testing.T) {
	onEmulatedIn(t, allOrders[:1], func(t *testing.T, r *rig) {
		t.Logf("%-6s %-14s %8s %12s %12s %12s %12s %12s %9s %11s", "tokens", "core", "groups", "state bytes", "floor", "conv loaded", "conv stored", "mixed loaded", "barriers", "shuffles/sg")
		for _, n := range []int{1, 64} {
			var stepsOff, barriersOff float64
			for _, run := range []struct {
				name    string
				core    spec.Core
				inPlace bool
			}{{"off", spec.Core{}, false}, {"qwen apart", spec.QwenCore(), false}, {"qwen in place", spec.QwenCore(), true}} {
				core := run.core
				p := spec.Params{Shape: spec.Shape{DK: 128, DV: 128, NKHeads: 16, NVHeads: 32, NTokens: n, NSeqs: 1},
					QScale: 1 / 11.313708, Activation: spec.BF16, Fused: spec.FusedAll, Core: core}
				in, err := cpuref.RandomInputs(p, 7)
				if err != nil {
					t.Fatal(err)
				}
				o, err := r.runCore(t, coreJob{p: p, in: in, inPlace: run.inPlace})
				if err != nil {
					t.Fatal(err)
				}
				c := *o.Counters
				tg := uint64(c.Threadgroups[0] * c.Threadgroups[1] * c.Threadgroups[2])
				sgs := tg * uint64(c.ThreadsPerThreadgroup[0]*c.ThreadsPerThreadgroup[1]/32)
				// In place one view is bound at both indices; the emulator
				// charges its bytes to the lower one.
				state := c.Loaded[bindStateIn] + c.Stored[bindStateIn] + c.Loaded[bindStateOut] + c.Stored[bindStateOut]
				convLoaded := c.Loaded[bindConvStateIn] + c.Loaded[bindConvStateOut]
				convStored := c.Stored[bindConvStateIn] + c.Stored[bindConvStateOut]
				floor := uint64(2 * p.StateLen() * p.State.Size())
				barriers := float64(c.Barriers) / float64(tg) / float64(n)
				steps := float64(c.ShuffleSteps()) / float64(sgs) / float64(n)
				groups := fmt.Sprintf("%dx%d", tg, c.ThreadsPerThreadgroup[0]*c.ThreadsPerThreadgroup[1])
				t.Logf("%-6d %-14s %8s %12d %12d %12d %12d %12d %9.2f %11.2f", n, run.name, groups, state, floor, convLoaded, convStored, c.Loaded[bindMixed], barriers, steps)
				if state != floor {
					t.Errorf("%d tokens, core %s: state bytes %d, floor %d", n, run.name, state, floor)
				}
				if core.Conv == 0 {
					stepsOff, barriersOff = steps, barriers
					if barriers != 0 {
						t.Errorf("%d tokens, core off: %.2f barriers per token, want 0", n, barriers)
					}
					continue
				}
				a := uint64(p.Activation.Size())
				rr := 2 // value heads per key head, each reading its q and k
				wantTG := uint64(p.NVHeads)
				if run.inPlace {
					rr, wantTG = 1, uint64(p.NKHeads)
				}
				if tg != wantTG {
					t.Errorf("%d tokens, %s: %d threadgroups, want %d", n, run.name, tg, wantTG)
				}
				if want := uint64(3*p.ConvDim()) * a; convStored != want {
					t.Errorf("%d tokens, %s: conv state stored %d bytes, want (K-1) conv_dim = %d", n, run.name, convStored, want)
				}
				if want := uint64(3*(rr*2*p.NKHeads*p.DK+p.NVHeads*p.DV)) * a; convLoaded != want {
					t.Errorf("%d tokens, %s: conv state loaded %d bytes, want %d", n, run.name, convLoaded, want)
				}
				if want := uint64(n*(rr*2*p.NKHeads*p.DK+p.NVHeads*p.DV)) * a; c.Loaded[bindMixed] != want {
					t.Errorf("%d tokens, %s: mixed_qkv loaded %d bytes, want %d", n, run.name, c.Loaded[bindMixed], want)
				}
				if barriers-barriersOff != 2 {
					t.Errorf("%d tokens, %s: the core adds %.2f barriers per token, want 2", n, run.name, barriers-barriersOff)
				}
				if d := steps - stepsOff; d != 3 {
					t.Errorf("%d tokens, %s: the core adds %.2f shuffle steps per token and SIMD-group, want 3 (xor 4, 8, 16)", n, run.name, d)
				}
				t.Logf("%d tokens, %s: the core adds %.0f barriers and %.0f shuffle steps per token (%.3f per row); conv state read %.2f x, mixed_qkv read %.2f x its size",
					n, run.name, barriers-barriersOff, steps-stepsOff, (steps-stepsOff)/8,
					float64(convLoaded)/float64(uint64(p.ConvStateLen())*a), float64(c.Loaded[bindMixed])/float64(uint64(p.MixedLen())*a))
			}
		}
	})
}
