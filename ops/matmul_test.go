package ops_test

import (
	"errors"
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

// linearCase is one dense product y = x W^T (+ r).
type linearCase struct {
	n, in, out int
	residual   bool // y = r + x W^T, r a view of its own
	inPlace    bool // y = y + x W^T: r is y itself
	offsets    bool // W is the middle matrix of three stacked ones, x and y lie at offsets too
}

func (c linearCase) String() string {
	s := fmt.Sprintf("n%d_in%d_out%d", c.n, c.in, c.out)
	if c.residual {
		s += "_residual"
	}
	if c.inPlace {
		s += "_inplace"
	}
	if c.offsets {
		s += "_offsets"
	}
	return s
}

// The shapes are small (the emulator runs a fiber per GPU thread) and odd:
// in not a multiple of a lane's 4 elements, nor of a SIMD-group's 128, nor
// of the matmul's 16; out not a multiple of a threadgroup's 16 rows (64
// for the matmul), n not of the matmul's 64.
var (
	matvecCases = []linearCase{
		{n: 1, in: 128, out: 16},
		{n: 1, in: 131, out: 37, residual: true},
		{n: 3, in: 130, out: 21, inPlace: true},
		{n: 8, in: 259, out: 18, residual: true, offsets: true},
		{n: 5, in: 3, out: 1},
	}
	matmulCases = []linearCase{
		{n: 1, in: 16, out: 32},
		{n: 33, in: 45, out: 37, residual: true},
		{n: 9, in: 7, out: 70, inPlace: true, offsets: true},
		{n: 64, in: 32, out: 64},
		{n: 70, in: 20, out: 65, residual: true},
	}
)

// linearFunc is a dispatcher of a dense product: Linear, MatVec or MatMul.
type linearFunc func(k *ops.Kernels, enc *mtl.ComputeCommandEncoder, w, x, r, y tensor.View, n, in, out int) error

// TestMatVec checks the matvec kernel against cpuref.Linear64 for every
// weight and activation type, with and without the residual (in place
// too), at offsets, in both scheduling orders and with bf16 by hand.
func TestMatVec(t *testing.T) { testLinear(t, (*ops.Kernels).MatVec, matvecCases) }

// TestMatMul is TestMatVec for the tiled matmul kernel.
func TestMatMul(t *testing.T) { testLinear(t, (*ops.Kernels).MatMul, matmulCases) }

func testLinear(t *testing.T, f linearFunc, cases []linearCase) {
	eachRun(t, func(t *testing.T, r *rig) {
		for wi, wt := range kernels.ElemTypes {
			for ai, at := range kernels.ElemTypes {
				for ci, c := range cases {
					seed := uint64(wi*100 + ai*10 + ci)
					t.Run(fmt.Sprintf("%v_%v/%v", wt, at, c), func(t *testing.T) {
						checkLinear(t, r, f, wt, at, c, seed)
					})
				}
			}
		}
	})
}

// checkLinear runs one case through f on fresh random inputs and compares
// y with the float64 oracle on the inputs as rounded to their types.
func checkLinear(t *testing.T, r *rig, f linearFunc, wt, at tensor.ElemType, c linearCase, seed uint64) {
	defer func(old testing.TB) { r.T = old }(r.T)
	r.T = t // buffers and failures belong to the subtest
	rng := rand.New(rand.NewPCG(seed, 0x3a7))
	var w, x, y, res tensor.View
	if c.offsets {
		w = r.within(wt, random(rng, c.out*c.in, 1), c.out*c.in, c.out*c.in)
		x = r.within(at, random(rng, c.n*c.in, 1), 3, 5)
		y = r.within(at, nans(c.n*c.out), 7, 2)
	} else {
		w = r.view(wt, random(rng, c.out*c.in, 1))
		x = r.view(at, random(rng, c.n*c.in, 1))
		y = r.empty(at, c.n*c.out)
	}
	switch {
	case c.inPlace:
		if err := y.Store(random(rng, c.n*c.out, 1)); err != nil {
			t.Fatal(err)
		}
		res = y
	case c.residual:
		res = r.view(at, random(rng, c.n*c.out, 1))
	}
	var rv []float32
	if !res.IsZero() {
		rv = r.read(res)
	}
	want, mag := linear64(r.read(x), r.read(w), rv, c.out, c.in)

	r.run(func(enc *mtl.ComputeCommandEncoder) error { return f(r.k, enc, w, x, res, y, c.n, c.in, c.out) })
	checkClose(t, r.read(y), want, mag, at, c.in)
	if c.offsets {
		r.untouched(x)
		r.untouched(y)
	}
}

// linear64 returns cpuref.Linear64's x W^T plus r (if any) and, per
// element, the magnitude its rounding errors scale with: sum |x_i w_i|
// (Linear64 on the absolute values) + |r|.
func linear64(x, w, r []float32, out, in int) (want, mag []float64) {
	want = cpuref.Linear64(cpuref.Widen(x), cpuref.Widen(w), out, in)
	mag = cpuref.Linear64(abs64(cpuref.Widen(x)), abs64(cpuref.Widen(w)), out, in)
	for i, e := range r {
		want[i] += float64(e)
		mag[i] += math.Abs(float64(e))
	}
	return want, mag
}

// checkClose compares got, of type typ, with want: each element within
// the bound of a float32 dot product of length in (and a residual add)
// rounded once to typ.
//
// The kernels multiply and add in float32 and round y once. For any order
// of the in products and in additions (the residual's included), the
// float32 result is within gamma(in+1) * mag of the exact value, where
// gamma(m) = m u / (1 - m u), u = 2^-24 and mag = sum |x_i w_i| + |r|
// (Higham, Accuracy and Stability of Numerical Algorithms, section 3.1;
// a product of two f16 or bf16 values is exact in float32, one of f32
// values rounds once, which the +1 counts). Rounding to typ then adds
// half an ulp: u_typ (2^-24 f32, 2^-11 f16, 2^-8 bf16) times the computed
// value's magnitude, at most |want| + gamma * mag, and for f16 half its
// smallest subnormal, 2^-25, below its normal range.
func checkClose(t *testing.T, got []float32, want, mag []float64, typ tensor.ElemType, in int) {
	t.Helper()
	const u = 0x1p-24
	m := float64(in + 1)
	gamma := m * u / (1 - m*u)
	uOut, sub := roundingOf(typ)
	within(t, "y", got, want, func(i int) float64 {
		acc := gamma * mag[i]
		return acc + uOut*(math.Abs(want[i])+acc) + sub
	})
}

// nans returns n NaNs: the contents of an output view at an offset.
func nans(n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(math.NaN())
	}
	return x
}

