package msl

import (
	"strings"
	"testing"
)

// A missing barrier between threads writing and reading the same
// threadgroup memory is a fault naming both accesses, whatever the order
// the threads run in.
func TestThreadgroupRaceReported(t *testing.T) {
	const src = mslPrelude + `kernel void shift(device float* out [[buffer(0)]],
                  threadgroup float* tile [[threadgroup(0)]],
                  uint tid [[thread_index_in_threadgroup]],
                  uint n [[threads_per_threadgroup]]) {
    tile[tid] = out[tid];
    BARRIER
    out[tid] = tile[(tid + 33) % n];
}
`
	fixed := strings.Replace(src, "BARRIER", "threadgroup_barrier(mem_flags::mem_threadgroup);", 1)
	runOK(t, fixed, "shift", 64, 256)
	racy := strings.Replace(src, "BARRIER", "", 1)
	f := functionT(t, compileT(t, racy, CompileOptions{}), "shift")
	out := newMem(t, 4096)
	for _, order := range []Order{Forward, Reverse, Shuffled} {
		d := &Dispatch{Grid: ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{64, 1, 1}), Order: order}
		d.Buffers[0] = out.binding()
		d.ThreadgroupMemoryLength[0] = 256
		_, err := f.Run(d)
		ke := kernelErrorT(t, err)
		if ke.Line != 7 && ke.Line != 9 {
			t.Errorf("%v: race reported at line %d, want 7 or 9: %v", order, ke.Line, err)
		}
		other := "program_source:9"
		if ke.Line == 9 {
			other = "program_source:7"
		}
		if !strings.Contains(ke.Msg, "threadgroup memory race") || !strings.Contains(ke.Msg, "of threadgroup(0) (length 256)") ||
			!strings.Contains(ke.Msg, ", with no barrier between them") || !strings.Contains(ke.Msg, "the other access is at "+other) {
			t.Errorf("%v: %v does not name the race and both accesses", order, err)
		}
	}
}

// Threads of different SIMD-groups are ordered only by threadgroup
// barriers; lanes of one SIMD-group also by the SIMD-group functions and
// simdgroup_barrier they run together (where the emulator switches
// between them, as the lanes of a SIMD-group step together on the GPU).
// Without either, lanes exchanging values through threadgroup memory race.
func TestSIMDGroupOrdering(t *testing.T) {
	const src = mslPrelude + `kernel void lanes(device float* out [[buffer(0)]],
                  constant uint& mode [[buffer(1)]],
                  uint tid [[thread_index_in_threadgroup]],
                  uint lane [[thread_index_in_simdgroup]],
                  uint sg [[simdgroup_index_in_threadgroup]]) {
    threadgroup float partial[64];
    threadgroup float sums[2];
    partial[tid] = out[tid];
    if (mode % 4 == 1) simdgroup_barrier(mem_flags::mem_threadgroup);
    if (mode % 4 == 2) (void)simd_any(true);
    if (mode % 4 == 3) threadgroup_barrier(mem_flags::mem_threadgroup);
    float x = partial[mode < 4 ? sg * 32 + (lane ^ 1) : (tid + 32) % 64];
    float s = simd_sum(x);
    if (lane == 0) sums[sg] = s;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    out[tid] = sums[0] + sums[1];
}
`
	f := functionT(t, compileT(t, src, CompileOptions{}), "lanes")
	out, mode := newF32(t, 64), newMem(t, 4)
	run := func(m uint32, order Order) error {
		mode.u32()[0] = m
		fillRandom(out.f32(), int64(m))
		d := &Dispatch{Grid: ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{64, 1, 1}), Order: order}
		d.Buffers[0], d.Buffers[1] = out.binding(), mode.binding()
		_, err := f.Run(d)
		return err
	}
	for _, m := range []uint32{1, 2, 3, 7} {
		for _, order := range []Order{Forward, Reverse, Shuffled} {
			if err := run(m, order); err != nil {
				t.Fatalf("mode %d (%v): %v", m, order, err)
			}
		}
	}
	// no synchronisation; across SIMD-groups a simdgroup_barrier or a
	// SIMD-group function is not enough
	for _, m := range []uint32{0, 5, 6} {
		ke := kernelErrorT(t, run(m, Forward))
		if ke.Line != 10 && ke.Line != 14 || !strings.Contains(ke.Msg, "threadgroup memory race") {
			t.Fatalf("mode %d: %v, want a race between lines 10 and 14", m, ke)
		}
	}
}

