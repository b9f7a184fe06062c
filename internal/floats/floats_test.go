package floats

import (
	"math"
	"slices"
	"testing"
)

func TestPoison(t *testing.T) {
	x := []float32{1, 2, 3, 4}
	Poison(x[1:3])
	if n := Unwritten(x); n != 2 {
		t.Errorf("%d poisoned elements, want 2", n)
	}
	// Other NaNs are not the poison: a kernel that wrote a NaN wrote.
	x[0], x[3] = float32(math.NaN()), -NaN
	if n := Unwritten(x); n != 2 {
		t.Errorf("other NaNs counted as the poison: %d", n)
	}
	Fill(x, 0.5)
	if n := Unwritten(x); n != 0 || x[2] != 0.5 {
		t.Errorf("after Fill: %v", x)
	}
}

func TestBytes(t *testing.T) {
	b := Bytes(1, -2, NaN)
	want := []byte{0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0, 0xad, 0xde, 0xc0, 0x7f}
	if !slices.Equal(b, want) {
		t.Errorf("Bytes: % x, want % x", b, want)
	}
	if x := FromBytes(append(b, 1)); len(x) != 3 || x[0] != 1 || x[1] != -2 || Unwritten(x) != 1 {
		t.Errorf("FromBytes: %v", x)
	}
	if len(Bytes()) != 0 {
		t.Errorf("Bytes of nothing is not empty")
	}
}

func TestEqual(t *testing.T) {
	negZero := float32(math.Copysign(0, -1))
	for _, c := range []struct {
		a, b []float32
		diff int
	}{
		{nil, nil, -1},
		{[]float32{1, NaN}, []float32{1, NaN}, -1},
		{[]float32{1, 0}, []float32{1, negZero}, 1},
		{[]float32{1, 2}, []float32{1, 2, 3}, 2},
		{[]float32{5}, []float32{4}, 0},
	} {
		if got := FirstDiff(c.a, c.b); got != c.diff {
			t.Errorf("FirstDiff(%v, %v) = %d, want %d", c.a, c.b, got, c.diff)
		}
		if got := Equal(c.a, c.b); got != (c.diff < 0) {
			t.Errorf("Equal(%v, %v) = %v", c.a, c.b, got)
		}
	}
	if !Equal64([]float64{1, math.NaN()}[:1], []float64{1}) || Equal64([]float64{0}, []float64{math.Copysign(0, -1)}) || Equal64([]float64{1}, nil) {
		t.Errorf("Equal64")
	}
}
