package gdn_test

import (
	"fmt"
	"log"
	"math"
	"math/rand/v2"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/gdn"
	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/mtl"
)

// A Qwen3.5 linear-attention layer decoding one token: the model's own
// projections (here a matrix product on the CPU, rounded to bf16) make
// mixed_qkv, z, a and b; one dispatch runs the whole core (the short
// convolution with its conv state, the L2 norm of q and k, the gates, the
// recurrence and the gated RMSNorm); out_proj follows. The conv state is
// kept in two buffers swapped every token: then Kernels.DecodeCore runs one
// threadgroup per value head, which one sequence alone needs more than the
// in-place geometry's saving of conv state reads.
func ExampleKernels_DecodeCore() {
	m := open()
	defer m.Release()

	p := gdn.Params{
		Shape:      gdn.Shape{DK: 128, DV: 128, NKHeads: 16, NVHeads: 32, NTokens: 1, NSeqs: 1},
		QScale:     float32(1 / math.Sqrt(128)),
		Activation: gdn.BF16,
		Fused:      gdn.FusedAll,
		Core:       gdn.QwenCore(), // conv K = 4, gated RMSNorm with silu(z), eps 1e-6
	}
	const hidden = 64
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(n int, sd float64) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(sd * rng.NormFloat64())
		}
		cpuref.Round(gdn.BF16, x)
		return x
	}
	// The layer's weights and the token's hidden state.
	cd, vd, nv := p.ConvDim(), p.NVHeads*p.DV, p.NVHeads
	inProj := random((cd+vd+2*nv)*hidden, 0.125) // rows: mixed_qkv | z | b | a
	x := random(hidden, 1)
	proj := make([]float32, cd+vd+2*nv)
	for r := range proj {
		var acc float64
		for j, w := range inProj[r*hidden : (r+1)*hidden] {
			acc += float64(w) * float64(x[j])
		}
		proj[r] = float32(acc)
	}
	cpuref.Round(gdn.BF16, proj)
	// in_proj's output (Qwen3.5's in_proj_qkv, _z, _b, _a; Qwen3-Next's rows permuted by package checkpoint)
	mixed, z, b, a := proj[:cd], proj[cd:cd+vd], proj[cd+vd:cd+vd+nv], proj[cd+vd+nv:]

	convW, normW := random(p.ConvWeightLen(), 0.5), random(p.DV, 0.1)
	for i := range normW {
		normW[i] += 1
	}
	cpuref.Round(gdn.BF16, normW)
	aLog, dtBias := make([]float32, nv), make([]float32, nv)
	for h := range aLog {
		aLog[h], dtBias[h] = float32(math.Log(1+float64(h))), 0.5
	}
	state := m.f32(make([]float32, p.StateLen())...)
	bufs := gdn.Buffers{
		G: m.view(gdn.BF16, a...), Beta: m.view(gdn.BF16, b...),
		StateIn: state, StateOut: state, // the recurrent state in place
		Output: m.view(gdn.BF16, make([]float32, p.VLen())...),
		ALog:   m.f32(aLog...), DtBias: m.f32(dtBias...),
	}
	core := gdn.CoreBuffers{
		MixedQKV: m.view(gdn.BF16, mixed...), ConvWeight: m.view(gdn.BF16, convW...),
		ConvStateIn:  m.view(gdn.BF16, make([]float32, p.ConvStateLen())...), // empty caches: a new sequence
		ConvStateOut: m.view(gdn.BF16, make([]float32, p.ConvStateLen())...),
		Z:            m.view(gdn.BF16, z...), NormWeight: m.view(gdn.BF16, normW...),
	}
	if err := m.queue.Run(func(enc *mtl.ComputeCommandEncoder) error { return m.k.DecodeCore(enc, p, bufs, core) }); err != nil {
		log.Fatal(err)
	}
	// y (bf16, [D_v, n_v_heads]) goes to out_proj; here it is checked
	// against the CPU reference instead.
	y, err := bufs.Output.Float32s() // bf16 widened exactly
	if err != nil {
		log.Fatal(err)
	}
	ref, err := cpuref.Reference32(p, cpuref.Inputs{
		G: a, Beta: b, StateIn: make([]float32, p.StateLen()), ALog: aLog, DtBias: dtBias,
		MixedQKV: mixed, ConvWeight: convW, ConvState: make([]float32, p.ConvStateLen()), Z: z, NormWeight: normW,
	}, false)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("1 dispatch; y within bf16's bound of cpuref: %v\n", cpuref.MaxRelErr(y, ref.Output) <= spec.TolBF16)
	// Output:
	// 1 dispatch; y within bf16's bound of cpuref: true
}
