package cpuref_test

import (
	"testing"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/internal/golden"
)

// goldenBound is the README's figure for a correct float32 implementation
// against HF's float32 results, relative to the largest magnitude: the two
// differ only in summation order. The undecayed-delta bug, or a wrong head
// map or gate sign, lands near 1e-1.
const goldenBound = 1e-6

// TestGoldenHF checks both references against the six HF transformers
// cases (output, state_out, and capture where the case has it).
func TestGoldenHF(t *testing.T) {
	for _, c := range golden.LoadAll(t) {
		t.Run(c.Name, func(t *testing.T) {
			ref, err := cpuref.Reference32(c.Params, c.Inputs, c.Capture != nil)
			if err != nil {
				t.Fatal(err)
			}
			ora, err := cpuref.Oracle64(c.Params, c.Inputs, c.Capture != nil)
			if err != nil {
				t.Fatal(err)
			}
			check := func(what string, e float64) {
				t.Helper()
				t.Logf("%-28s %.3g", what, e)
				if !(e <= goldenBound) {
					t.Errorf("%s: relative error %.3g > %g", what, e, goldenBound)
				}
			}
			check("Reference32 output", cpuref.MaxRelErr(ref.Output, c.Output))
			check("Reference32 state_out", cpuref.MaxRelErr(ref.StateOut, c.StateOut))
			check("Oracle64 output", cpuref.MaxRelErr64(c.Output, ora.Output))
			check("Oracle64 state_out", cpuref.MaxRelErr64(c.StateOut, ora.StateOut))
			check("Oracle64 vs output_f64", cpuref.MaxRelErr64(c.OutputF64, ora.Output))
			check("Oracle64 vs state_out_f64", cpuref.MaxRelErr64(c.StateOutF64, ora.StateOut))
			if c.Capture != nil {
				check("Reference32 capture", cpuref.MaxRelErr(ref.Capture, c.Capture))
				check("Oracle64 capture", cpuref.MaxRelErr64(c.Capture, ora.Capture))
			}
		})
	}
}
