package msl

import (
	"strings"
	"testing"
)

// Every threadgroup barrier is an execution barrier: a load before it has
// returned its value before its thread waits, so another thread's store
// after it does not race with it (write after read), whatever its
// mem_flags. ggml's soft_max kernels rely on this: every thread reads
// buf[lane], then threadgroup_barrier(mem_flags::mem_none), then SIMD-group
// 0 stores over buf. A store before such a barrier still races with
// another thread's load or store after it, which only a barrier with
// mem_threadgroup orders.
func TestBarrierOrdersLoadsBeforeStores(t *testing.T) {
	const src = mslPrelude + `kernel void reuse(device float* out [[buffer(0)]],
                  threadgroup float* tile [[threadgroup(0)]],
                  uint tid [[thread_index_in_threadgroup]],
                  uint n [[threads_per_threadgroup]]) {
    tile[tid] = out[tid];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float v = tile[(tid + 33) % n];
    BARRIER;
    tile[tid] = v * 2;
    AFTER;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    out[tid] = tile[(tid + 33) % n];
}
`
	for _, c := range []struct {
		barrier, after string
		race           bool
	}{
		{"threadgroup_barrier(mem_flags::mem_none)", "", false},
		{"threadgroup_barrier(mem_flags::mem_device)", "", false},
		{"threadgroup_barrier(mem_flags::mem_threadgroup)", "", false},
		// a store after the store, by another thread, across a barrier
		// that only waits: a race (write after write)
		{"threadgroup_barrier(mem_flags::mem_none)", "threadgroup_barrier(mem_flags::mem_none); tile[(tid + 1) % n] = v", true},
		// a load of another thread's store across such a barrier: a race
		// (read after write)
		{"threadgroup_barrier(mem_flags::mem_none)", "threadgroup_barrier(mem_flags::mem_none); out[n + tid] = tile[(tid + 1) % n]", true},
	} {
		k := strings.Replace(strings.Replace(src, "BARRIER", c.barrier, 1), "AFTER", c.after, 1)
		f := functionT(t, compileT(t, k, CompileOptions{}), "reuse")
		const n = 64
		out := newMem(t, 8*n)
		for _, order := range []Order{Forward, Reverse} {
			for i := range out.f32()[:n] {
				out.f32()[i] = float32(i)
			}
			d := &Dispatch{Grid: ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{n, 1, 1}), Order: order}
			d.Buffers[0] = out.binding()
			d.ThreadgroupMemoryLength[0] = 4 * n
			_, err := f.Run(d)
			if c.race {
				if err == nil || !strings.Contains(err.Error(), "threadgroup memory race") {
					t.Errorf("%s; %s, %v: %v, want a threadgroup memory race", c.barrier, c.after, order, err)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s, %v: %v", c.barrier, order, err)
				continue
			}
			for i, g := range out.f32()[:n] {
				if w := float32(2 * ((i + 66) % n)); g != w {
					t.Fatalf("%s, %v: out[%d] = %v, want %v", c.barrier, order, i, g, w)
				}
			}
		}
	}
}
