//lint:file-ignore U1000 the Args and Params types mirror MLX's and ggml's argument structs field for field, so that their layout is the C one; the fields a sample leaves zero are still needed

package msl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/puremetal/puremetal/half"
	"github.com/puremetal/puremetal/internal/floats"
)

// The samples below run more of MLX's and ggml's kernels, each set up as its
// host sets it up (buffer bindings, argument structs, grid and threadgroup
// sizes, function constants: the host files are named at each sample), and
// compare every element written with a Go computation in float64, in the
// forward and the reverse scheduling order. Outputs are poisoned before each
// run, so an element the kernel did not write fails the test. Bounds on the
// error come from the arithmetic of the kernel: u = 2^-24 is float's unit
// roundoff, and a float sum of n terms in any order is within γ(n) = n u /
// (1 - n u) times the sum of the terms' magnitudes of the exact sum.

const unitRoundoff = 0x1p-24

// gamma is γ(n) = n u / (1 - n u) for float.
func gamma(n int) float64 { return float64(n) * unitRoundoff / (1 - float64(n)*unitRoundoff) }

// halfPoison is a half NaN no conversion produces (its payload is not that
// of a quiet NaN made from a float).
const halfPoison = 0x7dea

// compareF32 checks every element of got against want within bound[i]
// (absolute), failing on an unwritten (still poisoned) element or one
// outside its bound, and returns the largest error and the largest ratio of
// error to bound.
func compareF32(t *testing.T, what string, o Order, got []float32, want, bound []float64) (maxErr, worst float64) {
	t.Helper()
	if n := floats.Unwritten(got); n > 0 {
		for i, g := range got {
			if floats.Unwritten([]float32{g}) > 0 {
				t.Fatalf("%s, %v order: %d of %d elements not written, the first %d", what, o, n, len(got), i)
			}
		}
	}
	for i, g := range got {
		e := math.Abs(float64(g) - want[i])
		if !(e <= bound[i]) {
			t.Fatalf("%s, %v order: element %d = %v, want %v (error %g, bound %g)", what, o, i, g, want[i], e, bound[i])
		}
		maxErr = math.Max(maxErr, e)
		if bound[i] > 0 {
			worst = math.Max(worst, e/bound[i])
		}
	}
	return maxErr, worst
}

// sampleRun runs f over d in both orders, poisoning the outputs before each
// run and comparing them with want within bound after it; it logs the
// result line of the sample's report.
func sampleRun(t *testing.T, f *Function, d *Dispatch, outs []*mem, want, bound [][]float64) {
	t.Helper()
	maxErr, worst := 0.0, 0.0
	runOrders(t, f, d, func() {
		for _, m := range outs {
			floats.Poison(m.f32())
		}
	}, func(o Order) {
		for i, m := range outs {
			e, w := compareF32(t, fmt.Sprintf("%s output %d", f.Name, i), o, m.f32(), want[i], bound[i])
			maxErr, worst = math.Max(maxErr, e), math.Max(worst, w)
		}
	})
	n := 0
	for _, w := range want {
		n += len(w)
	}
	t.Logf("%s: %d elements matched in both orders, max error %.3g (%.2g of its bound)", f.Name, n, maxErr, worst)
}

func zeros(n int) []float64 { return make([]float64, n) }

// fcBool and fcShort are function constant values by index, as
// MTLFunctionConstantValues setConstantValue:type:atIndex: gives them.
func fcBool(index int, v bool) ConstantValue {
	b := byte(0)
	if v {
		b = 1
	}
	return ConstantValue{Index: index, Type: "bool", Bytes: []byte{b}}
}

func fcShort(index int, v int16) ConstantValue {
	return ConstantValue{Index: index, Type: "short", Bytes: binary.LittleEndian.AppendUint16(nil, uint16(v))}
}

func specializeT(t *testing.T, lib *Library, name string, values ...ConstantValue) *Function {
	t.Helper()
	start := time.Now()
	f, err := lib.Specialize(name, values)
	if err != nil {
		logCompileError(t, err)
		t.FailNow()
	}
	t.Logf("%s: specialized in %.1fs", name, time.Since(start).Seconds())
	return f
}

func lazyFunction(t *testing.T, lib *Library, name string) *Function {
	t.Helper()
	start := time.Now()
	f, err := lib.Function(name)
	if err != nil {
		logCompileError(t, err)
		t.FailNow()
	}
	for _, c := range f.Constants {
		if c.Required {
			t.Fatalf("%s requires function constant %s (index %d), which its host does not give", name, c.Name, c.Index)
		}
	}
	t.Logf("%s: built in %.1fs", name, time.Since(start).Seconds())
	return f
}

// mlxLazy compiles one of MLX's kernel files lazily, with the options of
// MLX's build.
func mlxLazy(t *testing.T, root, name string) *Library {
	t.Helper()
	opts := mlxOptions(root)
	opts.Lazy = true
	lib, err := CompileFile(filepath.Join(root, "mlx", "backend", "metal", "kernels", name), opts)
	if err != nil {
		logCompileError(t, err)
		t.FailNow()
	}
	return lib
}

func int64Mem(t *testing.T, v ...int64) *mem {
	m := newMem(t, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(m.b[8*i:], uint64(x))
	}
	return m
}

func int32Mem(t *testing.T, v ...int32) *mem {
	m := newMem(t, 4*len(v))
	copy(m.i32(), v)
	return m
}

// mlxBlockDims is MLX's get_block_dims_common (backend/common/utils.cpp):
// powers of two of the three extents, up to 2^10 threads.
func mlxBlockDims(dim0, dim1, dim2 int) [3]int {
	var pows [3]int
	sum := 0
	for {
		presum := sum
		if dim0 >= 1<<(pows[0]+1) {
			pows[0]++
			sum++
		}
		if sum == 10 {
			break
		}
		if dim1 >= 1<<(pows[1]+1) {
			pows[1]++
			sum++
		}
		if sum == 10 {
			break
		}
		if dim2 >= 1<<(pows[2]+1) {
			pows[2]++
			sum++
		}
		if sum == presum || sum == 10 {
			break
		}
	}
	return [3]int{1 << pows[0], 1 << pows[1], 1 << pows[2]}
}

// mlxSamples runs MLX's binary, reduce, layer_norm, rope, gemv and steel
// GEMM kernels.
func mlxSamples(t *testing.T, root string) {
	t.Run("binary", func(t *testing.T) { mlxBinary(t, root) })
	t.Run("reduce", func(t *testing.T) { mlxReduce(t, root) })
	t.Run("layer_norm", func(t *testing.T) { mlxLayerNorm(t, root) })
	t.Run("rope", func(t *testing.T) { mlxRope(t, root) })
	t.Run("gemv", func(t *testing.T) { mlxGemv(t, root) })
	t.Run("steel_gemm", func(t *testing.T) { mlxSteelGemm(t, root) })
}

