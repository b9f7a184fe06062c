package ops_test

import (
	"math/rand/v2"
	"testing"

	"github.com/puremetal/puremetal/emu/msl"
	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/ops"
	"github.com/puremetal/puremetal/tensor"
)

// traffic is what one dispatch must move through one binding: loaded and
// stored bytes, exactly.
type traffic struct {
	binding        int
	name           string
	loaded, stored uint64
}

// checkTraffic fails the test for each binding of c whose bytes differ
// from want, and logs the dispatch's bytes through its buffers (the
// parameters' binding, params, left out: a constant-cache read of a few
// bytes per thread) against floor (the bytes a dispatch cannot avoid
// moving).
func checkTraffic(t *testing.T, what string, c msl.Counters, params int, floor uint64, want ...traffic) {
	t.Helper()
	var total uint64
	for i := range c.Loaded {
		if i != params {
			total += c.Loaded[i] + c.Stored[i]
		}
	}
	for _, w := range want {
		if c.Loaded[w.binding] != w.loaded || c.Stored[w.binding] != w.stored {
			t.Errorf("%s: %s loaded %d and stored %d bytes, want %d and %d", what, w.name, c.Loaded[w.binding], c.Stored[w.binding], w.loaded, w.stored)
		}
	}
	t.Logf("%-44s %10d bytes, floor %10d: %.3fx", what, total, floor, float64(total)/float64(floor))
}

