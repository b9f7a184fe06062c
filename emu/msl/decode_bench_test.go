package msl_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/emu/msl"
	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/kernels"
	"golang.org/x/sys/unix"
)

// The shape of one Qwen3.5 Gated DeltaNet layer at decode time: D_k = D_v =
// 128, 16 key heads, 32 value heads, one token of one sequence.
const qwenDk, qwenDv, qwenNkh, qwenNvh = 128, 128, 16, 32

var benchCache = filepath.Join(os.TempDir(), "puremetal-msl-bench")

// qwenRun prepares one dispatch of a repository kernel on that shape
// for n tokens of one sequence, with random inputs.
func qwenRun(b *testing.B, entry string, tokens int) repoRun {
	p := spec.Params{Shape: spec.Shape{DK: qwenDk, DV: qwenDv, NKHeads: qwenNkh, NVHeads: qwenNvh, NTokens: tokens, NSeqs: 1}}
	in, err := cpuref.RandomInputs(p, 1)
	if err != nil {
		b.Fatal(err)
	}
	return newRepoRun(b, entry, p, in)
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
//
// testdata/bench-compare.sh COMMIT runs it alternately with the test
// binary of an earlier commit, for a comparison on one machine.
func BenchmarkQwenDecode(b *testing.B) {
	r := qwenRun(b, kernels.Decode(qwenDk/32), 1)
	benchDispatch(b, r.f, r.d)
}

// BenchmarkQwenPrefill times the prefill kernel on 8 tokens of the same
// layer (32 threadgroups of 128 threads staging each token in threadgroup
// memory), the emulator's threadgroup memory checks at work.
func BenchmarkQwenPrefill(b *testing.B) {
	r := qwenRun(b, kernels.Prefill, 8)
	benchDispatch(b, r.f, r.d)
}

// threadCostsSource has a kernel whose threads only start and store one
// value, and one whose threads also call simd_sum four times.
const threadCostsSource = `#include <metal_stdlib>
using namespace metal;
kernel void start(device float *o [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    o[i] = float(i);
}
kernel void simd_sum4(device float *o [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    float s = simd_sum(float(i));
    s = simd_sum(s);
    s = simd_sum(s);
    o[i] = simd_sum(s);
}
`

// BenchmarkThreadCosts times the emulator's own cost per thread, on one
// worker, with the decode dispatch's grid (1024 threadgroups of 128
// threads): starting and ending a thread (start), and that plus four
// SIMD-group functions, each of which switches every lane out and back in
// (simd_sum4). Their difference over four is the cost of one SIMD-group
// function per lane.
func BenchmarkThreadCosts(b *testing.B) {
	if err := msl.Supported(); err != nil {
		b.Skip(err)
	}
	lib, err := msl.Compile(threadCostsSource, msl.CompileOptions{FileName: "threadcosts.metal", CacheDir: benchCache})
	if err != nil {
		b.Fatal(err)
	}
	const tgs, tpg = 1024, 128
	out := make([]float32, tgs*tpg)
	for _, name := range []string{"start", "simd_sum4"} {
		f, err := lib.Function(name)
		if err != nil {
			b.Fatal(err)
		}
		d := &msl.Dispatch{Workers: 1, Grid: msl.ThreadgroupsGrid([3]int{tgs, 1, 1}, [3]int{tpg, 1, 1})}
		d.Buffers[0] = msl.Binding{Ptr: uintptr(unsafe.Pointer(&out[0])), Len: len(out) * 4}
		b.Run(name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if _, err := f.Run(d); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(tgs*tpg), "ns/thread")
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
