package ops_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/kernels"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/ops"
	"github.com/puremetal/puremetal/tensor"
)

// attnSeq is one sequence of an attention test step: its slot (negative:
// padding), the positions its slot held before the step, and its tokens.
type attnSeq struct{ slot, past, tokens int }

// attnCase is one attention step: the layer's shape, the sequences, and
// decode's splits (0: prefill).
type attnCase struct {
	typ                 tensor.ElemType
	dim, heads, kvHeads int
	slots, maxLen       int
	seqs                []attnSeq
	varlen              bool
	splits              int
	gate                int // the gate's stride in head sizes: 0 (none), 1 or 2 (q_proj's [query | gate])
}

func (c attnCase) String() string {
	kind := "prefill"
	if c.splits > 0 {
		kind = fmt.Sprintf("decode-split%d", c.splits)
	}
	return fmt.Sprintf("%v-d%d-h%d-kv%d-%s-gate%d", c.typ, c.dim, c.heads, c.kvHeads, kind, c.gate)
}

// Decode cases: every type and head size, GQA 1, 2, 4 and 8, caches of 1
// position, odd lengths and long enough for the splits (301 keys are ten
// blocks of 32: eight splits use five of them), padding, slots out of
// order.
var attnDecodeCases = []attnCase{
	{typ: tensor.F32, dim: 64, heads: 8, kvHeads: 1, slots: 4, maxLen: 48, splits: 1,
		seqs: []attnSeq{{2, 0, 1}, {-1, 0, 1}, {0, 40, 1}}},
	{typ: tensor.F16, dim: 128, heads: 4, kvHeads: 2, slots: 3, maxLen: 224, splits: 4, gate: 1,
		seqs: []attnSeq{{1, 70, 1}, {2, 200, 1}, {0, 0, 1}}},
	{typ: tensor.BF16, dim: 256, heads: 4, kvHeads: 1, slots: 2, maxLen: 112, splits: 3, gate: 2,
		seqs: []attnSeq{{1, 100, 1}, {0, 33, 1}}},
	{typ: tensor.F32, dim: 128, heads: 2, kvHeads: 2, slots: 1, maxLen: 320, splits: 8, gate: 2,
		seqs: []attnSeq{{0, 300, 1}}},
	{typ: tensor.F16, dim: 64, heads: 16, kvHeads: 2, slots: 2, maxLen: 96, splits: 2,
		seqs: []attnSeq{{-1, 0, 1}, {1, 95, 1}}},
	{typ: tensor.BF16, dim: 128, heads: 8, kvHeads: 1, slots: 2, maxLen: 8, splits: 1, gate: 1,
		seqs: []attnSeq{{0, 0, 1}, {1, 7, 1}}},
}

// Prefill cases: packed sequences of different lengths (one empty) after
// cached prefixes of different lengths (chunked prefill), padding, one
// step without Varlen, every type, head size and GQA ratio.
var attnPrefillCases = []attnCase{
	{typ: tensor.F32, dim: 64, heads: 2, kvHeads: 2, slots: 4, maxLen: 40, varlen: true,
		seqs: []attnSeq{{1, 0, 5}, {3, 0, 0}, {-1, 0, 3}, {0, 20, 9}}},
	{typ: tensor.F16, dim: 128, heads: 4, kvHeads: 1, slots: 2, maxLen: 24, varlen: true, gate: 2,
		seqs: []attnSeq{{1, 11, 3}, {0, 0, 7}}},
	{typ: tensor.BF16, dim: 256, heads: 8, kvHeads: 1, slots: 3, maxLen: 16, varlen: true, gate: 1,
		seqs: []attnSeq{{2, 5, 2}, {0, 9, 4}}},
	{typ: tensor.F32, dim: 256, heads: 4, kvHeads: 2, slots: 2, maxLen: 12,
		seqs: []attnSeq{{1, 0, 3}, {0, 7, 3}}},
	{typ: tensor.F16, dim: 64, heads: 4, kvHeads: 2, slots: 1, maxLen: 40, varlen: true,
		seqs: []attnSeq{{0, 3, 33}}},
}

