package ops

import (
	"github.com/puremetal/puremetal/kernels"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/tensor"
)

// MatVecMaxRows is the most rows of x [Kernels.MatVec] takes, and the
// largest n for which [Kernels.Linear] chooses it. The matvec reads each
// weight once for all its rows, so up to here a product costs about what
// its weight bytes cost, as decode must; beyond, the arithmetic per weight
// byte grows with n and the tiled matmul's simdgroup_matrix products win,
// at the price of reading the weights once per 64 rows of x. (llama.cpp
// switches from its matvec kernels to its matmul at about the same number
// of rows.)
const MatVecMaxRows = kernels.MatVecMaxRows

// matmulParams is matmul.metal's matmul_params, bound at index 4.
type matmulParams struct {
	n, in, out, residual uint32
	experts, topK        uint32
	xPerSlot, _          uint32
}

// The buffer indices of matmul.metal.
const (
	matmulW, matmulX, matmulY, matmulR, matmulParamsIndex, matmulIDs = 0, 1, 2, 3, 4, 5
)

// Linear encodes y = x W^T, or y = r + x W^T with a residual r (a zero
// View for none): x [n][in], W [out][in] as HF stores nn.Linear, y and r
// [n][out]. It dispatches [Kernels.MatVec] for n up to [MatVecMaxRows] and
// [Kernels.MatMul] above, and refuses what they refuse.
func (k *Kernels) Linear(enc *mtl.ComputeCommandEncoder, w, x, r, y tensor.View, n, in, out int) error {
	if n <= MatVecMaxRows {
		return k.MatVec(enc, w, x, r, y, n, in, out)
	}
	return k.MatMul(enc, w, x, r, y, n, in, out)
}

// MatVec encodes y = x W^T (+ r) for n = 1 .. [MatVecMaxRows] rows of x
// with the matvec kernel, which reads each weight once for all n rows.
//
// W is [out][in] of type f32, f16 or bf16 and may be one matrix of a
// larger tensor (an expert of a stacked [E][out][in] one: a view with an
// offset); x is [n][in] of type A (f32, f16 or bf16); y and r, when given,
// are [n][out] of type A. r may be y itself, exactly (the same buffer,
// offset and length): the residual is added in place. The products
// accumulate in float and y is rounded once.
//
// It refuses, encoding nothing: n outside 1 .. MatVecMaxRows, in or out
// below 1, a type other than those, a view whose length is not the one the
// shape implies, a buffer not of the Kernels' device or released, an
// element count at or beyond 2^32, and y sharing a byte with x, W or an r
// that is not y itself.
func (k *Kernels) MatVec(enc *mtl.ComputeCommandEncoder, w, x, r, y tensor.View, n, in, out int) error {
	if n > MatVecMaxRows {
		return tensor.Invalid("n", "%d rows of x, the matvec takes 1 to %d (Linear chooses the matmul above)", n, MatVecMaxRows)
	}
	return k.linear(enc, kernels.MatVecOf, w, x, r, y, n, in, out,
		mtl.Sz(ceilDiv(out, kernels.MatVecTileRows), 1, 1), mtl.Sz(32, kernels.MatVecSIMDGroups, 1))
}

// MatMul encodes y = x W^T (+ r) with the tiled matmul kernel, for any n:
// tiles of [kernels.MatMulTileRows] rows of x by
// [kernels.MatMulTileCols] rows of W, each weight read once per tile row
// (ceil(n / 64) times in all). Its arguments and refusals are
// [Kernels.MatVec]'s, without the limit on n.
func (k *Kernels) MatMul(enc *mtl.ComputeCommandEncoder, w, x, r, y tensor.View, n, in, out int) error {
	return k.linear(enc, kernels.MatMulOf, w, x, r, y, n, in, out,
		mtl.Sz(ceilDiv(out, kernels.MatMulTileCols), ceilDiv(n, kernels.MatMulTileRows), 1), mtl.Sz(kernels.MatMulThreads, 1, 1))
}

// checkLinear checks the arguments of a dense product.
func (k *Kernels) checkLinear(w, x, r, y tensor.View, n, in, out int) error {
	if err := positive(dim{"n", n}, dim{"in", in}, dim{"out", out}); err != nil {
		return err
	}
	if err := floatTypes(named{"W", w}, named{"X", x}); err != nil {
		return err
	}
	if r == y {
		r = tensor.View{} // in place: y's checks cover r
	}
	return tensor.Check(k.dev,
		tensor.Arg{Name: "W", View: w, Type: w.Type, Len: elems(out, in), Formula: "out*in"},
		tensor.Arg{Name: "X", View: x, Type: x.Type, Len: elems(n, in), Formula: "n*in"},
		tensor.Arg{Name: "R", View: r, Type: x.Type, TypeFrom: "X's type", Len: elems(n, out), Formula: "n*out", Optional: true},
		tensor.Arg{Name: "Y", View: y, Type: x.Type, TypeFrom: "X's type", Len: elems(n, out), Formula: "n*out", Written: true},
	)
}

