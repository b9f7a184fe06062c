package tests

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/emu/msl"
	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/kernels"
)

// The chunked prefill kernel (gated_delta_net_chunked_*, the WY form of
// gdn_chunked.metal) against the three references: Reference32 (the
// float32 token loop), Oracle64 (float64, one token at a time) and
// Chunked64 (float64, the chunked matrix form).

// chunkedCases are D_k, D_v in {64, 128}, each on one sequence of two key
// and four value heads (r = 2, so the head maps differ) and, where D_k =
// D_v, on two sequences; n_tokens is two chunks and a partial one, so
// every run has full chunks and a partial last chunk. The head map
// alternates, and the q scale is set with the tiled map.
func chunkedCases() []spec.Params {
	var out []spec.Params
	for i, s := range []struct{ dk, dv, ns int }{{64, 64, 2}, {64, 128, 1}, {128, 64, 1}, {128, 128, 2}} {
		p := spec.Params{Shape: spec.Shape{DK: s.dk, DV: s.dv, NKHeads: 2, NVHeads: 4, NTokens: 2*kernels.ChunkLen + 5, NSeqs: s.ns}}
		if i%2 == 1 {
			p.HeadMap, p.QScale = spec.Tiled, float32(1/math.Sqrt(float64(s.dk)))
		}
		out = append(out, p)
	}
	return out
}

// chunkedRefs are the three references' results for one case.
type chunkedRefs struct {
	references
	c64 cpuref.Result64
}

// chunkedReferences computes the references of one case; without oracle,
// Oracle64 (O(D_v D_k^2) per token and head) is left out, and Chunked64,
// which cpuref's tests hold within 1e-12 of it, stands in for it.
func chunkedReferences(t *testing.T, p spec.Params, in cpuref.Inputs, oracle bool) *chunkedRefs {
	t.Helper()
	r32, err := cpuref.Reference32(p, in, false)
	if err != nil {
		t.Fatal(err)
	}
	c64, err := cpuref.Chunked64(p, in, kernels.ChunkLen)
	if err != nil {
		t.Fatal(err)
	}
	o64 := c64
	if oracle {
		if o64, err = cpuref.Oracle64(p, in, false); err != nil {
			t.Fatal(err)
		}
	}
	return &chunkedRefs{references{in, r32, o64}, c64}
}

// checkChunked checks a chunked run's f32 results against the three
// references: every element written, within boundRef32 of Reference32 and
// boundOracle64 of both float64 forms (checkAgainstReferences, then
// Chunked64).
func checkChunked(t *testing.T, name string, p spec.Params, o outcome, ref *chunkedRefs) {
	t.Helper()
	checkAgainstReferences(t, name, p, o, &ref.references)
	checkBound(t, name+": output vs Chunked64", cpuref.MaxRelErr64(o.Output, ref.c64.Output), boundOracle64)
	checkBound(t, name+": state_out vs Chunked64", cpuref.MaxRelErr64(o.StateOut, ref.c64.StateOut), boundOracle64)
}

// TestEmulatedChunkedParity runs the chunked kernel on chunkedCases
// against the three references, and checks that the results are the same
// bytes in every scheduling order, the same bytes in place (D_k = D_v), and
// that the state is read once and written once and the output written
// once.
func TestEmulatedChunkedParity(t *testing.T) { onEmulated(t, chunkedParity) }

// TestMetalChunkedParity runs the same on the system's GPU (a Mac; it
// skips elsewhere).
func TestMetalChunkedParity(t *testing.T) { onMetal(t, chunkedParity) }

func chunkedParity(t *testing.T, r *rig) {
	for i, p := range chunkedCases() {
		in, err := cpuref.RandomInputs(p, uint64(0xc4c0+i))
		if err != nil {
			t.Fatal(err)
		}
		ref := chunkedReferences(t, p, in, true)
		name := fmt.Sprintf("chunked %v %v", p.Shape, p.HeadMap)
		o := r.runChecked(t, name, job{kern: kChunked, p: p, in: in})
		checkChunked(t, name, p, o, ref)
		if p.DK == p.DV {
			r.checkInPlace(t, name, job{kern: kChunked, p: p, in: in}, o)
		}
	}
}

