package tensor_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/half"
	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/tensor"
)

// TestStoreLoad stores values that need rounding into views of every
// float type at an offset, and reads back exactly what package half's
// round-to-nearest-even gives, leaving the bytes around the view alone.
func TestStoreLoad(t *testing.T) {
	g := testdevice.NewEmulated(t, emu.Options{})
	src := []float32{1, -2.5, 1.0009765625, 3.14159265, float32(math.Inf(-1)), 65504.5, 1e-8, -0}
	for _, c := range []struct {
		typ   tensor.ElemType
		round func(float32) float32
	}{
		{tensor.F32, func(x float32) float32 { return x }},
		{tensor.F16, func(x float32) float32 { return half.ToFloat16(x).Float32() }},
		{tensor.BF16, func(x float32) float32 { return half.ToBFloat16(x).Float32() }},
	} {
		size := c.typ.Size()
		b := g.Buffer((len(src)+4)*size, mtl.ResourceStorageModeShared)
		v := tensor.NewView(b, 2*size, c.typ, len(src)+1)
		if err := v.Poison(); err != nil {
			t.Fatal(err)
		}
		if err := v.Store(src); err != nil {
			t.Fatalf("%v: Store: %v", c.typ, err)
		}
		got, err := v.Float32s()
		if err != nil {
			t.Fatalf("%v: Float32s: %v", c.typ, err)
		}
		for i, x := range src {
			if want := c.round(x); math.Float32bits(got[i]) != math.Float32bits(want) {
				t.Errorf("%v: element %d = %v, want %v (%v rounded)", c.typ, i, got[i], want, x)
			}
		}
		if last := got[len(src)]; last == last {
			t.Errorf("%v: the element past src was written: %v", c.typ, last)
		}
		for i, m := range b.Contents()[:2*size] {
			if m != 0 {
				t.Errorf("%v: byte %d before the view is %#x, want 0", c.typ, i, m)
			}
		}
	}
}

func TestInts(t *testing.T) {
	g := testdevice.NewEmulated(t, emu.Options{})
	v := tensor.NewView(g.Buffer(16, mtl.ResourceStorageModeShared), 4, tensor.I32, 3)
	if err := tensor.StoreInts(v, []int32{-1, 7, math.MaxInt32}); err != nil {
		t.Fatal(err)
	}
	got := make([]uint32, 3)
	if err := tensor.LoadInts(v, got); err != nil {
		t.Fatal(err)
	}
	if got[0] != math.MaxUint32 || got[1] != 7 || got[2] != math.MaxInt32 {
		t.Errorf("LoadInts = %v, want the bits of -1, 7, MaxInt32", got)
	}
	if err := v.Store([]float32{1}); !errors.Is(err, tensor.ErrInvalidArgument) {
		t.Errorf("Store into an i32 view: %v, want ErrInvalidArgument", err)
	}
}

// TestRefusals checks that every copy refuses what it cannot do, with an
// error naming the reason, and touches nothing.
func TestRefusals(t *testing.T) {
	g := testdevice.NewEmulated(t, emu.Options{})
	shared := g.Buffer(64, mtl.ResourceStorageModeShared)
	private := g.Buffer(64, mtl.ResourceStorageModePrivate)
	gone, err := g.D.NewBuffer(64, mtl.ResourceStorageModeShared)
	if err != nil {
		t.Fatal(err)
	}
	gone.Release()
	for _, c := range []struct {
		name     string
		v        tensor.View
		n        int
		released bool
	}{
		{"no buffer", tensor.View{Type: tensor.F32, Len: 4}, 1, false},
		{"released", tensor.NewView(gone, 0, tensor.F32, 4), 1, true},
		{"private", tensor.NewView(private, 0, tensor.F32, 4), 1, false},
		{"more than Len", tensor.NewView(shared, 0, tensor.F32, 4), 5, false},
		{"past the buffer", tensor.NewView(shared, 32, tensor.F32, 9), 1, false},
		{"misaligned", tensor.NewView(shared, 2, tensor.F32, 4), 1, false},
		{"integer type", tensor.NewView(shared, 0, tensor.U32, 4), 1, false},
	} {
		err := c.v.Store(make([]float32, c.n))
		if !errors.Is(err, tensor.ErrInvalidArgument) || errors.Is(err, mtl.ErrReleased) != c.released {
			t.Errorf("%s: Store: %v, want ErrInvalidArgument (released: %v)", c.name, err, c.released)
		}
		if err := c.v.Load(make([]float32, c.n)); !errors.Is(err, tensor.ErrInvalidArgument) {
			t.Errorf("%s: Load: %v, want ErrInvalidArgument", c.name, err)
		}
	}
	for i, m := range shared.Contents() {
		if m != 0 {
			t.Fatalf("byte %d of the buffer was written (%#x) by a refused copy", i, m)
		}
	}
}

// TestCheck runs tensor.Check on one good set of arguments, then on each
// single change that must be refused, naming the argument.
func TestCheck(t *testing.T) {
	g := testdevice.NewEmulated(t, emu.Options{})
	other := testdevice.Emulated(t, emu.Options{})
	b := g.Buffer(256, mtl.ResourceStorageModeShared)
	foreign, err := other.NewBuffer(64, mtl.ResourceStorageModeShared)
	if err != nil {
		t.Fatal(err)
	}
	defer foreign.Release()
	good := func() []tensor.Arg {
		return []tensor.Arg{
			{Name: "X", View: tensor.NewView(b, 0, tensor.BF16, 8), Type: tensor.BF16, Len: 8, Formula: "n*d"},
			{Name: "Y", View: tensor.NewView(b, 64, tensor.F32, 8), Type: tensor.F32, Len: 8, Formula: "n*d", Written: true},
			{Name: "R", Type: tensor.F32, Len: 8, Optional: true},
		}
	}
	if err := tensor.Check(g.D, good()...); err != nil {
		t.Fatalf("good arguments refused: %v", err)
	}
	for _, c := range []struct {
		name, arg string
		change    func(a []tensor.Arg)
	}{
		{"no buffer", "X", func(a []tensor.Arg) { a[0].View.Buffer = nil }},
		{"another device", "X", func(a []tensor.Arg) { a[0].View.Buffer = foreign }},
		{"type", "X", func(a []tensor.Arg) { a[0].View.Type = tensor.F16 }},
		{"length", "Y", func(a []tensor.Arg) { a[1].View.Len = 7 }},
		{"offset", "Y", func(a []tensor.Arg) { a[1].View.Offset = 66 }},
		{"past the end", "Y", func(a []tensor.Arg) { a[1].View.Offset = 240; a[1].Len, a[1].View.Len = 8, 8 }},
		{"too many elements", "X", func(a []tensor.Arg) { a[0].Len = tensor.MaxElems }},
		{"overlap", "Y", func(a []tensor.Arg) { a[1].View.Offset = 8 }},
		{"optional but set wrong", "R", func(a []tensor.Arg) { a[2].View = tensor.NewView(b, 128, tensor.F32, 3) }},
	} {
		a := good()
		c.change(a)
		err := tensor.Check(g.D, a...)
		if !errors.Is(err, tensor.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", c.name, err)
			continue
		}
		if got := err.Error(); !strings.Contains(got, c.arg+":") {
			t.Errorf("%s: %q does not name %s", c.name, got, c.arg)
		}
	}
	a := good()
	allocs := testing.AllocsPerRun(100, func() { _ = tensor.Check(g.D, a[0], a[1], a[2]) })
	if allocs != 0 {
		t.Errorf("Check of good arguments allocates %v times, want 0", allocs)
	}
}
