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

// quantCombo is one variant of the quantized kernels.
type quantCombo struct {
	bits, group int
	act, scale  tensor.ElemType
}

func (c quantCombo) String() string {
	return fmt.Sprintf("%d-bit/group %d/%v x/%v scales", c.bits, c.group, c.act, c.scale)
}

// quantCombos lists every bits x group x activation x scale type.
func quantCombos() []quantCombo {
	var cs []quantCombo
	for _, b := range kernels.QuantBits {
		for _, g := range []int{32, 64, 128} {
			for _, a := range kernels.ElemTypes {
				for _, s := range kernels.ElemTypes {
					cs = append(cs, quantCombo{b, g, a, s})
				}
			}
		}
	}
	return cs
}

// quantMatrix is a random quantized weight on the device and, in float64,
// the matrix it holds (w) and the one of |scale| q + |bias| (mag), which
// bounds |w| element-wise and enters the tolerances.
type quantMatrix struct {
	ops.QuantWeight
	w, mag []float64
}

// newQuantMatrix makes experts (0: one) random rows x cols matrices (see
// randomQuantWeight) and their float64 references.
func (r *rig) newQuantMatrix(rng *rand.Rand, c quantCombo, experts, rows, cols int) quantMatrix {
	r.T.Helper()
	q := quantMatrix{QuantWeight: r.randomQuantWeight(rng, c, experts, rows, cols)}
	words := make([]uint32, q.Words.Len)
	if err := tensor.LoadInts(q.Words, words); err != nil {
		r.T.Fatal(err)
	}
	m := max(experts, 1)
	s, b := cpuref.Widen(r.read(q.Scales)), cpuref.Widen(r.read(q.Biases))
	q.w = cpuref.Dequantize64(words, s, b, m*rows, cols, c.bits, c.group)
	for i := range s {
		s[i], b[i] = math.Abs(s[i]), math.Abs(b[i])
	}
	q.mag = cpuref.Dequantize64(words, s, b, m*rows, cols, c.bits, c.group)
	return q
}

// randomQuantWeight makes experts (0: one) random rows x cols quantized
// matrices on the device: all words random, scales in +-1/32 and biases
// in +-1/4, as MLX's quantizer makes them for weights of a few tenths
// (scale = range / (2^bits - 1)).
func (r *rig) randomQuantWeight(rng *rand.Rand, c quantCombo, experts, rows, cols int) ops.QuantWeight {
	r.T.Helper()
	m := max(experts, 1)
	words := make([]uint32, m*rows*cols*c.bits/32)
	for i := range words {
		words[i] = rng.Uint32()
	}
	groups := m * rows * cols / c.group
	return ops.QuantWeight{
		Words: ints(r, tensor.U32, words), Scales: r.view(c.scale, random(rng, groups, 1.0/32)), Biases: r.view(c.scale, random(rng, groups, 0.25)),
		Rows: rows, Cols: cols, Bits: c.bits, GroupSize: c.group, Experts: experts,
	}
}

// input returns a view of n random values in +-1 of type t and the values
// it holds, widened.
func (r *rig) input(rng *rand.Rand, t tensor.ElemType, n int) (tensor.View, []float64) {
	v := r.view(t, random(rng, n, 1))
	return v, cpuref.Widen(r.read(v))
}

// productTolerance bounds |y - ref| for one output of a kernel that sums
// terms f32 products and rounds once to t: any f32 summation of terms
// products is off by at most gamma_terms * sum|a_i b_i| (Higham, Accuracy
// and Stability, 3.1), gamma_k ~ k u with u = 2^-24, and mag bounds that
// sum: sum_i (|scale| q_i + |bias|) |x_i| (+ |residual|). The terms are
// cols products and 4 more roundings: the dequantization (scale q + bias,
// or scale * sum q x + bias * sum x), the residual add. Rounding to t adds
// roundErr.
func productTolerance(t tensor.ElemType, terms int, ref, mag float64) float64 {
	return float64(terms+4)*0x1p-24*mag + roundErr(t, ref)
}

