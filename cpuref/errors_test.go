package cpuref_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/gdn/spec"
)

// Every refusal of Reference32 and the other references matches
// cpuref.ErrInvalidInput; one of invalid Params is also the
// *spec.ArgumentError naming the field.
func TestErrorsMatchErrInvalidInput(t *testing.T) {
	p := spec.Params{Shape: spec.Shape{DK: 32, DV: 32, NKHeads: 1, NVHeads: 2, NTokens: 2, NSeqs: 1}, Activation: spec.BF16}
	good := random(t, p, 1)
	pooled := p
	pooled.NSlots = 4
	for _, c := range []struct {
		name string
		p    spec.Params
		in   func(in cpuref.Inputs) cpuref.Inputs
		want string
	}{
		{"short q", p, func(in cpuref.Inputs) cpuref.Inputs { in.Q = in.Q[1:]; return in }, "q has 63 elements"},
		{"not bf16", p, func(in cpuref.Inputs) cpuref.Inputs {
			in.V = append([]float32(nil), in.V...)
			in.V[3] = 1.001
			return in
		}, "v[3] = 1.001 is not a value of"},
		{"no slots", pooled, func(in cpuref.Inputs) cpuref.Inputs { in.StateIn = make([]float32, pooled.StateLen()); return in }, "slots has 0 elements"},
		{"bad params", spec.Params{Shape: spec.Shape{DK: 32, DV: 32, NKHeads: 1, NVHeads: 2, NSeqs: 1}}, func(in cpuref.Inputs) cpuref.Inputs { return in }, "Shape.NTokens: 0"},
	} {
		_, err := cpuref.Reference32(c.p, c.in(good), false)
		if !errors.Is(err, cpuref.ErrInvalidInput) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error wrapping cpuref.ErrInvalidInput saying %q", c.name, err, c.want)
		}
		_, err = cpuref.Oracle64(c.p, c.in(good), false)
		if !errors.Is(err, cpuref.ErrInvalidInput) {
			t.Errorf("%s: Oracle64: %v does not wrap cpuref.ErrInvalidInput", c.name, err)
		}
	}
	_, err := cpuref.Reference32(spec.Params{}, good, false)
	if ae := (*spec.ArgumentError)(nil); !errors.As(err, &ae) || ae.Arg != "Shape.DK" {
		t.Errorf("zero Params: %v, want the *spec.ArgumentError of Shape.DK", err)
	}
}
