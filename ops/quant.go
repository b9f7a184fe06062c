package ops

import (
	"math/bits"

	"github.com/puremetal/puremetal/kernels"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/tensor"
)

// QuantWeight is an MLX affine-quantized weight W [Rows][Cols] (SPEC
// section 14), or Experts of them stacked (mlx-lm's switch_mlp layout):
//
//	Words   U32 [Experts][Rows][Cols*Bits/32]  element j of a word at bits [j*Bits, (j+1)*Bits), the first lowest
//	Scales  S   [Experts][Rows][Cols/GroupSize]
//	Biases  S   [Experts][Rows][Cols/GroupSize]
//
// with W[r][c] = Scales[r][c/GroupSize] * q + Biases[r][c/GroupSize], S one
// of f32, f16 and bf16 (the model's dtype in an MLX checkpoint). Experts is
// 0 for a single matrix (a linear layer, an embedding table, a tied
// lm_head) and the number of stacked experts for [Kernels.GatherQuantMatVec].
type QuantWeight struct {
	Words, Scales, Biases tensor.View
	Rows, Cols            int
	Bits, GroupSize       int // 4 or 8; 32, 64 or 128
	Experts               int
}

// Check reports whether w is well formed: Bits 4 or 8, GroupSize 32, 64 or
// 128, Rows and Cols positive, Cols a multiple of GroupSize, Scales and
// Biases of one float type, and each view's length what the shape
// implies. Errors name the field and wrap [ErrInvalidArgument].
func (w QuantWeight) Check() error { return w.check(nil) }

// check is Check with the views' device. The fields are named as the
// dispatchers' argument W's.
func (w QuantWeight) check(dev *mtl.Device) error {
	if err := positive(dim{"W.Rows", w.Rows}, dim{"W.Cols", w.Cols}); err != nil {
		return err
	}
	switch {
	case w.Bits != 4 && w.Bits != 8:
		return tensor.Invalid("W.Bits", "%d bits, must be 4 or 8", w.Bits)
	case w.GroupSize != 32 && w.GroupSize != 64 && w.GroupSize != 128:
		return tensor.Invalid("W.GroupSize", "group size %d, must be 32, 64 or 128", w.GroupSize)
	case w.Cols%w.GroupSize != 0:
		return tensor.Invalid("W.Cols", "%d columns, not a multiple of the group size %d", w.Cols, w.GroupSize)
	case w.Experts < 0:
		return tensor.Invalid("W.Experts", "%d experts, must not be negative", w.Experts)
	}
	if err := tensor.FloatType("W.Scales", w.Scales.Type); err != nil {
		return err
	}
	m := max(w.Experts, 1)
	words, groups := elems(m, w.Rows, w.Cols*w.Bits/32), elems(m, w.Rows, w.Cols/w.GroupSize)
	return tensor.Check(dev,
		tensor.Arg{Name: "W.Words", View: w.Words, Type: tensor.U32, Len: words, Formula: "experts*rows*cols*bits/32"},
		tensor.Arg{Name: "W.Scales", View: w.Scales, Type: w.Scales.Type, Len: groups, Formula: "experts*rows*cols/group_size"},
		tensor.Arg{Name: "W.Biases", View: w.Biases, Type: w.Scales.Type, TypeFrom: "W.Scales", Len: groups, Formula: "experts*rows*cols/group_size"},
	)
}

// quantParams is quant.metal's quant_params, the parameter block at
// buffer index 6.
type quantParams struct {
	rows, cols, n, groupShift uint32
	residual                  uint32
	k, experts, xPerSlot      uint32
}

// params returns the block for w's shape with n rows of x.
func (w QuantWeight) params(n int) quantParams {
	return quantParams{
		rows: uint32(w.Rows), cols: uint32(w.Cols), n: uint32(n),
		groupShift: uint32(bits.TrailingZeros(uint(w.GroupSize))),
		experts:    uint32(w.Experts),
	}
}

// The quantized kernels' geometry (quant.metal says why).
const (
	quantMatVecRows    = 8             // rows of W per matvec threadgroup: 2 SIMD-groups of 4
	quantMatVecThreads = 2 * simdWidth // (32, 2, 1)
	quantMatVecNX      = 8             // rows of x per pass over W
	quantMatMulTile    = 32            // a matmul threadgroup's tile of y: 32 x 32
	quantMatMulThreads = 128           // 4 SIMD-groups of 16 x 16
	embedThreads       = 256           // dense lookup: a thread per element
	quantEmbedWords    = 64            // quantized lookup: a thread per word
)

