package cpuref

import (
	"math"

	"github.com/puremetal/puremetal/gdn/spec"
)

// Chunked64 runs the recurrence in float64 in the chunked (WY, or UT
// transform) form, chunk tokens at a time, from matrix products only: it
// never steps through a chunk token by token. Within a chunk of n tokens
// (rows r, s = 0 .. n-1; the last chunk of a sequence may be shorter) with
// S_0 the state before the chunk, write
//
//	Gamma[r][s] = exp(-(g_{s+1} + ... + g_r))   for s <= r, 0 above
//	e_r         = exp(-(g_0 + ... + g_r))        decay from S_0 to token r
//
// Each exponent is a sum of g >= 0 over a range of tokens, never a
// difference of two running sums: a decay that underflows gives 0, not
// inf / inf, and a long range loses nothing to cancellation. Since
// S_r = alpha_r S_{r-1} + u_r k_r^T with u_r = beta_r (v_r - alpha_r S_{r-1} k_r),
//
//	S_r = e_r S_0 + sum_{s<=r} Gamma[r][s] u_s k_s^T
//
// and the u_r solve the unit lower-triangular system
//
//	(I + A) U = diag(beta) (V - diag(e) K S_0^T),
//	A[r][s] = beta_r Gamma[r][s] (k_r . k_s)  for s < r, 0 otherwise,
//
// with K, Q (n x D_k), V, U (n x D_v) holding one token per row. Then
//
//	O   = scale (diag(e) Q S_0^T + (Gamma o Q K^T) U)
//	S_n = e_{n-1} S_0 + U^T diag(Gamma[n-1][.]) K
//
// (o: the elementwise product). T = (I + A)^-1 is the UT transform, built
// here as a matrix by forward substitution on the columns of I; U = T
// diag(beta) (V - diag(e) K S_0^T). chunk = 1 is the token recurrence in
// matrix form; chunk >= n_tokens is one chunk per sequence. The fused
// parts of p.Fused are computed as [Oracle64] computes them, and nothing
// is rounded to p.Activation or p.State. It returns an error for invalid
// inputs or chunk < 1.
func Chunked64(p spec.Params, in Inputs, chunk int) (Result64, error) {
	if err := in.Validate(p); err != nil {
		return Result64{}, err
	}
	if chunk < 1 {
		return Result64{}, invalidf("chunk %d, must be >= 1", chunk)
	}
	if p.Core != (spec.Core{}) {
		return Result64{}, invalidf("Chunked64 runs the recurrence alone, not Params.Core %+v", p.Core)
	}
	dk, dv := p.DK, p.DV
	res := newResult64(p, in, false)
	scale := float64(p.Scale())
	x := fused64(p, in, Widen(in.Q), Widen(in.K))
	for _, run := range headRuns(p, in) {
		S := matrix{rows: dv, cols: dk, a: Widen(in.StateIn[run.st : run.st+dv*dk])}
		for t0 := 0; t0 < run.n; t0 += chunk {
			n := min(chunk, run.n-t0)
			K, Q, V := newMatrix(n, dk), newMatrix(n, dk), newMatrix(n, dv)
			g, beta := make([]float64, n), make([]float64, n)
			for r := 0; r < n; r++ {
				qk, vo, gi := run.at(p, run.tok0+t0+r)
				copy(K.a[r*dk:(r+1)*dk], x.k[qk:qk+dk])
				copy(Q.a[r*dk:(r+1)*dk], x.q[qk:qk+dk])
				copy(V.a[r*dv:(r+1)*dv], Widen(in.V[vo:vo+dv]))
				g[r], beta[r] = x.g[gi], x.beta[gi]
			}
			var O matrix
			O, S = chunkStep(S, K, Q, V, g, beta)
			for r := 0; r < n; r++ {
				_, vo, _ := run.at(p, run.tok0+t0+r)
				for i := 0; i < dv; i++ {
					res.Output[vo+i] = scale * O.at(r, i)
				}
			}
		}
		copy(res.StateOut[run.st:run.st+dv*dk], S.a)
	}
	return res, nil
}

// chunkStep applies one chunk of [Chunked64] to the state S (D_v x D_k):
// it returns the unscaled outputs O (n x D_v) and the state after the
// chunk.
func chunkStep(S, K, Q, V matrix, g, beta []float64) (O, next matrix) {
	n := len(g)
	gamma := newMatrix(n, n)
	e := make([]float64, n)
	for r := 0; r < n; r++ {
		sum := 0.0
		for s := r; s >= 0; s-- {
			gamma.a[r*n+s] = math.Exp(-sum)
			sum += g[s]
		}
		e[r] = math.Exp(-sum)
	}
	Kt := K.transposed()
	A := diag(beta).mul(gamma.hadamard(K.mul(Kt))).strictlyLower()
	T := A.plus(identity(n)).lowerInverse()

	St := S.transposed()
	rhs := V.minus(diag(e).mul(K).mul(St)) // V - diag(e) K S_0^T
	U := T.mul(diag(beta).mul(rhs))

	O = diag(e).mul(Q).mul(St).plus(gamma.hadamard(Q.mul(Kt)).mul(U))
	last := make([]float64, n)
	for s := range last {
		last[s] = gamma.at(n-1, s)
	}
	next = S.scaled(e[n-1]).plus(U.transposed().mul(diag(last)).mul(K))
	return O, next
}

// transposed returns m^T.
func (m matrix) transposed() matrix {
	t := newMatrix(m.cols, m.rows)
	for i := 0; i < m.rows; i++ {
		for j := 0; j < m.cols; j++ {
			t.a[j*t.cols+i] = m.at(i, j)
		}
	}
	return t
}

// hadamard returns the elementwise product of m and n.
func (m matrix) hadamard(n matrix) matrix {
	p := newMatrix(m.rows, m.cols)
	for i := range m.a {
		p.a[i] = m.a[i] * n.a[i]
	}
	return p
}

// strictlyLower returns m with its diagonal and everything above it set to
// 0.
func (m matrix) strictlyLower() matrix {
	p := newMatrix(m.rows, m.cols)
	for i := 0; i < m.rows; i++ {
		for j := 0; j < i && j < m.cols; j++ {
			p.a[i*p.cols+j] = m.at(i, j)
		}
	}
	return p
}

// lowerInverse returns the inverse of the square lower-triangular matrix
// m, column by column: forward substitution of m x = e_c for every column
// e_c of the identity.
func (m matrix) lowerInverse() matrix {
	n := m.rows
	inv := newMatrix(n, n)
	for c := 0; c < n; c++ {
		for r := c; r < n; r++ {
			sum := 0.0
			if r == c {
				sum = 1
			}
			for s := c; s < r; s++ {
				sum -= m.at(r, s) * inv.at(s, c)
			}
			inv.a[r*n+c] = sum / m.at(r, r)
		}
	}
	return inv
}

// diag returns the square matrix with d on its diagonal.
func diag(d []float64) matrix {
	m := newMatrix(len(d), len(d))
	for i, x := range d {
		m.a[i*len(d)+i] = x
	}
	return m
}
