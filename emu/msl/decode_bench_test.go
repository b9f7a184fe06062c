package msl_test

import (
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/puremetal/puremetal/emu/msl"
	"github.com/puremetal/puremetal/internal/testenv"
	"github.com/puremetal/puremetal/kernels"
	"golang.org/x/sys/unix"
)

// The shape of one Qwen3.5 Gated DeltaNet layer at decode time: D_k = D_v =
// 128, 16 key heads, 32 value heads, one token of one sequence.
const qwenDk, qwenDv, qwenNkh, qwenNvh = 128, 128, 16, 32

var benchCache = filepath.Join(os.TempDir(), "puremetal-msl-bench")

// qwenDecode prepares one dispatch of the library's decode kernel on that
// shape, with random inputs.
func qwenDecode(tb testing.TB) (*msl.Function, *msl.Dispatch) {
	tb.Helper()
	lib, err := msl.Compile(kernels.Source(kernels.DecodeFile), msl.CompileOptions{FileName: kernels.DecodeFile, CacheDir: benchCache})
	if err != nil {
		testenv.SkipOrFail(tb, err.Error())
	}
	const nsg = qwenDk / 32
	f, err := lib.Function(kernels.Decode(nsg))
	if err != nil {
		tb.Fatal(err)
	}
	lengths := []int{qwenDk * qwenNkh, qwenDk * qwenNkh, qwenDv * qwenNvh, qwenNvh, qwenNvh,
		qwenDk * qwenDv * qwenNvh, qwenDv * qwenNvh, qwenDk * qwenDv * qwenNvh}
	d := &msl.Dispatch{Grid: msl.ThreadgroupsGrid([3]int{qwenDv / nsg, qwenNvh, 1}, [3]int{32, nsg, 1})}
	r := rand.New(rand.NewSource(1))
	for i, n := range lengths {
		b, err := unix.Mmap(-1, 0, 4*n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { unix.Munmap(b) })
		x := unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), n)
		for j := range x {
			x[j] = float32(r.NormFloat64()) * 0.1
		}
		d.Buffers[i] = msl.Binding{Ptr: uintptr(unsafe.Pointer(&b[0])), Len: len(b)}
	}
	params := []uint32{qwenDk, qwenDv, qwenNkh, qwenNvh, 1, 1, 0, 0, math.Float32bits(0)}
	d.Buffers[8] = msl.Binding{Ptr: uintptr(unsafe.Pointer(&params[0])), Len: 4 * len(params)}
	tb.Cleanup(func() { _ = params[0] })
	return f, d
}

// BenchmarkQwenDecode times the emulator on one full decode dispatch of a
// Qwen3.5 layer (1024 threadgroups of 128 threads).
//
//	go test ./emu/msl -run '^$' -bench QwenDecode -count 5
func BenchmarkQwenDecode(b *testing.B) {
	f, d := qwenDecode(b)
	for _, workers := range []int{1, 0} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			d.Workers = workers
			cpu0 := cpuTime()
			for i := 0; i < b.N; i++ {
				if _, err := f.Run(d); err != nil {
					b.Fatal(err)
				}
			}
			// CPU time tells the emulator's cost on a shared machine
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuTime is the CPU time the process used, user and system, in ns.
func cpuTime() int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