// compare checks got against want element by element within
// productTolerance.
func compare(t *testing.T, name string, typ tensor.ElemType, terms int, got []float32, want, mag []float64) {
	t.Helper()
	within(t, name, got, want, func(i int) float64 { return productTolerance(typ, terms, want[i], mag[i]) })
}

// residualMode is how a product test passes the residual.
type residualMode int

const (
	noResidual residualMode = iota
	ownResidual
	inPlace // the residual is y itself
)

// TestQuantProducts checks QuantMatVec and QuantMatMul against
// cpuref.Dequantize64 and Linear64 on every variant, with row counts that
// are not multiples of the tiles, 640 columns for QuantMatVec (past one
// 512-column step and not a multiple of it), 256 for QuantMatMul (8
// slices of 32, 2 to 8 groups), n from 1 to 10 for QuantMatVec (8 rows
// per pass, then a second pass) and 33 to 37 for QuantMatMul (two tiles of
// 32), and all three residual modes (without one, x and y are views at
// offsets whose neighbours must stay untouched).
func TestQuantProducts(t *testing.T) {
	eachRun(t, func(t *testing.T, r *rig) {
		for i, c := range quantCombos() {
			rng := rand.New(rand.NewPCG(0x9a17, uint64(i)))
			const rows = 37
			for _, p := range []struct {
				name    string
				n, cols int
				f       func(*ops.Kernels, *mtl.ComputeCommandEncoder, ops.QuantWeight, tensor.View, tensor.View, tensor.View, int) error
			}{
				{"QuantMatVec", 1 + i%10, 640, (*ops.Kernels).QuantMatVec},
				{"QuantMatMul", 33 + i%5, 256, (*ops.Kernels).QuantMatMul},
			} {
				cols := p.cols
				w := r.newQuantMatrix(rng, c, 0, rows, cols)
				mode := residualMode((i + len(p.name)) % 3)
				x, xs := r.input(rng, c.act, p.n*cols)
				want := cpuref.Linear64(xs, w.w, rows, cols)
				mag := cpuref.Linear64(abs64(xs), w.mag, rows, cols)
				y := r.empty(c.act, p.n*rows)
				var res tensor.View
				switch mode {
				case noResidual:
					// x and y at offsets into larger buffers, whose other
					// elements must be neither read (NaN) nor written
					vals := random(rng, p.n*cols, 1)
					x, xs = r.within(c.act, vals, 3, 5), cpuref.Widen(rounded(c.act, vals))
					want = cpuref.Linear64(xs, w.w, rows, cols)
					mag = cpuref.Linear64(abs64(xs), w.mag, rows, cols)
					all := r.empty(c.act, p.n*rows+6)
					y = tensor.NewView(all.Buffer, 2*c.act.Size(), c.act, p.n*rows)
				case ownResidual:
					var rs []float64
					res, rs = r.input(rng, c.act, p.n*rows)
					addResidual(want, mag, rs)
				case inPlace:
					var rs []float64
					y, rs = r.input(rng, c.act, p.n*rows)
					res = y
					addResidual(want, mag, rs)
				}
				r.run(func(enc *mtl.ComputeCommandEncoder) error { return p.f(r.k, enc, w.QuantWeight, x, res, y, p.n) })
				compare(t, fmt.Sprintf("%s %v, n %d, residual mode %d", p.name, c, p.n, mode), c.act, cols, r.read(y), want, mag)
				if mode == noResidual {
					r.untouched(y)
				}
			}
		}
	})
}

func addResidual(want, mag, res []float64) {
	for i, v := range res {
		want[i] += v
		mag[i] += math.Abs(v)
	}
}

