package msl

import (
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/puremetal/puremetal/internal/clang"
	"github.com/puremetal/puremetal/internal/floats"
	"github.com/puremetal/puremetal/internal/testenv"
	"golang.org/x/sys/unix"
)

// mem is a buffer outside the Go heap (mmap'd), as kernels require.
type mem struct {
	b []byte
}

func newMem(t testing.TB, n int) *mem {
	t.Helper()
	size := n
	if size == 0 {
		size = 1
	}
	b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatalf("mmap %d bytes: %v", n, err)
	}
	t.Cleanup(func() { unix.Munmap(b) })
	return &mem{b: b[:n]}
}

func newF32(t testing.TB, n int) *mem { return newMem(t, 4*n) }

func (m *mem) binding() Binding {
	return Binding{Ptr: uintptr(unsafe.Pointer(&m.b[0])), Len: len(m.b)}
}

func (m *mem) f32() []float32 {
	return unsafe.Slice((*float32)(unsafe.Pointer(&m.b[0])), len(m.b)/4)
}

func (m *mem) u32() []uint32 {
	return unsafe.Slice((*uint32)(unsafe.Pointer(&m.b[0])), len(m.b)/4)
}

func (m *mem) i32() []int32 {
	return unsafe.Slice((*int32)(unsafe.Pointer(&m.b[0])), len(m.b)/4)
}

func (m *mem) u16() []uint16 {
	return unsafe.Slice((*uint16)(unsafe.Pointer(&m.b[0])), len(m.b)/2)
}

func fillRandom(x []float32, seed int64) {
	r := rand.New(rand.NewSource(seed))
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
}

var poison = floats.Poison

// testCacheDir is one cache for the whole test binary run, so the tests
// also exercise cache hits.
var testCacheDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "puremetal-msl-test-")
	if err != nil {
		panic(err)
	}
	testCacheDir = filepath.Join(dir, "cache")
	code := testenv.RunMain(m, func() error {
		if err := Supported(); err != nil {
			return fmt.Errorf("%w: %w", testenv.ErrPlatform, err)
		}
		_, err := clang.Find()
		return err
	})
	os.RemoveAll(dir)
	os.Exit(code)
}

// needClang skips the test where the engine does not run (the platform,
// which strict mode accepts) and, or fails it in strict mode, where clang
// is missing.
func needClang(t testing.TB) {
	t.Helper()
	if err := Supported(); err != nil {
		t.Skip(err)
	}
	if _, err := clang.Find(); err != nil {
		testenv.SkipOrFail(t, err.Error())
	}
}

func compileT(t testing.TB, src string, opts CompileOptions) *Library {
	t.Helper()
	needClang(t)
	if opts.CacheDir == "" {
		opts.CacheDir = testCacheDir
	}
	lib, err := Compile(src, opts)
	if err != nil {
		var ce *CompileError
		if errors.As(err, &ce) {
			t.Fatalf("compile: %v\n%s", err, ce.Log)
		}
		t.Fatalf("compile: %v", err)
	}
	return lib
}

func functionT(t testing.TB, lib *Library, name string) *Function {
	t.Helper()
	f, err := lib.Function(name)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func kernelErrorT(t testing.TB, err error) *KernelError {
	t.Helper()
	return errorAs[*KernelError](t, err, "the dispatch succeeded; want a kernel error")
}

// errorAs returns the E in err's chain, failing the test with ifNil when
// err is nil, or naming err when it holds no E.
func errorAs[E error](t testing.TB, err error, ifNil string) E {
	t.Helper()
	if err == nil {
		t.Fatal(ifNil)
	}
	var e E
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a %T", err, err, e)
	}
	return e
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func equalU32(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// mslPrelude opens a test kernel's source as Metal programs usually
// begin: the standard library's header and its namespace, two lines, so
// that the lines after it keep their numbers.
const mslPrelude = "#include <metal_stdlib>\nusing namespace metal;\n"

// vecAddSrc is a minimal kernel for the tests of compilation and dispatch
// validation.
const vecAddSrc = mslPrelude + `
kernel void vec_add(device const float* a [[buffer(0)]],
                    device const float* b [[buffer(1)]],
                    device float* out [[buffer(2)]],
                    uint i [[thread_position_in_grid]]) {
    out[i] = a[i] + b[i];
}
`

// runT runs f over grid with bufs bound at buffer indices 0, 1, ... and
// fails the test on an error: the dispatch most tests make. It returns the
// dispatch's counters.
func runT(t testing.TB, f *Function, grid Grid, bufs ...*mem) Counters {
	t.Helper()
	d := &Dispatch{Grid: grid}
	for i, m := range bufs {
		d.Buffers[i] = m.binding()
	}
	c, err := f.Run(d)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