// mlxBinary runs add and multiply of broadcast operands, as binary.cpp
// dispatches the general (strided) case: a [3,1,5] and b [1,4,5] broadcast
// to [3,4,5] (strides a [5,0,1], b [0,5,1], which collapse_contiguous_dims
// cannot merge) take g3_, and a [2,3,1,5] with b [2,1,4,5] (four
// dimensions) take gn2_, two elements per thread, with the shape and
// strides bound as arrays. dispatch_threads over (dim0, dim1, rest) in
// get_block_dims threadgroups. float addition and multiplication round
// once, like float64's result rounded to float: the results are exact.
func mlxBinary(t *testing.T, root string) {
	lib := mlxLazy(t, root, "binary.metal")
	type bcase struct {
		kernel        string
		shape, sa, sb []int // out shape, a's and b's broadcast strides
		na, nb        int   // a's and b's element counts
		op            func(a, b float32) float32
		wpt           int
	}
	add := func(a, b float32) float32 { return float32(float64(a) + float64(b)) }
	mul := func(a, b float32) float32 { return float32(float64(a) * float64(b)) }
	for _, c := range []bcase{
		{"g3_Addfloat32", []int{3, 4, 5}, []int{5, 0, 1}, []int{0, 5, 1}, 15, 20, add, 1},
		{"g3_Multiplyfloat32", []int{3, 4, 5}, []int{5, 0, 1}, []int{0, 5, 1}, 15, 20, mul, 1},
		{"gn2_Addfloat32", []int{2, 3, 4, 5}, []int{15, 5, 0, 1}, []int{20, 0, 5, 1}, 30, 40, add, 2},
	} {
		t.Run(c.kernel, func(t *testing.T) {
			f := lazyFunction(t, lib, c.kernel)
			n := 1
			for _, s := range c.shape {
				n *= s
			}
			a, b, out := newF32(t, c.na), newF32(t, c.nb), newF32(t, n)
			fillRandom(a.f32(), 21)
			fillRandom(b.f32(), 22)
			want := make([]float64, n)
			nd := len(c.shape)
			for i := range want {
				ia, ib, r := 0, 0, i
				for d := nd - 1; d >= 0; d-- {
					k := r % c.shape[d]
					r /= c.shape[d]
					ia += k * c.sa[d]
					ib += k * c.sb[d]
				}
				want[i] = float64(c.op(a.f32()[ia], b.f32()[ib]))
			}
			d := &Dispatch{}
			d.Buffers[0], d.Buffers[1], d.Buffers[2] = a.binding(), b.binding(), out.binding()
			sa, sb := make([]int64, nd), make([]int64, nd)
			for i := range sa {
				sa[i], sb[i] = int64(c.sa[i]), int64(c.sb[i])
			}
			dim0, dim1 := c.shape[nd-1], c.shape[nd-2]
			rest := n / (dim0 * dim1)
			if nd > 3 {
				shape := make([]int32, nd)
				for i, s := range c.shape {
					shape[i] = int32(s)
				}
				d.Buffers[3], d.Buffers[4], d.Buffers[5] = int32Mem(t, shape...).binding(), int64Mem(t, sa...).binding(), int64Mem(t, sb...).binding()
				d.Buffers[6] = scalarMem(t, int32(nd)).binding()
				dim0 = (dim0 + c.wpt - 1) / c.wpt
			} else {
				d.Buffers[3], d.Buffers[4] = int64Mem(t, sa...).binding(), int64Mem(t, sb...).binding()
			}
			d.Grid = ThreadsGrid([3]int{dim0, dim1, rest}, mlxBlockDims(dim0, dim1, rest))
			sampleRun(t, f, d, []*mem{out}, [][]float64{want}, [][]float64{zeros(n)})
		})
	}
}

// mlxReduce runs sum and max as reduce.cpp dispatches them: a row reduce
// of 42 contiguous rows of 300 (row_reduce_simple: rows > 64 elements, at
// least 32 rows; one SIMD-group per threadgroup, 4 rows per threadgroup,
// grid (32, ceil(42 / 4))), and an all reduce of 3000 elements in one
// threadgroup (all_reduce, at most 4 * 1024 elements: ceil(3000 / 4)
// rounded up to 768 threads). Max is exact; a float sum of n terms is
// within γ(n) Σ|x| of the exact sum.
func mlxReduce(t *testing.T, root string) {
	lib := mlxLazy(t, root, "reduce.metal")
	const rows, rowSize = 42, 300
	in := newF32(t, rows*rowSize)
	fillRandom(in.f32(), 31)
	x := in.f32()
	for _, op := range []string{"sum", "max"} {
		reduce := func(v []float32) (want, bound float64) {
			if op == "max" {
				m := math.Inf(-1)
				for _, e := range v {
					m = math.Max(m, float64(e))
				}
				return m, 0
			}
			s, a := 0.0, 0.0
			for _, e := range v {
				s += float64(e)
				a += math.Abs(float64(e))
			}
			return s, gamma(len(v)) * a
		}
		t.Run("row_reduce_simple_"+op, func(t *testing.T) {
			f := lazyFunction(t, lib, "row_reduce_simple_"+op+"float32")
			out := newF32(t, rows)
			want, bound := make([]float64, rows), make([]float64, rows)
			for r := range want {
				want[r], bound[r] = reduce(x[r*rowSize : (r+1)*rowSize])
			}
			d := &Dispatch{Grid: ThreadsGrid([3]int{32, (rows + 3) / 4, 1}, [3]int{32, 1, 1})}
			d.Buffers[0], d.Buffers[1] = in.binding(), out.binding()
			d.Buffers[2], d.Buffers[3] = scalarMem(t, uint64(rowSize)).binding(), scalarMem(t, int64(rows)).binding()
			sampleRun(t, f, d, []*mem{out}, [][]float64{want}, [][]float64{bound})
		})
		t.Run("all_reduce_"+op, func(t *testing.T) {
			f := lazyFunction(t, lib, "all_reduce_"+op+"float32")
			const n = 3000
			out := newF32(t, 1)
			w, b := reduce(x[:n])
			tg := ((n+3)/4 + 31) / 32 * 32
			d := &Dispatch{Grid: ThreadsGrid([3]int{tg, 1, 1}, [3]int{tg, 1, 1})}
			d.Buffers[0], d.Buffers[1] = in.binding(), out.binding()
			d.Buffers[2], d.Buffers[3] = scalarMem(t, uint64(n)).binding(), scalarMem(t, uint64(n)).binding()
			sampleRun(t, f, d, []*mem{out}, [][]float64{{w}}, [][]float64{{b}})
		})
		t.Run("all_reduce_2pass_"+op, func(t *testing.T) {
			// more than 4 * 1024 elements, fewer than 2^26 bytes: 128 rows
			// of ceil(n / 128) into an intermediate, in threadgroups of
			// ceil(row / 4) rounded up to 32 threads, then the same kernel
			// over the 128 partial results in one SIMD-group
			f := lazyFunction(t, lib, "all_reduce_"+op+"float32")
			const n, nRows = 20000, 32 * 4
			big, inter, out := newF32(t, n), newF32(t, nRows), newF32(t, 1)
			fillRandom(big.f32(), 32)
			w, b := reduce(big.f32())
			rowSize := (n + nRows - 1) / nRows
			tg := ((rowSize+3)/4 + 31) / 32 * 32
			partial, partialBound := make([]float64, nRows), make([]float64, nRows)
			for r := range partial {
				partial[r], partialBound[r] = reduce(big.f32()[r*rowSize : min((r+1)*rowSize, n)])
			}
			d := &Dispatch{Grid: ThreadsGrid([3]int{tg, nRows, 1}, [3]int{tg, 1, 1})}
			d.Buffers[0], d.Buffers[1] = big.binding(), inter.binding()
			d.Buffers[2], d.Buffers[3] = scalarMem(t, uint64(n)).binding(), scalarMem(t, uint64(rowSize)).binding()
			sampleRun(t, f, d, []*mem{inter}, [][]float64{partial}, [][]float64{partialBound})
			d2 := &Dispatch{Grid: ThreadsGrid([3]int{32, 1, 1}, [3]int{32, 1, 1})}
			d2.Buffers[0], d2.Buffers[1] = inter.binding(), out.binding()
			d2.Buffers[2], d2.Buffers[3] = scalarMem(t, uint64(nRows)).binding(), scalarMem(t, uint64(nRows)).binding()
			sampleRun(t, f, d2, []*mem{out}, [][]float64{{w}}, [][]float64{{b}})
		})
	}
}