// QuantMatVec encodes y = x W^T (+ residual) for decode: x [n][w.Cols], y
// and residual [n][w.Rows], all three of one activation type (f32, f16 or
// bf16), w a single quantized matrix (Experts 0). It reads W once for
// every 8 rows of x, so it suits n up to about 8 ([Kernels.QuantMatMul]
// is the prefill product), and any number of rows (a quantized lm_head
// over a 151936-token vocabulary is one dispatch). residual is optional
// (the zero View: none) and may be y itself (h += x W^T: each element is
// read, then written, by one thread); otherwise y may share no byte with
// another argument. The products accumulate in f32 and y is rounded once.
//
// It refuses, encoding nothing: n below 1, a malformed w (see
// [QuantWeight.Check]) or a stacked one, x not of a float type, y or
// residual not of x's type, a view whose length is not the one the shape
// implies, a buffer not of the Kernels' device or released, an element
// count at or beyond 2^32, and y sharing a byte with another argument
// (but residual itself).
func (k *Kernels) QuantMatVec(enc *mtl.ComputeCommandEncoder, w QuantWeight, x, residual, y tensor.View, n int) error {
	return k.quantProduct(enc, kernels.QuantMatVec, w, x, residual, y, n)
}

// QuantMatMul encodes y = x W^T (+ residual) as [Kernels.QuantMatVec]
// does, for prefill: tiles of 32 rows of x by 32 rows of W, dequantized a
// 32-column slice at a time into threadgroup memory (never the whole W)
// and multiplied with simdgroup_matrix in f32. W is read once per 32 rows
// of x.
func (k *Kernels) QuantMatMul(enc *mtl.ComputeCommandEncoder, w QuantWeight, x, residual, y tensor.View, n int) error {
	return k.quantProduct(enc, kernels.QuantMatMul, w, x, residual, y, n)
}

// quantProduct checks and encodes QuantMatVec or QuantMatMul.
func (k *Kernels) quantProduct(enc *mtl.ComputeCommandEncoder, q kernels.QuantKernel, w QuantWeight, x, residual, y tensor.View, n int) error {
	if err := positive(dim{"n", n}); err != nil {
		return err
	}
	if w.Experts != 0 {
		return tensor.Invalid("W.Experts", "%d stacked experts: %v takes one matrix (GatherQuantMatVec takes stacked experts)", w.Experts, q)
	}
	if err := w.check(k.dev); err != nil {
		return err
	}
	if err := tensor.FloatType("X", x.Type); err != nil {
		return err
	}
	inPlace := !residual.IsZero() && residual == y
	res := residual
	if inPlace {
		res = tensor.View{} // y's own check covers it
	}
	if err := tensor.Check(k.dev,
		tensor.Arg{Name: "X", View: x, Type: x.Type, Len: elems(n, w.Cols), Formula: "n*cols"},
		tensor.Arg{Name: "Y", View: y, Type: x.Type, TypeFrom: "X", Len: elems(n, w.Rows), Formula: "n*rows", Written: true},
		tensor.Arg{Name: "Residual", View: res, Type: x.Type, TypeFrom: "X", Len: elems(n, w.Rows), Formula: "n*rows", Optional: true},
		tensor.Arg{Name: "W.Words", View: w.Words, Type: tensor.U32, Len: w.Words.Len},
		tensor.Arg{Name: "W.Scales", View: w.Scales, Type: w.Scales.Type, Len: w.Scales.Len},
		tensor.Arg{Name: "W.Biases", View: w.Biases, Type: w.Biases.Type, Len: w.Biases.Len},
	); err != nil {
		return err
	}
	threads := quantMatVecThreads
	if q == kernels.QuantMatMul {
		threads = quantMatMulThreads
	}
	entry := kernels.QuantOf(q, x.Type, w.Scales.Type, w.Bits)
	if err := k.setPipeline(enc, entry, threads, "W", "the kernel's fixed"); err != nil {
		return err
	}
	p := w.params(n)
	if !residual.IsZero() {
		p.residual = 1
	} else {
		residual = y // bound, never read
	}
	k.bindQuant(enc, w, x, y)
	bind(enc, residual, 5)
	mtl.SetValue(enc, p, 6)
	if q == kernels.QuantMatMul {
		enc.DispatchThreadgroups(mtl.Sz(ceilDiv(w.Rows, quantMatMulTile), ceilDiv(n, quantMatMulTile), 1), mtl.Sz(quantMatMulThreads, 1, 1))
	} else {
		enc.DispatchThreadgroups(mtl.Sz(ceilDiv(w.Rows, quantMatVecRows), ceilDiv(n, quantMatVecNX), 1), mtl.Sz(simdWidth, 2, 1))
	}
	return finish(enc, entry)
}

