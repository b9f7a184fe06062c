package ops_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/emu/msl"
	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/half"
	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/kernels"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/ops"
	"github.com/puremetal/puremetal/tensor"
)

// rig is an emulated device in one scheduling order, its queue and its
// kernels, all released when the test ends.
type rig struct {
	*testdevice.GPU
	k *ops.Kernels
}

// newRig returns a rig on a fresh emulated device with options opts (one
// of testdevice.Orders).
func newRig(t *testing.T, opts emu.Options) *rig {
	return newRigWith(t, opts, nil)
}

// newRigWith is newRig with the pipeline states taken from reg, which the
// rig releases; nil makes the Kernels' own registry.
func newRigWith(t *testing.T, opts emu.Options, reg *kernels.Registry) *rig {
	t.Helper()
	g := testdevice.NewEmulated(t, opts)
	if reg != nil {
		t.Cleanup(reg.Release)
	}
	k, err := ops.New(g.D, reg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Release) // the registry New made when reg is nil
	return &rig{GPU: g, k: k}
}

// newRigLanguage returns a rig whose kernels are compiled as Metal
// Shading Language version lang (3.0 reads and writes bf16 as 16-bit
// integers converted by hand, 3.1 as MSL's bfloat), with a registry of
// its own.
func newRigLanguage(t *testing.T, opts emu.Options, lang mtl.LanguageVersion) *rig {
	t.Helper()
	return newRigWith(t, opts, kernels.NewRegistryWithLanguage(lang))
}

// eachOrder runs f on a rig in each of testdevice.Orders, as a subtest
// named by the order.
func eachOrder(t *testing.T, f func(t *testing.T, r *rig)) {
	for _, o := range testdevice.Orders {
		t.Run(o.Order.String(), func(t *testing.T) { f(t, newRig(t, o)) })
	}
}

// eachRun runs f as eachOrder does, then once more in the first order
// with the kernels compiled as MSL 3.0, where bf16 data is read and
// written as 16-bit integers converted by hand instead of MSL's bfloat
// (kernels.LanguageVersion), as a subtest named msl3.0.
func eachRun(t *testing.T, f func(t *testing.T, r *rig)) {
	eachOrder(t, f)
	t.Run("msl3.0", func(t *testing.T) {
		f(t, newRigLanguage(t, testdevice.Orders[0], mtl.LanguageVersion3_0))
	})
}

// counters encodes f on one command buffer, waits for it and returns the
// emulator's counters of the dispatch it encoded (it must encode one),
// failing the test on an error of f or of the command buffer.
func (r *rig) counters(f func(enc *mtl.ComputeCommandEncoder) error) msl.Counters {
	r.T.Helper()
	c, err := r.commit(f)
	if err != nil {
		r.T.Fatal(err)
	}
	if len(c) != 1 {
		r.T.Fatalf("%d dispatches, want 1", len(c))
	}
	return c[0]
}

// rounded returns x rounded to typ as the kernels' stores round it.
func rounded(typ tensor.ElemType, x []float32) []float32 {
	y := make([]float32, len(x))
	for i, v := range x {
		switch typ {
		case tensor.F16:
			y[i] = half.ToFloat16(v).Float32()
		case tensor.BF16:
			y[i] = half.ToBFloat16(v).Float32()
		default:
			y[i] = v
		}
	}
	return y
}

// abs64 returns the absolute values of x.
func abs64(x []float64) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = math.Abs(v)
	}
	return y
}

// roundingOf returns the rounding error of a store to typ: the unit
// roundoff, half an ulp relative (2^-24 for f32, 2^-11 for f16, 2^-8 for
// bf16), and the absolute error for the values that round to a subnormal,
// half the spacing of its subnormals (2^-150, 2^-25, 2^-134).
func roundingOf(typ tensor.ElemType) (u, sub float64) {
	switch typ {
	case tensor.F16:
		return 0x1p-11, 0x1p-25
	case tensor.BF16:
		return 0x1p-8, 0x1p-134
	}
	return 0x1p-24, 0x1p-150
}

