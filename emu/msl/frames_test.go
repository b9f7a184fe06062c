package msl

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// A kernel whose private arrays do not fit in a thread's stack is refused
// at compile time, naming the kernel, its line and the bytes it needs; one
// that fits runs, and PrivateBytes tells its need.
func TestPrivateMemoryLimit(t *testing.T) {
	const src = mslPrelude + `kernel void big(device float* out [[buffer(0)]],
                uint tid [[thread_index_in_threadgroup]]) {
    float scratch[N];
    for (uint i = 0; i < N; i++) scratch[i] = out[i] + float(tid);
    for (uint i = 1; i < N; i++) scratch[i] += scratch[(i * 7) % i];
    out[tid] = scratch[(tid * 13) % N];
}
`
	small := strings.ReplaceAll(src, "N", "2048")
	lib := compileT(t, small, CompileOptions{})
	f := functionT(t, lib, "big")
	if f.PrivateBytes < 2048*4 || f.PrivateBytes > 2048*4+1024 {
		t.Fatalf("PrivateBytes %d, want a little over %d", f.PrivateBytes, 2048*4)
	}
	out := newF32(t, 2048)
	runT(t, f, ThreadgroupsGrid([3]int{2, 1, 1}, [3]int{64, 1, 1}), out)

	needClang(t)
	for _, n := range []int{16384, 1 << 20} {
		_, err := Compile(strings.ReplaceAll(src, "N", fmt.Sprint(n)), CompileOptions{CacheDir: testCacheDir})
		var ce *CompileError
		if !errors.As(err, &ce) {
			t.Fatalf("float scratch[%d]: error %v, want a CompileError", n, err)
		}
		want := fmt.Sprintf("kernel big needs %d bytes", n*4)
		if ce.Line != 3 || !strings.Contains(ce.Error(), "kernel big needs ") || !strings.Contains(ce.Error(), "more than 49152 bytes of private memory per thread is not supported by the emulated device") {
			t.Fatalf("float scratch[%d]: %v (line %d), want %q... at line 3", n, err, ce.Line, want)
		}
	}
}

// The frames of called functions add up along the deepest call chain.
func TestPrivateBytesOfCalledFunctions(t *testing.T) {
	const src = mslPrelude + `__attribute__((noinline)) float leaf(device float* p, uint k) {
    float a[1000];
    for (uint i = 0; i < 1000; i++) a[i] = p[i];
    return a[k % 1000];
}
__attribute__((noinline)) float middle(device float* p, uint k) {
    float b[500];
    for (uint i = 0; i < 500; i++) b[i] = p[i] * 2.0;
    return b[k % 500] + leaf(p, k);
}
kernel void chain(device float* out [[buffer(0)]],
                  uint tid [[thread_index_in_threadgroup]]) {
    out[tid] = middle(out, tid);
}
kernel void flat(device float* out [[buffer(0)]],
                 uint tid [[thread_index_in_threadgroup]]) {
    out[tid] = leaf(out, tid);
}
`
	lib := compileT(t, src, CompileOptions{})
	chain, flat := functionT(t, lib, "chain"), functionT(t, lib, "flat")
	if chain.PrivateBytes < 6000 || flat.PrivateBytes < 4000 || chain.PrivateBytes-flat.PrivateBytes < 2000 {
		t.Fatalf("PrivateBytes: chain %d (wants 1500 floats along its calls), flat %d (1000)", chain.PrivateBytes, flat.PrivateBytes)
	}
}

// A call in tail position compiles to a jump (jmp, b), and the callee's
// frame replaces the caller's: it counts all the same.
func TestPrivateBytesOfTailCalls(t *testing.T) {
	const src = mslPrelude + `__attribute__((noinline)) void leaf(device float* p, uint k) {
    float a[3000];
    for (uint i = 0; i < 3000; i++) a[i] = p[i];
    p[k] = a[(k * 7) % 3000];
}
kernel void tail(device float* out [[buffer(0)]],
                 uint tid [[thread_index_in_threadgroup]]) {
    leaf(out, tid);
}
`
	f := functionT(t, compileT(t, src, CompileOptions{}), "tail")
	if f.PrivateBytes < 3000*4 {
		t.Fatalf("PrivateBytes %d, want at least the %d of the tail-called function's array", f.PrivateBytes, 3000*4)
	}
	out := newF32(t, 3000)
	runT(t, f, ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{32, 1, 1}), out)
}

// A thread whose stack overflows into another thread's (here through
// recursion, which Metal does not allow and the frame count takes once) is
// stopped with a fault, not a crash.
func TestStackOverflowReported(t *testing.T) {
	const src = mslPrelude + `int deep(device int* p, int n) {
    int a[64];
    for (int i = 0; i < 64; i++) a[i] = p[i & 3] + n;
    if (n <= 0) return a[3];
    return deep(p, n - 1) + a[n & 63];
}
kernel void recurse(device int* out [[buffer(0)]],
                    uint tid [[thread_index_in_threadgroup]]) {
    if (tid == uint(out[1])) out[4] = deep(out, out[0]);
}
`
	f := functionT(t, compileT(t, src, CompileOptions{}), "recurse")
	out := newMem(t, 64)
	d := &Dispatch{Grid: ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{2, 1, 1})}
	d.Buffers[0] = out.binding()
	for _, c := range []struct {
		tid  int32
		want string
	}{{1, "in the stack of thread 0"}, {0, "below the lowest thread's stack"}} {
		out.i32()[0] = 10
		if _, err := f.Run(d); err != nil {
			t.Fatal(err)
		}
		out.i32()[0], out.i32()[1] = 100000, c.tid
		_, err := f.Run(d)
		ke := kernelErrorT(t, err)
		if ke.Thread != [3]int{int(c.tid), 0, 0} || !strings.Contains(ke.Msg, c.want+": this thread's 65536-byte stack overflowed") {
			t.Fatalf("%v, want thread %d overflowing its stack", err, c.tid)
		}
	}
	// the device stays usable
	out.i32()[0] = 10
	if _, err := f.Run(d); err != nil {
		t.Fatal(err)
	}
}

// A library with no kernels, only helper functions or nothing at all,
// compiles, as on Apple's compiler, and has no functions.
func TestLibraryWithoutKernels(t *testing.T) {
	for name, src := range map[string]string{
		"empty":     "",
		"comment":   "// nothing here\n",
		"helpers":   mslPrelude + "float twice(float x) { return 2 * x; }\nstruct S { int a; };\nconstant float table[2] = {1, 2};\n",
		"templates": mslPrelude + "template <typename T> T sq(T x) { return x * x; }\ninline int f(int x) { return sq(x) + 1; }\n",
	} {
		lib := compileT(t, src, CompileOptions{})
		if names := lib.FunctionNames(); len(names) != 0 {
			t.Errorf("%s: functions %q, want none", name, names)
		}
		if _, err := lib.Function("twice"); err == nil {
			t.Errorf("%s: a function that is not a kernel was found", name)
		}
	}
}
