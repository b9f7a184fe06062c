package msl

import (
	"strings"
	"testing"
	"time"
	"unsafe"
)

// runFault runs a one-threadgroup dispatch of the kernel and returns its
// kernel error; out is bound at index 0, and threadgroup(0) gets tgLen bytes.
func runFault(t *testing.T, src, name string, threads, tgLen int) *KernelError {
	t.Helper()
	f := functionT(t, compileT(t, src, CompileOptions{}), name)
	out := newMem(t, 4096)
	d := &Dispatch{Grid: ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{threads, 1, 1})}
	d.Buffers[0] = out.binding()
	d.ThreadgroupMemoryLength[0] = tgLen
	_, err := f.Run(d)
	return kernelErrorT(t, err)
}

// runOK runs the same dispatch and wants it to succeed.
func runOK(t *testing.T, src, name string, threads, tgLen int) *mem {
	t.Helper()
	f := functionT(t, compileT(t, src, CompileOptions{}), name)
	out := newMem(t, 4096)
	for _, order := range []Order{Forward, Reverse, Shuffled} {
		d := &Dispatch{Grid: ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{threads, 1, 1}), Order: order}
		d.Buffers[0] = out.binding()
		d.ThreadgroupMemoryLength[0] = tgLen
		if _, err := f.Run(d); err != nil {
			t.Fatalf("%s (%v): %v", name, order, err)
		}
	}
	return out
}

func wantFault(t *testing.T, ke *KernelError, line int, thread [3]int, msg ...string) {
	t.Helper()
	if ke.Line != line || ke.Thread != thread || ke.File != DefaultFileName {
		t.Errorf("fault %v at %s:%d thread %v, want %s:%d thread %v", ke, ke.File, ke.Line, ke.Thread, DefaultFileName, line, thread)
	}
	for _, m := range msg {
		if !strings.Contains(ke.Msg, m) {
			t.Errorf("fault %q does not say %q", ke.Msg, m)
		}
	}
}

// INT_MIN / -1 and INT_MIN % -1 trap on the CPU like a division by zero:
// both are kernel faults at their line; other signed overflow wraps, as on
// the GPU.
func TestIntegerDivisionOverflowReported(t *testing.T) {
	const src = `kernel void div(device int* out [[buffer(0)]],
                uint tid [[thread_index_in_threadgroup]]) {
    int a = out[0], b = out[1];
    if (tid == uint(out[5])) out[2] = a / b;
    if (tid == uint(out[6])) out[3] = a % b;
    out[4] = a * 2 + b;
}
`
	f := functionT(t, compileT(t, src, CompileOptions{}), "div")
	out := newMem(t, 64)
	d := &Dispatch{Grid: ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{8, 1, 1})}
	d.Buffers[0] = out.binding()
	for _, c := range []struct{ line, div, rem int }{{4, 3, 99}, {5, 99, 5}} {
		copy(out.i32(), []int32{-1 << 31, -1, 0, 0, 0, int32(c.div), int32(c.rem)})
		_, err := f.Run(d)
		ke := kernelErrorT(t, err)
		wantFault(t, ke, c.line, [3]int{min(c.div, c.rem), 0, 0}, "-2147483648 / -1 does not fit in int")
	}
	// wrapping signed arithmetic is no fault
	copy(out.i32(), []int32{1 << 30, 1 << 30, 0, 0, 0, 99, 99})
	if _, err := f.Run(d); err != nil {
		t.Fatal(err)
	}
	if got := out.i32()[4]; got != -1<<31+1<<30 {
		t.Fatalf("2^30 * 2 + 2^30 = %d, want the wrapped %d", got, -1<<31+1<<30)
	}
}

// Threadgroup memory is checked like device memory: an access outside its
// allocation (the encoder's length, or a variable's size) is a fault, even
// where the arena has memory.
func TestThreadgroupOutOfBoundsReported(t *testing.T) {
	const src = mslPrelude + `kernel void tg_oob(device float* out [[buffer(0)]],
                   threadgroup float* dyn [[threadgroup(0)]],
                   uint tid [[thread_index_in_threadgroup]]) {
    dyn[tid] = 1.0;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    out[tid] = dyn[tid];
}
`
	runOK(t, src, "tg_oob", 16, 64)
	ke := runFault(t, src, "tg_oob", 32, 64)
	// reverse order would name thread 31; forward runs thread 16 first
	wantFault(t, ke, 6, [3]int{16, 0, 0}, "out-of-bounds threadgroup memory access: store of 4 bytes at threadgroup offset 64, 0 bytes past the end of threadgroup(0) (length 64)")

	// a pointer walking before a kernel's threadgroup variable
	const src2 = mslPrelude + `kernel void tg_var(device float* out [[buffer(0)]],
                   uint tid [[thread_index_in_threadgroup]]) {
    threadgroup float tile[16];
    threadgroup float* p = tile;
    p[tid] = 2.0;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    out[tid] = p[(int)tid - 4];
}
`
	ke = runFault(t, src2, "tg_var", 16, 0)
	wantFault(t, ke, 9, [3]int{0, 0, 0}, "load of 4 bytes", "16 bytes before the start of a threadgroup variable of 64 bytes")
}