// roundErr bounds the error of storing v to typ: u |v| + sub (roundingOf).
func roundErr(typ tensor.ElemType, v float64) float64 {
	u, sub := roundingOf(typ)
	return u*math.Abs(v) + sub
}

// within fails the test for each element of got farther from want than
// tol(i) (at most a few of them reported), naming what.
func within(t *testing.T, what string, got []float32, want []float64, tol func(i int) float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d elements, want %d", what, len(got), len(want))
	}
	bad := 0
	for i := range got {
		if d := math.Abs(float64(got[i]) - want[i]); !(d <= tol(i)) {
			if bad++; bad <= 5 {
				t.Errorf("%s[%d] = %g, want %g (error %.3g, bound %.3g)", what, i, got[i], want[i], d, tol(i))
			}
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d elements out of bounds", what, bad)
	}
}

// refusal is a dispatch that must be refused: call encodes it, arg is
// the argument the error must name and want what its message must say.
type refusal struct {
	name string
	call func(enc *mtl.ComputeCommandEncoder) error
	arg  string
	want []string
}

// checkRefusals runs each case as a subtest on its own command buffer and
// checks that it is refused before anything is encoded: an error matching
// ops.ErrInvalidArgument whose *spec.ArgumentError names the argument,
// a message saying each of want, an encoder that was sent no message and
// a command buffer that runs no dispatch.
func checkRefusals(t *testing.T, r *rig, cases []refusal) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sends := -1
			counters, err := r.commit(func(enc *mtl.ComputeCommandEncoder) error {
				err := c.call(enc)
				sends = enc.Sends()
				return err
			})
			if sends != 0 {
				t.Errorf("the encoder was sent %d messages before the refusal", sends)
			}
			if !errors.Is(err, ops.ErrInvalidArgument) {
				t.Fatalf("error %v, want one matching ops.ErrInvalidArgument", err)
			}
			var ae *spec.ArgumentError
			if !errors.As(err, &ae) || ae.Arg != c.arg {
				t.Errorf("error %v names %v, want %q", err, ae, c.arg)
			}
			for _, s := range c.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
			if len(counters) != 0 {
				t.Errorf("%d dispatches ran after a refusal", len(counters))
			}
		})
	}
}

// view returns a view of type typ holding values (rounded to typ), in a
// buffer of its own.
func (r *rig) view(typ tensor.ElemType, values []float32) tensor.View {
	r.T.Helper()
	v := r.empty(typ, len(values))
	if err := v.Store(values); err != nil {
		r.T.Fatal(err)
	}
	return v
}

// within returns a view of type typ holding values (rounded to typ), with
// before poisoned elements in front of it and after behind it in the same
// buffer: a view at an offset, whose neighbours a kernel must not read
// (they are NaN) or write (they must stay NaN; see rig.untouched).
func (r *rig) within(typ tensor.ElemType, values []float32, before, after int) tensor.View {
	r.T.Helper()
	all := r.empty(typ, max(before+len(values)+after, 16/typ.Size())) // the whole buffer poisoned
	v := tensor.NewView(all.Buffer, before*typ.Size(), typ, len(values))
	if err := v.Store(values); err != nil {
		r.T.Fatal(err)
	}
	return v
}

// untouched fails the test unless every element of v's buffer outside v
// is still the poison NaN.
func (r *rig) untouched(v tensor.View) {
	r.T.Helper()
	all, err := tensor.NewView(v.Buffer, 0, v.Type, v.Buffer.Length()/v.Type.Size()).Float32s()
	if err != nil {
		r.T.Fatal(err)
	}
	first := v.Offset / v.Type.Size()
	for i, e := range all {
		if (i < first || i >= first+v.Len) && e == e {
			r.T.Fatalf("element %d of the buffer, outside the view [%d, %d), was written: %g", i, first, first+v.Len, e)
		}
	}
}

