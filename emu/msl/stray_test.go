package msl

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// strayOffsets are the byte offsets the stray-pointer tests try around an
// allocation: every offset from -200 KiB to +1.5 MiB in steps of step bytes
// (shifted by a few bytes, so that they are not all page-aligned), and the
// ones that used to land in the emulator's own state or kill the process.
func strayOffsets(size, step int) []int {
	var offs []int
	for o := -200 << 10; o <= 3<<19; o += step {
		offs = append(offs, o+(o>>10)%7*4)
	}
	return append(offs, -40054*4, 312360*4, -4096, -size, 1<<22, -(1 << 21), 5<<20)
}

// A threadgroup pointer moved outside its allocation, loading or storing,
// by any offset in the range around threadgroup memory is reported as an
// out-of-bounds threadgroup access, and the process lives on: no stray
// access lands in the emulator's worker state, its stacks or its shadow
// memory. The threadgroup has 64 threads, and the last one makes the stray
// access, so that the other threads' stacks and state are there to hit.
func TestStrayThreadgroupPointerReported(t *testing.T) {
	const src = mslPrelude + `kernel void stray(device int* io [[buffer(0)]],
                  threadgroup float* t [[threadgroup(0)]],
                  uint tid [[thread_index_in_threadgroup]]) {
    t[tid] = 1.0f;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (tid == 63) {
        threadgroup char* p = (threadgroup char*)t + io[0];
        if (io[1] != 0) *(threadgroup float*)p = 2.0f;
        else io[2] = int(*(threadgroup float*)p);
    }
}
`
	f := functionT(t, compileT(t, src, CompileOptions{}), "stray")
	io := newMem(t, 64)
	d := &Dispatch{Grid: ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{64, 1, 1})}
	d.Buffers[0] = io.binding()
	d.ThreadgroupMemoryLength[0] = 1024
	// in range: no fault
	for _, o := range []int{0, 1020, 4 * 63} {
		for _, store := range []int32{0, 1} {
			copy(io.i32(), []int32{int32(o), store})
			if _, err := f.Run(d); err != nil {
				t.Fatalf("offset %d (store %d): %v", o, store, err)
			}
		}
	}
	reported := 0
	for _, o := range strayOffsets(1024, 4<<10) {
		if o >= 0 && o+4 <= 1024 {
			continue
		}
		for _, store := range []int32{0, 1} {
			copy(io.i32(), []int32{int32(o), store})
			_, err := f.Run(d)
			var ke *KernelError
			if !errors.As(err, &ke) {
				t.Fatalf("threadgroup offset %d (store %d): %v, want an out-of-bounds fault", o, store, err)
			}
			// within the threadgroup zone around threadgroup memory, the
			// fault names the threadgroup offset; past it, the address
			inZone := o >= -(2<<20) && o < 4<<20
			if ke.Line != 10+int(1-store) || ke.Thread != [3]int{63, 0, 0} ||
				inZone && (ke.kind != faultThreadgroupBounds || !strings.Contains(ke.Msg, fmt.Sprintf("at threadgroup offset %d,", o))) ||
				!inZone && !ke.OutOfBounds() && ke.kind != faultThreadgroupBounds {
				t.Fatalf("threadgroup offset %d (store %d): %v (kind %d), want an out-of-bounds threadgroup access at line %d by thread 63", o, store, err, ke.kind, 10+1-store)
			}
			reported++
		}
	}
	t.Logf("%d stray threadgroup accesses reported", reported)
	// the device still runs kernels, and threadgroup memory is right
	copy(io.i32(), []int32{8, 0})
	if _, err := f.Run(d); err != nil || io.i32()[2] != 1 {
		t.Fatalf("after the stray accesses: %v, loaded %d, want 1", err, io.i32()[2])
	}
}