// TestQuantMatVecManyRows runs a quantized lm_head over Qwen3's whole
// vocabulary (151936 rows) with a tiny hidden size: 18992 threadgroups
// along the grid's first dimension, every row written and right.
func TestQuantMatVecManyRows(t *testing.T) {
	if testing.Short() {
		t.Skip("151936 rows on the emulated device: skipped in -short")
	}
	r := newRig(t, testdevice.Orders[0])
	c := quantCombo{4, 32, tensor.F16, tensor.BF16}
	rng := rand.New(rand.NewPCG(0x1b, 151936))
	rows, cols := 151936, 32
	w := r.newQuantMatrix(rng, c, 0, rows, cols)
	x, xs := r.input(rng, c.act, cols)
	y := r.empty(c.act, rows)
	r.run(func(enc *mtl.ComputeCommandEncoder) error {
		return r.k.QuantMatVec(enc, w.QuantWeight, x, tensor.View{}, y, 1)
	})
	compare(t, "lm_head", c.act, cols, r.read(y), cpuref.Linear64(xs, w.w, rows, cols), cpuref.Linear64(abs64(xs), w.mag, rows, cols))
}

// TestGatherQuantMatVec checks the gathered product of stacked experts on
// every variant, x shared by a token's slots and x per slot, against the
// product with each chosen expert's matrix; an expert id past the stack
// gives zeros.
func TestGatherQuantMatVec(t *testing.T) {
	eachRun(t, func(t *testing.T, r *rig) {
		for i, c := range quantCombos() {
			rng := rand.New(rand.NewPCG(0x6a7e, uint64(i)))
			const experts, rows, cols, n, k = 5, 19, 256, 3, 2
			w := r.newQuantMatrix(rng, c, experts, rows, cols)
			ids := []uint32{4, 1, 0, experts + 2, 2, 4} // one out of range
			perSlot := i%2 == 1
			xRows := n
			if perSlot {
				xRows = n * k
			}
			x, xs := r.input(rng, c.act, xRows*cols)
			y := r.empty(c.act, n*k*rows)
			r.run(func(enc *mtl.ComputeCommandEncoder) error {
				return r.k.GatherQuantMatVec(enc, w.QuantWeight, x, ints(r, tensor.U32, ids), y, ops.Gather{Tokens: n, TopK: k, Experts: experts, In: cols, Out: rows, XPerSlot: perSlot})
			})
			want, mag := make([]float64, n*k*rows), make([]float64, n*k*rows)
			for s, e := range ids {
				if int(e) >= experts {
					continue // zeros
				}
				xr := s / k
				if perSlot {
					xr = s
				}
				xt := xs[xr*cols : (xr+1)*cols]
				m := int(e) * rows * cols
				copy(want[s*rows:], cpuref.Linear64(xt, w.w[m:m+rows*cols], rows, cols))
				copy(mag[s*rows:], cpuref.Linear64(abs64(xt), w.mag[m:m+rows*cols], rows, cols))
			}
			compare(t, fmt.Sprintf("GatherQuantMatVec %v, x per slot %v", c, perSlot), c.act, cols, r.read(y), want, mag)
		}
	})
}

// embedIDs are the token ids of the embedding tests over a vocabulary of
// 11: in range, repeated, and out of range (11, 2^31 and, as int32, -1).
var embedIDs = []uint32{3, 0, 10, 11, 3, 1 << 31, math.MaxUint32}

// embedWant returns the rows of table [vocab][hidden] the ids pick, zeros
// for an id out of range.
func embedWant(table []float64, vocab, hidden int) []float64 {
	want := make([]float64, len(embedIDs)*hidden)
	for t, id := range embedIDs {
		if int64(id) < int64(vocab) {
			copy(want[t*hidden:], table[int(id)*hidden:(int(id)+1)*hidden])
		}
	}
	return want
}

// idsView returns embedIDs as a view of type typ (U32, or I32 where the
// last id is -1).
func (r *rig) idsView(typ tensor.ElemType) tensor.View {
	if typ == tensor.I32 {
		v := make([]int32, len(embedIDs))
		for i, id := range embedIDs {
			v[i] = int32(id)
		}
		return ints(r, typ, v)
	}
	return ints(r, typ, embedIDs)
}