// mlxLayerNorm runs layer_normfloat32 as normalization.cpp's
// LayerNorm::eval_gpu dispatches it: one threadgroup per row of 32 *
// ceil(ceil(axis / 8) / 32) threads, w and b strides 1. The kernel sums x,
// then (x - mean)^2, and scales: with n = axis the mean is within
// γ(n) mean|x|, the variance within γ(n+3) of its value (relative) plus
// what the mean's error adds, so each y is within γ(n+8) (|w| inv (mean|x|
// + 2|x - mean|) + |b|), inv = 1 / sqrt(var + eps).
//
// Rows of 1020 take 128 threads, of which only the last is partial. Rows
// of 700 take 96 threads, 88 of which hold elements: each of the other 8
// computes n = axis - 8 lid < 0 and sets thread_x[i] for i from n to 7, an
// index outside its 8-float array (thread_x[-28]), which the emulator
// reports as a fault. That sample logs the fault if reported, and is
// checked otherwise.
func mlxLayerNorm(t *testing.T, root string) {
	f := lazyFunction(t, mlxLazy(t, root, "layer_norm.metal"), "layer_normfloat32")
	for _, axis := range []int{1020, 700} {
		t.Run(fmt.Sprint(axis), func(t *testing.T) { mlxLayerNormRows(t, f, axis) })
	}
}

func mlxLayerNormRows(t *testing.T, f *Function, axis int) {
	const rows, eps = 3, 1e-5
	x, w, b, out := newF32(t, rows*axis), newF32(t, axis), newF32(t, axis), newF32(t, rows*axis)
	fillRandom(x.f32(), 41)
	fillRandom(w.f32(), 42)
	fillRandom(b.f32(), 43)
	want, bound := make([]float64, rows*axis), make([]float64, rows*axis)
	for r := 0; r < rows; r++ {
		row := x.f32()[r*axis : (r+1)*axis]
		mean, meanAbs := 0.0, 0.0
		for _, v := range row {
			mean += float64(v)
			meanAbs += math.Abs(float64(v))
		}
		mean /= float64(axis)
		meanAbs /= float64(axis)
		v := 0.0
		for _, e := range row {
			v += (float64(e) - mean) * (float64(e) - mean)
		}
		inv := 1 / math.Sqrt(v/float64(axis)+eps)
		for i, e := range row {
			c := float64(e) - mean
			want[r*axis+i] = c*inv*float64(w.f32()[i]) + float64(b.f32()[i])
			bound[r*axis+i] = gamma(axis+8) * (math.Abs(float64(w.f32()[i]))*inv*(meanAbs+2*math.Abs(c)) + math.Abs(float64(b.f32()[i])))
		}
	}
	tg := 32 * (((axis+7)/8 + 31) / 32)
	d := &Dispatch{Grid: ThreadsGrid([3]int{rows * tg, 1, 1}, [3]int{tg, 1, 1})}
	d.Buffers[0], d.Buffers[1], d.Buffers[2], d.Buffers[3] = x.binding(), w.binding(), b.binding(), out.binding()
	d.Buffers[4], d.Buffers[5] = scalarMem(t, float32(eps)).binding(), scalarMem(t, uint32(axis)).binding()
	d.Buffers[6], d.Buffers[7] = scalarMem(t, uint32(1)).binding(), scalarMem(t, uint32(1)).binding()
	if axis%8 != 0 && (axis+7)/8%32 != 0 {
		var ke *KernelError
		_, err := f.Run(d)
		if errors.As(err, &ke) && strings.Contains(ke.Msg, "out of bounds of the array") {
			t.Logf("rows of %d in threadgroups of %d: %v", axis, tg, err)
			return
		}
	}
	sampleRun(t, f, d, []*mem{out}, [][]float64{want}, [][]float64{bound})
}

// mlxRope runs rope_float32 (not the single-token kernel: 5 tokens) as
// rope.cpp dispatches it for a row-contiguous [B=2, N=3 heads, T=5, D=16]
// input rotating all 16 dimensions, forward, not traditional, with one
// offset (3) and base log2(10000) as float: function constants forward,
// traditional and hs_transpose (1, 2, 3), strides (T*D, D, 1) for input and
// output, grid (D/2, T, B * ceil(N / 4)) in get_block_dims threadgroups.
// The kernel computes inv_freq = exp2(-d base) with d = i / (D/2) and θ =
// (t + offset) inv_freq in float: θ is within 6 u θ of the value from the
// same float inputs, cos and sin within u + 6 u θ, and each output within
// (|x1| + |x2|) u (4 + 6 θ).
func mlxRope(t *testing.T, root string) {
	lib := mlxLazy(t, root, "rope.metal")
	f := specializeT(t, lib, "rope_float32", fcBool(1, true), fcBool(2, false), fcBool(3, false))
	const B, N, T, D, offset = 2, 3, 5, 16, 3
	base := float32(math.Log2(10000))
	in, out := newF32(t, B*N*T*D), newF32(t, B*N*T*D)
	fillRandom(in.f32(), 51)
	want, bound := make([]float64, B*N*T*D), make([]float64, B*N*T*D)
	for m := 0; m < B*N; m++ {
		for p := 0; p < T; p++ {
			for i := 0; i < D/2; i++ {
				theta := float64(p+offset) * math.Exp2(-float64(i)/(D/2)*float64(base))
				c, s := math.Cos(theta), math.Sin(theta)
				i1, i2 := m*T*D+p*D+i, m*T*D+p*D+i+D/2
				x1, x2 := float64(in.f32()[i1]), float64(in.f32()[i2])
				want[i1], want[i2] = x1*c-x2*s, x1*s+x2*c
				bound[i1] = (math.Abs(x1) + math.Abs(x2)) * unitRoundoff * (4 + 6*theta)
				bound[i2] = bound[i1]
			}
		}
	}
	d := &Dispatch{}
	d.Buffers[0], d.Buffers[1], d.Buffers[2] = in.binding(), out.binding(), int32Mem(t, offset).binding()
	d.Buffers[3] = scalarMem(t, float32(1)).binding()
	d.Buffers[4], d.Buffers[5] = int64Mem(t, T*D, D, 1).binding(), int64Mem(t, T*D, D, 1).binding()
	d.Buffers[6], d.Buffers[7] = scalarMem(t, int64(0)).binding(), scalarMem(t, int32(N)).binding()
	d.Buffers[10] = scalarMem(t, base).binding()
	dim0, dim1, dim2 := D/2, T, B*((N+3)/4)
	d.Grid = ThreadsGrid([3]int{dim0, dim1, dim2}, mlxBlockDims(dim0, dim1, dim2))
	sampleRun(t, f, d, []*mem{out}, [][]float64{want}, [][]float64{bound})
}