// The reduction patterns of real kernels are not races: partial sums
// written per SIMD-group, a barrier, then one SIMD-group reducing them with
// simd_sum; atomics on threadgroup memory from every thread.
func TestNoFalseRaces(t *testing.T) {
	const src = mslPrelude + `kernel void reduce(device float* out [[buffer(0)]],
                   uint tid [[thread_index_in_threadgroup]],
                   uint lane [[thread_index_in_simdgroup]],
                   uint sg [[simdgroup_index_in_threadgroup]],
                   uint nsg [[simdgroups_per_threadgroup]]) {
    threadgroup float partial[32];
    threadgroup atomic_uint count;
    if (tid == 0) atomic_store_explicit(&count, 0u, memory_order_relaxed);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    atomic_fetch_add_explicit(&count, 1u, memory_order_relaxed);
    uint seen = atomic_load_explicit(&count, memory_order_relaxed);
    float s = simd_sum(out[tid]);
    if (lane == 0) partial[sg] = s;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (sg == 0) {
        float p = lane < nsg ? partial[lane] : 0.0;
        p = simd_sum(p);
        if (lane == 0) partial[0] = p;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    out[tid] = partial[0] + (seen > 0 ? 0.0 : 1.0);
    out[512 + tid] = atomic_load_explicit(&count, memory_order_relaxed);
}
`
	out := runOK(t, src, "reduce", 256, 0)
	if got := out.f32()[512+255]; got != 256 {
		t.Fatalf("atomic count %v, want 256", got)
	}
}

// A store after loads by many threads: ordered if every loader is a lane
// of the storer's SIMD-group and they synchronised since; a race if any
// loader is in another SIMD-group (a SIMD-group barrier orders only its
// own lanes) or if nothing synchronised them.
func TestStoreAfterManyLoads(t *testing.T) {
	const src = mslPrelude + `kernel void broadcast(device float* out [[buffer(0)]],
                      constant uint& mode [[buffer(1)]],
                      uint tid [[thread_index_in_threadgroup]],
                      uint lane [[thread_index_in_simdgroup]]) {
    threadgroup float slot[2];
    if (tid < 2) slot[tid] = out[tid];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float x = (mode == 2 || tid < 32) ? slot[0] : 0.0;
    if (mode != 0) simdgroup_barrier(mem_flags::mem_threadgroup);
    if (tid == 5) slot[0] = x + 1.0;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    out[tid] = x + slot[0];
}
`
	f := functionT(t, compileT(t, src, CompileOptions{}), "broadcast")
	out, mode := newF32(t, 64), newMem(t, 4)
	run := func(m uint32) error {
		mode.u32()[0] = m
		d := &Dispatch{Grid: ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{64, 1, 1})}
		d.Buffers[0], d.Buffers[1] = out.binding(), mode.binding()
		_, err := f.Run(d)
		return err
	}
	// 32 lanes of SIMD-group 0 load slot[0], simdgroup_barrier, lane 5 stores
	if err := run(1); err != nil {
		t.Fatalf("loads by one SIMD-group then its barrier: %v", err)
	}
	for _, m := range []uint32{0, 2} {
		ke := kernelErrorT(t, run(m))
		if ke.Line != 12 || ke.Thread != [3]int{5, 0, 0} || !strings.Contains(ke.Msg, "this thread's store of 4 bytes at offset 0") || !strings.Contains(ke.Msg, "program_source:10") {
			t.Fatalf("mode %d: %v, want thread 5's store at line 12 racing with the loads at line 10", m, ke)
		}
	}
}