func TestAttentionDecode(t *testing.T)  { eachAttnCase(t, attnDecodeCases) }
func TestAttentionPrefill(t *testing.T) { eachAttnCase(t, attnPrefillCases) }

// TestAttentionBF16ByHand runs the bf16 cases with the kernels compiled as
// MSL 3.0, where bf16 is 16-bit integers converted by hand, and as 3.1
// (MSL's bfloat): both pass the checks and give the same bytes.
func TestAttentionBF16ByHand(t *testing.T) {
	langs := []mtl.LanguageVersion{mtl.LanguageVersion3_0, mtl.LanguageVersion3_1}
	cases := append(append([]attnCase(nil), attnDecodeCases...), attnPrefillCases...)
	outs := make([][2][]float32, len(cases))
	for l, lang := range langs {
		t.Run(fmt.Sprintf("msl%d.%d", lang>>16, lang&0xffff), func(t *testing.T) {
			r := newRigWith(t, testdevice.Orders[0], kernels.NewRegistryWithLanguage(lang))
			for i, c := range cases {
				if c.typ != tensor.BF16 {
					continue
				}
				t.Run(c.String(), func(t *testing.T) {
					g := *r.GPU
					g.T = t
					outs[i][l] = runAttnCase(&rig{GPU: &g, k: r.k}, c, uint64(i))
				})
			}
		})
	}
	for i, o := range outs {
		for j := range o[0] {
			if math.Float32bits(o[0][j]) != math.Float32bits(o[1][j]) {
				t.Fatalf("%v, output element %d: %v with bf16 by hand, %v with MSL's bfloat", cases[i], j, o[0][j], o[1][j])
			}
		}
	}
}

// eachAttnCase runs every case in both scheduling orders, each run with
// inputs of its own.
func eachAttnCase(t *testing.T, cases []attnCase) {
	eachOrder(t, func(t *testing.T, r *rig) {
		for i, c := range cases {
			t.Run(c.String(), func(t *testing.T) {
				g := *r.GPU
				g.T = t
				r := &rig{GPU: &g, k: r.k}
				runAttnCase(r, c, uint64(i)<<8|uint64(len(t.Name())))
			})
		}
	})
}

// attnRun is what one case put on the device.
type attnRun struct {
	a     ops.Attention
	step  ops.AttentionStep
	views ops.AttentionViews
	cache [2][]float32 // the caches before the step (NaN where nothing was cached)
	tok0  []int        // each sequence's first token
	qkv   [3][]float32 // q, k, v as rounded to the type
	gate  []float32
}

// setUpAttn makes the views of case c with random inputs from seed: the
// caches poisoned except for each sequence's cached prefix, the slots and
// cache lengths, and the step's views (newStep).
func setUpAttn(r *rig, c attnCase, seed uint64) *attnRun {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	u := &attnRun{a: ops.Attention{Type: c.typ, HeadDim: c.dim, Heads: c.heads, KVHeads: c.kvHeads,
		Slots: c.slots, MaxLen: c.maxLen, GateStride: c.gate * c.dim}}
	slots, lens := make([]int32, len(c.seqs)), make([]int32, len(c.seqs))
	for i, s := range c.seqs {
		slots[i], lens[i] = int32(s.slot), int32(s.past)
	}
	n := c.dim * c.maxLen * c.kvHeads * c.slots
	for i := range u.cache {
		u.cache[i] = make([]float32, n)
		for j := range u.cache[i] {
			u.cache[i][j] = float32(math.NaN())
		}
		for _, s := range c.seqs {
			for g := 0; g < c.kvHeads && s.slot >= 0; g++ {
				run := u.cache[i][((s.slot*c.kvHeads+g)*c.maxLen)*c.dim:][:s.past*c.dim]
				copy(run, random(rng, len(run), 1))
			}
		}
	}
	v := &u.views
	v.KCache, v.VCache = r.view(c.typ, u.cache[0]), r.view(c.typ, u.cache[1])
	u.cache[0], u.cache[1] = r.raw(v.KCache), r.raw(v.VCache)
	v.Slots, v.CacheLens = ints(r, tensor.I32, slots), ints(r, tensor.I32, lens)
	u.newStep(r, c, rng)
	return u
}