// dotBound returns a·b in float64 and γ(n+2) Σ|a_i b_i|, the bound on a
// float dot product of n terms computed in any order (the 2 for a final
// scaling or conversion).
func dotBound(a, b []float32) (dot, bound float64) {
	s := 0.0
	for i := range a {
		p := float64(a[i]) * float64(b[i])
		dot += p
		s += math.Abs(p)
	}
	return dot, gamma(len(a)+2) * s
}

// mlxGemv runs a [M=100, K=300] row-major float matrix times a vector, as
// matmul.cpp routes it (N == 1: gemv, not transposed; out_vector_len < 4096
// and K > 64: bm 4, bn 1, sm 1, sn 32, tm 4, tn 4; contiguous batch: nc0;
// no axpby): threadgroups (32, bn, bm), ceil(M / (bm sm tm)) of them,
// buffers 0 matrix, 1 vector, 3 out, 4-6 K, M, K (the matrix's leading
// dimension), 9-12 batch ndim 1, shape {1}, strides {0}, {0}.
func mlxGemv(t *testing.T, root string) {
	const name = "gemv_float32_bm4_bn1_sm1_sn32_tm4_tn4_nc0_axpby0"
	f := lazyFunction(t, mlxLazy(t, root, "gemv.metal"), name)
	const M, K = 100, 300
	mat, vec, out := newF32(t, M*K), newF32(t, K), newF32(t, M)
	fillRandom(mat.f32(), 61)
	fillRandom(vec.f32(), 62)
	want, bound := make([]float64, M), make([]float64, M)
	for i := range want {
		want[i], bound[i] = dotBound(mat.f32()[i*K:(i+1)*K], vec.f32())
	}
	d := &Dispatch{Grid: ThreadgroupsGrid([3]int{(M + 15) / 16, 1, 1}, [3]int{32, 1, 4})}
	d.Buffers[0], d.Buffers[1], d.Buffers[3] = mat.binding(), vec.binding(), out.binding()
	d.Buffers[4], d.Buffers[5], d.Buffers[6] = scalarMem(t, int32(K)).binding(), scalarMem(t, int32(M)).binding(), scalarMem(t, int32(K)).binding()
	d.Buffers[9], d.Buffers[10] = scalarMem(t, int32(1)).binding(), int32Mem(t, 1).binding()
	d.Buffers[11], d.Buffers[12] = int64Mem(t, 0).binding(), int64Mem(t, 0).binding()
	sampleRun(t, f, d, []*mem{out}, [][]float64{want}, [][]float64{bound})
}

// mlxGEMMParams mirrors mlx::steel::GEMMParams (steel/gemm/params.h).
type mlxGEMMParams struct {
	M, N, K, lda, ldb, ldd, tilesN, tilesM   int32
	batchStrideA, batchStrideB, batchStrideD int64
	swizzleLog, gemmKIterationsAligned       int32
	batchNdim                                int32
}

// mlxSteelGemm runs a float [M=70, K=40] x [K, N=80] product (row-major,
// not transposed) as matmul.cpp's steel_matmul_regular_axpby dispatches it
// on an M1-class GPU (architecture ending in 'g': float nn keeps bm 64, bn
// 64, bk 16, wm 2, wn 2; K / 16 < 8 iterations, so not split-K):
// steel_gemm_fused_nn_float32_float32_bm64_bn64_bk16_wm2_wn2 with function
// constants has_batch, use_out_source, do_axpby false and align_M, align_N,
// align_K false (70, 80, 40 are not multiples of 64, 64, 16), GEMMParams at
// buffer 4, threadgroups (32, wn, wm), grid (tiles_n, tiles_m, 1).
func mlxSteelGemm(t *testing.T, root string) {
	lib := mlxLazy(t, root, "steel/gemm/kernels/steel_gemm_fused.metal")
	f := specializeT(t, lib, "steel_gemm_fused_nn_float32_float32_bm64_bn64_bk16_wm2_wn2",
		fcBool(10, false), fcBool(100, false), fcBool(110, false), fcBool(200, false), fcBool(201, false), fcBool(202, false))
	const M, N, K = 70, 80, 40
	a, b, out := newF32(t, M*K), newF32(t, K*N), newF32(t, M*N)
	fillRandom(a.f32(), 71)
	fillRandom(b.f32(), 72)
	want, bound := make([]float64, M*N), make([]float64, M*N)
	col := make([]float32, K)
	for j := 0; j < N; j++ {
		for k := range col {
			col[k] = b.f32()[k*N+j]
		}
		for i := 0; i < M; i++ {
			want[i*N+j], bound[i*N+j] = dotBound(a.f32()[i*K:(i+1)*K], col)
		}
	}
	tn, tm := (N+63)/64, (M+63)/64
	p := mlxGEMMParams{M: M, N: N, K: K, lda: K, ldb: N, ldd: N, tilesN: int32(tn), tilesM: int32(tm),
		batchStrideD: M * N, gemmKIterationsAligned: K / 16, batchNdim: 1}
	d := &Dispatch{Grid: ThreadgroupsGrid([3]int{tn, tm, 1}, [3]int{32, 2, 2})}
	d.Buffers[0], d.Buffers[1], d.Buffers[3] = a.binding(), b.binding(), out.binding()
	d.Buffers[4] = scalarMem(t, p).binding()
	sampleRun(t, f, d, []*mem{out}, [][]float64{want}, [][]float64{bound})
}

// ggmlSamples runs ggml's mul_mv (f32 and f16 matrices), soft_max,
// rms_norm, rope (norm), cpy f32 to f16, gated_delta_net and leaky ReLU
// kernels from the lazy library lib.
func ggmlSamples(t *testing.T, lib *Library) {
	t.Run("mul_mv_f32_f32", func(t *testing.T) { ggmlMulMv(t, lib, false) })
	t.Run("mul_mv_f16_f32_4", func(t *testing.T) { ggmlMulMv(t, lib, true) })
	t.Run("soft_max_f32_4", func(t *testing.T) { ggmlSoftMax(t, lib, 1000) })
	t.Run("soft_max_f32", func(t *testing.T) { ggmlSoftMax(t, lib, 1001) })
	t.Run("rms_norm_f32_4", func(t *testing.T) { ggmlRMSNorm(t, lib) })
	t.Run("rope_norm_f32", func(t *testing.T) { ggmlRope(t, lib) })
	t.Run("cpy_f32_f16", func(t *testing.T) { ggmlCpy(t, lib) })
	t.Run("gated_delta_net_f32_2", func(t *testing.T) { ggmlGatedDeltaNet(t, lib) })
	t.Run("unary_leaky_relu_f32_f32_4", func(t *testing.T) { ggmlLeakyReLU(t, lib) })
}

// ggmlUnaryArgs mirrors ggml_metal_kargs_unary.
type ggmlUnaryArgs struct {
	ne00, ne01, ne02, ne03              int32
	nb00, nb01, nb02, nb03              uint64
	ne0, ne1, ne2, ne3                  int32
	nb0, nb1, nb2, nb3                  uint64
	slope, scale, bias, val, minv, maxv float32
}

