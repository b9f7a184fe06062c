package tests

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/gdn"
	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/mtl"
)

// speedBudget is the most buffer memory one case of BenchmarkMetalKernels
// allocates; larger cases are skipped, saying so.
const speedBudget = 4 << 30

// speedPair is a kernel of one row per SIMD-group (or thread) and its
// packed counterpart (or two prefill kernels), measured side by side.
type speedPair struct {
	name     string
	old, new kernel
}

// BenchmarkMetalKernels times every kernel pair on the system's GPU (a
// Mac; it skips elsewhere, saying why) at Qwen3.5-like shapes: 16 key
// heads, 32 value heads, D_k = D_v = 128, f32 state, the fused step, bf16
// and f32 activations, B = 1, 8, 32 sequences, T = 1, 4, 512, 2048 tokens.
// Each iteration runs the old kernel and the packed one once each, in
// alternating order, as command buffers of their own, and takes the GPU
// time of each from the command buffer's timestamps
// (mtl.CommandQueue.RunTimed): the pairs are interleaved, so the ratio of
// each pair compares the two under the same conditions. Reported per case:
// the median GPU time of each (us), the median of the per-iteration ratios
// old/new (x) with the smallest and largest, and the effective bandwidth
// of each against the bytes a dispatch must move (SPEC section 8: the
// state once in and once out, q, k, v, the gates and the output once).
//
//	go test ./tests -run '^$' -bench Metal -benchtime 20x
func BenchmarkMetalKernels(b *testing.B) {
	r := newRig(b, testdevice.Metal(b), false)

	for _, act := range []spec.ElemType{spec.BF16, spec.F32} {
		for _, seqs := range []int{1, 8, 32} {
			for _, tokens := range []int{1, 4, 512, 2048} {
				p := spec.Params{
					Shape:      spec.Shape{DK: 128, DV: 128, NKHeads: 16, NVHeads: 32, NTokens: tokens, NSeqs: seqs},
					QScale:     float32(1 / math.Sqrt(128)),
					Activation: act, State: spec.F32, Fused: spec.FusedAll,
				}
				var pairs []speedPair
				if tokens == 1 {
					pairs = append(pairs, speedPair{"decode", kOneRowDecode, kPacked})
				} else {
					// and the blocked prefill against the chunked one, which
					// Prefill picks from gdn.ChunkedMinTokens tokens on
					pairs = append(pairs, speedPair{"seq", kOneRowSeq, kPackedSeq}, speedPair{"prefill", kRecurrent, kBlocked},
						speedPair{"blocked-vs-chunked", kBlocked, kChunked})
				}
				if tokens <= 4 {
					pairs = append(pairs, speedPair{"capture", kOneRowCapture, kPackedCapture})
				}
				for _, pair := range pairs {
					b.Run(fmt.Sprintf("%s/%v/B%d/T%d", pair.name, act, seqs, tokens), func(b *testing.B) {
						benchPair(b, r, pair, p)
					})
				}
			}
		}
	}
	benchCorePairs(b, r)
}

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
				run := r.timedRun(b, k.name, func(enc *mtl.ComputeCommandEncoder) error { return k.call(r.k, enc, p, bufs) })
				var total float64
				for b.Loop() {
					total += run()
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

// speedBuffers allocates the buffers of p (state in place), filled with
// small random values in their element types, or reports that they need
// more than speedBudget.
func speedBuffers(b *testing.B, r *rig, p spec.Params, capture bool) gdn.Buffers {
	a, st := p.Activation, p.State
	need := a.Size()*(2*p.QKLen()+2*p.VLen()+2*p.GateLen()) + st.Size()*p.StateLen() + 8*p.NVHeads
	if capture {
		need += st.Size() * p.CaptureLen()
	}
	if need > speedBudget {
		b.Skipf("%d MiB of buffers, more than the benchmark's %d MiB", need>>20, speedBudget>>20)
	}
	rng := rand.New(rand.NewPCG(uint64(p.NTokens), uint64(p.NSeqs)))
	fill := func(et spec.ElemType, n int, lo, hi float64) gdn.View {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(lo + (hi-lo)*rng.Float64())
		}
		return r.uploadTyped(b, et, x)
	}
	buf := gdn.Buffers{
		Q: fill(a, p.QKLen(), -1, 1), K: fill(a, p.QKLen(), -1, 1), V: fill(a, p.VLen(), -1, 1),
		G: fill(a, p.GateLen(), -2, 2), Beta: fill(a, p.GateLen(), -2, 2),
		StateIn: fill(st, p.StateLen(), -0.1, 0.1), Output: fill(a, p.VLen(), 0, 0),
		ALog: fill(spec.F32, p.NVHeads, 0, 2), DtBias: fill(spec.F32, p.NVHeads, -1, 1),
	}
	buf.StateOut = buf.StateIn
	if capture {
		buf.Capture = fill(st, p.CaptureLen(), 0, 0)
	}
	return buf
}