// TestSmallOpsTraffic measures, from the emulator's counters, the bytes
// each kernel moves at Qwen3-Next-80B-A3B's shapes (hidden 2048, head_dim
// 256 with rotary_dim 64, 16 query and 2 KV heads, 512 experts top-10,
// moe_intermediate 512, vocabulary 151936) for one decode token, and
// checks each operand's bytes exactly:
//
//   - RMSNorm (bf16, 2048): x once, out once, w once per row; fused with
//     the residual add: h loaded once and stored once, r once, out once.
//   - q_norm on the query halves of q_proj's [query | gate] output: only
//     the query halves, once each way.
//   - RoPE on those queries: the rotary_dim elements of each head, once
//     each way (pos and inv_freq are per-thread reads of 8 bytes).
//   - SwiGLU (512): gate, up once, out once.
//   - the router (512 experts, top 10): the logits once, 10 ids and
//     weights stored; combine: the 10 experts' outputs and the shared
//     expert's once, out once (the weights and the gate are per-thread
//     reads of a few bytes, served by a GPU's caches).
//   - argmax and the sampler (Qwen's 0.6 / top-k 20 / top-p 0.95) over
//     151936 f32 logits: the logits read exactly once (a thread holds 4
//     candidates, so no refill pass at random logits), one id stored;
//     min-p without top-k reads them twice (its maximum first).
//
// The floor is the bytes of the operands each dispatch must read and
// write once; the ratio printed is the emulator's total through the
// buffers (every per-thread load counted, the parameters left out)
// against it.
func TestSmallOpsTraffic(t *testing.T) {
	r := newRig(t, testdevice.Orders[0])
	rng := rand.New(rand.NewPCG(0x7aff, 1))
	bf := tensor.BF16
	const hidden, headDim, rotary, qHeads, experts, topK, inter, vocab = 2048, 256, 64, 16, 512, 10, 512, 151936
	b := func(n int) uint64 { return uint64(2 * n) } // bf16 bytes

	x, w, out := r.view(bf, random(rng, hidden, 1)), r.view(bf, random(rng, hidden, 1)), r.empty(bf, hidden)
	c := r.counters(func(enc *mtl.ComputeCommandEncoder) error {
		return r.k.RMSNorm(enc, ops.RMSNormParams{Rows: 1, Dim: hidden, Eps: 1e-6, Offset: 1}, x, w, out)
	})
	checkTraffic(t, "RMSNorm bf16 2048", c, 4, 3*b(hidden), traffic{0, "x", b(hidden), 0}, traffic{1, "w", b(hidden), 0}, traffic{2, "out", 0, b(hidden)})

	h, res := r.view(bf, random(rng, hidden, 1)), r.view(bf, random(rng, hidden, 1))
	c = r.counters(func(enc *mtl.ComputeCommandEncoder) error {
		return r.k.RMSNormResidual(enc, ops.RMSNormParams{Rows: 1, Dim: hidden, Eps: 1e-6, Offset: 1}, h, res, w, out)
	})
	checkTraffic(t, "RMSNorm + residual bf16 2048", c, 4, 5*b(hidden),
		traffic{0, "h", b(hidden), b(hidden)}, traffic{1, "w", b(hidden), 0}, traffic{2, "out", 0, b(hidden)}, traffic{3, "r", b(hidden), 0})

	q, qw := r.view(bf, random(rng, 2*qHeads*headDim, 1)), r.view(bf, random(rng, headDim, 1))
	c = r.counters(func(enc *mtl.ComputeCommandEncoder) error {
		return r.k.RMSNorm(enc, ops.RMSNormParams{Rows: qHeads, Dim: headDim, Stride: 2 * headDim, Eps: 1e-6, Offset: 1}, q, qw, tensor.View{})
	})
	checkTraffic(t, "q_norm in place, 16 heads of 256 (stride 512)", c, 4, 2*b(qHeads*headDim)+b(headDim),
		traffic{0, "q (in place)", b(qHeads * headDim), b(qHeads * headDim)}, traffic{1, "w", b(qHeads * headDim), 0})

	pos, inv := ints(r, tensor.I32, []int32{1234}), r.view(tensor.F32, ops.RoPEInvFreq(rotary, 1e7))
	c = r.counters(func(enc *mtl.ComputeCommandEncoder) error {
		return r.k.RoPE(enc, ops.RoPEParams{Tokens: 1, Heads: qHeads, HeadDim: headDim, HeadStride: 2 * headDim, RotaryDim: rotary}, q, pos, inv)
	})
	checkTraffic(t, "RoPE, 16 heads, rotary 64 of 256", c, 3, 2*b(qHeads*rotary),
		traffic{0, "q", b(qHeads * rotary), b(qHeads * rotary)}, traffic{1, "pos", 4 * qHeads * rotary / 2, 0}, traffic{2, "inv_freq", 4 * qHeads * rotary / 2, 0})

	g, u, o := r.view(bf, random(rng, inter, 4)), r.view(bf, random(rng, inter, 1)), r.empty(bf, inter)
	c = r.counters(func(enc *mtl.ComputeCommandEncoder) error { return r.k.SwiGLU(enc, 1, inter, g, u, o) })
	checkTraffic(t, "SwiGLU bf16 512", c, 3, 3*b(inter), traffic{0, "gate", b(inter), 0}, traffic{1, "up", b(inter), 0}, traffic{2, "out", 0, b(inter)})

	logits, ids, weights := r.view(bf, random(rng, experts, 4)), r.empty(tensor.U32, topK), r.empty(tensor.F32, topK)
	c = r.counters(func(enc *mtl.ComputeCommandEncoder) error {
		return r.k.MoERoute(enc, ops.MoERouteParams{Tokens: 1, Experts: experts, TopK: topK, NormTop: true}, logits, ids, weights)
	})
	checkTraffic(t, "router 512 experts, top 10", c, 3, b(experts)+8*topK,
		traffic{0, "logits", b(experts), 0}, traffic{1, "ids", 0, 4 * topK}, traffic{2, "weights", 0, 4 * topK})

	ex, sh, gate := r.view(bf, random(rng, topK*hidden, 1)), r.view(bf, random(rng, hidden, 1)), r.view(bf, random(rng, 1, 1))
	c = r.counters(func(enc *mtl.ComputeCommandEncoder) error {
		return r.k.MoECombine(enc, ops.MoECombineParams{Tokens: 1, Dim: hidden, TopK: topK}, ex, weights, sh, gate, out)
	})
	checkTraffic(t, "combine 10 experts + shared, 2048", c, 5, b(topK*hidden)+2*b(hidden)+4*topK+2,
		traffic{0, "experts", b(topK * hidden), 0}, traffic{2, "shared", b(hidden), 0}, traffic{4, "out", 0, b(hidden)})

	lg, tok := r.view(tensor.F32, random(rng, vocab, 8)), r.empty(tensor.U32, 1)
	floor := uint64(4*vocab + 4)
	c = r.counters(func(enc *mtl.ComputeCommandEncoder) error { return r.k.Argmax(enc, 1, vocab, lg, tok) })
	checkTraffic(t, "argmax f32 151936", c, 2, floor, traffic{0, "logits", 4 * vocab, 0}, traffic{1, "token", 0, 4})
	c = r.counters(func(enc *mtl.ComputeCommandEncoder) error {
		return r.k.Sample(enc, ops.SampleParams{Rows: 1, Vocab: vocab, Temperature: 0.6, TopK: 20, TopP: 0.95, Seed: 7}, lg, tok)
	})
	checkTraffic(t, "sample f32 151936 (0.6, top-k 20, top-p 0.95)", c, 2, floor, traffic{0, "logits", 4 * vocab, 0}, traffic{1, "token", 0, 4})
	c = r.counters(func(enc *mtl.ComputeCommandEncoder) error {
		return r.k.Sample(enc, ops.SampleParams{Rows: 1, Vocab: vocab, Temperature: 1, TopP: 1, MinP: 0.05, Seed: 7}, lg, tok)
	})
	checkTraffic(t, "sample f32 151936 (min-p 0.05 alone)", c, 2, floor, traffic{0, "logits", 2 * 4 * vocab, 0}, traffic{1, "token", 0, 4})
}