// newStep makes the views of a step of case c over u's caches, slots and
// cache lengths: random q, k, v and gate, cu_seqlens, the output and the
// partials poisoned.
func (u *attnRun) newStep(r *rig, c attnCase, rng *rand.Rand) {
	u.step = ops.AttentionStep{Seqs: len(c.seqs), Varlen: c.varlen, Splits: c.splits}
	u.tok0 = u.tok0[:0]
	cu := []int32{0}
	for _, s := range c.seqs {
		u.tok0 = append(u.tok0, u.step.Tokens)
		u.step.Tokens += s.tokens
		cu = append(cu, int32(u.step.Tokens))
	}
	v := &u.views
	qw, kvw := c.dim*c.heads, c.dim*c.kvHeads
	v.Q = r.view(c.typ, random(rng, u.step.Tokens*qw, 1))
	v.K = r.view(c.typ, random(rng, u.step.Tokens*kvw, 1))
	v.V = r.view(c.typ, random(rng, u.step.Tokens*kvw, 1))
	u.qkv = [3][]float32{r.read(v.Q), r.read(v.K), r.read(v.V)}
	v.Gate, u.gate = tensor.View{}, nil
	if c.gate > 0 {
		v.Gate = r.view(c.typ, random(rng, (u.step.Tokens*c.heads-1)*c.gate*c.dim+c.dim, 4))
		u.gate = r.read(v.Gate)
	}
	v.Out = r.empty(c.typ, u.step.Tokens*qw)
	v.CuSeqlens = tensor.View{}
	if c.varlen {
		v.CuSeqlens = ints(r, tensor.I32, cu)
	}
	v.PartialO, v.PartialML = tensor.View{}, tensor.View{}
	if c.splits > 1 {
		v.PartialO = r.empty(tensor.F32, c.dim*c.splits*c.heads*len(c.seqs))
		v.PartialML = r.empty(tensor.F32, 2*c.splits*c.heads*len(c.seqs))
	}
}

// encode encodes the step: the append, then decode or prefill attention.
func (u *attnRun) encode(k *ops.Kernels, enc *mtl.ComputeCommandEncoder) error {
	if err := k.KVAppend(enc, u.a, u.step, u.views); err != nil {
		return err
	}
	if u.step.Splits > 0 {
		return k.AttentionDecode(enc, u.a, u.step, u.views)
	}
	return k.AttentionPrefill(enc, u.a, u.step, u.views)
}

// runAttnCase runs the append and the attention of case c and checks
// (attnRun.check):
// the caches hold the step's keys and values, bit for bit, at each live
// sequence's positions and are unchanged elsewhere; each live sequence's
// output is within attnBound of cpuref.Attention64 (float64, over the
// same rounded inputs) times the gate's sigmoid; padding sequences' rows
// are left poisoned.
func runAttnCase(r *rig, c attnCase, seed uint64) []float32 {
	u := setUpAttn(r, c, seed)
	r.run(func(enc *mtl.ComputeCommandEncoder) error { return u.encode(r.k, enc) })
	return u.check(r, c)
}

