package ops_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/tensor"
)

// BenchmarkMetalQuant times the quantized products on the system's GPU (a
// Mac; it skips elsewhere, saying why) at Qwen3-Next-80B-A3B's shapes,
// 4-bit and 8-bit, group 64, bf16 (an mlx-community checkpoint's):
// QuantMatVec for 1 and 8 tokens over a 2048 x 2048 projection, a 512 x
// 2048 expert's gate and the 151936 x 2048 lm_head, and QuantMatMul for a
// 512-token prefill of the 2048 x 2048 projection. Each case reports the
// median GPU time of a command buffer of one dispatch (us, from its
// timestamps: mtl.CommandQueue.RunTimed) and the bandwidth against the
// bytes it must move (the words, scales and biases, x and y once).
//
//	go test ./ops -run '^$' -bench MetalQuant -benchtime 50x
func BenchmarkMetalQuant(b *testing.B) {
	r := newMetalRig(b)
	for _, bits := range []int{4, 8} {
		for _, s := range []struct {
			name       string
			rows, cols int
		}{{"proj", 2048, 2048}, {"expert", 512, 2048}, {"lm_head", 151936, 2048}} {
			c := quantCombo{bits, 64, tensor.BF16, tensor.BF16}
			w := r.randomQuantWeight(rand.New(rand.NewPCG(1, 2)), c, 0, s.rows, s.cols)
			for _, n := range []int{1, 8, 512} {
				f, kind := r.k.QuantMatVec, "QuantMatVec"
				if n == 512 {
					if s.name != "proj" {
						continue
					}
					f, kind = r.k.QuantMatMul, "QuantMatMul"
				}
				x, y := r.empty(c.act, n*s.cols), r.empty(c.act, n*s.rows)
				floor := float64(w.Words.Bytes() + w.Scales.Bytes() + w.Biases.Bytes() + x.Bytes() + y.Bytes())
				b.Run(fmt.Sprintf("%s/%s/%d-bit/n%d", kind, s.name, bits, n), func(b *testing.B) {
					benchGPU(b, r.GPU, floor, func(enc *mtl.ComputeCommandEncoder) error { return f(enc, w, x, tensor.View{}, y, n) })
				})
			}
		}
	}
}