// TestEmulatedChunked2048 runs 2048 tokens of realistic inputs (q and k
// L2-normalised, real gates: cpuref.RandomInputs) through the chunked
// kernel at D_k = D_v = 128 and at 64, one sequence and one head, and
// requires the output and the final state within 1e-5 of the float32
// token loop (SPEC section 9), and within 1e-4 of the float64 chunked
// form (Oracle64 is left out here for its cost).
func TestEmulatedChunked2048(t *testing.T) { onEmulatedIn(t, allOrders[:1], chunked2048) }

// TestMetalChunked2048 runs the same on the system's GPU (a Mac; it skips
// elsewhere).
func TestMetalChunked2048(t *testing.T) { onMetal(t, chunked2048) }

func chunked2048(t *testing.T, r *rig) {
	for _, d := range []int{64, 128} {
		p := spec.Params{
			Shape:  spec.Shape{DK: d, DV: d, NKHeads: 1, NVHeads: 1, NTokens: 2048, NSeqs: 1},
			QScale: float32(1 / math.Sqrt(float64(d))),
		}
		in, err := cpuref.RandomInputs(p, 0x2048+uint64(d))
		if err != nil {
			t.Fatal(err)
		}
		ref := chunkedReferences(t, p, in, false)
		start := time.Now()
		o := r.run(t, job{kern: kChunked, p: p, in: in})
		el := time.Since(start)
		checkChunked(t, fmt.Sprintf("chunked %v", p.Shape), p, o, ref)
		t.Logf("D=%d, 2048 tokens: vs Reference32 output %.3g, state %.3g (bound %g); vs Chunked64 output %.3g, state %.3g; %v to run",
			d, cpuref.MaxRelErr(o.Output, ref.r32.Output), cpuref.MaxRelErr(o.StateOut, ref.r32.StateOut), boundRef32,
			cpuref.MaxRelErr64(o.Output, ref.c64.Output), cpuref.MaxRelErr64(o.StateOut, ref.c64.StateOut), el.Round(time.Millisecond))
	}
}

// TestEmulatedChunkedTyped runs the chunked kernel for every activation
// type and state type, the fused step off and on (and each fused part on
// its own at f32 and bf16), D_k 64 and 128, the tiled map, against both
// references within SPEC section 9's bounds (checkTypedAgainstReferences),
// on a chunk and three tokens with the typed suite's planted edge values,
// the same bytes in every scheduling order, with the state's and the
// activations' traffic in their own element sizes. The largest errors are
// logged per combination.
func TestEmulatedChunkedTyped(t *testing.T) {
	type row struct{ out, state, out32, state32 float64 }
	worst := map[string]*row{}
	var names []string
	onEmulatedRuns(t, typedRuns, func(t *testing.T, r *rig) {
		seed := uint64(0xc4ed00)
		run := func(a, st spec.ElemType, f spec.Fused, dk int) {
			seed++
			c := typedCase{
				name: fmt.Sprintf("chunked_%v_%v_%s_dk%d", a, st, fusedName(f), dk),
				p: spec.Params{
					Shape:   spec.Shape{DK: dk, DV: 32, NKHeads: 2, NVHeads: 4, NTokens: kernels.ChunkLen + 3, NSeqs: 1},
					HeadMap: spec.Tiled, QScale: float32(1 / math.Sqrt(float64(dk))),
					Activation: a, State: st, Fused: f,
				},
				seed: seed,
			}
			t.Run(c.name, func(t *testing.T) {
				ref := c.references(t)
				o := r.runChecked(t, c.name, job{kern: kChunked, p: c.p, in: ref.in})
				checkTypedAgainstReferences(t, kChunked.name, c.p, o, ref)
				key := fmt.Sprintf("%-4v %-4v %s", a, st, fusedName(f))
				w := worst[key]
				if w == nil {
					w = &row{}
					worst[key] = w
					names = append(names, key)
				}
				w.out = max(w.out, cpuref.MaxRelErr64(o.Output, ref.o64.Output))
				w.state = max(w.state, cpuref.MaxRelErr64(o.StateOut, ref.o64.StateOut))
				w.out32 = max(w.out32, cpuref.MaxRelErr(o.Output, ref.r32.Output))
				w.state32 = max(w.state32, cpuref.MaxRelErr(o.StateOut, ref.r32.StateOut))
			})
		}
		for _, a := range kernels.ElemTypes {
			for _, st := range kernels.ElemTypes {
				for _, f := range []spec.Fused{{}, spec.FusedAll} {
					for _, dk := range []int{64, 128} {
						run(a, st, f, dk)
					}
				}
			}
		}
		for _, a := range []spec.ElemType{spec.F32, spec.BF16} {
			for _, f := range []spec.Fused{{L2Norm: true}, {Gate: true}, {Beta: true}} {
				run(a, spec.F32, f, 64)
			}
		}
	})
	t.Logf("largest error relative to the largest magnitude of the chunked kernel, against Oracle64 | Reference32:")
	t.Logf("%-22s %9s %9s | %9s %9s", "act  state step", "output", "state", "output", "state")
	for _, k := range names {
		w := worst[k]
		t.Logf("%-22s %9.3g %9.3g | %9.3g %9.3g", k, w.out, w.state, w.out32, w.state32)
	}
}