// TestEmbed checks the embedding lookups, dense (every table and output
// type) and quantized (every variant), with U32 and I32 ids: rows picked
// exactly as the table holds them (rounded once to the output type),
// zeros for ids out of range.
func TestEmbed(t *testing.T) {
	const vocab, hidden = 11, 256
	eachRun(t, func(t *testing.T, r *rig) {
		n := len(embedIDs)
		for i, c := range quantCombos() {
			rng := rand.New(rand.NewPCG(0xe3b, uint64(i)))
			w := r.newQuantMatrix(rng, c, 0, vocab, hidden)
			idt := []tensor.ElemType{tensor.U32, tensor.I32}[i%2]
			y := r.empty(c.act, n*hidden)
			r.run(func(enc *mtl.ComputeCommandEncoder) error {
				return r.k.QuantEmbed(enc, w.QuantWeight, r.idsView(idt), y, n)
			})
			want := embedWant(w.w, vocab, hidden)
			// scale * q + bias in f32: two roundings of at most u |scale q + bias| each.
			compare(t, fmt.Sprintf("QuantEmbed %v, %v ids", c, idt), c.act, -2, r.read(y), want, embedWant(w.mag, vocab, hidden))
		}
		for i, wt := range kernels.ElemTypes {
			for j, ot := range kernels.ElemTypes {
				rng := rand.New(rand.NewPCG(0xe3d, uint64(3*i+j)))
				table, ts := r.input(rng, wt, vocab*hidden)
				idt := []tensor.ElemType{tensor.U32, tensor.I32}[(i+j)%2]
				y := r.empty(ot, n*hidden)
				r.run(func(enc *mtl.ComputeCommandEncoder) error {
					return r.k.Embed(enc, table, vocab, hidden, r.idsView(idt), y, n)
				})
				want := embedWant(ts, vocab, hidden)
				// A copy: exact, but for the rounding to the output type.
				compare(t, fmt.Sprintf("Embed %v table, %v out, %v ids", wt, ot, idt), ot, -4, r.read(y), want, make([]float64, len(want)))
			}
		}
	})
}