// Lanes of one SIMD-group exchanging a value through threadgroup memory
// with n SIMD-group functions between the store and the load (or the load
// and the store) are ordered whatever n is: the SIMD-group epochs the race
// detector records never alias, at 2^16 and 2^17 functions as at any other
// count. With none between them, the exchange is a race.
func TestSIMDGroupEpochsDoNotAlias(t *testing.T) {
	const src = mslPrelude + `kernel void epochs(device uint* io [[buffer(0)]],
                   uint lane [[thread_index_in_simdgroup]]) {
    threadgroup float t[32];
    if (lane == 0) t[1] = 1.0f;
    simdgroup_barrier(mem_flags::mem_threadgroup);
    if (io[1] == 0 && lane == 0) t[0] = 1.0f;
    if (io[1] != 0 && lane == 1) io[2] = uint(t[0]);
    for (uint i = 0; i < io[0]; i++) simdgroup_barrier(mem_flags::mem_threadgroup);
    if (io[1] == 0 && lane == 1) io[2] = uint(t[0]);
    if (io[1] != 0 && lane == 0) t[0] = 2.0f;
}
`
	f := functionT(t, compileT(t, src, CompileOptions{}), "epochs")
	io := newMem(t, 16)
	for _, mode := range []uint32{0, 1} { // store then load, load then store
		for _, n := range []uint32{1, 3, 1<<15 - 1, 1 << 15, 1<<16 - 1, 1 << 16, 1<<16 + 1, 1 << 17} {
			for _, order := range []Order{Forward, Reverse} {
				copy(io.u32(), []uint32{n, mode, 0})
				d := &Dispatch{Grid: ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{32, 1, 1}), Order: order}
				d.Buffers[0] = io.binding()
				c, err := f.Run(d)
				if err != nil {
					t.Fatalf("mode %d, %d SIMD-group functions between the accesses, %v: %v", mode, n, order, err)
				}
				if c.SIMDGroupOps != uint64(n)+1 {
					t.Fatalf("mode %d, n %d: %d SIMD-group functions counted, want %d", mode, n, c.SIMDGroupOps, n+1)
				}
			}
		}
		copy(io.u32(), []uint32{0, mode, 0})
		d := &Dispatch{Grid: ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{32, 1, 1})}
		d.Buffers[0] = io.binding()
		if _, err := f.Run(d); err == nil || !strings.Contains(err.Error(), "threadgroup memory race") {
			t.Fatalf("mode %d with no SIMD-group function between the accesses: %v, want a race", mode, err)
		}
	}
}

// A barrier orders threadgroup memory only with mem_flags::mem_threadgroup,
// as Metal defines it: across threadgroup_barrier(mem_none) or
// (mem_device) alone threads exchanging values through threadgroup memory
// race, and so do lanes across simdgroup_barrier without it.
func TestBarrierMemFlagsHonoured(t *testing.T) {
	const src = mslPrelude + `kernel void shift(device float* out [[buffer(0)]],
                  threadgroup float* tile [[threadgroup(0)]],
                  uint tid [[thread_index_in_threadgroup]],
                  uint n [[threads_per_threadgroup]]) {
    tile[tid] = out[tid];
    BARRIER;
    out[tid] = tile[INDEX];
}
`
	const other, lane = "(tid + 33) % n", "(tid & ~31u) | ((tid + 1) & 31u)"
	for _, c := range []struct {
		barrier string
		index   string // another SIMD-group's value, or another lane's of the same
		race    bool
	}{
		{"threadgroup_barrier(mem_flags::mem_threadgroup)", other, false},
		{"threadgroup_barrier(mem_flags::mem_device | mem_flags::mem_threadgroup)", other, false},
		{"threadgroup_barrier(mem_flags::mem_none)", other, true},
		{"threadgroup_barrier(mem_flags::mem_device)", other, true},
		{"threadgroup_barrier(mem_flags::mem_texture)", other, true},
		{"simdgroup_barrier(mem_flags::mem_threadgroup)", lane, false},
		{"simdgroup_barrier(mem_flags::mem_none)", lane, true},
		{"simdgroup_barrier(mem_flags::mem_device)", lane, true},
	} {
		k := strings.Replace(strings.Replace(src, "BARRIER", c.barrier, 1), "INDEX", c.index, 1)
		f := functionT(t, compileT(t, k, CompileOptions{}), "shift")
		out := newMem(t, 4096)
		for _, order := range []Order{Forward, Reverse} {
			d := &Dispatch{Grid: ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{64, 1, 1}), Order: order}
			d.Buffers[0] = out.binding()
			d.ThreadgroupMemoryLength[0] = 256
			_, err := f.Run(d)
			if !c.race && err != nil {
				t.Errorf("%s, %v: %v", c.barrier, order, err)
			}
			if c.race && (err == nil || !strings.Contains(err.Error(), "threadgroup memory race")) {
				t.Errorf("%s, %v: %v, want a threadgroup memory race", c.barrier, order, err)
			}
		}
	}
}
