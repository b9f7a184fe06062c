package ops_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/kernels"
	"github.com/puremetal/puremetal/mtl"
)

// TestSwiGLU checks SwiGLU and SwiGLUFused for every type against
// cpuref.SwiGLU64 on the same rounded inputs. Bound: exp within a few ulp
// (its relative error passes to silu scaled by e/(1+e) <= 1), then the
// sum, the quotient and the product, one rounding each: relative
// 8 * 2^-24, plus the rounding to the output type (roundErr).
func TestSwiGLU(t *testing.T) {
	eachRun(t, func(t *testing.T, r *rig) {
		for i, xt := range kernels.ElemTypes {
			for _, fused := range []bool{false, true} {
				rows, width := 3, 300+i
				rng := rand.New(rand.NewPCG(uint64(i)*2+uint64(len(fmt.Sprint(fused))), 0x5e1))
				gate := rounded(xt, random(rng, rows*width, 12))
				up := rounded(xt, random(rng, rows*width, 3))
				out := r.empty(xt, rows*width)
				if fused {
					gu := make([]float32, 0, 2*rows*width)
					for row := 0; row < rows; row++ {
						gu = append(append(gu, gate[row*width:(row+1)*width]...), up[row*width:(row+1)*width]...)
					}
					v := r.view(xt, gu)
					r.run(func(enc *mtl.ComputeCommandEncoder) error { return r.k.SwiGLUFused(enc, rows, width, v, out) })
				} else {
					g, u := r.view(xt, gate), r.view(xt, up)
					r.run(func(enc *mtl.ComputeCommandEncoder) error { return r.k.SwiGLU(enc, rows, width, g, u, out) })
				}
				want := cpuref.SwiGLU64(cpuref.Widen(gate), cpuref.Widen(up))
				within(t, fmt.Sprintf("%v fused=%v", xt, fused), r.read(out), want, func(i int) float64 {
					return 8*0x1p-24*math.Abs(want[i]) + roundErr(xt, want[i])
				})
			}
		}
	})
}