// GatherQuantMatVec encodes the products of MoE experts stacked in w, as
// [Kernels.GatherMatVec] does for dense ones: for each token t <
// g.Tokens and slot s < g.TopK,
//
//	y[t][s] = x_t W_{ids[t][s]}^T
//
// with x_t = x[t] (x [n][In]) or, with g.XPerSlot, x[t][s] (x [n][k][In],
// as the down projection takes each expert's own input); y is [n][k][Out],
// of x's type, ids U32 [n][k] (the router's choice, on the GPU: never read
// here). g's Experts, In and Out must be w's Experts, Cols and Rows. Each
// token reads only its k experts' weights. An id at or past g.Experts
// reads no weight and gives y[t][s] = 0. y may share no byte with another
// argument.
func (k *Kernels) GatherQuantMatVec(enc *mtl.ComputeCommandEncoder, w QuantWeight, x, ids, y tensor.View, g Gather) error {
	if err := positive(dim{"Tokens", g.Tokens}, dim{"TopK", g.TopK}, dim{"Experts", g.Experts}, dim{"In", g.In}, dim{"Out", g.Out}); err != nil {
		return err
	}
	switch {
	case w.Experts != g.Experts:
		return tensor.Invalid("W.Experts", "%d stacked experts, the Gather's Experts is %d", w.Experts, g.Experts)
	case w.Cols != g.In:
		return tensor.Invalid("W.Cols", "%d columns, the Gather's In is %d", w.Cols, g.In)
	case w.Rows != g.Out:
		return tensor.Invalid("W.Rows", "%d rows, the Gather's Out is %d", w.Rows, g.Out)
	}
	n, topK := g.Tokens, g.TopK
	if err := w.check(k.dev); err != nil {
		return err
	}
	if err := tensor.FloatType("X", x.Type); err != nil {
		return err
	}
	xRows, xForm := n, "Tokens*In"
	if g.XPerSlot {
		xRows, xForm = n*topK, "Tokens*TopK*In"
	}
	if err := tensor.Check(k.dev,
		tensor.Arg{Name: "X", View: x, Type: x.Type, Len: elems(xRows, w.Cols), Formula: xForm},
		tensor.Arg{Name: "IDs", View: ids, Type: tensor.U32, Len: elems(n, topK), Formula: "Tokens*TopK"},
		tensor.Arg{Name: "Y", View: y, Type: x.Type, TypeFrom: "X", Len: elems(n, topK, w.Rows), Formula: "Tokens*TopK*Out", Written: true},
		tensor.Arg{Name: "W.Words", View: w.Words, Type: tensor.U32, Len: w.Words.Len},
		tensor.Arg{Name: "W.Scales", View: w.Scales, Type: w.Scales.Type, Len: w.Scales.Len},
		tensor.Arg{Name: "W.Biases", View: w.Biases, Type: w.Biases.Type, Len: w.Biases.Len},
	); err != nil {
		return err
	}
	entry := kernels.QuantOf(kernels.QuantGatherMatVec, x.Type, w.Scales.Type, w.Bits)
	if err := k.setPipeline(enc, entry, quantMatVecThreads, "W", "the kernel's fixed"); err != nil {
		return err
	}
	p := w.params(n)
	p.k = uint32(topK)
	if g.XPerSlot {
		p.xPerSlot = 1
	}
	k.bindQuant(enc, w, x, y)
	bind(enc, y, 5) // no residual: bound, never read
	mtl.SetValue(enc, p, 6)
	bind(enc, ids, 7)
	enc.DispatchThreadgroups(mtl.Sz(ceilDiv(w.Rows, quantMatVecRows), n*topK, 1), mtl.Sz(simdWidth, 2, 1))
	return finish(enc, entry)
}