// TestQuantRefusals checks that each bad argument of the quantized
// dispatchers is refused with an error that wraps ErrInvalidArgument and
// names it, and that nothing was encoded.
func TestQuantRefusals(t *testing.T) {
	r := newRig(t, testdevice.Orders[0])
	rng := rand.New(rand.NewPCG(0x4ef, 1))
	c := quantCombo{4, 64, tensor.F16, tensor.F16}
	const rows, cols, n = 9, 128, 2
	good := r.newQuantMatrix(rng, c, 0, rows, cols).QuantWeight
	stack := r.newQuantMatrix(rng, c, 3, rows, cols).QuantWeight
	x := r.empty(tensor.F16, n*cols)
	y := r.empty(tensor.F16, n*rows)
	ids := r.empty(tensor.U32, n*2)
	tokens := r.empty(tensor.I32, n)
	yk := r.empty(tensor.F16, n*2*rows)
	gather := ops.Gather{Tokens: n, TopK: 2, Experts: 3, In: cols, Out: rows}
	perSlot := gather
	perSlot.XPerSlot = true
	with := func(f func(w *ops.QuantWeight)) ops.QuantWeight { w := good; f(&w); return w }
	product := func(w ops.QuantWeight, x, y, res tensor.View, n int) func(*mtl.ComputeCommandEncoder) error {
		return func(enc *mtl.ComputeCommandEncoder) error { return r.k.QuantMatVec(enc, w, x, res, y, n) }
	}
	checkRefusals(t, r, []refusal{
		{name: "3 bits", arg: "W.Bits", call: product(with(func(w *ops.QuantWeight) { w.Bits = 3 }), x, y, tensor.View{}, n)},
		{name: "group 16", arg: "W.GroupSize", call: product(with(func(w *ops.QuantWeight) { w.GroupSize = 16 }), x, y, tensor.View{}, n)},
		{name: "cols not groups", arg: "W.Cols", call: product(with(func(w *ops.QuantWeight) { w.Cols = 96 }), x, y, tensor.View{}, n)},
		{name: "no rows", arg: "W.Rows", call: product(with(func(w *ops.QuantWeight) { w.Rows = 0 }), x, y, tensor.View{}, n)},
		{name: "short words", arg: "W.Words", call: product(with(func(w *ops.QuantWeight) { w.Words.Len-- }), x, y, tensor.View{}, n)},
		{name: "u32 scales", arg: "W.Scales", call: product(with(func(w *ops.QuantWeight) { w.Scales.Type = tensor.U32 }), x, y, tensor.View{}, n)},
		{name: "biases of another type", arg: "W.Biases", call: product(with(func(w *ops.QuantWeight) { w.Biases.Type, w.Biases.Len = tensor.F32, w.Biases.Len/2 }), x, y, tensor.View{}, n)},
		{name: "stacked experts", arg: "W.Experts", call: product(stack, x, y, tensor.View{}, n)},
		{name: "n 0", arg: "n", call: product(good, x, y, tensor.View{}, 0)},
		{name: "short x", arg: "X", call: product(good, x, y, tensor.View{}, n+1)},
		{name: "y of another type", arg: "Y", call: product(good, x, r.empty(tensor.F32, n*rows), tensor.View{}, n)},
		{name: "residual of another type", arg: "Residual", call: product(good, x, y, r.empty(tensor.BF16, n*rows), n)},
		{name: "y over x", arg: "Y", call: product(good, x, tensor.NewView(x.Buffer, 0, tensor.F16, n*rows), tensor.View{}, n)},
		{name: "y over the words", arg: "Y", call: product(good, x, tensor.NewView(good.Words.Buffer, 0, tensor.F16, n*rows), tensor.View{}, n)},
		{name: "matmul: short y", arg: "Y", call: func(enc *mtl.ComputeCommandEncoder) error {
			return r.k.QuantMatMul(enc, good, x, tensor.View{}, r.empty(tensor.F16, n*rows-1), n)
		}},
		{name: "gather: one matrix", arg: "W.Experts", call: func(enc *mtl.ComputeCommandEncoder) error {
			return r.k.GatherQuantMatVec(enc, good, x, ids, yk, gather)
		}},
		{name: "gather: In not W's", arg: "W.Cols", call: func(enc *mtl.ComputeCommandEncoder) error {
			g := gather
			g.In = 2 * cols
			return r.k.GatherQuantMatVec(enc, stack, x, ids, yk, g)
		}},
		{name: "gather: i32 ids", arg: "IDs", call: func(enc *mtl.ComputeCommandEncoder) error {
			return r.k.GatherQuantMatVec(enc, stack, x, r.empty(tensor.I32, n*2), yk, gather)
		}},
		{name: "gather: x not per slot", arg: "X", call: func(enc *mtl.ComputeCommandEncoder) error {
			return r.k.GatherQuantMatVec(enc, stack, x, ids, yk, perSlot)
		}},
		{name: "gather: k 0", arg: "TopK", call: func(enc *mtl.ComputeCommandEncoder) error {
			return r.k.GatherQuantMatVec(enc, stack, x, ids, yk, ops.Gather{Tokens: n, Experts: 3, In: cols, Out: rows})
		}},
		{name: "embed: f32 ids", arg: "IDs", call: func(enc *mtl.ComputeCommandEncoder) error {
			return r.k.QuantEmbed(enc, good, r.empty(tensor.F32, n), r.empty(tensor.F16, n*cols), n)
		}},
		{name: "embed: u32 output", arg: "Y", call: func(enc *mtl.ComputeCommandEncoder) error {
			return r.k.QuantEmbed(enc, good, tokens, r.empty(tensor.U32, n*cols), n)
		}},
		{name: "embed: stacked table", arg: "W.Experts", call: func(enc *mtl.ComputeCommandEncoder) error {
			return r.k.QuantEmbed(enc, stack, tokens, r.empty(tensor.F16, n*cols), n)
		}},
		{name: "dense embed: short table", arg: "table", call: func(enc *mtl.ComputeCommandEncoder) error {
			return r.k.Embed(enc, x, 3, cols, tokens, r.empty(tensor.F16, n*cols), n)
		}},
		{name: "dense embed: no vocabulary", arg: "table", call: func(enc *mtl.ComputeCommandEncoder) error {
			return r.k.Embed(enc, x, 0, cols, tokens, r.empty(tensor.F16, n*cols), n)
		}},
		{name: "dense embed: n 0", arg: "n", call: func(enc *mtl.ComputeCommandEncoder) error {
			return r.k.Embed(enc, x, n, cols, tokens, r.empty(tensor.F16, 0), 0)
		}},
	})
	if err := good.Check(); err != nil {
		t.Errorf("Check of a good weight: %v", err)
	}
}