// Indexing an array declared in the kernel (thread or threadgroup) out of
// its bounds is a fault naming the line, even where the memory there
// belongs to the kernel.
func TestArrayIndexOutOfBoundsReported(t *testing.T) {
	const src = mslPrelude + `kernel void partials(device float* out [[buffer(0)]],
                     uint tid [[thread_index_in_threadgroup]]) {
    threadgroup float partial[8];
    threadgroup float other[8];
    partial[tid] = 1.0;
    other[tid & 7] = 2.0;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    out[tid] = partial[tid & 7];
}
`
	runOK(t, src, "partials", 8, 0)
	ke := runFault(t, src, "partials", 16, 0)
	wantFault(t, ke, 7, [3]int{8, 0, 0}, "index 8 is out of bounds of the array threadgroup float[8]")

	const src2 = `kernel void private_array(device float* out [[buffer(0)]],
                          uint tid [[thread_index_in_threadgroup]]) {
    float acc[4];
    for (uint i = 0; i < 4; i++) acc[i] = out[i];
    out[tid] = acc[tid];
}
`
	runOK(t, src2, "private_array", 4, 0)
	ke = runFault(t, src2, "private_array", 5, 0)
	wantFault(t, ke, 5, [3]int{4, 0, 0}, "index 4 is out of bounds of the array float[4]")
}

// An endless loop is stopped at the dispatch's time limit with a timeout
// fault naming the loop's line; the device keeps working afterwards.
func TestEndlessLoopTimesOut(t *testing.T) {
	const src = `kernel void spin(device uint* out [[buffer(0)]],
                 uint tid [[thread_index_in_threadgroup]]) {
    if (tid == 1) {
        while (out[out[1]] == 0) {
            out[4 + out[3]] += 1;
        }
    }
    out[2] = tid;
}
`
	f := functionT(t, compileT(t, src, CompileOptions{}), "spin")
	out := newMem(t, 64)
	out.u32()[3] = 2
	for _, workers := range []int{1, 2} {
		d := &Dispatch{Grid: ThreadgroupsGrid([3]int{4, 1, 1}, [3]int{4, 1, 1}), Timeout: 200 * time.Millisecond, Workers: workers}
		d.Buffers[0] = out.binding()
		ke := runTimesOut(t, "spin", f, d)
		if ke.Line != 4 && ke.Line != 5 || ke.Thread != [3]int{1, 0, 0} || !strings.Contains(ke.Msg, "time limit of 0.2 s") {
			t.Fatalf("fault %v at line %d thread %v, want the loop (line 4 or 5), thread 1, the limit", ke, ke.Line, ke.Thread)
		}
	}
	// the same function runs again, to completion
	out.u32()[0] = 1
	d := &Dispatch{Grid: ThreadgroupsGrid([3]int{4, 1, 1}, [3]int{4, 1, 1}), Timeout: 200 * time.Millisecond}
	d.Buffers[0] = out.binding()
	if _, err := f.Run(d); err != nil {
		t.Fatalf("after a timeout: %v", err)
	}
	// an endless loop around a barrier is caught there
	const src2 = mslPrelude + `kernel void spin_barrier(device uint* out [[buffer(0)]]) {
    for (;;) {
        threadgroup_barrier(mem_flags::mem_none);
    }
}
`
	f = functionT(t, compileT(t, src2, CompileOptions{}), "spin_barrier")
	d.Grid = ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{2, 1, 1})
	_, err := f.Run(d)
	if ke := kernelErrorT(t, err); !ke.Timeout() || ke.Line != 5 {
		t.Fatalf("%v (line %d), want a timeout at line 5", err, ke.Line)
	}
}

