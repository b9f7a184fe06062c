package msl

import "testing"

// structSrc has one SIMD-group access of each shape the segment counters
// tell apart, and known SIMD-group functions.
const structSrc = mslPrelude + `
kernel void shapes(device const float*  in      [[buffer(0)]],
                   device const float4* in4     [[buffer(2)]],
                   device float*        out     [[buffer(3)]],
                   uint gid  [[thread_position_in_grid]],
                   ushort lane [[thread_index_in_simdgroup]]) {
    threadgroup float tile[8];
    float a = in[gid];                 // contiguous: 128 bytes per SIMD-group
    float b = in[64 + gid * 8];        // stride 32 bytes: one segment per lane
    float4 c = in4[gid];               // contiguous float4: 512 bytes
    float d = in[gid / 8];             // 8 lanes per address: 16 bytes
    float s = simd_sum(a + b + c.x + c.w + d);
    s += simd_shuffle_xor(s, 1u);
    s += simd_shuffle_xor(s, 2u);
    if (gid < 8) {
        tile[gid] = s;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    out[gid] = s + tile[lane % 8];     // contiguous store
    if (lane == 0) {
        out[64 + gid / 32] = s;        // one lane: 4 bytes, one segment
    }
}

kernel void gap(device const float* x [[buffer(0)]],
                device float*       y [[buffer(2)]],
                uint gid [[thread_position_in_grid]]) {
    y[gid] = x[gid] + 1.0f;
}
`

// The segment counters follow the lanes' addresses exactly, in every
// scheduling order: a contiguous access touches as few segments as its
// bytes need, a strided one a segment per lane, a one-lane access one.
func TestSegmentCounters(t *testing.T) {
	lib := compileT(t, structSrc, CompileOptions{})
	f := functionT(t, lib, "shapes")
	const n = 64 // two SIMD-groups, one threadgroup
	in, in4, out := newF32(t, 64+8*n), newF32(t, 4*n), newF32(t, n+2)
	for _, order := range []Order{Forward, Reverse, Shuffled} {
		d := &Dispatch{Grid: ThreadsGrid([3]int{n, 1, 1}, [3]int{n, 1, 1}), Order: order, Seed: 3, CountSegments: true}
		d.Buffers[0], d.Buffers[2], d.Buffers[3] = in.binding(), in4.binding(), out.binding()
		c, err := f.Run(d)
		if err != nil {
			t.Fatalf("%v: %v", order, err)
		}
		// buffer 0: per SIMD-group one contiguous access (128 bytes: 4
		// segments of 32, 1 of 128), one with a 32-byte stride (128
		// bytes over 32 segments of 32 and 8 of 128) and one broadcast
		// (128 bytes loaded, 16 distinct: 1 segment)
		want0 := Segments{Accesses: 6, LaneAccesses: 3 * n, Bytes: 3 * 4 * n, UniqueBytes: 2 * (128 + 128 + 16),
			Touched32: 2 * (4 + 32 + 1), Touched128: 2 * (1 + 8 + 1), Min32: 2 * (4 + 4 + 1), Min128: 2 * (1 + 1 + 1)}
		want2 := Segments{Accesses: 2, LaneAccesses: n, Bytes: 16 * n, UniqueBytes: 16 * n, Touched32: 2 * 16, Touched128: 2 * 4, Min32: 2 * 16, Min128: 2 * 4}
		want3 := Segments{Accesses: 4, LaneAccesses: n + 2, Bytes: 4 * (n + 2), UniqueBytes: 4 * (n + 2), Touched32: 2 * (4 + 1), Touched128: 2 * (1 + 1), Min32: 2 * (4 + 1), Min128: 2 * (1 + 1)}
		if c.Loads[0] != want0 || c.Loads[2] != want2 || c.Stores[3] != want3 {
			t.Errorf("%v: loads 0 %+v, loads 2 %+v, stores 3 %+v; want %+v, %+v, %+v", order, c.Loads[0], c.Loads[2], c.Stores[3], want0, want2, want3)
		}
		if c.Loads[0].Ratio32() != 37.0/9 || c.Loads[2].Ratio32() != 1 || c.Stores[3].Ratio128() != 1 {
			t.Errorf("%v: ratios %v %v %v", order, c.Loads[0].Ratio32(), c.Loads[2].Ratio32(), c.Stores[3].Ratio128())
		}
		if c.Stores[0] != (Segments{}) || c.Loads[3] != (Segments{}) || c.Untracked != 0 {
			t.Errorf("%v: stores 0 %+v, loads 3 %+v, untracked %d", order, c.Stores[0], c.Loads[3], c.Untracked)
		}
		if c.SIMDOps[SIMDSum] != 2 || c.SIMDOps[SIMDShuffleXor] != 4 || c.SIMDGroupOps != 6 {
			t.Errorf("%v: %d simd_sum, %d simd_shuffle_xor, %d in all; want 2, 4, 6", order, c.SIMDOps[SIMDSum], c.SIMDOps[SIMDShuffleXor], c.SIMDGroupOps)
		}
		if got := c.ShuffleSteps(); got != 2*5+4*1 {
			t.Errorf("%v: %d shuffle steps, want %d", order, got, 2*5+4)
		}
		if c.Barriers != 1 || c.Threadgroups != [3]int{1, 1, 1} || c.ThreadsPerThreadgroup != [3]int{n, 1, 1} {
			t.Errorf("%v: %d barriers, grid %v of %v", order, c.Barriers, c.Threadgroups, c.ThreadsPerThreadgroup)
		}
		if c.ThreadgroupMemory != 32 || c.PrivateBytes != f.PrivateBytes || c.PrivateBytes <= 0 {
			t.Errorf("%v: threadgroup memory %d (want 32), private bytes %d (function %d)", order, c.ThreadgroupMemory, c.PrivateBytes, f.PrivateBytes)
		}
	}
	// without CountSegments nothing is counted
	d := &Dispatch{Grid: ThreadsGrid([3]int{n, 1, 1}, [3]int{n, 1, 1})}
	d.Buffers[0], d.Buffers[2], d.Buffers[3] = in.binding(), in4.binding(), out.binding()
	c, err := f.Run(d)
	if err != nil {
		t.Fatal(err)
	}
	if c.Loads[0] != (Segments{}) || c.Stores[3] != (Segments{}) || c.Loaded[0] != 3*4*n {
		t.Errorf("without CountSegments: loads %+v, stores %+v, %d bytes loaded", c.Loads[0], c.Stores[3], c.Loaded[0])
	}
}

// Bytes are charged to the binding index the kernel names, also when a
// lower index is left unbound.
func TestCountersBindingGap(t *testing.T) {
	lib := compileT(t, structSrc, CompileOptions{})
	f := functionT(t, lib, "gap")
	x, y := newF32(t, 32), newF32(t, 32)
	d := &Dispatch{Grid: ThreadsGrid([3]int{32, 1, 1}, [3]int{32, 1, 1})}
	d.Buffers[0], d.Buffers[2] = x.binding(), y.binding()
	c, err := f.Run(d)
	if err != nil {
		t.Fatal(err)
	}
	if c.Loaded[0] != 128 || c.Stored[2] != 128 || c.Stored[1] != 0 {
		t.Errorf("loaded %v, stored %v: want 128 bytes loaded through 0 and stored through 2", c.Loaded[:3], c.Stored[:3])
	}
}
