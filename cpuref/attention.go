package cpuref

import (
	"fmt"
	"math"
)

// InvFreq returns RoPE's inverse frequencies for rotaryDim dimensions and
// base theta, inv_freq_i = theta^(-2i/rotaryDim) for i < rotaryDim/2,
// computed as HF transformers computes them (the default rope type) and
// widened: the exponent 2i/rotaryDim is a float32 quotient, the power
// float32 (theta as float32), and 1/power rounded to float32 again. HF
// models run with these float32 frequencies whatever their dtype, so a
// float64 reference that computes theta^(-2i/d) exactly drifts from them
// by up to a float32 ulp per frequency, which at position p is an angle
// error of p ulps.
func InvFreq(rotaryDim int, theta float64) []float64 {
	if rotaryDim <= 0 || rotaryDim%2 != 0 {
		panic(fmt.Sprintf("cpuref.InvFreq: rotaryDim %d, want an even number > 0", rotaryDim))
	}
	f := make([]float64, rotaryDim/2)
	base := float64(float32(theta))
	for i := range f {
		e := float32(2*i) / float32(rotaryDim)
		p := float32(math.Pow(base, float64(e)))
		f[i] = float64(float32(1 / p))
	}
	return f
}

// RoPE64 rotates, in place, the first rotaryDim dimensions of every head
// vector (width headDim) of x [n][nHeads*headDim], token t at position
// pos[t]. It pairs dimension i with i + rotaryDim/2 (rotate-half, the NeoX
// layout HF uses), angle a = pos[t] * invFreq[i]:
//
//	x_i'          = x_i cos a - x_{i+r/2} sin a
//	x_{i+r/2}'    = x_{i+r/2} cos a + x_i sin a
//
// Dimensions rotaryDim and up pass through (partial rotary).
func RoPE64(x []float64, nHeads, headDim, rotaryDim int, pos []int, invFreq []float64) {
	half := rotaryDim / 2
	if rotaryDim <= 0 || rotaryDim%2 != 0 || rotaryDim > headDim {
		panic(fmt.Sprintf("cpuref.RoPE64: rotaryDim %d, want an even number in 2..headDim %d", rotaryDim, headDim))
	}
	mustLen("RoPE64", "invFreq", len(invFreq), half)
	n := mustRows("RoPE64", "x", len(x), nHeads*headDim)
	mustLen("RoPE64", "pos", len(pos), n)
	for t := 0; t < n; t++ {
		for h := 0; h < nHeads; h++ {
			v := x[(t*nHeads+h)*headDim:]
			for i := 0; i < half; i++ {
				s, c := math.Sincos(float64(pos[t]) * invFreq[i])
				a, b := v[i], v[i+half]
				v[i], v[i+half] = a*c-b*s, b*c+a*s
			}
		}
	}
}

// Attention64 is causal softmax(q k^T * scale) v with grouped-query
// attention: q [n][nHeads*headDim], k and v [m][nKVHeads*headDim] (the
// cache, positions 0..m-1); query t attends to keys 0..pos[t]; query head
// h reads KV head h / (nHeads/nKVHeads). Returns [n][nHeads*headDim].
func Attention64(q, k, v []float64, nHeads, nKVHeads, headDim int, pos []int, scale float64) []float64 {
	if nKVHeads <= 0 || nHeads%nKVHeads != 0 {
		panic(fmt.Sprintf("cpuref.Attention64: %d query heads are not groups of %d KV heads", nHeads, nKVHeads))
	}
	qw, kw := nHeads*headDim, nKVHeads*headDim
	n := mustRows("Attention64", "q", len(q), qw)
	m := mustRows("Attention64", "k", len(k), kw)
	mustLen("Attention64", "v", len(v), m*kw)
	mustLen("Attention64", "pos", len(pos), n)
	group := nHeads / nKVHeads
	out := make([]float64, n*qw)
	for t := 0; t < n; t++ {
		if pos[t] < 0 || pos[t] >= m {
			panic(fmt.Sprintf("cpuref.Attention64: pos[%d] = %d outside the %d cached positions", t, pos[t], m))
		}
		for h := 0; h < nHeads; h++ {
			kv := h / group
			qh := q[t*qw+h*headDim : t*qw+(h+1)*headDim]
			s := make([]float64, pos[t]+1)
			for j := range s {
				s[j] = scale * dot64(qh, k[j*kw+kv*headDim:j*kw+(kv+1)*headDim])
			}
			p := Softmax64(s)
			o := out[t*qw+h*headDim : t*qw+(h+1)*headDim]
			for j, pj := range p {
				vj := v[j*kw+kv*headDim : j*kw+(kv+1)*headDim]
				for i := range o {
					o[i] += pj * vj[i]
				}
			}
		}
	}
	return out
}