// ggmlLeakyReLU runs leaky_relu(x, 0.1) of a contiguous [64, 5] tensor as
// ggml_metal_op_unary dispatches it: kernel_unary_f32_f32_4 (ne00 % 4 ==
// 0, so ne00 and ne0 in float4s) with function constants op 18
// (OP_UNARY_NUM_LEAKY_RELU) and cnt true (contiguous, fewer than 32768
// elements; FC_UNARY 1200 + 0, 1), one thread per float4: threadgroups (n
// / 4) of 1. The kernel computes TC(x > 0)*x + TC(x <= 0)*(x*slope) with TC
// float4: exactly x or x*slope rounded once, as float64's product rounded
// to float.
func ggmlLeakyReLU(t *testing.T, lib *Library) {
	f := specializeT(t, lib, "kernel_unary_f32_f32_4", fcShort(1200, 18), fcBool(1201, true))
	const ne00, ne01, slope = 64, 5, float32(0.1)
	src, dst := newF32(t, ne00*ne01), newF32(t, ne00*ne01)
	fillRandom(src.f32(), 141)
	want := make([]float64, ne00*ne01)
	for i, x := range src.f32() {
		if x > 0 {
			want[i] = float64(x)
		} else {
			want[i] = float64(float32(float64(x) * float64(slope)))
		}
	}
	args := ggmlUnaryArgs{ne00: ne00 / 4, ne01: ne01, ne02: 1, ne03: 1, nb00: 4, nb01: 4 * ne00, nb02: 4 * ne00 * ne01, nb03: 4 * ne00 * ne01,
		ne0: ne00 / 4, ne1: ne01, ne2: 1, ne3: 1, nb0: 4, nb1: 4 * ne00, nb2: 4 * ne00 * ne01, nb3: 4 * ne00 * ne01, slope: slope}
	d := &Dispatch{Grid: ThreadgroupsGrid([3]int{ne00 * ne01 / 4, 1, 1}, [3]int{1, 1, 1})}
	d.Buffers[0], d.Buffers[1], d.Buffers[2] = scalarMem(t, args).binding(), src.binding(), dst.binding()
	sampleRun(t, f, d, []*mem{dst}, [][]float64{want}, [][]float64{zeros(ne00 * ne01)})
}

// ggmlMulMvArgs mirrors ggml_metal_kargs_mul_mv (ggml-metal-impl.h).
type ggmlMulMvArgs struct {
	ne00, ne01, ne02       int32
	nb00, nb01, nb02, nb03 uint64
	ne10, ne11, ne12       int32
	nb10, nb11, nb12, nb13 uint64
	ne0, ne1, nr0          int32
	r2, r3                 int16
}

// ggmlMulMv runs src0 [ne00, ne01] (f32 or f16 rows) times src1 [ne00,
// ne11] (f32) as ggml_metal_op_mul_mat routes it: ne11 = 3 with ne00 % 128
// != 0 (f32, ne00 302: kernel_mul_mv_f32_f32) or ne11 = 1 (f16, ne00 256:
// kernel_mul_mv_f16_f32_4) is neither mul_mv_ext nor mul_mm, so
// ggml_metal_library_get_pipeline_mul_mv: nsg min(4, ceil(ne00 / 128)), nr0
// 2, nr1 1, 256 bytes of threadgroup memory, function constants nsg, ne12,
// r2, r3 (FC_MUL_MV 600 + 0, 2, 3, 4, shorts); threadgroups (ceil(ne01 /
// nr0), ceil(ne11 / nr1), ne12 ne13) of (32, nsg). Each dot product is
// within γ(ne00+2) Σ|a b| (half values convert to float exactly).
//
// The kernel reads its nr0 rows without checking them against ne01, so
// with ne01 odd (37, 21) the last threadgroup reads one row past src0 and
// discards what it computes from it; in ggml's buffers the tensor is
// followed by others. Here src0's binding extends one row past the tensor,
// filled with NaN, which must not reach dst.
func ggmlMulMv(t *testing.T, lib *Library, f16 bool) {
	ne00, ne01, ne11, name, esz := 302, 37, 3, "kernel_mul_mv_f32_f32", 4
	if f16 {
		ne00, ne01, ne11, name, esz = 256, 21, 1, "kernel_mul_mv_f16_f32_4", 2
	}
	nsg := min(4, (ne00+127)/128)
	f := specializeT(t, lib, name, fcShort(600, int16(nsg)), fcShort(602, 1), fcShort(603, 1), fcShort(604, 1))
	src0, src1, dst := newMem(t, esz*ne00*(ne01+1)), newF32(t, ne00*ne11), newF32(t, ne01*ne11)
	for i := range src0.u16() {
		src0.u16()[i] = 0x7fff // a NaN in f32 rows and in f16 rows alike
	}
	a := make([]float32, ne00*ne01)
	fillRandom(a, 81)
	if f16 {
		for i, v := range a {
			h := half.ToFloat16(v)
			src0.u16()[i] = uint16(h)
			a[i] = h.Float32()
		}
	} else {
		copy(src0.f32(), a)
	}
	fillRandom(src1.f32(), 82)
	want, bound := make([]float64, ne01*ne11), make([]float64, ne01*ne11)
	for j := 0; j < ne11; j++ {
		for i := 0; i < ne01; i++ {
			want[j*ne01+i], bound[j*ne01+i] = dotBound(a[i*ne00:(i+1)*ne00], src1.f32()[j*ne00:(j+1)*ne00])
		}
	}
	nb01, nb11 := uint64(esz*ne00), uint64(4*ne00)
	args := ggmlMulMvArgs{ne00: int32(ne00), ne01: int32(ne01), ne02: 1, nb00: uint64(esz), nb01: nb01, nb02: nb01 * uint64(ne01), nb03: nb01 * uint64(ne01),
		ne10: int32(ne00), ne11: int32(ne11), ne12: 1, nb10: 4, nb11: nb11, nb12: nb11 * uint64(ne11), nb13: nb11 * uint64(ne11),
		ne0: int32(ne01), ne1: int32(ne11), nr0: 2, r2: 1, r3: 1}
	d := &Dispatch{Grid: ThreadgroupsGrid([3]int{(ne01 + 1) / 2, ne11, 1}, [3]int{32, nsg, 1})}
	d.Buffers[0], d.Buffers[1], d.Buffers[2], d.Buffers[3] = scalarMem(t, args).binding(), src0.binding(), src1.binding(), dst.binding()
	d.ThreadgroupMemoryLength[0] = 32 * 4 * 2
	sampleRun(t, f, d, []*mem{dst}, [][]float64{want}, [][]float64{bound})
}

// ggmlSoftMaxArgs mirrors ggml_metal_kargs_soft_max.
type ggmlSoftMaxArgs struct {
	ne00, ne01, ne02 int32
	nb01, nb02, nb03 uint64
	ne11, ne12, ne13 int32
	nb11, nb12, nb13 uint64
	nb1, nb2, nb3    uint64
	scale, maxBias   float32
	m0, m1           float32
	nHeadLog2        int32
}