// A device or constant pointer moved outside its buffer is reported
// wherever it lands: in the emulator's own memory, a thread's stack below
// its frames, or memory of nobody's. Stores are refused everywhere but in
// the bound buffers and the thread's frames; loads too, except from the
// kernel library's constant data, which any kernel may read.
func TestStrayDevicePointerReported(t *testing.T) {
	const src = `kernel void stray(device int* io [[buffer(0)]],
                  constant int* c [[buffer(1)]],
                  uint tid [[thread_index_in_threadgroup]]) {
    if (tid == 31) {
        long o = long(io[0]) / 4;
        if (io[1] == 1) io[o] = 7;
        else if (io[1] == 0) io[2] = io[o];
        else io[2] = c[o];
    }
}
`
	f := functionT(t, compileT(t, src, CompileOptions{}), "stray")
	io, c := newMem(t, 64), newMem(t, 64)
	d := &Dispatch{Grid: ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{32, 1, 1})}
	d.Buffers[0], d.Buffers[1] = io.binding(), c.binding()
	ioLo, ioHi := uint64(d.Buffers[0].Ptr), uint64(d.Buffers[0].Ptr)+64
	cLo, cHi := uint64(d.Buffers[1].Ptr), uint64(d.Buffers[1].Ptr)+64
	reported, skipped := 0, 0
	for _, o := range strayOffsets(64, 8<<10) {
		o &^= 3
		for mode := int32(0); mode < 3; mode++ {
			base := ioLo
			if mode == 2 {
				base = cLo
			}
			a := base + uint64(int64(o))
			if (a >= ioLo && a+4 <= ioHi) || (a >= cLo && a+4 <= cHi) {
				skipped++ // inside a bound buffer: a legitimate access by address
				continue
			}
			copy(io.i32(), []int32{int32(o), mode})
			_, err := f.Run(d)
			if err == nil && mode != 1 && inSegment(f, a) {
				skipped++ // a load of the library's constants
				continue
			}
			var ke *KernelError
			if !errors.As(err, &ke) || !ke.OutOfBounds() && ke.kind != faultThreadgroupBounds {
				t.Fatalf("offset %d (mode %d, address %#x): %v, want an out-of-bounds fault", o, mode, a, err)
			}
			if ke.Thread != [3]int{31, 0, 0} {
				t.Fatalf("offset %d (mode %d): fault by thread %v, want 31: %v", o, mode, ke.Thread, err)
			}
			reported++
		}
	}
	t.Logf("%d stray device and constant accesses reported, %d legitimate by address", reported, skipped)
	copy(io.i32(), []int32{0, 0})
	if _, err := f.Run(d); err != nil {
		t.Fatal(err)
	}
}

// A kernel may read its built-ins but store nothing into the emulator's
// own memory, nor into the library's constants: a pointer made from the
// built-ins' address, or from a program-scope constant's, is refused.
func TestStoreIntoEmulatorStateReported(t *testing.T) {
	const src = `constant int table[4] = {1, 2, 3, 4};
kernel void poke(device int* io [[buffer(0)]],
                 uint tid [[thread_index_in_threadgroup]]) {
    device int* p = (device int*)(ulong(&table[0]) + ulong(io[1]));
    if (io[0] == 1) p[io[1]] = 5;
    io[2] = table[tid % 4];
}
`
	f := functionT(t, compileT(t, src, CompileOptions{}), "poke")
	io := newMem(t, 64)
	d := &Dispatch{Grid: ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{4, 1, 1})}
	d.Buffers[0] = io.binding()
	copy(io.i32(), []int32{0, 0})
	if _, err := f.Run(d); err != nil {
		t.Fatal(err)
	}
	copy(io.i32(), []int32{1, 0})
	_, err := f.Run(d)
	ke := kernelErrorT(t, err)
	if !ke.OutOfBounds() || ke.Line != 5 || !strings.Contains(ke.Msg, "read-only") {
		t.Fatalf("store into a program-scope constant: %v, want an out-of-bounds fault at line 5 saying read-only", err)
	}
}

// inSegment reports whether a lies in one of the readable segments of f's
// library.
func inSegment(f *Function, a uint64) bool {
	for _, s := range f.modSegs {
		if a >= s[0] && a+4 <= s[1] {
			return true
		}
	}
	return false
}