// check makes runAttnCase's checks of a step of case c that ran, and
// returns the output.
func (u *attnRun) check(r *rig, c attnCase) []float32 {
	t := r.T

	want := [2][]float32{append([]float32(nil), u.cache[0]...), append([]float32(nil), u.cache[1]...)}
	kvw := c.dim * c.kvHeads
	for i, s := range c.seqs {
		for j := 0; j < s.tokens && s.slot >= 0; j++ {
			for g := 0; g < c.kvHeads; g++ {
				dst := ((s.slot*c.kvHeads+g)*c.maxLen + s.past + j) * c.dim
				src := (u.tok0[i]+j)*kvw + g*c.dim
				copy(want[0][dst:dst+c.dim], u.qkv[1][src:])
				copy(want[1][dst:dst+c.dim], u.qkv[2][src:])
			}
		}
	}
	for i, name := range []string{"KCache", "VCache"} {
		got := r.raw([]tensor.View{u.views.KCache, u.views.VCache}[i])
		for j := range got {
			if math.Float32bits(got[j]) != math.Float32bits(want[i][j]) && !(got[j] != got[j] && want[i][j] != want[i][j]) {
				t.Fatalf("%s element %d = %v, want %v", name, j, got[j], want[i][j])
			}
		}
	}
	u.cache = want

	out := r.raw(u.views.Out)
	qw := c.dim * c.heads
	var worst float64
	for i, s := range c.seqs {
		rows := out[u.tok0[i]*qw : (u.tok0[i]+s.tokens)*qw]
		if s.slot < 0 {
			for j, o := range rows {
				if o == o {
					t.Fatalf("sequence %d is padding, its output element %d was written (%v)", i, j, o)
				}
			}
			continue
		}
		ref, bound := u.reference(c, i)
		for j, o := range rows {
			err := math.Abs(float64(o) - ref[j])
			if !(err <= bound[j]) {
				t.Fatalf("sequence %d, token %d, head %d, element %d: %v, want %v within %.3g (error %.3g)",
					i, j/qw, j%qw/c.dim, j%c.dim, o, ref[j], bound[j], err)
			}
			worst = max(worst, err/bound[j])
		}
	}
	t.Logf("largest error %.3g of its bound", worst)
	return out
}

// reference returns sequence i's output from cpuref.Attention64 over the
// rounded inputs, times sigmoid of the gate, and each element's bound.
//
// The bound: a score s = scale * q.k summed in float32 over D products is
// off by at most (D+1) eps S, S = scale * sum_i |q_i k_i| (the dot
// product's and the scale's roundings, eps = 2^-24). Through exp(s - m)
// and the normalisation a weight's relative error is at most twice that
// plus the roundings of exp (a few ulps, the kernels compile without fast
// math), of the running sum over n keys (n eps) and of the rescalings
// (at most one per key, each an exp and a product); the output, a convex
// combination of values, is then off by at most
//
//	eps * (2 (D+1) S + 4 n + 32) * max|v|
//
// plus 8 eps |o| for its last divisions and the gate's sigmoid, and half
// an ulp of the output type, u |o| (u = 2^-11 f16, 2^-8 bf16, 0 f32,
// whose rounding the 8 eps already hold). The sigmoid is at most 1, so
// it shrinks the first term.
func (u *attnRun) reference(c attnCase, i int) (ref, bound []float64) {
	s := c.seqs[i]
	qw, kvw := c.dim*c.heads, c.dim*c.kvHeads
	n := s.past + s.tokens
	k, v := make([]float64, n*kvw), make([]float64, n*kvw)
	for p := 0; p < n; p++ {
		for g := 0; g < c.kvHeads; g++ {
			src := ((s.slot*c.kvHeads+g)*c.maxLen + p) * c.dim
			for d := 0; d < c.dim; d++ {
				k[p*kvw+g*c.dim+d] = float64(u.cache[0][src+d])
				v[p*kvw+g*c.dim+d] = float64(u.cache[1][src+d])
			}
		}
	}
	q := make([]float64, s.tokens*qw)
	pos := make([]int, s.tokens)
	for j := range q {
		q[j] = float64(u.qkv[0][u.tok0[i]*qw+j])
	}
	for j := range pos {
		pos[j] = s.past + j
	}
	scale := float64(float32(1 / math.Sqrt(float64(c.dim))))
	ref = cpuref.Attention64(q, k, v, c.heads, c.kvHeads, c.dim, pos, scale)
	unit := map[tensor.ElemType]float64{tensor.F32: 0, tensor.F16: 0x1p-11, tensor.BF16: 0x1p-8}[c.typ]
	const eps = 0x1p-24
	// Per row (token, head): S and max|v| over the keys it sees.
	sMax, vMax := make([]float64, s.tokens*c.heads), make([]float64, s.tokens*c.heads)
	for row := range sMax {
		t, h := row/c.heads, row%c.heads
		g := h / (c.heads / c.kvHeads)
		for p := 0; p <= pos[t]; p++ {
			var sum float64
			for e := 0; e < c.dim; e++ {
				sum += math.Abs(q[row*c.dim+e] * k[p*kvw+g*c.dim+e])
				vMax[row] = max(vMax[row], math.Abs(v[p*kvw+g*c.dim+e]))
			}
			sMax[row] = max(sMax[row], scale*sum)
		}
	}
	bound = make([]float64, len(ref))
	for j := range ref {
		t, h, d := j/qw, j%qw/c.dim, j%c.dim
		if c.gate > 0 {
			ref[j] *= cpuref.Sigmoid64(float64(u.gate[((u.tok0[i]+t)*c.heads+h)*c.gate*c.dim+d]))
		}
		nk := float64(pos[t] + 1)
		bound[j] = eps*(2*float64(c.dim+1)*sMax[j/c.dim]+4*nk+32)*vMax[j/c.dim] + (8*eps+unit)*math.Abs(ref[j])
	}
	return ref, bound
}

