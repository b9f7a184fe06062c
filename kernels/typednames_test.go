package kernels

import (
	"testing"

	"github.com/puremetal/puremetal/gdn/spec"
)

// An ops kernel's name is looked up on every dispatch: it allocates nothing,
// and names the types in order.
func TestOpsNames(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{RMSNormResidualOf(spec.F32, spec.BF16, spec.F16), "rms_norm_residual_f32_bf16_f16"},
		{MatVecOf(spec.BF16, spec.F32), "matvec_bf16_f32"},
		{SampleOf(spec.F16), "sample_f16"},
		{RoPEOf(spec.ElemType(9)), "rope_" + spec.ElemType(9).String()},
	} {
		if c.got != c.want {
			t.Errorf("%q, want %q", c.got, c.want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = RMSNormResidualOf(spec.BF16, spec.F16, spec.F32) }); n != 0 {
		t.Errorf("a name lookup allocates %v times", n)
	}
	if got := len(entriesOf(rmsNormNames, rmsNormResidualNames)()); got != 9+27 {
		t.Errorf("%d RMSNorm entry points, want 9 + 27", got)
	}
}
