package msl

import "testing"

// countedSrc loads and stores through known bindings, leaves one binding
// untouched, and calls SIMD-group functions and barriers a known number
// of times, with partial SIMD-groups and threadgroups and lanes that
// return early.
const countedSrc = mslPrelude + `
kernel void counted(device const float* in [[buffer(0)]],
                    device float* out [[buffer(1)]],
                    device float* untouched [[buffer(2)]],
                    device float* sums [[buffer(3)]],
                    uint gid [[thread_position_in_grid]],
                    uint tid [[thread_index_in_threadgroup]],
                    ushort lane [[thread_index_in_simdgroup]]) {
    threadgroup float tile[64];
    tile[tid] = in[gid];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float s = simd_sum(tile[tid ^ 1]);
    simdgroup_barrier(mem_flags::mem_none);
    threadgroup_barrier(mem_flags::mem_none);
    if (lane == 5) {
        return;
    }
    out[gid] = s + simd_max(in[gid]);
    if (lane == 0) {
        sums[gid / 32] = s;
    }
}
`

// The counters are exact: every byte loaded and stored through each
// binding, one SIMD-group operation per SIMD-group and call, one barrier
// per threadgroup and call, in every order.
func TestCountersExact(t *testing.T) {
	lib := compileT(t, countedSrc, CompileOptions{})
	f := functionT(t, lib, "counted")
	// 100 threads in threadgroups of 64: SIMD-groups of 32, 32, 32 and 4
	const n, tg = 100, 64
	in, out, untouched, sums := newF32(t, n), newF32(t, n), newF32(t, 4), newF32(t, 4)
	for i := range in.f32() {
		in.f32()[i] = float32(i%17) - 8 // small integers: exact sums in any order
	}
	in.f32()[5] = 100 // the largest, in a lane that returns before simd_max
	for _, order := range []Order{Forward, Reverse, Shuffled} {
		poison(out.f32())
		poison(sums.f32())
		poison(untouched.f32())
		d := &Dispatch{Grid: ThreadsGrid([3]int{n, 1, 1}, [3]int{tg, 1, 1}), Order: order, Seed: 11}
		for i, m := range []*mem{in, out, untouched, sums} {
			d.Buffers[i] = m.binding()
		}
		c, err := f.Run(d)
		if err != nil {
			t.Fatalf("%v: %v", order, err)
		}
		written := 0
		for sg := 0; sg < 4; sg++ {
			lo, hi := sg*32, min(sg*32+32, n)
			var sum, max float32 = 0, -1e9
			for i := lo; i < hi; i++ {
				sum += in.f32()[i]
				if i-lo != 5 { // simd_max runs after lane 5 returned
					max = fmaxf(max, in.f32()[i])
				}
			}
			for i := lo; i < hi; i++ {
				if i-lo == 5 {
					if v := out.f32()[i]; v == v {
						t.Fatalf("%v: lane 5 (thread %d) returned but wrote %v", order, i, v)
					}
					continue
				}
				written++
				if got := out.f32()[i]; got != sum+max {
					t.Fatalf("%v: out[%d] = %v, want %v", order, i, got, sum+max)
				}
			}
			if sums.f32()[sg] != sum {
				t.Fatalf("%v: sums[%d] = %v, want %v", order, sg, sums.f32()[sg], sum)
			}
		}
		for i, v := range untouched.f32() {
			if v == v {
				t.Fatalf("%v: untouched[%d] = %v", order, i, v)
			}
		}
		var want Counters
		want.Loaded[0] = uint64(4*n + 4*written) // in[gid], and again by the lanes that did not return
		want.Stored[1] = uint64(4 * written)     // out, not by lane 5
		want.Stored[3] = 4 * 4                   // one sum per SIMD-group
		want.SIMDGroupOps = 4 * 3                // simd_sum, simdgroup_barrier, simd_max
		want.Barriers = 2 * 2                    // two threadgroup_barrier calls
		want.SIMDOps[SIMDSum], want.SIMDOps[SIMDGroupBarrier], want.SIMDOps[SIMDMax] = 4, 4, 4
		want.Threadgroups, want.ThreadsPerThreadgroup = [3]int{2, 1, 1}, [3]int{tg, 1, 1}
		want.ThreadgroupMemory, want.PrivateBytes = 0, f.PrivateBytes // threadgroup variables: with CountSegments
		if c != want {
			t.Fatalf("%v: counters\n loaded %v\n stored %v\n SIMD-group ops %d, barriers %d\nwant\n loaded %v\n stored %v\n SIMD-group ops %d, barriers %d",
				order, c.Loaded[:4], c.Stored[:4], c.SIMDGroupOps, c.Barriers, want.Loaded[:4], want.Stored[:4], want.SIMDGroupOps, want.Barriers)
		}
	}
}

func fmaxf(a, b float32) float32 {
	if a > b {
		return a
	}
	return b
}
