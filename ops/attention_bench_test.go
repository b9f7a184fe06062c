package ops_test

import (
	"fmt"
	"testing"

	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/ops"
)

// BenchmarkMetalAttention times attention on the system's GPU (a Mac; it
// skips elsewhere, saying why) at Qwen3-Next-80B-A3B's attention shape
// (16 query heads, 2 KV heads, head size 256, bf16, the output gate read
// from q_proj's output): decode of B = 1 and 8 sequences against caches
// of 1k to 64k positions, split as ops.AttentionSplits says, and prefill
// of one prompt of 512 and 2048 tokens. Each iteration is a command buffer
// of its own, timed by its GPU timestamps (mtl.CommandQueue.RunTimed);
// reported: the median GPU time (us) and, for decode, the effective
// bandwidth against the cache's floor (each cached key and value read
// once), for prefill the attention's arithmetic rate (4 * heads * head
// size multiply-adds per query and key it sees, half the square).
//
//	go test ./ops -run '^$' -bench MetalAttention -benchtime 20x
func BenchmarkMetalAttention(b *testing.B) {
	r := newMetalRig(b)
	for _, seqs := range []int{1, 8} {
		for _, keys := range []int{1024, 4096, 16384, 65536} {
			if seqs*keys > 1<<17 {
				continue // keeps the caches under 1 GiB
			}
			b.Run(fmt.Sprintf("decode/B%d/L%d", seqs, keys), func(b *testing.B) {
				s := make([]attnSeq, seqs)
				for i := range s {
					s[i] = attnSeq{i, keys - 1, 1}
				}
				c := qwen3NextAttention(seqs, keys, ops.AttentionSplits(keys), s)
				floor := float64(2 * seqs * keys * c.kvHeads * c.dim * 2)
				benchAttention(b, r, c, func(u *attnRun, enc *mtl.ComputeCommandEncoder) error {
					return r.k.AttentionDecode(enc, u.a, u.step, u.views)
				}, floor/1e9, "GB/s")
			})
		}
	}
	for _, tokens := range []int{512, 2048} {
		b.Run(fmt.Sprintf("prefill/T%d", tokens), func(b *testing.B) {
			c := qwen3NextAttention(1, tokens, 0, []attnSeq{{0, 0, tokens}})
			flops := 4 * float64(c.heads*c.dim) * float64(tokens) * float64(tokens+1) / 2
			benchAttention(b, r, c, func(u *attnRun, enc *mtl.ComputeCommandEncoder) error {
				return r.k.AttentionPrefill(enc, u.a, u.step, u.views)
			}, flops/1e12, "TFLOP/s")
		})
	}
}

// benchAttention sets case c up, appends the step's keys once, then times
// run, reporting the median GPU time and work / time in unit.
func benchAttention(b *testing.B, r *rig, c attnCase, run func(*attnRun, *mtl.ComputeCommandEncoder) error, work float64, unit string) {
	g := *r.GPU
	g.T = b
	r = &rig{GPU: &g, k: r.k}
	u := setUpAttn(r, c, 1)
	r.run(func(enc *mtl.ComputeCommandEncoder) error { return r.k.KVAppend(enc, u.a, u.step, u.views) })
	med := medianGPUTime(b, func() (float64, error) {
		return r.Q.RunTimed(func(enc *mtl.ComputeCommandEncoder) error { return run(u, enc) })
	})
	b.ReportMetric(work/med, unit)
}
