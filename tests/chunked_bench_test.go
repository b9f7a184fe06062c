package tests

import (
	"fmt"
	"testing"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/gdn"
	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/mtl"
)

// BenchmarkMetalPrefill times one prefill dispatch of one Qwen3.5-sized
// layer (D_k = D_v = 128, 16 key heads, 32 value heads, one sequence) on
// the system's GPU, for the token-by-token kernel and the chunked kernel
// at T = 512, 2048 and 8192 tokens, and logs the ratio chunked /
// recurrent of their GPU times per T: the figures gdn.ChunkedMinTokens
// should be checked against. It reports the GPU time per dispatch
// (gpu-us) and per token (gpu-ns/token). It skips off macOS (the emulated
// device is far too slow for these sizes):
//
//	go test ./tests -run '^$' -bench MetalPrefill
func BenchmarkMetalPrefill(b *testing.B) {
	r := newRig(b, testdevice.Metal(b), false)
	for _, nt := range []int{512, 2048, 8192} {
		p := spec.Params{
			Shape:  spec.Shape{DK: 128, DV: 128, NKHeads: 16, NVHeads: 32, NTokens: nt, NSeqs: 1},
			QScale: 0.0883883476,
		}
		in, err := cpuref.RandomInputs(p, 0xbe7c+uint64(nt))
		if err != nil {
			b.Fatal(err)
		}
		bufs := gdn.Buffers{
			Q: r.upload(b, in.Q), K: r.upload(b, in.K), V: r.upload(b, in.V),
			G: r.upload(b, in.G), Beta: r.upload(b, in.Beta), StateIn: r.upload(b, in.StateIn),
			Output: r.poisoned(b, p.VLen()), StateOut: r.poisoned(b, p.StateLen()),
		}
		gpu := map[string]float64{}
		for _, k := range []kernel{kRecurrent, kChunked} {
			b.Run(fmt.Sprintf("T=%d/%s", nt, k.name), func(b *testing.B) {
				var total float64
				for b.Loop() {
					s, err := r.queue.RunTimed(func(enc *mtl.ComputeCommandEncoder) error { return k.call(r.k, enc, p, bufs) })
					if err != nil {
						b.Fatal(err)
					}
					total += s
				}
				mean := total / float64(b.N)
				gpu[k.name] = mean
				b.ReportMetric(mean*1e6, "gpu-us")
				b.ReportMetric(mean*1e9/float64(nt), "gpu-ns/token")
			})
		}
		if gpu[kRecurrent.name] > 0 {
			b.Logf("T = %d: chunked / recurrent GPU time %.3f", nt, gpu[kChunked.name]/gpu[kRecurrent.name])
		}
	}
}
