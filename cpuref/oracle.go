package cpuref

import (
	"math"

	"github.com/puremetal/puremetal/gdn/spec"
)

// matrix is a dense row-major float64 matrix.
type matrix struct {
	rows, cols int
	a          []float64
}

func newMatrix(rows, cols int) matrix {
	return matrix{rows: rows, cols: cols, a: make([]float64, rows*cols)}
}

func (m matrix) at(i, j int) float64 { return m.a[i*m.cols+j] }

// identity returns the n x n identity matrix I.
func identity(n int) matrix {
	m := newMatrix(n, n)
	for i := 0; i < n; i++ {
		m.a[i*n+i] = 1
	}
	return m
}

// outer returns the outer product x y^T.
func outer(x, y []float64) matrix {
	m := newMatrix(len(x), len(y))
	for i, xi := range x {
		for j, yj := range y {
			m.a[i*m.cols+j] = xi * yj
		}
	}
	return m
}

// mul returns the matrix product m n.
func (m matrix) mul(n matrix) matrix {
	p := newMatrix(m.rows, n.cols)
	for i := 0; i < m.rows; i++ {
		prow := p.a[i*p.cols : (i+1)*p.cols]
		for l := 0; l < m.cols; l++ {
			mil := m.at(i, l)
			nrow := n.a[l*n.cols : (l+1)*n.cols]
			for j := range prow {
				prow[j] += mil * nrow[j]
			}
		}
	}
	return p
}

// scaled returns c m.
func (m matrix) scaled(c float64) matrix {
	p := newMatrix(m.rows, m.cols)
	for i, v := range m.a {
		p.a[i] = c * v
	}
	return p
}

// plus returns m + n.
func (m matrix) plus(n matrix) matrix {
	p := newMatrix(m.rows, m.cols)
	for i := range m.a {
		p.a[i] = m.a[i] + n.a[i]
	}
	return p
}

// minus returns m - n.
func (m matrix) minus(n matrix) matrix { return m.plus(n.scaled(-1)) }

// apply returns the matrix-vector product m x.
func (m matrix) apply(x []float64) []float64 {
	y := make([]float64, m.rows)
	for i := range y {
		for j, xj := range x {
			y[i] += m.at(i, j) * xj
		}
	}
	return y
}

// Widen returns x widened to float64, exactly: the float64 oracles' view
// of float32 data.
func Widen(x []float32) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = float64(v)
	}
	return y
}

// Oracle64 runs the recurrence in float64, written from the matrix form of
// the Gated Delta Networks paper:
//
//	S_t = alpha_t S_{t-1} (I - beta_t k_t k_t^T) + beta_t v_t k_t^T
//	o_t = scale S_t q_t
//
// with alpha_t = exp(-g_t), S a D_v x D_k matrix per (sequence, value head)
// and scale = p.Scale(). It builds I - beta k k^T and v k^T as matrices and
// multiplies them, so it shares no evaluation order with the per-element
// loop of [Reference32] or the kernels. The fused parts of p.Fused are
// computed in float64 from the same inputs. Nothing is rounded to
// p.Activation or p.State: the result is the truth that SPEC section 9
// measures rounded results against. With capture set, the result also
// holds the state after every token. With p.Core the convolution and the
// gated norm run in float64 as well ([conv64], [gatedNorm64]). It costs O(D_v D_k^2) per token and
// head: meant for tests, not speed.
func Oracle64(p spec.Params, in Inputs, capture bool) (Result64, error) {
	if err := in.Validate(p); err != nil {
		return Result64{}, err
	}
	dk, dv := p.DK, p.DV
	res := newResult64(p, in, capture)
	scale := float64(p.Scale())
	q, k, v := Widen(in.Q), Widen(in.K), Widen(in.V)
	if p.Core.Conv > 0 {
		res.ConvState = Widen(in.ConvState)
		q, k, v = conv64(p, in, res.ConvState)
	}
	x := fused64(p, in, q, k)
	eye := identity(dk)
	for _, r := range headRuns(p, in) {
		S := matrix{rows: dv, cols: dk, a: Widen(in.StateIn[r.st : r.st+dv*dk])}
		for t := r.tok0; t < r.tok0+r.n; t++ {
			qk, vo, gi := r.at(p, t)
			q := x.q[qk : qk+dk]
			k := x.k[qk : qk+dk]
			v := v[vo : vo+dv]
			alpha := math.Exp(-x.g[gi])
			beta := x.beta[gi]

			transition := eye.minus(outer(k, k).scaled(beta)) // I - beta k k^T
			S = S.mul(transition).scaled(alpha).plus(outer(v, k).scaled(beta))

			o := S.apply(q)
			for i := range o {
				o[i] *= scale
			}
			if p.Core.Norm {
				gatedNorm64(p, o, in.Z[vo:vo+dv], in.NormWeight)
			}
			copy(res.Output[vo:vo+dv], o)
			if capture {
				co := gi * dv * dk
				copy(res.Capture[co:co+dv*dk], S.a)
			}
		}
		copy(res.StateOut[r.st:r.st+dv*dk], S.a)
	}
	return res, nil
}