// linear checks the arguments of a dense product and encodes it with the
// kernel entry names for W's and X's types: the pipeline, the views and
// the parameters, then groups threadgroups of threads threads.
func (k *Kernels) linear(enc *mtl.ComputeCommandEncoder, entry func(w, a tensor.ElemType) string, w, x, r, y tensor.View, n, in, out int, groups, threads mtl.Size) error {
	if err := k.checkLinear(w, x, r, y, n, in, out); err != nil {
		return err
	}
	if err := k.setProduct(enc, entry(w.Type, x.Type), w, x, y); err != nil {
		return err
	}
	p := matmulParams{n: uint32(n), in: uint32(in), out: uint32(out)}
	if !r.IsZero() {
		bind(enc, r, matmulR)
		p.residual = 1
	} else {
		bind(enc, y, matmulR) // bound but not read
	}
	mtl.SetValue(enc, p, matmulParamsIndex)
	enc.DispatchThreadgroups(groups, threads)
	return nil
}

// Gather is the shape of a gathered matvec of stacked experts
// ([Kernels.GatherMatVec]).
type Gather struct {
	Tokens  int // n: rows of x, rows of ids
	TopK    int // k: the experts each token selected
	Experts int // E: the matrices of W
	In, Out int // each expert's matrix is [Out][In]
	// XPerSlot says x holds one row per selected expert, [n][k][In] (the
	// input of a down projection); otherwise x is [n][In], one row per
	// token shared by its k experts.
	XPerSlot bool
}

// GatherMatVec encodes the products of stacked experts a router chose:
// y[t][j] = x[t] W[ids[t][j]]^T (x[t][j] with g.XPerSlot), W [E][out][in]
// of type f32, f16 or bf16, x of type A (f32, f16 or bf16), ids U32
// [n][k] (on the GPU: the host never reads them), y [n][k][out] of type A.
// Each (token, expert) pair reads only its expert's matrix, once, as a
// matvec does. An id at or beyond E reads nothing and gives a row of
// zeros in y.
//
// It refuses, encoding nothing: any of g's numbers below 1, a type other
// than those, a view whose length is not the one the shape implies, a
// buffer not of the Kernels' device or released, an element count at or
// beyond 2^32, and y sharing a byte with another argument.
func (k *Kernels) GatherMatVec(enc *mtl.ComputeCommandEncoder, w, x, ids, y tensor.View, g Gather) error {
	if err := positive(dim{"Tokens", g.Tokens}, dim{"TopK", g.TopK}, dim{"Experts", g.Experts}, dim{"In", g.In}, dim{"Out", g.Out}); err != nil {
		return err
	}
	if err := floatTypes(named{"W", w}, named{"X", x}); err != nil {
		return err
	}
	xLen, xFormula := elems(g.Tokens, g.In), "Tokens*In"
	if g.XPerSlot {
		xLen, xFormula = elems(g.Tokens, g.TopK, g.In), "Tokens*TopK*In"
	}
	if err := tensor.Check(k.dev,
		tensor.Arg{Name: "W", View: w, Type: w.Type, Len: elems(g.Experts, g.Out, g.In), Formula: "Experts*Out*In"},
		tensor.Arg{Name: "X", View: x, Type: x.Type, Len: xLen, Formula: xFormula},
		tensor.Arg{Name: "IDs", View: ids, Type: tensor.U32, Len: elems(g.Tokens, g.TopK), Formula: "Tokens*TopK"},
		tensor.Arg{Name: "Y", View: y, Type: x.Type, TypeFrom: "X's type", Len: elems(g.Tokens, g.TopK, g.Out), Formula: "Tokens*TopK*Out", Written: true},
	); err != nil {
		return err
	}
	if err := k.setProduct(enc, kernels.GatherMatVecOf(w.Type, x.Type), w, x, y); err != nil {
		return err
	}
	bind(enc, ids, matmulIDs)
	p := matmulParams{n: uint32(g.Tokens), in: uint32(g.In), out: uint32(g.Out), experts: uint32(g.Experts), topK: uint32(g.TopK)}
	if g.XPerSlot {
		p.xPerSlot = 1
	}
	mtl.SetValue(enc, p, matmulParamsIndex)
	enc.DispatchThreadgroups(mtl.Sz(ceilDiv(g.Out, kernels.MatVecTileRows), g.Tokens*g.TopK, 1), mtl.Sz(32, kernels.MatVecSIMDGroups, 1))
	return nil
}

// setProduct sets entry's pipeline state on enc and binds a product's W,
// X and Y.
func (k *Kernels) setProduct(enc *mtl.ComputeCommandEncoder, entry string, w, x, y tensor.View) error {
	pso, err := k.pipeline(entry)
	if err != nil {
		return err
	}
	enc.SetComputePipelineState(pso)
	bind(enc, w, matmulW)
	bind(enc, x, matmulX)
	bind(enc, y, matmulY)
	return nil
}
