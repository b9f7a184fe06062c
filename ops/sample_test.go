package ops_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/kernels"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/ops"
	"github.com/puremetal/puremetal/tensor"
)

// tokens returns the U32 view's elements.
func tokens(t *testing.T, v tensor.View) []uint32 {
	t.Helper()
	x := make([]uint32, v.Len)
	if err := tensor.LoadInts(v, x); err != nil {
		t.Fatal(err)
	}
	return x
}

// argmax is torch.argmax of one row: NaN above every number, the first of
// equal values.
func argmax(x []float32) int {
	best := 0
	for i, v := range x {
		b := x[best]
		if b != b {
			break
		}
		if v != v || v > b {
			best = i
		}
	}
	return best
}

// TestArgmax checks argmax for every type on rows of several widths
// (around and above the 1024 threads of a threadgroup), bf16 rows with
// many ties, a row of equal values (index 0), and NaNs (the first NaN).
func TestArgmax(t *testing.T) {
	eachRun(t, func(t *testing.T, r *rig) {
		seed := uint64(0)
		for _, xt := range kernels.ElemTypes {
			for _, vocab := range []int{1, 37, 1000, 5003} {
				seed++
				rows := 4
				rng := rand.New(rand.NewPCG(seed, 0xa1))
				x := rounded(xt, random(rng, rows*vocab, 8))
				for i := vocab; i < 2*vocab; i++ {
					x[i] = 0.5 // row 1: all equal
				}
				if vocab > 2 {
					x[3*vocab+vocab/2], x[3*vocab+vocab-1] = float32(math.NaN()), float32(math.NaN())
				}
				out := r.empty(tensor.U32, rows)
				xv := r.view(xt, x)
				r.run(func(enc *mtl.ComputeCommandEncoder) error { return r.k.Argmax(enc, rows, vocab, xv, out) })
				for row, got := range tokens(t, out) {
					if want := argmax(x[row*vocab : (row+1)*vocab]); int(got) != want {
						t.Errorf("%v vocab %d row %d: %d, want %d", xt, vocab, row, got, want)
					}
				}
			}
		}
	})
}

// sampleConfigs are the settings the sampler's tests run: Qwen's
// generation_config (0.6 / 20 / 0.95), plain temperature, min-p alone,
// every filter at once at the largest TopK.
var sampleConfigs = []cpuref.SampleConfig{
	{Temperature: 0.6, TopK: 20, TopP: 0.95},
	{Temperature: 1, TopP: 1},
	{Temperature: 1.3, TopP: 1, MinP: 0.05},
	{Temperature: 0.8, TopK: 64, TopP: 0.9, MinP: 0.02},
	{Temperature: 0.7, TopK: 5, TopP: 1},
}

func sampleParams(c cpuref.SampleConfig, rows, vocab int, seed uint64, step uint32) ops.SampleParams {
	return ops.SampleParams{Rows: rows, Vocab: vocab, Temperature: c.Temperature, TopK: c.TopK, TopP: c.TopP, MinP: c.MinP, Seed: seed, Step: step}
}

// TestSampleMatchesCPU checks that the device draws exactly the tokens
// cpuref.Sample32 (the same algorithm, filters and Philox noise in the
// same float32 order) draws, for every type and setting, several seeds
// and steps. One vocabulary of 5000 logits puts the five largest in one
// thread's share (indices 7 + 1024 j), so that its list of 4 runs out and
// is refilled.
func TestSampleMatchesCPU(t *testing.T) {
	eachRun(t, func(t *testing.T, r *rig) {
		seed := uint64(0)
		for _, xt := range kernels.ElemTypes {
			for ci, c := range sampleConfigs {
				for _, vocab := range []int{50, 5000} {
					seed++
					rows := 3
					rng := rand.New(rand.NewPCG(seed, 0x5a))
					x := random(rng, rows*vocab, 4)
					if vocab == 5000 {
						for j := 0; j < 5; j++ {
							x[7+1024*j] = 6 + float32(j)/8
						}
					}
					x = rounded(xt, x)
					xv, out := r.view(xt, x), r.empty(tensor.U32, rows)
					p := sampleParams(c, rows, vocab, seed*0x9e3779b97f4a7c15, uint32(seed*7))
					r.run(func(enc *mtl.ComputeCommandEncoder) error { return r.k.Sample(enc, p, xv, out) })
					for row, got := range tokens(t, out) {
						want := cpuref.Sample32(x[row*vocab:(row+1)*vocab], c, p.Seed, p.Step, uint32(row))
						if int(got) != want {
							t.Errorf("%v config %d vocab %d row %d: token %d, cpuref.Sample32 draws %d", xt, ci, vocab, row, got, want)
						}
					}
				}
			}
		}
	})
}

// chiSquareBound is the chi-square statistic at which TestSampleDistribution
// fails: for at most 5 degrees of freedom a correct sampler exceeds 36 with
// probability below 1e-6 (the 1 - 1e-6 quantile is 35.9 at 5 degrees of
// freedom and smaller at fewer).
const chiSquareBound = 36

// TestSampleDistribution draws 4000 tokens per setting from a vocabulary of
// 6 (4 dispatches of 1000 rows, each with its own seed) and checks their
// frequencies against cpuref.SampleProbs64, HF's warpers in float64: no
// token outside the kept set, and a chi-square statistic below
// chiSquareBound. Forward order only: TestSampleMatchesCPU checks the
// draws themselves in every run.
func TestSampleDistribution(t *testing.T) {
	r := newRig(t, testdevice.Orders[0])
	logits := []float32{2.0, 1.2, 1.1, 0.3, -0.5, -3}
	const rows, vocab, runs = 1000, 6, 4
	x := make([]float32, 0, rows*vocab)
	for range rows {
		x = append(x, logits...)
	}
	xv := r.view(tensor.F32, x)
	for ci, c := range sampleConfigs {
		counts := make([]int, vocab)
		for run := range runs {
			out := r.empty(tensor.U32, rows)
			p := sampleParams(c, rows, vocab, uint64(ci*runs+run)+1, 3)
			r.run(func(enc *mtl.ComputeCommandEncoder) error { return r.k.Sample(enc, p, xv, out) })
			for _, tok := range tokens(t, out) {
				counts[tok]++
			}
		}
		want := cpuref.SampleProbs64(logits, c)
		chi := 0.0
		for i, n := range counts {
			e := want[i] * rows * runs
			if e == 0 {
				if n != 0 {
					t.Errorf("config %d: token %d drawn %d times, filtered out", ci, i, n)
				}
				continue
			}
			chi += (float64(n) - e) * (float64(n) - e) / e
		}
		t.Logf("config %+v: counts %v, expected %v, chi-square %.2f", c, counts, fmt.Sprintf("%.0f", scale(want, rows*runs)), chi)
		if chi > chiSquareBound {
			t.Errorf("config %d: chi-square %.1f above %d", ci, chi, chiSquareBound)
		}
	}
}

func scale(p []float64, n int) []float64 {
	y := make([]float64, len(p))
	for i, v := range p {
		y[i] = v * float64(n)
	}
	return y
}
