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

// qwenDispatch prepares one dispatch of a kernel of the library on that
// shape for n tokens of one sequence, with random inputs.
func qwenDispatch(tb testing.TB, file, entry string, tokens int, grid msl.Grid) (*msl.Function, *msl.Dispatch) {
	tb.Helper()
	lib, err := msl.Compile(kernels.Source(file), msl.CompileOptions{FileName: file, CacheDir: benchCache})
	if err != nil {
		testenv.SkipOrFail(tb, err.Error())
	}
	f, err := lib.Function(entry)
	if err != nil {
		tb.Fatal(err)
	}
	lengths := []int{qwenDk * qwenNkh * tokens, qwenDk * qwenNkh * tokens, qwenDv * qwenNvh * tokens, qwenNvh * tokens, qwenNvh * tokens,
		qwenDk * qwenDv * qwenNvh, qwenDv * qwenNvh * tokens, qwenDk * qwenDv * qwenNvh}
	d := &msl.Dispatch{Grid: grid}
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
	params := []uint32{qwenDk, qwenDv, qwenNkh, qwenNvh, uint32(tokens), 1, 0, 0, math.Float32bits(0)}
	d.Buffers[8] = msl.Binding{Ptr: uintptr(unsafe.Pointer(&params[0])), Len: 4 * len(params)}
	tb.Cleanup(func() { _ = params[0] })
	return f, d
}

// benchDispatch times f on d with one worker and with one per CPU.
func benchDispatch(b *testing.B, f *msl.Function, d *msl.Dispatch) {
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

// BenchmarkQwenDecode times the emulator on one full decode dispatch of a
// Qwen3.5 layer, one token (1024 threadgroups of 128 threads).
//
//	go test ./emu/msl -run '^$' -bench Qwen -count 5
func BenchmarkQwenDecode(b *testing.B) {
	const nsg = qwenDk / 32
	f, d := qwenDispatch(b, kernels.DecodeFile, kernels.Decode(nsg), 1, msl.ThreadgroupsGrid([3]int{qwenDv / nsg, qwenNvh, 1}, [3]int{32, nsg, 1}))
	benchDispatch(b, f, d)
}

// BenchmarkQwenPrefill times the prefill kernel on 8 tokens of the same
// layer (32 threadgroups of 128 threads staging each token in threadgroup
// memory), the emulator's threadgroup memory checks at work.
func BenchmarkQwenPrefill(b *testing.B) {
	f, d := qwenDispatch(b, kernels.PrefillFile, kernels.Prefill, 8, msl.ThreadgroupsGrid([3]int{qwenNvh, 1, 1}, [3]int{qwenDv, 1, 1}))
	d.ThreadgroupMemoryLength[0] = (2*qwenDk + qwenDv) * 4
	benchDispatch(b, f, d)
}

// cpuTime is the CPU time the process used, user and system, in ns.
func cpuTime() int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