// benchPair measures one pair at p (see timePair) and reports the
// effective bandwidth of each against SPEC section 8's floor.
func benchPair(b *testing.B, r *rig, pair speedPair, p spec.Params) {
	buf := speedBuffers(b, r, p, pair.old.capture)
	timed := func(k kernel) func() float64 {
		return r.timedRun(b, k.name, func(enc *mtl.ComputeCommandEncoder) error { return k.call(r.k, enc, p, buf) })
	}
	mo, mn := timePair(b, timed(pair.old), timed(pair.new))
	a, st := p.Activation.Size(), p.State.Size()
	floor := float64(2*st*p.StateLen() + a*(2*p.QKLen()+2*p.VLen()+2*p.GateLen()))
	b.ReportMetric(floor/mo/1e9, "old-GB/s")
	b.ReportMetric(floor/mn/1e9, "new-GB/s")
}

// timedRun returns a function that runs encode in a command buffer of its
// own and returns the GPU seconds it took, failing b, named what, on an
// error.
func (r *rig) timedRun(b *testing.B, what string, encode func(enc *mtl.ComputeCommandEncoder) error) func() float64 {
	return func() float64 {
		s, err := r.queue.RunTimed(encode)
		if err != nil {
			b.Fatalf("%s: %v", what, err)
		}
		return s
	}
}

// timePair runs oldRun and newRun, each returning the GPU seconds of one
// run, once each to warm up (pipeline compilation), then b.N times each,
// interleaved in alternating order; it reports the median time of each
// (old-us, new-us) and the median, smallest and largest per-iteration
// ratio old/new (x-median, x-min, x-max), and returns the two medians in
// seconds.
func timePair(b *testing.B, oldRun, newRun func() float64) (oldMedian, newMedian float64) {
	oldRun()
	newRun()
	oldT, newT, ratio := make([]float64, 0, b.N), make([]float64, 0, b.N), make([]float64, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		var o, n float64
		if i%2 == 0 {
			o, n = oldRun(), newRun()
		} else {
			n, o = newRun(), oldRun()
		}
		oldT, newT, ratio = append(oldT, o), append(newT, n), append(ratio, o/n)
	}
	b.StopTimer()
	oldMedian, newMedian = median(oldT), median(newT)
	b.ReportMetric(oldMedian*1e6, "old-us")
	b.ReportMetric(newMedian*1e6, "new-us")
	b.ReportMetric(median(ratio), "x-median")
	b.ReportMetric(slices.Min(ratio), "x-min")
	b.ReportMetric(slices.Max(ratio), "x-max")
	return oldMedian, newMedian
}

// median returns the median of x (x is reordered).
func median(x []float64) float64 {
	if len(x) == 0 {
		return math.NaN()
	}
	slices.Sort(x)
	if n := len(x); n%2 == 0 {
		return (x[n/2-1] + x[n/2]) / 2
	}
	return x[len(x)/2]
}

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
			recurrence := r.timedRun(b, "recurrence", func(enc *mtl.ComputeCommandEncoder) error { return r.k.Decode(enc, p, buf) })
			core := r.timedRun(b, "core", func(enc *mtl.ComputeCommandEncoder) error { return r.k.DecodeCore(enc, pc, cb, cc) })
			timePair(b, recurrence, core)
		})
	}
}