// TestQuantNoAllocation checks that the quantized dispatchers allocate
// nothing of their own on the host (a decode step encodes hundreds of
// them): no more than the encoder calls they make, made directly (the
// emulated device's encoder allocates), and none in the pipeline lookup.
func TestQuantNoAllocation(t *testing.T) {
	r := newRig(t, testdevice.Orders[0])
	rng := rand.New(rand.NewPCG(0xa110c, 1))
	c := quantCombo{4, 64, tensor.BF16, tensor.BF16}
	w := r.newQuantMatrix(rng, c, 0, 16, 128)
	stack := r.newQuantMatrix(rng, c, 4, 16, 128)
	x, y := r.empty(c.act, 128), r.empty(c.act, 16)
	ids, yk, tok := r.empty(tensor.U32, 2), r.empty(c.act, 2*16), r.empty(tensor.U32, 1)
	cb, enc := r.Encoder()
	defer cb.Release()
	for _, tc := range []struct {
		kernel  kernels.QuantKernel
		buffers int // the buffers it binds
		f       func() error
	}{
		{kernels.QuantMatVec, 6, func() error { return r.k.QuantMatVec(enc, w.QuantWeight, x, y, y, 1) }},
		{kernels.QuantMatMul, 6, func() error { return r.k.QuantMatMul(enc, w.QuantWeight, x, tensor.View{}, y, 1) }},
		{kernels.QuantGatherMatVec, 7, func() error {
			return r.k.GatherQuantMatVec(enc, stack.QuantWeight, x, ids, yk, ops.Gather{Tokens: 1, TopK: 2, Experts: 4, In: 128, Out: 16})
		}},
		{kernels.QuantEmbed, 5, func() error { return r.k.QuantEmbed(enc, w.QuantWeight, tok, x, 1) }},
	} {
		entry := kernels.QuantOf(tc.kernel, c.act, c.scale, c.bits)
		if got, direct := r.encodingAllocs(enc, entry, tc.buffers, x, tc.f); got > direct {
			t.Errorf("%v: %v allocations per dispatch, its encoder calls %v", tc.kernel, got, direct)
		}
	}
	enc.EndEncoding()
}