// TestEmulatedChunkedDecaysUnderflow plants gates whose decay products
// underflow within a chunk: g = 60 and 200 on some tokens, 1e30 on one,
// and 3e38 on two neighbours (their sum overflows float32 to +inf, so a
// decay written as exp(G_s) / exp(G_r), or as exp(-(G_r - G_s)) from
// running sums, would give inf / inf or inf - inf: NaN). Every output and
// state element must be finite, within 1e-5 of Reference32 (which
// multiplies by alpha = exp(-g) token by token) and within 1e-4 of the
// float64 references.
func TestEmulatedChunkedDecaysUnderflow(t *testing.T) {
	onEmulatedIn(t, allOrders[:1], func(t *testing.T, r *rig) {
		for _, dk := range []int{64, 128} {
			c := kernels.ChunkLen
			p := spec.Params{Shape: spec.Shape{DK: dk, DV: 64, NKHeads: 1, NVHeads: 2, NTokens: 2*c + 5, NSeqs: 1}, QScale: 0.125}
			in, err := cpuref.RandomInputs(p, 0xdeca7+uint64(dk))
			if err != nil {
				t.Fatal(err)
			}
			for i := range in.G {
				switch tok := i / p.NVHeads; {
				case tok == c+2 || tok == c+3:
					in.G[i] = 3e38
				case tok == 5:
					in.G[i] = 1e30
				case tok%7 == 3:
					in.G[i] = 200
				case tok%5 == 1:
					in.G[i] = 60
				}
			}
			name := fmt.Sprintf("chunked %v, decays underflowing", p.Shape)
			o := r.run(t, job{kern: kChunked, p: p, in: in})
			checkChunked(t, name, p, o, chunkedReferences(t, p, in, true))
		}
	})
}