// TestLinearChoosesByRows checks that Linear dispatches the matvec up to
// ops.MatVecMaxRows rows of x and the matmul above (told apart by their
// threadgroups), and that both give y within the bound.
func TestLinearChoosesByRows(t *testing.T) {
	r := newRig(t, testdevice.Orders[0])
	for _, n := range []int{1, ops.MatVecMaxRows, ops.MatVecMaxRows + 1} {
		c := linearCase{n: n, in: 40, out: 20, residual: true}
		rng := rand.New(rand.NewPCG(uint64(n), 0x11))
		w := r.view(tensor.BF16, random(rng, c.out*c.in, 1))
		x := r.view(tensor.F32, random(rng, c.n*c.in, 1))
		res := r.view(tensor.F32, random(rng, c.n*c.out, 1))
		y := r.empty(tensor.F32, c.n*c.out)
		counters := r.counters(func(enc *mtl.ComputeCommandEncoder) error {
			return r.k.Linear(enc, w, x, res, y, c.n, c.in, c.out)
		})
		group := [3]int{32, kernels.MatVecSIMDGroups, 1}
		if n > ops.MatVecMaxRows {
			group = [3]int{kernels.MatMulThreads, 1, 1}
		}
		if got := counters.ThreadsPerThreadgroup; got != group {
			t.Errorf("n = %d: threadgroup %v, want %v", n, got, group)
		}
		want, mag := linear64(r.read(x), r.read(w), r.read(res), c.out, c.in)
		checkClose(t, r.read(y), want, mag, tensor.F32, c.in)
	}
}

