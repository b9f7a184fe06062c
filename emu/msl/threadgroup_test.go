package msl

import (
	"math"
	"testing"
)

// Two tree reductions per threadgroup: one in a threadgroup array declared
// in the kernel, one in threadgroup memory set by the encoder.
const reduceSrc = `#include <metal_stdlib>
using namespace metal;

constant uint TG = 256;

kernel void reduce(device const float* in [[buffer(0)]],
                   device float* sums [[buffer(1)]],
                   device float* maxes [[buffer(2)]],
                   threadgroup float* scratch [[threadgroup(0)]],
                   uint gid [[thread_position_in_grid]],
                   uint tid [[thread_index_in_threadgroup]],
                   uint group [[threadgroup_position_in_grid]]) {
    threadgroup float partial[TG];
    partial[tid] = in[gid];
    scratch[tid] = in[gid];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint stride = TG / 2; stride > 0; stride /= 2) {
        if (tid < stride) {
            partial[tid] += partial[tid + stride];
            scratch[tid] = max(scratch[tid], scratch[tid + stride]);
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    if (tid == 0) {
        sums[group] = partial[0];
        maxes[group] = scratch[0];
    }
}
`

func TestThreadgroupReduction(t *testing.T) {
	lib := compileT(t, reduceSrc, CompileOptions{})
	f := functionT(t, lib, "reduce")
	const tg, groups = 256, 12
	in, sums, maxes := newF32(t, tg*groups), newF32(t, groups), newF32(t, groups)
	fillRandom(in.f32(), 3)
	want := make([]float32, groups)
	wantMax := make([]float32, groups)
	for g := 0; g < groups; g++ {
		p := append([]float32(nil), in.f32()[g*tg:(g+1)*tg]...)
		m := append([]float32(nil), p...)
		for stride := tg / 2; stride > 0; stride /= 2 {
			for i := 0; i < stride; i++ {
				p[i] += p[i+stride]
				m[i] = float32(math.Max(float64(m[i]), float64(m[i+stride])))
			}
		}
		want[g], wantMax[g] = p[0], m[0]
	}
	for _, order := range []Order{Forward, Reverse, Shuffled} {
		poison(sums.f32())
		poison(maxes.f32())
		d := &Dispatch{Grid: ThreadgroupsGrid([3]int{groups, 1, 1}, [3]int{tg, 1, 1}), Order: order, Seed: 5}
		d.Buffers[0], d.Buffers[1], d.Buffers[2] = in.binding(), sums.binding(), maxes.binding()
		d.ThreadgroupMemoryLength[0] = tg * 4
		c, err := f.Run(d)
		if err != nil {
			t.Fatalf("%v: %v", order, err)
		}
		for g := 0; g < groups; g++ {
			if math.Float32bits(sums.f32()[g]) != math.Float32bits(want[g]) || maxes.f32()[g] != wantMax[g] {
				t.Fatalf("%v: group %d: sum %v max %v, want %v and %v", order, g, sums.f32()[g], maxes.f32()[g], want[g], wantMax[g])
			}
		}
		// 1 + log2(256) barriers per threadgroup
		if c.Barriers != groups*9 {
			t.Fatalf("%v: %d barriers, want %d", order, c.Barriers, groups*9)
		}
		if c.Loaded[0] != tg*groups*4*2 || c.Stored[1] != groups*4 || c.Stored[2] != groups*4 {
			t.Fatalf("%v: counters loaded %v stored %v", order, c.Loaded[:3], c.Stored[:3])
		}
	}
}

// A missing barrier: each thread reads its neighbour's slot right after
// writing its own. Some scheduling order must expose it (the poisoned
// threadgroup memory shows as NaN).
const raceSrc = `#include <metal_stdlib>
using namespace metal;

kernel void shift(device const float* in [[buffer(0)]],
                  device float* out [[buffer(1)]],
                  uint gid [[thread_position_in_grid]],
                  uint tid [[thread_index_in_threadgroup]],
                  uint n [[threads_per_threadgroup]]) {
    threadgroup float tile[64];
    tile[tid] = in[gid];
    // missing: threadgroup_barrier(mem_flags::mem_threadgroup);
    out[gid] = tile[(tid + 1) % n];
}
`

