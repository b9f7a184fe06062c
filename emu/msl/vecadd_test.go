package msl

import (
	"math"
	"testing"
)

const vecAddSrc = `#include <metal_stdlib>
using namespace metal;

kernel void vec_add(device const float* a [[buffer(0)]],
                    device const float* b [[buffer(1)]],
                    device float* out [[buffer(2)]],
                    uint i [[thread_position_in_grid]]) {
    out[i] = a[i] + b[i];
}
`

func TestVectorAdd(t *testing.T) {
	lib := compileT(t, vecAddSrc, CompileOptions{})
	f := functionT(t, lib, "vec_add")
	const n = 1000
	a, b, out := newF32(t, n), newF32(t, n), newF32(t, n)
	fillRandom(a.f32(), 1)
	fillRandom(b.f32(), 2)
	for _, order := range []Order{Forward, Reverse, Shuffled} {
		poison(out.f32())
		d := &Dispatch{Grid: ThreadsGrid([3]int{n, 1, 1}, [3]int{64, 1, 1}), Order: order, Seed: 7}
		d.Buffers[0], d.Buffers[1], d.Buffers[2] = a.binding(), b.binding(), out.binding()
		c, err := f.Run(d)
		if err != nil {
			t.Fatalf("%v: %v", order, err)
		}
		for i := 0; i < n; i++ {
			want := a.f32()[i] + b.f32()[i]
			if math.Float32bits(out.f32()[i]) != math.Float32bits(want) {
				t.Fatalf("%v: out[%d] = %v, want %v", order, i, out.f32()[i], want)
			}
		}
		if c.Loaded[0] != 4*n || c.Loaded[1] != 4*n || c.Stored[2] != 4*n || c.Stored[0] != 0 || c.Loaded[2] != 0 {
			t.Fatalf("%v: counters loaded %v stored %v", order, c.Loaded[:3], c.Stored[:3])
		}
	}
}