// Endless loops whose accesses the hooks' fast path settles without a
// call, in the thread's own frames or in threadgroup memory, are stopped
// at the time limit too: the watchdog sends the next access to the slow
// path.
func TestEndlessLoopInPrivateOrThreadgroupMemoryTimesOut(t *testing.T) {
	const src = mslPrelude + `kernel void spin_private(device uint* out [[buffer(0)]]) {
    uint a[8];
    for (uint i = 0; i < 8; i++) a[i] = out[4 + i];
    uint k = out[3];
    while (a[k & 7] != 7u) {
        a[(k * 3 + 1) & 7] ^= 1u;
        k++;
    }
    out[2] = a[k & 7];
}
kernel void spin_threadgroup(device uint* out [[buffer(0)]],
                             uint tid [[thread_index_in_threadgroup]]) {
    threadgroup uint t[64];
    t[tid] = out[4 + tid];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    uint k = out[3], s = 0;
    while (t[k & 63] != 7u) {
        s += t[(k * 5) & 63];
        k++;
    }
    out[2] = s;
}
`
	lib := compileT(t, src, CompileOptions{})
	for _, name := range []string{"spin_private", "spin_threadgroup"} {
		f := functionT(t, lib, name)
		out := newMem(t, 512)
		d := &Dispatch{Grid: ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{64, 1, 1}), Timeout: 200 * time.Millisecond, Workers: 1}
		d.Buffers[0] = out.binding()
		runTimesOut(t, name, f, d)
	}
}

// runTimesOut runs d, which must stop with a timeout fault soon after its
// time limit (within 5 s), and returns the fault.
func runTimesOut(t *testing.T, name string, f *Function, d *Dispatch) *KernelError {
	t.Helper()
	start := time.Now()
	_, err := f.Run(d)
	took := time.Since(start)
	ke := kernelErrorT(t, err)
	if !ke.Timeout() || ke.OutOfBounds() {
		t.Fatalf("%s: %v: Timeout() %v, want a timeout", name, err, ke.Timeout())
	}
	if took < d.Timeout || took > 5*time.Second {
		t.Fatalf("%s: the dispatch stopped after %v, want soon after %v", name, took, d.Timeout)
	}
	return ke
}

// A fault on one worker stops the others, even in an endless loop, long
// before the time limit: the fault is what the dispatch reports.
func TestFaultStopsOtherWorkers(t *testing.T) {
	const src = mslPrelude + `kernel void fault_or_spin(device uint* out [[buffer(0)]],
                          uint tg [[threadgroup_position_in_grid]]) {
    if (tg == 0) {
        out[1 << 20] = 1u;
        return;
    }
    while (out[0] == 0u) {
        out[8 + (tg & 7)] += 1u;
    }
}
`
	f := functionT(t, compileT(t, src, CompileOptions{}), "fault_or_spin")
	out := newMem(t, 256)
	d := &Dispatch{Grid: ThreadgroupsGrid([3]int{2, 1, 1}, [3]int{1, 1, 1}), Timeout: time.Minute, Workers: 2}
	d.Buffers[0] = out.binding()
	start := time.Now()
	_, err := f.Run(d)
	took := time.Since(start)
	ke := kernelErrorT(t, err)
	if !ke.OutOfBounds() || ke.Timeout() {
		t.Fatalf("%v: want the out-of-bounds store", err)
	}
	if took > 5*time.Second {
		t.Fatalf("the dispatch stopped after %v, want the spinning worker stopped soon after the fault", took)
	}
}

// runPastEnd runs the kernel name of lib over one threadgroup of threads
// with buffer(0) of 4096 bytes, the first half of a mapping, so that what
// lies past its end is no other memory a kernel may read, and returns its
// kernel error.
func runPastEnd(t *testing.T, lib *Library, name string, threads int) *KernelError {
	t.Helper()
	m := newMem(t, 8192)
	d := &Dispatch{Grid: ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{threads, 1, 1})}
	d.Buffers[0] = Binding{Ptr: m.binding().Ptr, Len: 4096}
	_, err := functionT(t, lib, name).Run(d)
	return kernelErrorT(t, err)
}