// attnRefusal is a change to a valid step that a dispatcher must refuse,
// the dispatchers it applies to ('a' KVAppend, 'd' AttentionDecode, 'p'
// AttentionPrefill, 'v' KVAdvance) and words the error must hold.
type attnRefusal struct {
	name   string
	on     string
	change func(r *rig, u *attnRun)
	want   []string
}

var attnRefusals = []attnRefusal{
	{"integer type", "adpv", func(r *rig, u *attnRun) { u.a.Type = tensor.I32 }, []string{"Attention.Type", "i32"}},
	{"head size 96", "adpv", func(r *rig, u *attnRun) { u.a.HeadDim = 96 }, []string{"Attention.HeadDim", "96"}},
	{"heads not groups", "adpv", func(r *rig, u *attnRun) { u.a.Heads, u.a.KVHeads = 3, 2 }, []string{"Attention.Heads", "Heads = 3", "KVHeads = 2", "multiple"}},
	{"no KV heads", "adpv", func(r *rig, u *attnRun) { u.a.KVHeads = 0 }, []string{"Attention.Heads", "KVHeads = 0"}},
	{"GQA 16 in decode", "d", func(r *rig, u *attnRun) { u.a.Heads = 16 }, []string{"Attention.Heads", "16", "at most 8"}},
	{"no slots", "adpv", func(r *rig, u *attnRun) { u.a.Slots = 0 }, []string{"Attention.Slots", "Slots = 0"}},
	{"NaN scale", "adpv", func(r *rig, u *attnRun) { u.a.Scale = float32(math.NaN()) }, []string{"Attention.Scale", "NaN"}},
	{"gate stride below the head", "dp", func(r *rig, u *attnRun) { u.a.GateStride = 63 }, []string{"Attention.GateStride", "63"}},
	{"no tokens", "adpv", func(r *rig, u *attnRun) { u.step.Tokens = 0 }, []string{"AttentionStep.Tokens", "Tokens = 0"}},
	{"tokens not per sequence", "apv", func(r *rig, u *attnRun) { u.step.Tokens = 3 }, []string{"AttentionStep.Tokens", "3", "multiple"}},
	{"decode with Varlen", "d", func(r *rig, u *attnRun) { u.step.Varlen = true }, []string{"AttentionStep.Tokens", "Varlen = true"}},
	{"MaxSeqTokens beyond Tokens", "apv", func(r *rig, u *attnRun) { u.step.Varlen, u.step.MaxSeqTokens = true, 3 }, []string{"AttentionStep.MaxSeqTokens", "3"}},
	{"too many splits", "d", func(r *rig, u *attnRun) { u.step.Splits = ops.MaxAttentionSplits + 1 }, []string{"AttentionStep.Splits", "65537"}},
	{"q too short", "dp", func(r *rig, u *attnRun) { u.views.Q.Len-- }, []string{"Q", "255 elements", "HeadDim*Heads*Tokens = 256"}},
	{"k of another type", "a", func(r *rig, u *attnRun) { u.views.K.Type = tensor.F16 }, []string{"K", "f16", "Attention.Type is f32"}},
	{"cache too long", "adp", func(r *rig, u *attnRun) { u.a.MaxLen = 4 }, []string{"KCache", "HeadDim*MaxLen*KVHeads*Slots = 768"}},
	{"output on q", "dp", func(r *rig, u *attnRun) { u.views.Out = u.views.Q }, []string{"Out", "overlap", "Q"}},
	{"cache on k", "a", func(r *rig, u *attnRun) { u.views.VCache.Buffer = u.views.K.Buffer }, []string{"VCache"}},
	{"lengths on the slots", "v", func(r *rig, u *attnRun) { u.views.CacheLens = u.views.Slots }, []string{"CacheLens", "overlap", "Slots"}},
	{"no slots view", "adpv", func(r *rig, u *attnRun) { u.views.Slots = tensor.View{} }, []string{"Slots", "no buffer"}},
	{"no gate view", "dp", func(r *rig, u *attnRun) { u.a.GateStride = 64 }, []string{"Gate", "no buffer"}},
	{"no partials", "d", func(r *rig, u *attnRun) { u.step.Splits = 2 }, []string{"PartialO", "no buffer"}},
	{"no cu_seqlens", "apv", func(r *rig, u *attnRun) { u.step.Varlen = true }, []string{"CuSeqlens", "no buffer"}},
	{"slot beyond the pool", "adpv", func(r *rig, u *attnRun) { u.views.Slots = ints(r, tensor.I32, []int32{3, 0}) }, []string{"Slots", "slot 3", "Slots = 3"}},
	{"slot twice", "adpv", func(r *rig, u *attnRun) { u.views.Slots = ints(r, tensor.I32, []int32{1, 1}) }, []string{"Slots", "sequences 0 and 1", "slot 1"}},
	{"cache full", "adpv", func(r *rig, u *attnRun) { u.views.CacheLens = ints(r, tensor.I32, []int32{0, 8}) }, []string{"CacheLens", "sequence 1", "8 positions", "MaxLen = 8"}},
	{"negative cache length", "adpv", func(r *rig, u *attnRun) { u.views.CacheLens = ints(r, tensor.I32, []int32{-1, 0}) }, []string{"CacheLens", "-1"}},
	{"cu_seqlens short of Tokens", "apv", func(r *rig, u *attnRun) {
		u.step.Varlen, u.views.CuSeqlens = true, ints(r, tensor.I32, []int32{0, 1, 1})
	}, []string{"CuSeqlens", "ends at 1", "Tokens = 2"}},
	{"a sequence beyond MaxSeqTokens", "apv", func(r *rig, u *attnRun) {
		u.step.Varlen, u.step.MaxSeqTokens, u.views.CuSeqlens = true, 1, ints(r, tensor.I32, []int32{0, 2, 2})
	}, []string{"CuSeqlens", "sequence 0 has 2", "MaxSeqTokens = 1"}},
}

