package tests

import (
	"fmt"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/emu/msl"
	"github.com/puremetal/puremetal/gdn/spec"
)

// TestEmulatedStateTrafficPerWindow checks, from the emulator's counters,
// that the decode family reads and writes each state cell exactly once per
// dispatch whatever n_tokens is (1, 2, 5), and that capture writes exactly
// one state per token on top (SPEC section 8). The parity suite checks the
// same on all its cases; this test states it on its own, on a shape where
// the state dominates.
func TestEmulatedStateTrafficPerWindow(t *testing.T) {
	onEmulated(t, func(t *testing.T, r *rig) {
		for _, nt := range []int{1, 2, 5} {
			p := spec.Params{
				Shape:  spec.Shape{DK: 128, DV: 32, NKHeads: 2, NVHeads: 4, NTokens: nt, NSeqs: 2},
				QScale: 0.0883883476,
			}
			in, err := cpuref.RandomInputs(p, uint64(0x7a11c0+nt))
			if err != nil {
				t.Fatal(err)
			}
			state := uint64(4 * p.StateLen())
			for _, k := range decodeFamily {
				c := *r.run(t, job{kern: k, p: p, in: in}).Counters
				name := fmt.Sprintf("%s, %d tokens", k.name, nt)
				if got := c.Loaded[bindStateIn]; got != state {
					t.Errorf("%s: state_in loaded %d bytes, want the state once: %d", name, got, state)
				}
				if got := c.Stored[bindStateOut]; got != state {
					t.Errorf("%s: state_out stored %d bytes, want the state once: %d", name, got, state)
				}
				want := uint64(0)
				if k.capture {
					want = uint64(nt) * state
				}
				if got := c.Stored[bindCapture]; got != want {
					t.Errorf("%s: capture stored %d bytes, want n_tokens * state = %d", name, got, want)
				}
			}
		}
	})
}

// specFloor is SPEC section 8's floor for one decode step of one layer at
// D_k = D_v = 128, 32 value heads: the f32 state read once and written
// once.
const specFloor = 32 * 128 * 128 * 4 * 2 // 4,194,304 bytes

// TestEmulatedDecodeStepTraffic measures the bytes each kernel moves for
// one decode step of one Qwen3.5-sized layer (D_k = D_v = 128, 16 key
// heads, 32 value heads, one token, one sequence) and logs them against
// the floor of SPEC section 8. The state terms must equal the floor
// exactly. The emulator counts every load a thread issues, so the q, k, v,
// g and beta figures are per-thread reads (a GPU's caches serve the
// repeats), not DRAM traffic; they are logged, not bounded.
func TestEmulatedDecodeStepTraffic(t *testing.T) {
	p := spec.Params{
		Shape:  spec.Shape{DK: 128, DV: 128, NKHeads: 16, NVHeads: 32, NTokens: 1, NSeqs: 1},
		QScale: 0.0883883476,
	}
	in, err := cpuref.RandomInputs(p, 0x9e3)
	if err != nil {
		t.Fatal(err)
	}
	onEmulated(t, func(t *testing.T, r *rig) {
		for _, k := range allKernels {
			c := *r.run(t, job{kern: k, p: p, in: in}).Counters
			stateBytes := c.Loaded[bindStateIn] + c.Stored[bindStateOut]
			if stateBytes != specFloor {
				t.Errorf("%s: state_in loaded %d + state_out stored %d = %d bytes, want the floor %d",
					k.name, c.Loaded[bindStateIn], c.Stored[bindStateOut], stateBytes, specFloor)
			}
			total := totalBytes(c)
			t.Logf("%-8s %9d bytes per dispatch (%.3f MB, %.2fx the %.3f MB floor); state %d bytes; %s",
				k.name, total, float64(total)/1e6, float64(total)/specFloor, float64(specFloor)/1e6, stateBytes, perBinding(c))
		}
	})
}

func totalBytes(c msl.Counters) uint64 {
	var n uint64
	for i := range c.Loaded {
		if i == 8 { // the parameters, passed with setBytes, not device memory traffic
			continue
		}
		n += c.Loaded[i] + c.Stored[i]
	}
	return n
}

var bindingNames = [...]string{"q", "k", "v", "g", "beta", "state_in", "output", "state_out", "params", "capture", "a_log", "dt_bias"}

func perBinding(c msl.Counters) string {
	var parts []string
	for i, name := range bindingNames {
		if c.Loaded[i] != 0 {
			parts = append(parts, fmt.Sprintf("%s loaded %d", name, c.Loaded[i]))
		}
		if c.Stored[i] != 0 {
			parts = append(parts, fmt.Sprintf("%s stored %d", name, c.Stored[i]))
		}
	}
	return strings.Join(parts, ", ")
}