// TestQuantMatVecTraffic measures the bytes QuantMatVec loads for one
// decode token at Qwen3-Next's shapes (hidden 2048: a 2048 x 2048
// projection and a 512 x 2048 expert's gate) against the floor: the words
// (0.5 or 1 byte a weight), the scales and biases and x read once, y
// written once. The words must be loaded exactly once (they are the
// traffic) and y stored exactly once. The emulator counts each lane's
// loads: the 16-value chunks of a group (group / 16 lanes) each load its
// scale and bias, one address that a SIMD-group's load serves once, and
// each SIMD-group loads all of x, which the caches serve after the first;
// those figures are logged, and bounded by these factors. The gathered
// product must load exactly its k experts' words per token.
func TestQuantMatVecTraffic(t *testing.T) {
	r := newRig(t, testdevice.Orders[0])
	for _, s := range []struct{ rows, cols, bits int }{{2048, 2048, 4}, {512, 2048, 4}, {2048, 2048, 8}, {512, 2048, 8}} {
		c := quantCombo{s.bits, 64, tensor.BF16, tensor.BF16}
		rng := rand.New(rand.NewPCG(0x7aff1c, uint64(s.rows*s.bits)))
		w := r.newQuantMatrix(rng, c, 0, s.rows, s.cols)
		x, _ := r.input(rng, c.act, s.cols)
		y := r.empty(c.act, s.rows)
		got := r.counters(func(enc *mtl.ComputeCommandEncoder) error {
			return r.k.QuantMatVec(enc, w.QuantWeight, x, tensor.View{}, y, 1)
		})
		words, sb := uint64(w.Words.Bytes()), uint64(w.Scales.Bytes()+w.Biases.Bytes())
		xb, yb := uint64(x.Bytes()), uint64(y.Bytes())
		floor := words + sb + xb + yb
		name := fmt.Sprintf("%d x %d, %d bits, group 64, bf16", s.rows, s.cols, s.bits)
		total := uint64(0)
		for _, b := range got.Loaded {
			total += b
		}
		t.Logf("%s: loaded words %d B (floor %d), scales+biases %d B (floor %d), x %d B (floor %d); stored y %d B; floor %d B, loaded+stored %d B (%.2fx; %.3f B a weight)",
			name, got.Loaded[0], words, got.Loaded[1]+got.Loaded[2], sb, got.Loaded[3], xb, got.Stored[4], floor,
			total+got.Stored[4], float64(total+got.Stored[4])/float64(floor), float64(got.Loaded[0]+got.Loaded[1]+got.Loaded[2])/float64(s.rows*s.cols))
		if got.Loaded[0] != words {
			t.Errorf("%s: words loaded %d bytes, want each once: %d", name, got.Loaded[0], words)
		}
		if got.Stored[4] != yb {
			t.Errorf("%s: y stored %d bytes, want %d", name, got.Stored[4], yb)
		}
		if lanes := uint64(c.group / 16); got.Loaded[1]+got.Loaded[2] > lanes*sb {
			t.Errorf("%s: scales and biases loaded %d bytes, more than group/16 = %d lanes each: %d", name, got.Loaded[1]+got.Loaded[2], lanes, lanes*sb)
		}
		if simdgroups := uint64(s.rows / 4); got.Loaded[3] > simdgroups*xb {
			t.Errorf("%s: x loaded %d bytes, more than once per SIMD-group (%d): %d", name, got.Loaded[3], simdgroups, simdgroups*xb)
		}
	}

	// 4 tokens of top-2 out of 8 experts (512 x 256 each), one id out of
	// range: 7 expert matrices' words in all.
	c := quantCombo{4, 64, tensor.BF16, tensor.BF16}
	rng := rand.New(rand.NewPCG(0x6a7, 8))
	const experts, rows, cols, n, k = 8, 512, 256, 4, 2
	w := r.newQuantMatrix(rng, c, experts, rows, cols)
	x, _ := r.input(rng, c.act, n*cols)
	ids := ints(r, tensor.U32, []uint32{0, 7, 3, 3, 9, 1, 6, 2})
	got := r.counters(func(enc *mtl.ComputeCommandEncoder) error {
		return r.k.GatherQuantMatVec(enc, w.QuantWeight, x, ids, r.empty(c.act, n*k*rows), ops.Gather{Tokens: n, TopK: k, Experts: experts, In: cols, Out: rows})
	})
	if want := uint64(7 * rows * cols / 2); got.Loaded[0] != want {
		t.Errorf("GatherQuantMatVec: words loaded %d bytes, want the 7 chosen experts' once each: %d", got.Loaded[0], want)
	}
}