// gatherCase is one gathered matvec; bad lists slots whose id is replaced
// by one at or beyond Experts.
type gatherCase struct {
	ops.Gather
	bad map[int]uint32
}

var gatherCases = []gatherCase{
	{Gather: ops.Gather{Tokens: 1, TopK: 2, Experts: 4, In: 67, Out: 19}},
	{Gather: ops.Gather{Tokens: 3, TopK: 3, Experts: 5, In: 40, Out: 33, XPerSlot: true}},
	{Gather: ops.Gather{Tokens: 2, TopK: 2, Experts: 3, In: 9, Out: 5}, bad: map[int]uint32{1: 3, 2: math.MaxUint32}},
}

// TestGatherMatVec checks the gathered matvec against cpuref.Linear64 per
// (token, expert) pair, for every weight and activation type, x shared by
// a token's experts or one row per expert, and ids at or beyond the
// number of experts (a row of zeros), in both orders and with bf16 by
// hand.
func TestGatherMatVec(t *testing.T) {
	eachRun(t, func(t *testing.T, r *rig) {
		for wi, wt := range kernels.ElemTypes {
			for ai, at := range kernels.ElemTypes {
				for ci, c := range gatherCases {
					t.Run(fmt.Sprintf("%v_%v/%d", wt, at, ci), func(t *testing.T) {
						checkGather(t, r, wt, at, c, uint64(wi*100+ai*10+ci))
					})
				}
			}
		}
	})
}

func checkGather(t *testing.T, r *rig, wt, at tensor.ElemType, c gatherCase, seed uint64) {
	defer func(old testing.TB) { r.T = old }(r.T)
	r.T = t
	g := c.Gather
	rng := rand.New(rand.NewPCG(seed, 0x9a7))
	slots := g.Tokens * g.TopK
	xRows := g.Tokens
	if g.XPerSlot {
		xRows = slots
	}
	ids := make([]uint32, slots)
	for tok := range g.Tokens {
		for j, e := range rng.Perm(g.Experts)[:g.TopK] {
			ids[tok*g.TopK+j] = uint32(e)
		}
	}
	for s, id := range c.bad {
		ids[s] = id
	}
	matrix := g.Out * g.In
	w := r.view(wt, random(rng, g.Experts*matrix, 1))
	x := r.view(at, random(rng, xRows*g.In, 1))
	idv := ints(r, tensor.U32, ids)
	y := r.empty(at, slots*g.Out)

	wv, xv := r.read(w), r.read(x)
	want := make([]float64, 0, slots*g.Out)
	mag := make([]float64, 0, slots*g.Out)
	for s, e := range ids {
		if int(e) >= g.Experts {
			want = append(want, make([]float64, g.Out)...) // zeros, exactly
			mag = append(mag, make([]float64, g.Out)...)
			continue
		}
		xr := s / g.TopK
		if g.XPerSlot {
			xr = s
		}
		ws, ms := linear64(xv[xr*g.In:(xr+1)*g.In], wv[int(e)*matrix:(int(e)+1)*matrix], nil, g.Out, g.In)
		want, mag = append(want, ws...), append(mag, ms...)
	}
	r.run(func(enc *mtl.ComputeCommandEncoder) error { return r.k.GatherMatVec(enc, w, x, idv, y, g) })
	checkClose(t, r.read(y), want, mag, at, g.In)
}

