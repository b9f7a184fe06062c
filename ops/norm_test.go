package ops_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/kernels"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/ops"
	"github.com/puremetal/puremetal/tensor"
)

// normTol bounds |got - want| of an RMSNorm output against the float64
// oracle on the same rounded inputs: the kernel's float32 sum of Dim
// squares (all terms positive: relative error at most Dim * 2^-24 however
// it is ordered), the mean, eps, rsqrt (a few roundings), halved by the
// square root, and three products (x * inv * (offset + w)) give a relative
// error below (Dim/2 + 8) * 2^-24; the store adds its rounding (roundErr).
func normTol(dim int, out tensor.ElemType, want []float64) func(i int) float64 {
	rel := (float64(dim)/2 + 8) * 0x1p-24
	return func(i int) float64 { return rel*math.Abs(want[i]) + roundErr(out, want[i]) }
}

// TestRMSNorm checks rms_norm for every activation and weight type against
// cpuref.RMSNorm64: widths around the thread counts (1, 37, 128, 300,
// 2048), a row stride (the query half of [query | gate] heads), weight
// offsets 0 and 1, in place and not; the gaps between rows stay untouched.
func TestRMSNorm(t *testing.T) {
	eachRun(t, func(t *testing.T, r *rig) {
		seed := uint64(0)
		for _, xt := range kernels.ElemTypes {
			for _, wt := range kernels.ElemTypes {
				for _, c := range []struct {
					rows, dim, stride int
					offset            float32
					inPlace           bool
				}{
					{3, 37, 0, 0, false},
					{5, 128, 256, 1, true},
					{2, 300, 301, 1, false},
					{1, 1, 0, 0, true},
					{2, 2048, 0, 1, false},
				} {
					seed++
					name := fmt.Sprintf("%v/%v/%dx%d/stride%d/offset%v/inplace%v", xt, wt, c.rows, c.dim, c.stride, c.offset, c.inPlace)
					stride := max(c.stride, c.dim)
					rng := rand.New(rand.NewPCG(seed, 0x9a7))
					x := rounded(xt, random(rng, c.rows*stride, 3))
					w := rounded(wt, random(rng, c.dim, 1))
					p := ops.RMSNormParams{Rows: c.rows, Dim: c.dim, Stride: c.stride, Eps: 1e-6, Offset: c.offset}
					xv, wv := r.view(xt, x), r.view(wt, w)
					out := tensor.View{}
					if !c.inPlace {
						out = r.empty(xt, len(x))
					}
					r.run(func(enc *mtl.ComputeCommandEncoder) error { return r.k.RMSNorm(enc, p, xv, wv, out) })
					if c.inPlace {
						out = xv
					}
					got, err := out.Float32s()
					if err != nil {
						t.Fatal(err)
					}
					for i := 0; i < c.rows; i++ {
						row := x[i*stride : i*stride+c.dim]
						want := cpuref.RMSNorm64(cpuref.Widen(row), cpuref.Widen(w), 1e-6, float64(c.offset))
						within(t, name, got[i*stride:i*stride+c.dim], want, normTol(c.dim, xt, want))
						for j := i*stride + c.dim; j < (i+1)*stride; j++ {
							untouched := got[j] != got[j] // still the poison
							if c.inPlace {
								untouched = got[j] == x[j]
							}
							if !untouched {
								t.Fatalf("%s: element %d between rows was written: %g", name, j, got[j])
							}
						}
					}
				}
			}
		}
	})
}

// TestRMSNormResidual checks rms_norm_residual for every residual,
// activation and weight type: h + r rounded to h's type equals the float32
// sum rounded once, bit for bit, and the output matches
// cpuref.RMSNorm64 of that sum.
func TestRMSNormResidual(t *testing.T) {
	eachRun(t, func(t *testing.T, r *rig) {
		seed := uint64(100)
		for _, ht := range kernels.ElemTypes {
			for _, xt := range kernels.ElemTypes {
				for _, wt := range kernels.ElemTypes {
					seed++
					rows, dim := 2+int(seed%3), []int{33, 96, 257}[seed%3]
					name := fmt.Sprintf("%v/%v/%v/%dx%d", ht, xt, wt, rows, dim)
					rng := rand.New(rand.NewPCG(seed, 0x4e5))
					h := rounded(ht, random(rng, rows*dim, 4))
					res := rounded(xt, random(rng, rows*dim, 2))
					w := rounded(wt, random(rng, dim, 1))
					hv, rv, wv, out := r.view(ht, h), r.view(xt, res), r.view(wt, w), r.empty(xt, rows*dim)
					p := ops.RMSNormParams{Rows: rows, Dim: dim, Eps: 1e-5, Offset: float32(seed % 2)}
					r.run(func(enc *mtl.ComputeCommandEncoder) error { return r.k.RMSNormResidual(enc, p, hv, rv, wv, out) })
					sum := make([]float32, len(h))
					for i := range sum {
						sum[i] = h[i] + res[i]
					}
					sum = rounded(ht, sum)
					gotH, got := r.read(hv), r.read(out)
					for i := range sum {
						if gotH[i] != sum[i] {
							t.Fatalf("%s: h[%d] = %g, want h + r rounded = %g", name, i, gotH[i], sum[i])
						}
					}
					for i := 0; i < rows; i++ {
						want := cpuref.RMSNorm64(cpuref.Widen(sum[i*dim:(i+1)*dim]), cpuref.Widen(w), 1e-5, float64(p.Offset))
						within(t, name, got[i*dim:(i+1)*dim], want, normTol(dim, xt, want))
					}
				}
			}
		}
	})
}
