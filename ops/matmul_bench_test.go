package ops_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/kernels"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/ops"
	"github.com/puremetal/puremetal/tensor"
)

// benchRepeats is the number of dispatches each timed command buffer
// holds, so that a matvec of a few microseconds is not lost in the
// command buffer's own cost.
const benchRepeats = 16

// BenchmarkMetalMatMul times the dense products on the system's GPU (a
// Mac; it skips elsewhere, saying why) at Qwen3-Next / Qwen3.5 shapes,
// bf16 weights and activations: the attention and linear-attention
// projections (2048 x 2048), an expert's gate or up projection (512 x
// 2048), the lm_head (151936 x 2048), each through Linear at n = 1, 4, 8
// (matvec) and 32, 128, 512 (matmul) rows; and the gathered matvec of
// top-10 experts of 512. Reported per case: the median GPU time of one
// dispatch (us, from command buffers of benchRepeats dispatches), the
// effective bandwidth against the floor (W once per matvec, ceil(n/64)
// times per matmul, plus x and y once: GB/s) and the arithmetic rate
// (GFLOP/s).
//
//	go test ./ops -run '^$' -bench MetalMatMul -benchtime 20x
func BenchmarkMetalMatMul(b *testing.B) {
	r := newMetalRig(b)
	g, k := r.GPU, r.k
	view := func(typ tensor.ElemType, n int) tensor.View {
		v := tensor.NewView(g.Buffer(n*typ.Size(), mtl.ResourceStorageModeShared), 0, typ, n)
		rng := rand.New(rand.NewPCG(uint64(n), 7))
		if err := v.Store(random(rng, n, 0.05)); err != nil {
			b.Fatal(err)
		}
		return v
	}
	for _, s := range []struct {
		name    string
		out, in int
	}{{"proj2048", 2048, 2048}, {"expert512", 512, 2048}, {"lm_head", 151936, 2048}} {
		w := view(tensor.BF16, s.out*s.in)
		for _, n := range []int{1, 4, 8, 32, 128, 512} {
			if s.name == "lm_head" && n > 8 {
				continue // prefill needs the last row's logits only
			}
			x, y := view(tensor.BF16, n*s.in), view(tensor.BF16, n*s.out)
			b.Run(fmt.Sprintf("%s/n%d", s.name, n), func(b *testing.B) {
				reads := (n + kernels.MatMulTileRows - 1) / kernels.MatMulTileRows
				if n <= ops.MatVecMaxRows {
					reads = 1
				}
				floor := float64(reads*w.Bytes() + x.Bytes() + y.Bytes())
				benchDispatch(b, g, floor, 2*float64(n*s.out*s.in), func(enc *mtl.ComputeCommandEncoder) error {
					return k.Linear(enc, w, x, tensor.View{}, y, n, s.in, s.out)
				})
			})
		}
	}
	gt := ops.Gather{Tokens: 1, TopK: 10, Experts: 512, In: 2048, Out: 512}
	w := view(tensor.BF16, gt.Experts*gt.Out*gt.In)
	x, y := view(tensor.BF16, gt.In), view(tensor.BF16, gt.TopK*gt.Out)
	ids := tensor.NewView(g.Buffer(4*gt.TopK, mtl.ResourceStorageModeShared), 0, tensor.U32, gt.TopK)
	if err := tensor.StoreInts(ids, []uint32{3, 500, 77, 12, 256, 1, 431, 99, 310, 64}); err != nil {
		b.Fatal(err)
	}
	b.Run("gather/top10of512", func(b *testing.B) {
		floor := float64(gt.TopK*gt.Out*gt.In*2 + x.Bytes() + y.Bytes())
		benchDispatch(b, g, floor, 2*float64(gt.TopK*gt.Out*gt.In), func(enc *mtl.ComputeCommandEncoder) error {
			return k.GatherMatVec(enc, w, x, ids, y, gt)
		})
	})
}

// benchDispatch times encode, benchRepeats times per command buffer, b.N
// command buffers after one warm-up, and reports the median time of one
// dispatch and the rates of floor bytes and flops in it.
func benchDispatch(b *testing.B, g *testdevice.GPU, floor, flops float64, encode func(enc *mtl.ComputeCommandEncoder) error) {
	m := medianGPUTime(b, func() (float64, error) {
		s, err := g.Q.RunTimed(func(enc *mtl.ComputeCommandEncoder) error {
			for range benchRepeats {
				if err := encode(enc); err != nil {
					return err
				}
			}
			return nil
		})
		return s / benchRepeats, err
	})
	b.ReportMetric(floor/m/1e9, "GB/s")
	b.ReportMetric(flops/m/1e9, "GFLOP/s")
}