// TestMatMulRefusals checks that each bad argument of the dense products
// is refused before anything is encoded: an error matching
// ops.ErrInvalidArgument that names the argument and the numbers, and a
// command buffer that runs no dispatch.
func TestMatMulRefusals(t *testing.T) {
	r := newRig(t, testdevice.Orders[0])
	const n, in, out = 2, 8, 4
	f32 := func(k int) tensor.View { return r.view(tensor.F32, make([]float32, k)) }
	w, x, res, y := f32(out*in), f32(n*in), f32(n*out), r.empty(tensor.F32, n*out)
	wide := f32(n*in + n*out) // x followed by y
	xOf, yOf := tensor.NewView(wide.Buffer, 0, tensor.F32, n*in), tensor.NewView(wide.Buffer, n*in*4, tensor.F32, n*out)
	dead := f32(out * in)
	dead.Buffer.Release()
	h16 := r.empty(tensor.F16, n*out)
	ints32 := r.empty(tensor.I32, out*in)

	g := ops.Gather{Tokens: 2, TopK: 2, Experts: 3, In: in, Out: out}
	gw, gx, gids, gy := f32(3*out*in), f32(2*in), ints(r, tensor.U32, []uint32{0, 1, 2, 0}), r.empty(tensor.F32, 4*out)
	gather := func(edit func(w, x, ids, y *tensor.View, g *ops.Gather)) func(enc *mtl.ComputeCommandEncoder) error {
		w, x, ids, y, g := gw, gx, gids, gy, g
		edit(&w, &x, &ids, &y, &g)
		return func(enc *mtl.ComputeCommandEncoder) error { return r.k.GatherMatVec(enc, w, x, ids, y, g) }
	}
	linear := func(f linearFunc, w, x, res, y tensor.View, n, in, out int) func(enc *mtl.ComputeCommandEncoder) error {
		return func(enc *mtl.ComputeCommandEncoder) error { return f(r.k, enc, w, x, res, y, n, in, out) }
	}
	mv, mm := linearFunc((*ops.Kernels).MatVec), linearFunc((*ops.Kernels).MatMul)
	checkRefusals(t, r, []refusal{
		{"n zero", linear(mm, w, x, res, y, 0, in, out), "n", []string{"0"}},
		{"in negative", linear(mv, w, x, res, y, n, -1, out), "in", []string{"-1"}},
		{"out zero", linear(mm, w, x, res, y, n, in, 0), "out", []string{"0"}},
		{"matvec n above 8", linear(mv, w, f32(9*in), res, y, 9, in, out), "n", []string{"9", "8"}},
		{"W integer", linear(mv, ints32, x, res, y, n, in, out), "W", []string{"i32"}},
		{"X integer", linear(mm, w, ints32, res, y, n, in, out), "X", []string{"i32"}},
		{"Y of another type", linear(mv, w, x, res, h16, n, in, out), "Y", []string{"f16", "f32"}},
		{"R of another type", linear(mm, w, x, h16, y, n, in, out), "R", []string{"f16", "f32"}},
		{"W short", linear(mv, f32(out*in-1), x, res, y, n, in, out), "W", []string{"31", "32"}},
		{"X long", linear(mm, w, f32(n*in+1), res, y, n, in, out), "X", []string{"17", "16"}},
		{"Y short", linear(mv, w, x, res, f32(n*out-1), n, in, out), "Y", []string{"7", "8"}},
		{"W released", linear(mv, dead, x, res, y, n, in, out), "W", []string{"released"}},
		{"Y overlaps X", linear(mv, w, xOf, res, tensor.NewView(wide.Buffer, 4, tensor.F32, n*out), n, in, out), "Y", []string{"X"}},
		{"R overlaps Y, not equal", linear(mm, w, xOf, tensor.NewView(wide.Buffer, n*in*4-4, tensor.F32, n*out), yOf, n, in, out), "Y", []string{"R"}},
		{"W beyond 2^32 elements", linear(mv, w, x, res, y, n, 1<<31, 2), "W", []string{"2^32"}},
		{"gather TopK zero", gather(func(_, _, _, _ *tensor.View, g *ops.Gather) { g.TopK = 0 }), "TopK", []string{"0"}},
		{"gather Experts zero", gather(func(_, _, _, _ *tensor.View, g *ops.Gather) { g.Experts = 0 }), "Experts", []string{"0"}},
		{"gather ids signed", gather(func(_, _, ids, _ *tensor.View, _ *ops.Gather) { *ids = r.empty(tensor.I32, 4) }), "IDs", []string{"i32", "u32"}},
		{"gather ids short", gather(func(_, _, ids, _ *tensor.View, _ *ops.Gather) { *ids = r.empty(tensor.U32, 3) }), "IDs", []string{"3", "4"}},
		{"gather W one expert short", gather(func(w, _, _, _ *tensor.View, _ *ops.Gather) { *w = f32(2 * out * in) }), "W", []string{"64", "96"}},
		{"gather x per token given, per slot said", gather(func(_, _, _, _ *tensor.View, g *ops.Gather) { g.XPerSlot = true }), "X", []string{"16", "32"}},
		{"gather Y per token", gather(func(_, _, _, y *tensor.View, _ *ops.Gather) { *y = r.empty(tensor.F32, 2*out) }), "Y", []string{"8", "16"}},
		{"gather Y inside W", gather(func(w, _, _, y *tensor.View, _ *ops.Gather) {
			*y = tensor.NewView(w.Buffer, 64, tensor.F32, 16)
		}), "Y", []string{"W"}},
	})
	if _, err := r.commit(linear(mv, dead, x, res, y, n, in, out)); !errors.Is(err, mtl.ErrReleased) {
		t.Errorf("a released W: error %v, want one matching mtl.ErrReleased", err)
	}
	// In place is the one overlap allowed: R exactly Y.
	if _, err := r.commit(linear(mm, w, x, y, y, n, in, out)); err != nil {
		t.Errorf("R == Y refused: %v", err)
	}
}