// TestEmulatedChunkedBatchIndependent checks that a sequence's output and
// final state are the same bytes whether it runs in a batch of three
// sequences of one dispatch or alone: each (value head, sequence) is one
// threadgroup, whose chunks start at the sequence's first token whatever
// the batch holds.
func TestEmulatedChunkedBatchIndependent(t *testing.T) {
	onEmulatedIn(t, allOrders[:1], func(t *testing.T, r *rig) {
		p := spec.Params{Shape: spec.Shape{DK: 64, DV: 64, NKHeads: 1, NVHeads: 2, NTokens: 37, NSeqs: 3}, QScale: 0.125}
		in, err := cpuref.RandomInputs(p, 0xba7c4)
		if err != nil {
			t.Fatal(err)
		}
		batch := r.run(t, job{kern: kChunked, p: p, in: in})
		for s := range p.NSeqs {
			ps, ins := oneSequence(p, in, s)
			alone := r.run(t, job{kern: kChunked, p: ps, in: ins})
			v := ps.VLen() * p.Activation.Size()
			checkSameBytes(t, fmt.Sprintf("sequence %d: output alone vs in the batch", s), p.Activation, alone.output, batch.output[s*v:(s+1)*v])
			checkSameBytes(t, fmt.Sprintf("sequence %d: state_out alone vs in the batch", s), p.State, alone.stateOut, seqState(p, batch.stateOut, s))
		}
	})
}

// oneSequence returns the parameters and inputs of sequence s of p alone.
func oneSequence(p spec.Params, in cpuref.Inputs, s int) (spec.Params, cpuref.Inputs) {
	q := p
	q.NSeqs = 1
	part := func(x []float32, n int) []float32 { return x[s*n : (s+1)*n] }
	return q, cpuref.Inputs{
		Q: part(in.Q, q.QKLen()), K: part(in.K, q.QKLen()), V: part(in.V, q.VLen()),
		G: part(in.G, q.GateLen()), Beta: part(in.Beta, q.GateLen()),
		StateIn: part(in.StateIn, q.StateLen()), ALog: in.ALog, DtBias: in.DtBias,
	}
}

// TestChunkedThreadgroupMemoryFits checks that the chunked kernel's
// threadgroup memory stays within the 32 KiB every Apple GPU gives a
// threadgroup, for every D_k it takes.
func TestChunkedThreadgroupMemoryFits(t *testing.T) {
	for dk := 1; dk <= 128; dk++ {
		for dv := 1; dv <= 128; dv++ {
			if n := kernels.ChunkedThreadgroupMemory(dk, dv); n > 32<<10 || n%16 != 0 {
				t.Errorf("D_k %d, D_v %d: %d bytes of threadgroup memory, want at most 32 KiB, a multiple of 16", dk, dv, n)
			}
		}
	}
}

// TestEmulatedChunkedStructure measures, from the emulator's counters,
// what the chunked and the token-by-token prefill kernels move and how
// often they synchronise, at D_k = D_v = 128, one head, T = 256, 512 and
// 1024 tokens: bytes per buffer binding, threadgroup barriers, SIMD-group
// functions, and the threadgroup memory each reserves. Every count is
// affine in T for T a multiple of the chunk (a fixed part for the state,
// the rest per token or per chunk); the test checks that on the three
// points and logs the figures extrapolated to T = 2048 and 8192. Both
// kernels must read the state once and write it once whatever T is.
func TestEmulatedChunkedStructure(t *testing.T) {
	ts := []int{256, 512, 1024}
	type count struct {
		name string
		f    func(c msl.Counters) uint64
	}
	counts := []count{{"barriers", func(c msl.Counters) uint64 { return c.Barriers }},
		{"SIMD-group functions", func(c msl.Counters) uint64 { return c.SIMDGroupOps }}}
	for i, name := range bindingNames {
		if i == 8 {
			continue // the parameters, set with setBytes
		}
		counts = append(counts,
			count{name + " loaded", func(c msl.Counters) uint64 { return c.Loaded[i] }},
			count{name + " stored", func(c msl.Counters) uint64 { return c.Stored[i] }})
	}
	onEmulatedIn(t, allOrders[:1], func(t *testing.T, r *rig) {
		for _, k := range []kernel{kRecurrent, kChunked} {
			var got [][]uint64 // by T, by count
			for _, nt := range ts {
				p := spec.Params{Shape: spec.Shape{DK: 128, DV: 128, NKHeads: 1, NVHeads: 1, NTokens: nt, NSeqs: 1}, QScale: 0.0883883476}
				in, err := cpuref.RandomInputs(p, 0x57c+uint64(nt))
				if err != nil {
					t.Fatal(err)
				}
				o := r.run(t, job{kern: k, p: p, in: in})
				c := *o.Counters
				state := uint64(4 * p.StateLen())
				if c.Loaded[bindStateIn] != state || c.Stored[bindStateOut] != state {
					t.Errorf("%s, %d tokens: state loaded %d, stored %d bytes, want %d each", k.name, nt, c.Loaded[bindStateIn], c.Stored[bindStateOut], state)
				}
				row := make([]uint64, len(counts))
				for j, cn := range counts {
					row[j] = cn.f(c)
				}
				got = append(got, row)
			}
			tgMem := 4 * (2*128 + 2*128)
			if k.name == kChunked.name {
				tgMem = kernels.ChunkedThreadgroupMemory(128, 128)
			}
			t.Logf("%s kernel, D_k = D_v = 128, one head: %d bytes of threadgroup memory per threadgroup", k.name, tgMem)
			t.Logf("  %-22s %14s %12s %14s %14s", "count", "fixed", "per token", "T = 2048", "T = 8192")
			for j, cn := range counts {
				// c(T) = a + b T through the first two points, checked on the third.
				b := float64(got[1][j]-got[0][j]) / float64(ts[1]-ts[0])
				a := float64(got[0][j]) - b*float64(ts[0])
				if pred := a + b*float64(ts[2]); pred != float64(got[2][j]) {
					t.Errorf("%s: %s at T = %d is %d, not affine in T (%g predicted)", k.name, cn.name, ts[2], got[2][j], pred)
				}
				if got[2][j] == 0 {
					continue
				}
				t.Logf("  %-22s %14.0f %12.2f %14.0f %14.0f", cn.name, a, b, a+2048*b, a+8192*b)
			}
		}
	})
}