func TestMissingBarrierCaught(t *testing.T) {
	lib := compileT(t, raceSrc, CompileOptions{})
	f := functionT(t, lib, "shift")
	const n = 64 * 4
	in, out := newF32(t, n), newF32(t, n)
	fillRandom(in.f32(), 9)
	wrong := map[Order]int{}
	for _, order := range []Order{Forward, Reverse} {
		poison(out.f32())
		d := &Dispatch{Grid: ThreadsGrid([3]int{n, 1, 1}, [3]int{64, 1, 1}), Order: order}
		d.Buffers[0], d.Buffers[1] = in.binding(), out.binding()
		if _, err := f.Run(d); err != nil {
			t.Fatalf("%v: %v", order, err)
		}
		for i := 0; i < n; i++ {
			g, tid := i/64, i%64
			want := in.f32()[g*64+(tid+1)%64]
			if math.Float32bits(out.f32()[i]) != math.Float32bits(want) {
				wrong[order]++
			}
		}
	}
	t.Logf("wrong results without the barrier: %v", wrong)
	if wrong[Forward] == 0 && wrong[Reverse] == 0 {
		t.Fatalf("neither order exposed the missing barrier")
	}
}

const earlyReturnSrc = `#include <metal_stdlib>
using namespace metal;

kernel void early(device float* out [[buffer(0)]],
                  uint tid [[thread_index_in_threadgroup]]) {
    threadgroup float tile[32];
    if (tid >= 16) {
        return;
    }
    tile[tid] = 1.0;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    out[tid] = tile[31 - tid];
}
`

func TestBarrierAfterEarlyReturn(t *testing.T) {
	lib := compileT(t, earlyReturnSrc, CompileOptions{})
	f := functionT(t, lib, "early")
	out := newF32(t, 32)
	for _, order := range []Order{Forward, Reverse} {
		d := &Dispatch{Grid: ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{32, 1, 1}), Order: order}
		d.Buffers[0] = out.binding()
		_, err := f.Run(d)
		ke := kernelErrorT(t, err)
		if ke.Line != 11 || ke.Kernel != "early" || ke.File != DefaultFileName {
			t.Fatalf("%v: error at %s:%d in %s, want %s:11 in early: %v", order, ke.File, ke.Line, ke.Kernel, DefaultFileName, err)
		}
		if !contains(ke.Msg, "early return") {
			t.Fatalf("%v: message %q does not name the early return", order, ke.Msg)
		}
	}
}

const divergentBarrierSrc = `#include <metal_stdlib>
using namespace metal;

kernel void two_barriers(device float* out [[buffer(0)]],
                         uint tid [[thread_index_in_threadgroup]]) {
    if (tid % 2 == 0) {
        threadgroup_barrier(mem_flags::mem_threadgroup);
    } else {
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    out[tid] = 1.0;
}
`

func TestThreadsAtDifferentBarriers(t *testing.T) {
	lib := compileT(t, divergentBarrierSrc, CompileOptions{})
	f := functionT(t, lib, "two_barriers")
	out := newF32(t, 64)
	d := &Dispatch{Grid: ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{64, 1, 1})}
	d.Buffers[0] = out.binding()
	_, err := f.Run(d)
	ke := kernelErrorT(t, err)
	if ke.Line != 7 && ke.Line != 9 {
		t.Fatalf("error at line %d, want 7 or 9: %v", ke.Line, err)
	}
	if !contains(ke.Msg, "different barriers") || !contains(ke.Msg, "line 7") || !contains(ke.Msg, "line 9") {
		t.Fatalf("message %q does not name both barriers", ke.Msg)
	}
}