// TestMatMulNoAllocation checks that encoding a dense product allocates
// nothing beyond the encoder calls it makes: a decode step encodes
// hundreds of them.
func TestMatMulNoAllocation(t *testing.T) {
	r := newRig(t, testdevice.Orders[0])
	const n, in, out = 2, 64, 16
	w, x, y := r.empty(tensor.BF16, 3*out*in), r.empty(tensor.F32, n*in), r.empty(tensor.F32, n*2*out)
	w1, y1 := tensor.NewView(w.Buffer, 2*out*in, tensor.BF16, out*in), tensor.NewView(y.Buffer, 0, tensor.F32, n*out)
	ids := r.empty(tensor.U32, n*2)
	g := ops.Gather{Tokens: n, TopK: 2, Experts: 3, In: in, Out: out}
	cb, enc := r.Encoder()
	defer cb.Release()
	for _, c := range []struct {
		entry   string
		buffers int
		f       func() error
	}{
		{kernels.MatVecOf(tensor.BF16, tensor.F32), 4, func() error { return r.k.Linear(enc, w1, x, y1, y1, n, in, out) }},
		{kernels.MatMulOf(tensor.BF16, tensor.F32), 4, func() error { return r.k.MatMul(enc, w1, x, tensor.View{}, y1, n, in, out) }},
		{kernels.GatherMatVecOf(tensor.BF16, tensor.F32), 4, func() error { return r.k.GatherMatVec(enc, w, x, ids, y, g) }},
	} {
		if got, direct := r.encodingAllocs(enc, c.entry, c.buffers, x, c.f); got > direct {
			t.Errorf("%s: %v allocations per dispatch, its encoder calls %v", c.entry, got, direct)
		}
	}
	enc.EndEncoding()
}