// TestAttentionRefusals checks that each dispatcher refuses every change
// of attnRefusals with an error wrapping ErrInvalidArgument that names
// the argument and the numbers, and encodes nothing: the encoder has no
// error and the command buffer runs no dispatch.
func TestAttentionRefusals(t *testing.T) {
	r := newRig(t, testdevice.Orders[0])
	base := attnCase{typ: tensor.F32, dim: 64, heads: 2, kvHeads: 1, slots: 3, maxLen: 8, splits: 1,
		seqs: []attnSeq{{0, 2, 1}, {2, 5, 1}}}
	dispatchers := map[rune]func(*ops.Kernels, *mtl.ComputeCommandEncoder, ops.Attention, ops.AttentionStep, ops.AttentionViews) error{
		'a': (*ops.Kernels).KVAppend, 'd': (*ops.Kernels).AttentionDecode, 'p': (*ops.Kernels).AttentionPrefill,
		'v': (*ops.Kernels).KVAdvance,
	}
	cb, enc := r.Encoder()
	for _, c := range attnRefusals {
		for _, d := range c.on {
			u := setUpAttn(r, base, 1)
			if d != 'd' {
				u.step.Splits = 0
			}
			c.change(r, u)
			err := dispatchers[d](r.k, enc, u.a, u.step, u.views)
			if !errors.Is(err, ops.ErrInvalidArgument) {
				t.Errorf("%s (%c): error %v, want ErrInvalidArgument", c.name, d, err)
				continue
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s (%c): %q does not say %q", c.name, d, err, w)
				}
			}
		}
	}
	if err := enc.Err(); err != nil {
		t.Fatalf("the refusals left the encoder in error: %v", err)
	}
	enc.EndEncoding()
	cb.Commit()
	cb.WaitUntilCompleted()
	counters, err := emu.DispatchCounters(cb)
	if err != nil {
		t.Fatal(err)
	}
	if len(counters) != 0 {
		t.Fatalf("the refusals encoded %d dispatches", len(counters))
	}
}