// ggmlSoftMax runs soft_max(x scale + mask) over rows of ne00 (two rows,
// two heads) with an f32 mask [ne00, 2] and scale 0.5, no ALiBi, no sinks,
// as ggml_metal_op_soft_max dispatches it: kernel_soft_max_f32_4 if ne00 %
// 4 == 0 (1000), else kernel_soft_max_f32 (1001), src2 bound to src0 (no
// sinks), threadgroups (ne01, ne02, ne03) of nth threads, nth doubled from
// 32 while nth < ne00 / 4 (ne00 without _4) and nth ne01 ne02 ne03 < 256
// (here 64), 128 bytes of threadgroup memory. exp is within 2u
// of e^z, z = x scale + mask - max is within u |z| + u |max|, and the sum
// of n terms within γ(n): each output is within (γ(n+4) + 2u (|z| + |max|))
// of its value (relative).
func ggmlSoftMax(t *testing.T, lib *Library, ne00 int) {
	name, per := "kernel_soft_max_f32_4", 4
	if ne00%4 != 0 {
		name, per = "kernel_soft_max_f32", 1
	}
	f := lazyFunction(t, lib, name)
	const ne01, ne02, scale = 2, 2, 0.5
	x, mask, dst := newF32(t, ne00*ne01*ne02), newF32(t, ne00*ne01), newF32(t, ne00*ne01*ne02)
	fillRandom(x.f32(), 91)
	fillRandom(mask.f32(), 92)
	want, bound := make([]float64, ne00*ne01*ne02), make([]float64, ne00*ne01*ne02)
	z := make([]float64, ne00)
	for r := 0; r < ne01*ne02; r++ {
		row, mrow := x.f32()[r*ne00:(r+1)*ne00], mask.f32()[(r%ne01)*ne00:]
		m := math.Inf(-1)
		for i := range z {
			z[i] = float64(row[i])*scale + float64(mrow[i])
			m = math.Max(m, z[i])
		}
		s := 0.0
		for i := range z {
			s += math.Exp(z[i] - m)
		}
		for i := range z {
			y := math.Exp(z[i]-m) / s
			want[r*ne00+i] = y
			bound[r*ne00+i] = y * (gamma(ne00+4) + 2*unitRoundoff*(math.Abs(z[i]-m)+math.Abs(m)))
		}
	}
	nth := 32
	for nth < ne00/per && nth*ne01*ne02 < 256 {
		nth *= 2
	}
	nb1 := uint64(4 * ne00)
	args := ggmlSoftMaxArgs{ne00: int32(ne00), ne01: ne01, ne02: ne02, nb01: nb1, nb02: nb1 * ne01, nb03: nb1 * ne01 * ne02,
		ne11: ne01, ne12: 1, ne13: 1, nb11: nb1, nb12: nb1 * ne01, nb13: nb1 * ne01,
		nb1: nb1, nb2: nb1 * ne01, nb3: nb1 * ne01 * ne02, scale: scale, m0: 1, m1: 1, nHeadLog2: 2}
	d := &Dispatch{Grid: ThreadgroupsGrid([3]int{ne01, ne02, 1}, [3]int{nth, 1, 1})}
	d.Buffers[0], d.Buffers[1], d.Buffers[2] = scalarMem(t, args).binding(), x.binding(), mask.binding()
	d.Buffers[3], d.Buffers[4] = x.binding(), dst.binding()
	d.ThreadgroupMemoryLength[0] = 32 * 4
	sampleRun(t, f, d, []*mem{dst}, [][]float64{want}, [][]float64{bound})
}

// ggmlNormArgs mirrors ggml_metal_kargs_norm.
type ggmlNormArgs struct {
	ne00, ne00t      int32
	nb1, nb2, nb3    uint64
	eps              float32
	nef1, nef2, nef3 [3]int32
	nbf1, nbf2, nbf3 [3]uint64
}

// ggmlRMSNorm runs rms_norm over 3 rows of 1000 (no fusion) as
// ggml_metal_op_norm dispatches it: kernel_rms_norm_f32_4 (ne0 % 4 == 0,
// ne00_t = 250), src1_0 and src1_1 bound to src0, nth doubled from 32
// while below ne00_t and the pipeline's limit (1024), capped at ne00_t
// rounded up to 32 (256), 128 bytes of threadgroup memory, threadgroups
// (ne01, ne02, ne03). The sum of squares of n terms is within γ(n+1) (relative),
// so each y = x / sqrt(mean + eps) is within γ(n+8) |y|.
//
// Without fusion the host sets only nef1[0], nef2[0], nef3[0]: the kernel
// still computes i01 % nef1[1] (and nef2, nef3) for the f0 and f1 pointers
// it does not read, a remainder by zero, which the GPU leaves unspecified
// and the emulator reports as a fault. The sample runs it as the host does
// first, and if that fault is reported, again with nef[1] and nef[2] 1.
func ggmlRMSNorm(t *testing.T, lib *Library) {
	f := lazyFunction(t, lib, "kernel_rms_norm_f32_4")
	const ne00, ne01, eps = 1000, 3, 1e-6
	x, dst := newF32(t, ne00*ne01), newF32(t, ne00*ne01)
	fillRandom(x.f32(), 101)
	want, bound := make([]float64, ne00*ne01), make([]float64, ne00*ne01)
	for r := 0; r < ne01; r++ {
		row := x.f32()[r*ne00 : (r+1)*ne00]
		ss := 0.0
		for _, v := range row {
			ss += float64(v) * float64(v)
		}
		scale := 1 / math.Sqrt(ss/ne00+float64(float32(eps)))
		for i, v := range row {
			want[r*ne00+i] = float64(v) * scale
			bound[r*ne00+i] = gamma(ne00+8) * math.Abs(want[r*ne00+i])
		}
	}
	const ne00t, nb1 = ne00 / 4, 4 * ne00
	nth := 32
	for nth < ne00t && nth < 1024 {
		nth *= 2
	}
	nth = min(nth, (ne00t+31)/32*32)
	args := ggmlNormArgs{ne00: ne00, ne00t: ne00t, nb1: nb1, nb2: nb1 * ne01, nb3: nb1 * ne01, eps: eps,
		nef1: [3]int32{ne01}, nef2: [3]int32{1}, nef3: [3]int32{1},
		nbf1: [3]uint64{nb1}, nbf2: [3]uint64{nb1 * ne01}, nbf3: [3]uint64{nb1 * ne01}}
	d := &Dispatch{Grid: ThreadgroupsGrid([3]int{ne01, 1, 1}, [3]int{nth, 1, 1})}
	d.Buffers[0], d.Buffers[1], d.Buffers[2] = scalarMem(t, args).binding(), x.binding(), x.binding()
	d.Buffers[3], d.Buffers[4] = x.binding(), dst.binding()
	d.ThreadgroupMemoryLength[0] = 32 * 4
	var ke *KernelError
	if _, err := f.Run(d); errors.As(err, &ke) && strings.Contains(ke.Msg, "division or remainder by zero") {
		t.Logf("as the host sets it up: %v; again with nef[1], nef[2] = 1", err)
		for i := 1; i < 3; i++ {
			args.nef1[i], args.nef2[i], args.nef3[i] = 1, 1, 1
		}
		d.Buffers[0] = scalarMem(t, args).binding()
	} else if err != nil {
		t.Fatal(err)
	}
	sampleRun(t, f, d, []*mem{dst}, [][]float64{want}, [][]float64{bound})
}

