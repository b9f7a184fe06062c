package tests

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/puremetal/puremetal/gdn"
	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/mtl"
)

// benchCorePairs times, within BenchmarkMetalKernels, the layer core
// (gdn.Kernels.DecodeCore with the Qwen core: convolution, step, gated norm, one
// dispatch) against the recurrence alone (gdn.Kernels.Decode, the fused
// step on q, k and v given) at Qwen3.5's shape, bf16 activations, f32
// state, one sequence, 1 and 512 tokens: old-us is the recurrence, new-us
// the core, x-median their ratio (below 1: the core costs more).
func benchCorePairs(b *testing.B, r *rig) {
	for _, tokens := range []int{1, 512} {
		b.Run(fmt.Sprintf("core-vs-recurrence/bf16/B1/T%d", tokens), func(b *testing.B) {
			p := spec.Params{
				Shape:      spec.Shape{DK: 128, DV: 128, NKHeads: 16, NVHeads: 32, NTokens: tokens, NSeqs: 1},
				QScale:     float32(1 / math.Sqrt(128)),
				Activation: spec.BF16, State: spec.F32, Fused: spec.FusedAll,
			}
			buf := speedBuffers(b, r, p, false)
			pc := p
			pc.Core = spec.QwenCore()
			rng := rand.New(rand.NewPCG(9, uint64(tokens)))
			fill := func(n int, sd float64) gdn.View {
				x := make([]float32, n)
				for i := range x {
					x[i] = float32(sd * rng.NormFloat64())
				}
				return r.uploadTyped(b, spec.BF16, x)
			}
			cb := gdn.Buffers{G: buf.G, Beta: buf.Beta, StateIn: buf.StateIn, StateOut: buf.StateOut, Output: buf.Output, ALog: buf.ALog, DtBias: buf.DtBias}
			cc := gdn.CoreBuffers{
				MixedQKV: fill(pc.MixedLen(), 1), ConvWeight: fill(pc.ConvWeightLen(), 0.5),
				ConvStateIn: fill(pc.ConvStateLen(), 1), ConvStateOut: fill(pc.ConvStateLen(), 0),
				Z: fill(pc.ZLen(), 1), NormWeight: fill(pc.DV, 0.1),
			}
			recurrence := func() float64 {
				s, err := r.queue.RunTimed(func(enc *mtl.ComputeCommandEncoder) error { return r.k.Decode(enc, p, buf) })
				if err != nil {
					b.Fatal(err)
				}
				return s
			}
			core := func() float64 {
				s, err := r.queue.RunTimed(func(enc *mtl.ComputeCommandEncoder) error { return r.k.DecodeCore(enc, pc, cb, cc) })
				if err != nil {
					b.Fatal(err)
				}
				return s
			}
			recurrence()
			core()
			oldT, newT, ratio := make([]float64, 0, b.N), make([]float64, 0, b.N), make([]float64, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				var o, n float64
				if i%2 == 0 {
					o, n = recurrence(), core()
				} else {
					n, o = core(), recurrence()
				}
				oldT, newT, ratio = append(oldT, o), append(newT, n), append(ratio, o/n)
			}
			b.StopTimer()
			b.ReportMetric(median(oldT)*1e6, "old-us")
			b.ReportMetric(median(newT)*1e6, "new-us")
			b.ReportMetric(median(ratio), "x-median")
			b.ReportMetric(slices.Min(ratio), "x-min")
			b.ReportMetric(slices.Max(ratio), "x-max")
		})
	}
}