// TestAttentionStepsStayOnTheGPU runs a chunk of prompts, then two decode
// steps, over the same caches, slots and cache lengths, each step ended
// by KVAdvance: the host never writes the lengths after the first step,
// yet every step's caches and output pass runAttnCase's checks, and the
// lengths read back are the tokens each sequence has seen (padding's
// unchanged).
func TestAttentionStepsStayOnTheGPU(t *testing.T) {
	eachOrder(t, func(t *testing.T, r *rig) {
		c := attnCase{typ: tensor.F16, dim: 64, heads: 4, kvHeads: 2, slots: 3, maxLen: 80, varlen: true, gate: 2,
			seqs: []attnSeq{{2, 0, 9}, {-1, 4, 2}, {0, 30, 35}}}
		rng := rand.New(rand.NewPCG(uint64(len(t.Name())), 3))
		u := setUpAttn(r, c, rng.Uint64())
		for step := range 3 {
			if step > 0 { // decode: one token each, split over the cache
				for i := range c.seqs {
					if c.seqs[i].slot >= 0 {
						c.seqs[i].past += c.seqs[i].tokens
					}
					c.seqs[i].tokens = 1
				}
				c.varlen, c.splits = false, 2
				u.newStep(r, c, rng)
			}
			r.run(func(enc *mtl.ComputeCommandEncoder) error {
				if err := u.encode(r.k, enc); err != nil {
					return err
				}
				return r.k.KVAdvance(enc, u.a, u.step, u.views)
			})
			u.check(r, c)
			lens := make([]int32, len(c.seqs))
			if err := tensor.LoadInts(u.views.CacheLens, lens); err != nil {
				t.Fatal(err)
			}
			for i, s := range c.seqs {
				want := s.past
				if s.slot >= 0 {
					want += s.tokens
				}
				if int(lens[i]) != want {
					t.Fatalf("step %d: sequence %d's cache length is %d, want %d", step, i, lens[i], want)
				}
			}
		}
	})
}