// QuantEmbed encodes the embedding lookup from a quantized table w
// [vocab = w.Rows][hidden = w.Cols] (Experts 0): y[t] = the dequantized row
// ids[t] for t < n, y [n][hidden] of a float type, ids [n] U32 or I32. An
// id at or past the vocabulary (an I32 id below zero is one) gives a row of
// zeros and reads nothing: the ids come from the GPU or the caller
// unchecked, and the kernel never reads out of bounds. A tied lm_head is
// [Kernels.QuantMatVec] with the same w: logits over the vocabulary's rows.
func (k *Kernels) QuantEmbed(enc *mtl.ComputeCommandEncoder, w QuantWeight, ids, y tensor.View, n int) error {
	if w.Experts != 0 {
		return tensor.Invalid("W.Experts", "%d stacked experts: an embedding table is one matrix", w.Experts)
	}
	if err := w.check(k.dev); err != nil {
		return err
	}
	if err := k.checkEmbed(ids, y, n, w.Cols, tensor.Arg{Name: "W.Words", View: w.Words, Type: tensor.U32, Len: w.Words.Len},
		tensor.Arg{Name: "W.Scales", View: w.Scales, Type: w.Scales.Type, Len: w.Scales.Len},
		tensor.Arg{Name: "W.Biases", View: w.Biases, Type: w.Biases.Type, Len: w.Biases.Len}); err != nil {
		return err
	}
	entry := kernels.QuantOf(kernels.QuantEmbed, y.Type, w.Scales.Type, w.Bits)
	if err := k.setPipeline(enc, entry, quantEmbedWords, "W", "the kernel's fixed"); err != nil {
		return err
	}
	k.bindQuant(enc, w, ids, y)
	mtl.SetValue(enc, w.params(n), 6)
	enc.DispatchThreadgroups(mtl.Sz(ceilDiv(w.Cols*w.Bits/32, quantEmbedWords), n, 1), mtl.Sz(quantEmbedWords, 1, 1))
	return finish(enc, entry)
}

// Embed encodes the embedding lookup from a dense table [vocab][hidden]
// (f32, f16 or bf16): y[t] = table[ids[t]] converted to y's float type for
// t < n, ids [n] U32 or I32. An id at or past vocab (an I32 id below zero
// is one) gives a row of zeros and reads nothing, as [Kernels.QuantEmbed].
func (k *Kernels) Embed(enc *mtl.ComputeCommandEncoder, table tensor.View, vocab, hidden int, ids, y tensor.View, n int) error {
	if vocab <= 0 || hidden <= 0 {
		return tensor.Invalid("table", "shape %d x %d, both must be positive", vocab, hidden)
	}
	if err := tensor.FloatType("table", table.Type); err != nil {
		return err
	}
	if err := k.checkEmbed(ids, y, n, hidden, tensor.Arg{Name: "table", View: table, Type: table.Type, Len: elems(vocab, hidden), Formula: "vocab*hidden"}); err != nil {
		return err
	}
	entry := kernels.EmbedOf(table.Type, y.Type)
	if err := k.setPipeline(enc, entry, embedThreads, "table", "the kernel's fixed"); err != nil {
		return err
	}
	bind(enc, table, 0)
	bind(enc, ids, 3)
	bind(enc, y, 4)
	mtl.SetValue(enc, quantParams{rows: uint32(vocab), cols: uint32(hidden), n: uint32(n)}, 6)
	enc.DispatchThreadgroups(mtl.Sz(ceilDiv(hidden, embedThreads), n, 1), mtl.Sz(embedThreads, 1, 1))
	return finish(enc, entry)
}

// checkEmbed checks an embedding lookup's ids, output and table views.
func (k *Kernels) checkEmbed(ids, y tensor.View, n, hidden int, table ...tensor.Arg) error {
	if n <= 0 {
		return tensor.Invalid("n", "%d token ids, must be positive", n)
	}
	idType := tensor.U32 // or I32: the check below refuses any other type as not u32
	if ids.Type == tensor.I32 {
		idType = tensor.I32
	}
	if err := tensor.FloatType("Y", y.Type); err != nil {
		return err
	}
	args := [5]tensor.Arg{
		{Name: "IDs", View: ids, Type: idType, Len: n, Formula: "n"},
		{Name: "Y", View: y, Type: y.Type, Len: elems(n, hidden), Formula: "n*hidden", Written: true},
	}
	m := copy(args[2:], table)
	return tensor.Check(k.dev, args[:2+m]...)
}

// bindQuant binds w's words, scales and biases at indices 0-2, the input
// (x or ids) at 3 and y at 4.
func (k *Kernels) bindQuant(enc *mtl.ComputeCommandEncoder, w QuantWeight, in, y tensor.View) {
	bind(enc, w.Words, 0)
	bind(enc, w.Scales, 1)
	bind(enc, w.Biases, 2)
	bind(enc, in, 3)
	bind(enc, y, 4)
}