// ggmlRopeArgs mirrors ggml_metal_kargs_rope.
type ggmlRopeArgs struct {
	ne00, ne01, ne02, ne03                               int32
	nb00, nb01, nb02, nb03                               uint64
	ne0, ne1, ne2, ne3                                   int32
	nb0, nb1, nb2, nb3                                   uint64
	nPast, nDims, nOffs, nCtxOrig                        int32
	freqBase, freqScale, extFactor, attnFactor, betaFast float32
	betaSlow                                             float32
	sect0, sect1, sect2, sect3                           int32
	src2, inplace                                        bool
}

// ggmlRope runs normal-mode rope (mode 0) of src0 [64 head dims, 3 heads, 4
// tokens] rotating the first 48 dimensions, positions {7, 2, 0, 11}, base
// 10000, no YaRN (ext_factor 0, freq_scale 1, attn_factor 1), not in
// place, as ggml_metal_op_rope dispatches it: kernel_rope_norm_f32 with
// function constants imrope and is_back false (FC_ROPE 800 + 0, 1),
// src2 bound to src0, threadgroups (ne01, ne02, ne03) of min(1024, ne00)
// threads. θ = p base^(-i/n_dims) computed with pow in float is within
// u θ (|ln base| i/n_dims + 4) of its value, so each output is within
// (|x0| + |x1|) u (4 + θ (|ln base| + 4)); the channels past n_dims are
// copied exactly.
func ggmlRope(t *testing.T, lib *Library) {
	f := specializeT(t, lib, "kernel_rope_norm_f32", fcBool(800, false), fcBool(801, false))
	const ne00, ne01, ne02, nDims, base = 64, 3, 4, 48, 10000
	pos := []int32{7, 2, 0, 11}
	src0, dst := newF32(t, ne00*ne01*ne02), newF32(t, ne00*ne01*ne02)
	fillRandom(src0.f32(), 111)
	x := src0.f32()
	want, bound := make([]float64, len(x)), make([]float64, len(x))
	for i2 := 0; i2 < ne02; i2++ {
		for i1 := 0; i1 < ne01; i1++ {
			for i0 := 0; i0 < ne00; i0 += 2 {
				j := (i2*ne01+i1)*ne00 + i0
				x0, x1 := float64(x[j]), float64(x[j+1])
				if i0 >= nDims {
					want[j], want[j+1] = x0, x1
					continue
				}
				theta := float64(pos[i2]) * math.Pow(base, -float64(i0)/nDims)
				c, s := math.Cos(theta), math.Sin(theta)
				want[j], want[j+1] = x0*c-x1*s, x0*s+x1*c
				bound[j] = (math.Abs(x0) + math.Abs(x1)) * unitRoundoff * (4 + theta*(math.Log(base)+4))
				bound[j+1] = bound[j]
			}
		}
	}
	const nb1, nb2 = 4 * ne00, 4 * ne00 * ne01
	args := ggmlRopeArgs{ne00: ne00, ne01: ne01, ne02: ne02, ne03: 1, nb00: 4, nb01: nb1, nb02: nb2, nb03: nb2 * ne02,
		ne0: ne00, ne1: ne01, ne2: ne02, ne3: 1, nb0: 4, nb1: nb1, nb2: nb2, nb3: nb2 * ne02,
		nDims: nDims, nCtxOrig: 4096, freqBase: base, freqScale: 1, attnFactor: 1, betaFast: 32, betaSlow: 1}
	d := &Dispatch{Grid: ThreadgroupsGrid([3]int{ne01, ne02, 1}, [3]int{min(1024, ne00), 1, 1})}
	d.Buffers[0], d.Buffers[1], d.Buffers[2] = scalarMem(t, args).binding(), src0.binding(), int32Mem(t, pos...).binding()
	d.Buffers[3], d.Buffers[4] = src0.binding(), dst.binding()
	sampleRun(t, f, d, []*mem{dst}, [][]float64{want}, [][]float64{bound})
}

// ggmlCpyArgs mirrors ggml_metal_kargs_cpy.
type ggmlCpyArgs struct {
	nk0, ne00, ne01, ne02, ne03 int64
	nb00, nb01, nb02, nb03      uint64
	ne0, ne1, ne2, ne3          int64
	nb0, nb1, nb2, nb3          uint64
}

// ggmlCpy copies f32 [ne00, ne01, ne02] to f16 as ggml_metal_op_cpy
// dispatches it, twice: rows of 300 (nth min(nk0 ne01, 256) = 256, nk0 >
// nth, so one row per threadgroup, nw0 = 2 threadgroups per row: grid
// (2 ne01, ne02)) and rows of 20 (rows batched: nrptg = ceil(256 / 20) =
// 13, 12 after the 256 cap, nth 20: grid (ceil(ne01 / 12), ne02) of (20,
// 12)). Conversion to half rounds to nearest even, as half.ToFloat16 does:
// the results are exact.
func ggmlCpy(t *testing.T, lib *Library) {
	f := lazyFunction(t, lib, "kernel_cpy_f32_f16")
	for _, sh := range [][3]int{{300, 5, 2}, {20, 30, 2}} {
		ne00, ne01, ne02 := sh[0], sh[1], sh[2]
		n := ne00 * ne01 * ne02
		src, dst := newF32(t, n), newMem(t, 2*n)
		fillRandom(src.f32(), 121)
		for i := range src.f32() {
			src.f32()[i] *= 1000 // past half's precision, to see the rounding
		}
		nk0 := ne00
		nth := min(nk0*ne01, 256)
		nrptg := 1
		if nth > nk0 {
			nrptg = (nth + nk0 - 1) / nk0
			nth = nk0
			if nrptg*nth > 256 {
				nrptg--
			}
		}
		nth = min(nth, nk0)
		nw0 := 1
		if nrptg == 1 {
			nw0 = (nk0 + nth - 1) / nth
		}
		args := ggmlCpyArgs{nk0: int64(nk0), ne00: int64(ne00), ne01: int64(ne01), ne02: int64(ne02), ne03: 1,
			nb00: 4, nb01: uint64(4 * ne00), nb02: uint64(4 * ne00 * ne01), nb03: uint64(4 * n),
			ne0: int64(ne00), ne1: int64(ne01), ne2: int64(ne02), ne3: 1,
			nb0: 2, nb1: uint64(2 * ne00), nb2: uint64(2 * ne00 * ne01), nb3: uint64(2 * n)}
		d := &Dispatch{Grid: ThreadgroupsGrid([3]int{nw0 * (ne01 + nrptg - 1) / nrptg, ne02, 1}, [3]int{nth, nrptg, 1})}
		d.Buffers[0], d.Buffers[1], d.Buffers[2] = scalarMem(t, args).binding(), src.binding(), dst.binding()
		runOrders(t, f, d, func() {
			for i := range dst.u16() {
				dst.u16()[i] = halfPoison
			}
		}, func(o Order) {
			for i, g := range dst.u16() {
				if g == halfPoison {
					t.Fatalf("%v order, shape %v: element %d not written", o, sh, i)
				}
				if w := uint16(half.ToFloat16(src.f32()[i])); g != w {
					t.Fatalf("%v order, shape %v: element %d = %#04x, want %#04x (%v)", o, sh, i, g, w, src.f32()[i])
				}
			}
		})
		t.Logf("kernel_cpy_f32_f16, shape %v, threadgroups of (%d, %d): %d elements matched exactly in both orders", sh, nth, nrptg, n)
	}
}

