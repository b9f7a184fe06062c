package cpuref

import (
	"fmt"
	"math"
)

// The float64 references of the whole model's operations (SPEC section 14)
// are oracles for tests: they take slices whose lengths the caller derives
// from the same shape it hands them, so inconsistent lengths are a
// programming error in the test, not bad input. They panic then, with a
// message naming the operation and the numbers, instead of returning an
// error every caller would have to check for a case that cannot happen in
// a correct test. (The kernel references of this package, which validate
// user-built spec.Params, return errors.)

// mustLen panics unless n == want, naming op, what and both numbers.
func mustLen(op, what string, n, want int) {
	if n != want {
		panic(fmt.Sprintf("cpuref.%s: %s has %d elements, want %d", op, what, n, want))
	}
}

// mustRows panics unless n is a whole number of rows of width w > 0, and
// returns the number of rows.
func mustRows(op, what string, n, w int) int {
	if w <= 0 || n%w != 0 {
		panic(fmt.Sprintf("cpuref.%s: %s has %d elements, not rows of %d", op, what, n, w))
	}
	return n / w
}

// Linear64 returns y = x W^T: x [n][in], w [out][in] (row-major, as HF
// stores nn.Linear), y [n][out]. Each element is one float64 dot product
// summed in increasing index.
func Linear64(x []float64, w []float64, out, in int) []float64 {
	mustLen("Linear64", "w", len(w), out*in)
	n := mustRows("Linear64", "x", len(x), in)
	y := make([]float64, n*out)
	for t := 0; t < n; t++ {
		xt := x[t*in : (t+1)*in]
		for o := 0; o < out; o++ {
			y[t*out+o] = dot64(xt, w[o*in:(o+1)*in])
		}
	}
	return y
}

func dot64(a, b []float64) float64 {
	var s float64
	for i, x := range a {
		s += x * b[i]
	}
	return s
}

// RMSNorm64 normalises each row of x (width len(w)):
//
//	y = x / sqrt(mean(x^2) + eps) * (w + offset)
//
// offset 1 for the zero-centred norms of Qwen3-Next and Qwen3.5 (SPEC
// section 14: input, post-attention, final, q_norm, k_norm), 0 for plain w
// (Qwen3, and the gated norm inside the linear attention).
func RMSNorm64(x, w []float64, eps, offset float64) []float64 {
	d := len(w)
	n := mustRows("RMSNorm64", "x", len(x), d)
	y := make([]float64, len(x))
	for t := 0; t < n; t++ {
		row := x[t*d : (t+1)*d]
		r := 1 / math.Sqrt(dot64(row, row)/float64(d)+eps)
		for i, v := range row {
			y[t*d+i] = v * r * (w[i] + offset)
		}
	}
	return y
}

// Sigmoid64 returns 1 / (1 + exp(-x)).
func Sigmoid64(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// SiLU64 returns silu(x) = x * sigmoid(x), computed as x / (1 + exp(-x)).
func SiLU64(x float64) float64 { return x / (1 + math.Exp(-x)) }

// SwiGLU64 returns silu(gate) * up elementwise: the activation of the
// dense MLP and of each expert, down(silu(gate(x)) * up(x)).
func SwiGLU64(gate, up []float64) []float64 {
	mustLen("SwiGLU64", "up", len(up), len(gate))
	y := make([]float64, len(gate))
	for i, g := range gate {
		y[i] = SiLU64(g) * up[i]
	}
	return y
}

// Softmax64 returns exp(x_i - max x) / sum_j exp(x_j - max x): the maximum
// is subtracted first so no exponential overflows.
func Softmax64(x []float64) []float64 {
	if len(x) == 0 {
		return nil
	}
	m := math.Inf(-1)
	for _, v := range x {
		m = math.Max(m, v)
	}
	y := make([]float64, len(x))
	var s float64
	for i, v := range x {
		y[i] = math.Exp(v - m)
		s += y[i]
	}
	for i := range y {
		y[i] /= s
	}
	return y
}