// commit encodes f on one command buffer, ends the encoder, commits the
// command buffer even when f failed, waits for it and returns the
// counters of each dispatch it ran and f's error. It fails the test on an
// error of the command buffer.
func (r *rig) commit(f func(enc *mtl.ComputeCommandEncoder) error) ([]msl.Counters, error) {
	r.T.Helper()
	cb, enc := r.Encoder()
	err := f(enc)
	if endErr := enc.EndEncoding(); err == nil {
		err = endErr
	}
	cb.Commit()
	cb.WaitUntilCompleted()
	if err := cb.Error(); err != nil {
		r.T.Fatal(err)
	}
	c, cerr := emu.DispatchCounters(cb)
	if cerr != nil {
		r.T.Fatal(cerr)
	}
	return c, err
}

// ints returns a view of type typ (I32 or U32) holding values.
func ints[T int32 | uint32](r *rig, typ tensor.ElemType, values []T) tensor.View {
	r.T.Helper()
	v := r.empty(typ, len(values))
	if err := tensor.StoreInts(v, values); err != nil {
		r.T.Fatal(err)
	}
	return v
}

// empty returns a view of n elements of type typ in a buffer of its own,
// poisoned (see tensor.View.Poison).
func (r *rig) empty(typ tensor.ElemType, n int) tensor.View {
	r.T.Helper()
	v := tensor.NewView(r.Buffer(max(n*typ.Size(), 16), mtl.ResourceStorageModeShared), 0, typ, n)
	if err := v.Poison(); err != nil {
		r.T.Fatal(err)
	}
	return v
}

// run encodes f on one command buffer and waits for it, failing the test
// on an error of f or of the command buffer.
func (r *rig) run(f func(enc *mtl.ComputeCommandEncoder) error) {
	r.T.Helper()
	if err := r.Q.Run(f); err != nil {
		r.T.Fatal(err)
	}
}

// raw returns v's elements widened to float32, NaN included.
func (r *rig) raw(v tensor.View) []float32 {
	r.T.Helper()
	x, err := v.Float32s()
	if err != nil {
		r.T.Fatal(err)
	}
	return x
}

// read returns v's elements widened to float32, failing the test on a
// NaN: every element must have been written (views start poisoned).
func (r *rig) read(v tensor.View) []float32 {
	r.T.Helper()
	x := r.raw(v)
	for i, e := range x {
		if e != e {
			r.T.Fatalf("element %d of %d is NaN: not written", i, len(x))
		}
	}
	return x
}

// random returns n values drawn uniformly from [-scale, scale).
func random(rng *rand.Rand, n int, scale float32) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = (2*rng.Float32() - 1) * scale
	}
	return x
}

// encodingAllocs returns the allocations per call of f, a dispatcher
// encoding onto enc, and those of the encoder calls it cannot avoid:
// binding buffers buffers (any view's buffer, v), a 32-byte parameter block
// and one dispatch. A dispatcher that allocates nothing of its own makes no
// more than the second. The pipeline lookup of entry is not among them: it
// must allocate nothing, and encodingAllocs fails the test if it does.
func (r *rig) encodingAllocs(enc *mtl.ComputeCommandEncoder, entry string, buffers int, v tensor.View, f func() error) (dispatcher, direct float64) {
	r.T.Helper()
	if err := f(); err != nil {
		r.T.Fatalf("%s: %v", entry, err)
	}
	if n := testing.AllocsPerRun(20, func() { _ = r.k.Prepare(entry) }); n != 0 {
		r.T.Errorf("%s: the pipeline lookup made %v allocations, want 0", entry, n)
	}
	direct = testing.AllocsPerRun(20, func() {
		for i := range buffers {
			enc.SetBuffer(v.Buffer, 0, i)
		}
		mtl.SetValue(enc, [8]uint32{}, buffers)
		enc.DispatchThreadgroups(mtl.Sz(1, 1, 1), mtl.Sz(32, 4, 1))
	})
	return testing.AllocsPerRun(20, func() { _ = f() }), direct
}