// ggmlGDNArgs mirrors ggml_metal_kargs_gated_delta_net.
type ggmlGDNArgs struct {
	ne00, ne01, ne02, ne03 int32
	nb00, nb01, nb02, nb03 uint64
	ne10, ne11, ne12, ne13 int32
	nb10, nb11, nb12, nb13 uint64
	ne20, ne21, ne22, ne23 int32
	nb20, nb21, nb22, nb23 uint64
	ns02, ns12, ns22       int32
	ne0, ne1, ne2, ne3     int32
	nb0, nb1, nb2, nb3     uint64
}

// ggmlGatedDeltaNet runs ggml's gated delta rule (scalar gate, one state
// snapshot: K = 1) for S_v = 64, H = 2 heads, T = 4 tokens, 2 sequences
// as ggml_metal_op_gated_delta_net dispatches it: nsg = S_v / 32 = 2, so
// kernel_gated_delta_net_f32_2 with function constants ne20 = 64, ne30 = 1,
// K = 1 (FC_GATED_DELTA_NET 1600 + 0, 1, 2, shorts), buffers args, q, k,
// v, g, beta, state, dst, threadgroups (S_v / nsg, H, n_seqs) of (32, nsg).
// dst holds the outputs [S_v H, T, n_seqs] and then the final state. Each
// state row (the kernel's M[i20][:], S[:][i20]) evolves as s = s e^g;
// d = (v - s·k) beta; s += k d; y = (s·q) / sqrt(S_v). The bounds are a
// running error analysis in float64 of the same steps in float: every
// rounding adds u of its result, a dot product of n terms γ(n) of the sum
// of its terms' magnitudes, exp 2u.
func ggmlGatedDeltaNet(t *testing.T, lib *Library) {
	const S, H, T, B, nsg = 64, 2, 4, 2, 2
	f := specializeT(t, lib, "kernel_gated_delta_net_f32_2", fcShort(1600, S), fcShort(1601, 1), fcShort(1602, 1))
	q, k, v := newF32(t, S*H*T*B), newF32(t, S*H*T*B), newF32(t, S*H*T*B)
	g, beta, state := newF32(t, H*T*B), newF32(t, H*T*B), newF32(t, S*S*H*B)
	dst := newF32(t, S*H*T*B+S*S*H*B)
	fillRandom(q.f32(), 131)
	fillRandom(k.f32(), 132)
	fillRandom(v.f32(), 133)
	fillRandom(g.f32(), 134)
	fillRandom(beta.f32(), 135)
	fillRandom(state.f32(), 136)
	// q and k of unit norm, gates e^g < 1 and beta in (0, 1), as a model's
	// layer gives them
	for _, m := range []*mem{q, k} {
		x := m.f32()
		for i := 0; i < len(x); i += S {
			n := 0.0
			for _, e := range x[i : i+S] {
				n += float64(e) * float64(e)
			}
			for j := i; j < i+S; j++ {
				x[j] = float32(float64(x[j]) / math.Sqrt(n))
			}
		}
	}
	for i := range g.f32() {
		g.f32()[i] = -float32(math.Abs(float64(g.f32()[i]))) / 4
		beta.f32()[i] = float32(1 / (1 + math.Exp(-float64(beta.f32()[i]))))
	}
	for i := range state.f32() {
		state.f32()[i] /= 8
	}
	u := unitRoundoff
	want, bound := make([]float64, len(dst.f32())), make([]float64, len(dst.f32()))
	attn := S * H * T * B
	s, e := make([]float64, S), make([]float64, S) // a state row and its error bound
	for b := 0; b < B; b++ {
		for h := 0; h < H; h++ {
			for r := 0; r < S; r++ { // state row r: S[:][r], output component r
				base := ((b*H+h)*S + r) * S
				for j := range s {
					s[j], e[j] = float64(state.f32()[base+j]), 0
				}
				for tk := 0; tk < T; tk++ {
					tok := (b*T+tk)*H + h // token and head index of g, beta and the rows of q, k, v
					qr, kr := q.f32()[tok*S:(tok+1)*S], k.f32()[tok*S:(tok+1)*S]
					ge := math.Exp(float64(g.f32()[tok]))
					sk, skAbs, skErr := 0.0, 0.0, 0.0
					for j := range s {
						s[j] *= ge
						e[j] = e[j]*ge + 3*u*math.Abs(s[j])
						kj := float64(kr[j])
						sk += s[j] * kj
						skAbs += math.Abs(s[j] * kj)
						skErr += e[j] * math.Abs(kj)
					}
					skErr += gamma(S) * skAbs
					vb := float64(v.f32()[tok*S+r])
					bt := float64(beta.f32()[tok])
					dd := (vb - sk) * bt
					dErr := (skErr+u*math.Abs(vb-sk))*bt + u*math.Abs(dd)
					y, yAbs, yErr := 0.0, 0.0, 0.0
					for j := range s {
						kj, qj := float64(kr[j]), float64(qr[j])
						s[j] += kj * dd
						e[j] += math.Abs(kj)*dErr + 2*u*math.Abs(s[j]) + u*math.Abs(kj*dd)
						y += s[j] * qj
						yAbs += math.Abs(s[j] * qj)
						yErr += e[j] * math.Abs(qj)
					}
					yErr += gamma(S) * yAbs
					sc := 1 / math.Sqrt(S)
					o := (b*T+tk)*H*S + h*S + r
					want[o], bound[o] = y*sc, (yErr+3*u*math.Abs(y))*sc
				}
				for j := range s {
					want[attn+base+j], bound[attn+base+j] = s[j], e[j]
				}
			}
		}
	}
	const tokenBytes, rowBytes = 4 * S * H, 4 * S
	args := ggmlGDNArgs{
		ne00: S, ne01: H, ne02: T, ne03: B, nb00: 4, nb01: rowBytes, nb02: tokenBytes, nb03: tokenBytes * T,
		ne10: S, ne11: H, ne12: T, ne13: B, nb10: 4, nb11: rowBytes, nb12: tokenBytes, nb13: tokenBytes * T,
		ne20: S, ne21: H, ne22: T, ne23: B, nb20: 4, nb21: rowBytes, nb22: tokenBytes, nb23: tokenBytes * T,
		ns02: S * H, ns12: S * H, ns22: S * H,
		ne0: S * H, ne1: T*B + S*B, ne2: 1, ne3: 1, nb0: 4, nb1: 4 * S * H, nb2: uint64(4 * S * H * (T*B + S*B)), nb3: uint64(4 * S * H * (T*B + S*B)),
	}
	d := &Dispatch{Grid: ThreadgroupsGrid([3]int{S / nsg, H, B}, [3]int{32, nsg, 1})}
	d.Buffers[0], d.Buffers[1], d.Buffers[2], d.Buffers[3] = scalarMem(t, args).binding(), q.binding(), k.binding(), v.binding()
	d.Buffers[4], d.Buffers[5], d.Buffers[6], d.Buffers[7] = g.binding(), beta.binding(), state.binding(), dst.binding()
	sampleRun(t, f, d, []*mem{dst}, [][]float64{want}, [][]float64{bound})
}
