package ops_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/ops"
	"github.com/puremetal/puremetal/tensor"
)

// BenchmarkMetalSmallOps times RMSNorm (plain and with the residual add),
// q_norm and RoPE on the query halves (apart and fused), SwiGLU, the MoE router and
// combine, argmax and the sampler on the system's GPU at Qwen3-Next's
// shapes (hidden 2048, 16 query heads of 256, rotary 64, 512 experts
// top-10, moe_intermediate 512, vocabulary 151936) in bf16 (the logits in
// f32), for 1 token (decode) and 512 (prefill; 8 rows of logits). Each
// iteration runs one dispatch as a command buffer of its own and takes
// its GPU time (mtl.CommandQueue.RunTimed); reported: the median GPU time
// (us) and the bandwidth of the floor's bytes (the operands once)
// over it (GB/s). It skips off macOS, saying why:
//
//	go test ./ops -run '^$' -bench MetalSmallOps -benchtime 200x
func BenchmarkMetalSmallOps(b *testing.B) {
	metal := newMetalRig(b)
	g, k := metal.GPU, metal.k
	rng := rand.New(rand.NewPCG(1, 2))
	view := func(typ tensor.ElemType, n int) tensor.View {
		v := tensor.NewView(g.Buffer(n*typ.Size(), mtl.ResourceStorageModeShared), 0, typ, n)
		if typ == tensor.I32 || typ == tensor.U32 {
			return v // zeros: positions 0, expert ids 0
		}
		if err := v.Store(random(rng, n, 1)); err != nil {
			b.Fatal(err)
		}
		return v
	}
	const hidden, headDim, rotary, heads, experts, topK, inter, vocab = 2048, 256, 64, 16, 512, 10, 512, 151936
	bf := tensor.BF16
	for _, n := range []int{1, 512} {
		rows := min(n, 8) // rows of logits
		x, w, out, r := view(bf, n*hidden), view(bf, hidden), view(bf, n*hidden), view(bf, n*hidden)
		q, qw := view(bf, n*2*heads*headDim), view(bf, headDim)
		pos, inv := view(tensor.I32, n), view(tensor.F32, rotary/2)
		if err := inv.Store(ops.RoPEInvFreq(rotary, 1e7)); err != nil {
			b.Fatal(err)
		}
		gate, up, act := view(bf, n*inter), view(bf, n*inter), view(bf, n*inter)
		logits, ids, weights := view(bf, n*experts), view(tensor.U32, n*topK), view(tensor.F32, n*topK)
		ex, sh, sg := view(bf, n*topK*hidden), view(bf, n*hidden), view(bf, n)
		lg, tok := view(tensor.F32, rows*vocab), view(tensor.U32, rows)
		norm := ops.RMSNormParams{Rows: n, Dim: hidden, Eps: 1e-6, Offset: 1}
		qnorm := ops.RMSNormParams{Rows: n * heads, Dim: headDim, Stride: 2 * headDim, Eps: 1e-6, Offset: 1}
		cases := []struct {
			name  string
			floor int // bytes
			run   func(enc *mtl.ComputeCommandEncoder) error
		}{
			{"rmsnorm", 2 * (2*n*hidden + hidden), func(enc *mtl.ComputeCommandEncoder) error { return k.RMSNorm(enc, norm, x, w, out) }},
			{"rmsnorm-residual", 2 * (4*n*hidden + hidden), func(enc *mtl.ComputeCommandEncoder) error {
				return k.RMSNormResidual(enc, norm, x, r, w, out)
			}},
			{"q-norm", 2 * (2*n*heads*headDim + headDim), func(enc *mtl.ComputeCommandEncoder) error {
				return k.RMSNorm(enc, qnorm, q, qw, tensor.View{})
			}},
			{"q-norm-rope", 2 * (2*n*heads*headDim + headDim), func(enc *mtl.ComputeCommandEncoder) error {
				return k.RMSNormRoPE(enc, ops.RoPEParams{Tokens: n, Heads: heads, HeadDim: headDim, HeadStride: 2 * headDim, RotaryDim: rotary}, 1e-6, 1, q, qw, pos, inv)
			}},
			{"rope", 2 * 2 * n * heads * rotary, func(enc *mtl.ComputeCommandEncoder) error {
				return k.RoPE(enc, ops.RoPEParams{Tokens: n, Heads: heads, HeadDim: headDim, HeadStride: 2 * headDim, RotaryDim: rotary}, q, pos, inv)
			}},
			{"swiglu", 2 * 3 * n * inter, func(enc *mtl.ComputeCommandEncoder) error { return k.SwiGLU(enc, n, inter, gate, up, act) }},
			{"moe-route", 2*n*experts + 8*n*topK, func(enc *mtl.ComputeCommandEncoder) error {
				return k.MoERoute(enc, ops.MoERouteParams{Tokens: n, Experts: experts, TopK: topK, NormTop: true}, logits, ids, weights)
			}},
			{"moe-combine", 2*(n*topK*hidden+2*n*hidden+n) + 4*n*topK, func(enc *mtl.ComputeCommandEncoder) error {
				return k.MoECombine(enc, ops.MoECombineParams{Tokens: n, Dim: hidden, TopK: topK}, ex, weights, sh, sg, out)
			}},
			{"argmax", 4*rows*vocab + 4*rows, func(enc *mtl.ComputeCommandEncoder) error { return k.Argmax(enc, rows, vocab, lg, tok) }},
			{"sample", 4*rows*vocab + 4*rows, func(enc *mtl.ComputeCommandEncoder) error {
				return k.Sample(enc, ops.SampleParams{Rows: rows, Vocab: vocab, Temperature: 0.6, TopK: 20, TopP: 0.95, Seed: 1}, lg, tensor.View{}, tok)
			}},
		}
		for _, c := range cases {
			b.Run(fmt.Sprintf("%s/T%d", c.name, n), func(b *testing.B) {
				benchGPU(b, g, float64(c.floor), c.run)
			})
		}
	}
}
