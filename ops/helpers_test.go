package ops_test

import (
	"math/rand/v2"
	"testing"

	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/emu/msl"
	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/kernels"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/ops"
	"github.com/puremetal/puremetal/tensor"
)

// registry is shared by the package's tests, per device, so that each
// kernel source is compiled once per device.
var registry = kernels.NewRegistry()

// rig is an emulated device in one scheduling order, its queue and its
// kernels, all released when the test ends.
type rig struct {
	*testdevice.GPU
	k *ops.Kernels
}

// newRig returns a rig on a fresh emulated device with options opts (one
// of testdevice.Orders).
func newRig(t *testing.T, opts emu.Options) *rig {
	t.Helper()
	g := testdevice.NewEmulated(t, opts)
	k, err := ops.New(g.D, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Release)
	return &rig{GPU: g, k: k}
}

// newRigLanguage returns a rig whose kernels are compiled as Metal
// Shading Language version lang (3.0 reads and writes bf16 as 16-bit
// integers converted by hand, 3.1 as MSL's bfloat), with a registry of
// its own.
func newRigLanguage(t *testing.T, opts emu.Options, lang mtl.LanguageVersion) *rig {
	t.Helper()
	g := testdevice.NewEmulated(t, opts)
	reg := kernels.NewRegistryWithLanguage(lang)
	t.Cleanup(reg.Release)
	k, err := ops.New(g.D, reg)
	if err != nil {
		t.Fatal(err)
	}
	return &rig{GPU: g, k: k}
}

// eachOrder runs f on a rig in each of testdevice.Orders, as a subtest
// named by the order.
func eachOrder(t *testing.T, f func(t *testing.T, r *rig)) {
	for _, o := range testdevice.Orders {
		t.Run(o.Order.String(), func(t *testing.T) { f(t, newRig(t, o)) })
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

// counters encodes f on one command buffer, waits for it and returns the
// emulator's counters of its dispatches, failing the test on an error.
func (r *rig) counters(f func(enc *mtl.ComputeCommandEncoder) error) []msl.Counters {
	r.T.Helper()
	cb, enc := r.Encoder()
	if err := f(enc); err != nil {
		r.T.Fatal(err)
	}
	enc.EndEncoding()
	cb.Commit()
	cb.WaitUntilCompleted()
	if err := cb.Error(); err != nil {
		r.T.Fatal(err)
	}
	c, err := emu.DispatchCounters(cb)
	if err != nil {
		r.T.Fatal(err)
	}
	return c
}

// read returns v's elements widened to float32, failing the test on a
// NaN: every element must have been written (views start poisoned).
func (r *rig) read(v tensor.View) []float32 {
	r.T.Helper()
	x, err := v.Float32s()
	if err != nil {
		r.T.Fatal(err)
	}
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
