package msl

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// A Hillis-Steele scan whose lanes leave the loop's work as they pass
// their last step, and return: each lane reads lanes that are not active
// at the call (some returned already), and gets their current value of x,
// as on Apple GPUs, so the scan gives the inclusive prefix sums.
const simdInactiveScanSrc = `kernel void scan(device float* out [[buffer(0)]], device const float* in [[buffer(1)]],
                 uint lane [[thread_index_in_simdgroup]], uint gid [[thread_position_in_grid]]) {
    float x = in[gid];
    for (ushort d = 1; d <= 16; d *= 2) {
        if (lane >= d) x += simd_shuffle_up(x, d);
    }
    out[gid] = x;
}
`

func TestSIMDShuffleInactiveScan(t *testing.T) {
	f := functionT(t, compileT(t, simdInactiveSrc(), CompileOptions{}), "scan")
	// two threadgroups of 48 threads: a full SIMD-group and one of 16 lanes
	const tgs, tg = 2, 48
	in, out := newF32(t, tgs*tg), newF32(t, tgs*tg)
	fillRandom(in.f32(), 41)
	for _, order := range []Order{Forward, Reverse, Shuffled} {
		poison(out.f32())
		d := &Dispatch{Grid: ThreadgroupsGrid([3]int{tgs, 1, 1}, [3]int{tg, 1, 1}), Order: order}
		d.Buffers[0], d.Buffers[1] = out.binding(), in.binding()
		if _, err := f.Run(d); err != nil {
			t.Fatalf("order %v: %v", order, err)
		}
		for sg := range tgs * 2 {
			base, lanes := sg/2*tg+sg%2*32, 32-sg%2*16
			// the same float additions in the same order as the kernel's
			x := append([]float32(nil), in.f32()[base:base+lanes]...)
			for d := 1; d <= 16; d *= 2 {
				next := append([]float32(nil), x...)
				for l := d; l < lanes; l++ {
					next[l] = x[l] + x[l-d]
				}
				x = next
			}
			for l := range lanes {
				if g := out.f32()[base+l]; g != x[l] {
					t.Errorf("order %v, thread %d: %v, want the prefix sum %v", order, base+l, g, x[l])
				}
			}
		}
	}
}

// Every lane read from a lane that is not active at the call (lanes that
// are multiples of 3 skip it and return) gives that lane's value of the
// variable; a source outside the SIMD-group (or, for the quad functions,
// outside the quad) gives the caller's own value.
func TestSIMDLaneReadsInactive(t *testing.T) {
	lib := compileT(t, simdInactiveSrc(), CompileOptions{})
	const n = 32
	in, out := newF32(t, n), newF32(t, n)
	fillRandom(in.f32(), 9)
	for _, r := range laneReadCases {
		f := functionT(t, lib, r.fn+"_k")
		poison(out.f32())
		d := &Dispatch{Grid: ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{n, 1, 1}), Timeout: time.Minute}
		d.Buffers[0], d.Buffers[1] = out.binding(), in.binding()
		if _, err := f.Run(d); err != nil {
			t.Fatalf("%s: %v", r.fn, err)
		}
		for l := range n {
			want := float32(-1)
			if l%3 != 0 {
				want = in.f32()[l]
				if s := r.src(l, r.arg); s >= 0 && s < n {
					want = in.f32()[s]
				}
			}
			if g := out.f32()[l]; g != want {
				t.Errorf("%s(x, %d), lane %d: %v, want %v", r.fn, r.arg, l, g, want)
			}
		}
	}
}

