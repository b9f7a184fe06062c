package msl_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

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

// cpuTime is the CPU time the process used, user and system, in ns.
func cpuTime() int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
