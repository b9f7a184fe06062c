package tests

import (
	"testing"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/gdn/spec"
)

// TestEmulatedCoreStructure measures, from the emulator's counters, one
// Qwen3.5-shaped layer (D_k = D_v = 128, 16 key heads, 32 value heads, bf16
// activations, f32 state, one sequence) through the core kernel: a decode
// step and a 64-token prefill, with the whole core (convolution and gated
// norm) and with the core off (the same kernel running the fused step
// alone). It asserts that the recurrent state moves exactly SPEC section
// 8's floor; that the conv state is written exactly once, (K-1) conv_dim
// elements; that it is read (K-1) (r 2 n_k_heads D_k + n_v_heads D_v)
// elements (each of the r value heads of a key head reads that key head's
// q and k state: 1.5 (K-1) conv_dim at r = 2, where the floor is (K-1)
// conv_dim); and what the core adds per token: two threadgroup barriers
// with the convolution and norm (one of them the norm's), none without,
// and three shuffle steps per SIMD-group (8 rows) for the norm's sum. The
// table is logged.
func TestEmulatedCoreStructure(t *testing.T) {
	onEmulatedIn(t, allOrders[:1], func(t *testing.T, r *rig) {
		t.Logf("%-6s %-7s %12s %12s %14s %14s %9s %11s", "tokens", "core", "state bytes", "floor", "conv loaded", "conv stored", "barriers", "shuffles/sg")
		for _, n := range []int{1, 64} {
			var stepsOff, barriersOff float64
			for _, core := range []spec.Core{{}, spec.Qwen} {
				p := spec.Params{Shape: spec.Shape{DK: 128, DV: 128, NKHeads: 16, NVHeads: 32, NTokens: n, NSeqs: 1},
					QScale: 1 / 11.313708, Activation: spec.BF16, Fused: spec.FusedAll, Core: core}
				in, err := cpuref.RandomInputs(p, 7)
				if err != nil {
					t.Fatal(err)
				}
				o, err := r.runCore(t, coreJob{p: p, in: in})
				if err != nil {
					t.Fatal(err)
				}
				c := *o.Counters
				tg := uint64(c.Threadgroups[0] * c.Threadgroups[1] * c.Threadgroups[2])
				sgs := tg * uint64(c.ThreadsPerThreadgroup[0]*c.ThreadsPerThreadgroup[1]/32)
				state := c.Loaded[bindStateIn] + c.Stored[bindStateOut]
				floor := uint64(2 * p.StateLen() * p.State.Size())
				barriers := float64(c.Barriers) / float64(tg) / float64(n)
				steps := float64(c.ShuffleSteps()) / float64(sgs) / float64(n)
				name := "off"
				if core.Conv > 0 {
					name = "qwen"
				}
				t.Logf("%-6d %-7s %12d %12d %14d %14d %9.2f %11.2f", n, name, state, floor, c.Loaded[bindConvStateIn], c.Stored[bindConvStateOut], barriers, steps)
				if state != floor {
					t.Errorf("%d tokens, core %s: state bytes %d, floor %d", n, name, state, floor)
				}
				if core.Conv == 0 {
					stepsOff, barriersOff = steps, barriers
					if barriers != 0 {
						t.Errorf("%d tokens, core off: %.2f barriers per token, want 0", n, barriers)
					}
					continue
				}
				a := uint64(p.Activation.Size())
				if want := uint64(3*p.ConvDim()) * a; c.Stored[bindConvStateOut] != want {
					t.Errorf("%d tokens: conv state stored %d bytes, want (K-1) conv_dim = %d", n, c.Stored[bindConvStateOut], want)
				}
				if want := uint64(3*(2*2*p.NKHeads*p.DK+p.NVHeads*p.DV)) * a; c.Loaded[bindConvStateIn] != want {
					t.Errorf("%d tokens: conv state loaded %d bytes, want %d", n, c.Loaded[bindConvStateIn], want)
				}
				// mixed_qkv likewise: each token's q and k of a key head read by
				// its r = 2 value heads, v once.
				if want := uint64(n*(2*2*p.NKHeads*p.DK+p.NVHeads*p.DV)) * a; c.Loaded[bindMixed] != want {
					t.Errorf("%d tokens: mixed_qkv loaded %d bytes, want %d", n, c.Loaded[bindMixed], want)
				}
				if barriers-barriersOff != 2 {
					t.Errorf("%d tokens: the core adds %.2f barriers per token, want 2", n, barriers-barriersOff)
				}
				if d := steps - stepsOff; d != 3 {
					t.Errorf("%d tokens: the core adds %.2f shuffle steps per token and SIMD-group, want 3 (xor 4, 8, 16)", n, d)
				}
				t.Logf("%d tokens: the core adds %.0f barriers and %.0f shuffle steps per token (%.3f per row), mixed_qkv read %d bytes (%.2f x its size)",
					n, barriers-barriersOff, steps-stepsOff, (steps-stepsOff)/8, c.Loaded[bindMixed], float64(c.Loaded[bindMixed])/float64(uint64(p.MixedLen())*a))
			}
		}
	})
}