// A lane that returned before declaring the variable has no value of it:
// a shuffle reading it gives the caller's own value (the GPU's is
// undefined), and a loop variable declared in a for statement is read as
// the caller's own too.
func TestSIMDShuffleUndeclaredInactive(t *testing.T) {
	f := functionT(t, compileT(t, simdInactiveSrc(), CompileOptions{}), "undeclared")
	in, out := newF32(t, 32), newF32(t, 32)
	fillRandom(in.f32(), 3)
	poison(out.f32())
	d := &Dispatch{Grid: ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{32, 1, 1})}
	d.Buffers[0], d.Buffers[1] = out.binding(), in.binding()
	if _, err := f.Run(d); err != nil {
		t.Fatal(err)
	}
	for l := range 32 {
		g := out.f32()[l]
		if l%4 == 1 {
			if g == g {
				t.Errorf("returned lane %d wrote %v", l, g)
			}
			continue
		}
		x, i := in.f32()[l], float32(l)
		if s := l + 1; s < 32 && s%4 != 1 {
			x = in.f32()[s]
		}
		if s := l - 1; s >= 0 && s%4 != 1 {
			i = float32(s)
		}
		if want := x + i; g != want {
			t.Errorf("lane %d: %v, want %v", l, g, want)
		}
	}
}

const simdUndeclaredSrc = `kernel void undeclared(device float* out [[buffer(0)]], device const float* in [[buffer(1)]],
              uint lane [[thread_index_in_simdgroup]], uint gid [[thread_position_in_grid]]) {
    if (lane % 4 == 1) return;
    float x = in[gid];
    float y = simd_shuffle_down(x, ushort(1));
    for (uint i = lane; i < lane + 1; i++) {
        y += float(simd_shuffle_up(i, ushort(1)));
    }
    out[gid] = y;
}
`

type laneRead struct {
	fn  string
	arg int
	src func(l, arg int) int // the source lane, -1 for none
}

// laneReadCases are the lane reads TestSIMDLaneReadsInactive checks, each with
// the lane it reads.
var laneReadCases = []laneRead{
	{"simd_shuffle", 7, func(l, a int) int { return a }},
	{"simd_broadcast", 9, func(l, a int) int { return a }},
	{"simd_shuffle_up", 2, func(l, a int) int { return l - a }},
	{"simd_shuffle_down", 4, func(l, a int) int { return l + a }},
	{"simd_shuffle_xor", 1, func(l, a int) int { return l ^ a }},
	{"simd_shuffle_rotate_up", 5, func(l, a int) int { return (l + 32 - a) % 32 }},
	{"simd_shuffle_rotate_down", 3, func(l, a int) int { return (l + a) % 32 }},
	{"quad_shuffle", 2, func(l, a int) int { return l&^3 + a }},
	{"quad_broadcast", 3, func(l, a int) int { return l&^3 + a }},
	{"quad_shuffle_up", 1, func(l, a int) int {
		if l&3 < a {
			return -1
		}
		return l - a
	}},
	{"quad_shuffle_down", 2, func(l, a int) int {
		if l&3+a > 3 {
			return -1
		}
		return l + a
	}},
	{"quad_shuffle_xor", 3, func(l, a int) int { return l ^ a }},
	{"quad_shuffle_rotate_up", 1, func(l, a int) int { return l&^3 + (l+4-a)&3 }},
	{"quad_shuffle_rotate_down", 1, func(l, a int) int { return l&^3 + (l+a)&3 }},
}

// simdInactiveSrc is the kernels of the tests of lanes reading inactive
// lanes, in one library: the scan, the undeclared variable, and one kernel
// per lane read.
func simdInactiveSrc() string {
	var src strings.Builder
	src.WriteString(mslPrelude + simdInactiveScanSrc + simdUndeclaredSrc)
	for _, r := range laneReadCases {
		fmt.Fprintf(&src, `kernel void %[1]s_k(device float* out [[buffer(0)]], device const float* in [[buffer(1)]],
    uint lane [[thread_index_in_simdgroup]], uint gid [[thread_position_in_grid]]) {
    float x = in[gid];
    float y = -1.0f;
    if (lane %% 3 != 0) y = %[1]s(x, ushort(%[2]d));
    out[gid] = y;
}
`, r.fn, r.arg)
	}
	return src.String()
}