// wantPastEndFaults checks that lib's kernels load_past and store_past,
// whose thread 1 loads or stores past the end of buffer(0) at the given
// lines, fault there: the first 16 bytes the access checks in pieces are
// the ones past the end.
func wantPastEndFaults(t *testing.T, lib *Library, loadLine, storeLine int) {
	t.Helper()
	for _, k := range []struct {
		name, access string
		line         int
	}{{"load_past", "load", loadLine}, {"store_past", "store", storeLine}} {
		wantFault(t, runPastEnd(t, lib, k.name, 2), k.line, [3]int{1, 0, 0},
			"out-of-bounds device memory access: "+k.access+" of 16 bytes", "0 bytes past the end of buffer(0) (length 4096)")
	}
}

// Copies of structs larger than 16 bytes, which the compiler makes with
// memcpy, are checked and counted like every other access: out of the
// buffer they are faults naming it, inside it they move the bytes and
// count them.
func TestStructCopyChecked(t *testing.T) {
	const src = mslPrelude + `struct S { float4 a, b, c, d; };
struct T { uint a[5]; };
kernel void copy_in(device S* out [[buffer(0)]], uint tid [[thread_index_in_threadgroup]]) {
    out[tid] = out[tid + 32];
}
kernel void load_past(device S* out [[buffer(0)]], uint tid [[thread_index_in_threadgroup]]) {
    out[tid] = out[tid + 63];
}
kernel void store_past(device S* out [[buffer(0)]], uint tid [[thread_index_in_threadgroup]]) {
    out[tid + 63] = out[tid];
}
kernel void odd_past(device T* out [[buffer(0)]], uint tid [[thread_index_in_threadgroup]]) {
    out[tid] = out[tid + 204];
}
`
	// 4096 bytes: 64 S of 64 bytes, 204 T of 20 bytes (and 16 bytes over)
	lib := compileT(t, src, CompileOptions{})
	out := newMem(t, 4096)
	for i := range out.u32() {
		out.u32()[i] = uint32(i)
	}
	d := &Dispatch{Grid: ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{32, 1, 1})}
	d.Buffers[0] = out.binding()
	c, err := functionT(t, lib, "copy_in").Run(d)
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range out.u32()[:32*16] {
		if w != uint32(i+32*16) {
			t.Fatalf("word %d after the copy is %d, want %d", i, w, i+32*16)
		}
	}
	if c.Loaded[0] != 32*64 || c.Stored[0] != 32*64 {
		t.Errorf("copies of 32 structs of 64 bytes counted %d bytes loaded, %d stored; want 2048 each", c.Loaded[0], c.Stored[0])
	}

	wantPastEndFaults(t, lib, 9, 12)
	// a 20-byte struct whose last 4 bytes pass the end
	wantFault(t, runPastEnd(t, lib, "odd_past", 1), 15, [3]int{0, 0, 0},
		"out-of-bounds device memory access: load of 4 bytes", "0 bytes past the end of buffer(0) (length 4096)")
}

// Loads and stores of whole 32-byte vectors (long4, ulong4, long3,
// ulong3), which no access hook covers, are checked and counted too: out
// of the buffer they are faults naming it, inside it they move the bytes
// and count them.
func TestWideVectorAccessChecked(t *testing.T) {
	const src = mslPrelude + `
kernel void copy_in(device ulong4* out [[buffer(0)]], uint tid [[thread_index_in_threadgroup]]) {
    out[tid] = out[tid + 32] + ulong4(1);
}
kernel void load_past(device long4* out [[buffer(0)]], uint tid [[thread_index_in_threadgroup]]) {
    out[tid] = out[tid + 127];
}
kernel void store_past(device long3* out [[buffer(0)]], uint tid [[thread_index_in_threadgroup]]) {
    out[tid + 127] = out[tid];
}
`
	// 4096 bytes: 128 vectors of 32 bytes
	lib := compileT(t, src, CompileOptions{})
	out := newMem(t, 4096)
	w := unsafe.Slice((*uint64)(unsafe.Pointer(&out.b[0])), 512)
	for i := range w {
		w[i] = uint64(i) << 33
	}
	d := &Dispatch{Grid: ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{32, 1, 1})}
	d.Buffers[0] = out.binding()
	c, err := functionT(t, lib, "copy_in").Run(d)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range w[:32*4] {
		if want := uint64(i+32*4)<<33 + 1; v != want {
			t.Fatalf("word %d after the copy is %#x, want %#x", i, v, want)
		}
	}
	if c.Loaded[0] != 32*32 || c.Stored[0] != 32*32 {
		t.Errorf("32 vectors of 32 bytes counted %d bytes loaded, %d stored; want 1024 each", c.Loaded[0], c.Stored[0])
	}

	wantPastEndFaults(t, lib, 8, 11)
}