// TestEmulatedChunkedServing runs the chunked kernel on batches in a state
// pool (padding among the slots) with packed sequences whose lengths cross
// chunk boundaries (0, 1, 16, 17, 33 and 40 tokens: empty, a partial
// chunk, exactly one, one and a bit, ...), in place and into another pool,
// f32 and bf16 with the fused step, D_k 64 and 128, and checks each
// sequence against both references and, byte for byte, against the same
// sequence alone in a dispatch of its own (checkServing): the chunks of a
// sequence start at its first token whatever the packing.
func TestEmulatedChunkedServing(t *testing.T) {
	lens := []int32{17, 0, 40, 1, 16, 33}
	cu := []int32{0}
	for _, n := range lens {
		cu = append(cu, cu[len(cu)-1]+n)
	}
	onEmulatedIn(t, allOrders[:1], func(t *testing.T, r *rig) {
		seed := uint64(0xc5e7)
		for _, dk := range []int{64, 128} {
			for _, f := range []struct {
				a     spec.ElemType
				fused spec.Fused
			}{{spec.F32, spec.Fused{}}, {spec.BF16, spec.FusedAll}} {
				for _, inPlace := range []bool{false, true} {
					seed++
					p := spec.Params{
						Shape:   spec.Shape{DK: dk, DV: 32, NKHeads: 1, NVHeads: 2, NTokens: int(cu[len(cu)-1]), NSeqs: len(lens), NSlots: 9, Varlen: true},
						HeadMap: spec.Tiled, QScale: float32(1 / math.Sqrt(float64(dk))),
						Activation: f.a, State: f.a, Fused: f.fused,
					}
					in := typedInputs(t, p, seed, false)
					in.CuSeqlens = cu
					in.Slots[3] = -1 // padding
					c := servingCase{fmt.Sprintf("chunked_dk%d_%v_%s_inplace=%v", dk, f.a, fusedName(f.fused), inPlace), kChunked, p, in, inPlace}
					t.Run(c.name, func(t *testing.T) {
						o, err := r.tryRun(t, c.job(false))
						if err != nil {
							t.Fatal(err)
						}
						checkServing(t, r, c, o)
					})
				}
			}
		}
	})
}
