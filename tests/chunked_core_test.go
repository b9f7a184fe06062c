package tests

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/emu/msl"
	"github.com/puremetal/puremetal/gdn"
	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/kernels"
	"github.com/puremetal/puremetal/mtl"
)

// chunkedCoreCases are the core suite's calls (coreCases: the nine type
// combinations, each part alone, the sigmoid gate, grouped and ungrouped
// heads, a pool with padding, packed sequences of 0, 1, 2 and more
// tokens) and calls that span chunks: two and a part (37 tokens) with the
// whole core, the convolution alone and the sigmoid norm alone, and packed
// sequences of 0, 1, 2 and 37 tokens in a pool with padding.
func chunkedCoreCases() []coreCase {
	cs := coreCases()
	long := 2*kernels.ChunkLen + 5
	base := spec.Params{Shape: spec.Shape{DK: 64, DV: 32, NKHeads: 1, NVHeads: 2, NTokens: long, NSeqs: 2},
		QScale: 0.125, Activation: spec.BF16, Fused: spec.FusedAll, Core: spec.QwenCore()}
	add := func(name string, edit func(p *spec.Params), edits ...func(in *cpuref.Inputs)) {
		p := base
		edit(&p)
		cs = append(cs, coreCase{name, p, uint64(100 + len(cs)), edits})
	}
	add("chunks_qwen", func(*spec.Params) {})
	add("chunks_qwen_f16_f32_tiled", func(p *spec.Params) {
		p.Activation, p.DK, p.DV, p.NKHeads, p.NVHeads, p.HeadMap = spec.F16, 128, 64, 2, 4, spec.Tiled
	})
	add("chunks_conv_only", func(p *spec.Params) { p.Core = spec.Core{Conv: 4} })
	add("chunks_norm_only_sigmoid", func(p *spec.Params) {
		p.Core = spec.Core{Norm: true, NormGate: spec.GateSigmoid, NormEps: 1e-5}
	})
	add("chunks_mha_f32_bf16", func(p *spec.Params) {
		p.Activation, p.State, p.DK, p.DV, p.NKHeads, p.NVHeads = spec.F32, spec.BF16, 128, 128, 2, 2
	})
	add("chunks_varlen_slots", func(p *spec.Params) {
		p.NSeqs, p.NTokens, p.Varlen, p.NSlots, p.NVHeads = 5, 40, true, 6, 4
	}, func(in *cpuref.Inputs) {
		in.CuSeqlens = []int32{0, 0, 1, 3, 40, 40}
		in.Slots = []int32{4, 1, 0, 5, -1}
	})
	return cs
}

// TestEmulatedChunkedCore runs the chunked prefill with the layer core
// (gdn.Kernels.EncodeCore) on every case of chunkedCoreCases in two
// scheduling orders; see familyCoreSuite.
func TestEmulatedChunkedCore(t *testing.T) {
	onEmulated(t, familyCoreSuite(gdn.KernelPrefillChunked, false))
}

// TestEmulatedPrefillCore runs the token-by-token prefill with the layer
// core on every case of chunkedCoreCases (D_v widened where its D_v
// threads cannot hold the convolution's channels) in two scheduling
// orders; see familyCoreSuite.
func TestEmulatedPrefillCore(t *testing.T) {
	onEmulated(t, familyCoreSuite(gdn.KernelPrefill, false))
}

// TestEmulatedBlockedCore runs the blocked prefill with the layer core on
// every case of chunkedCoreCases it takes (D_k 64 or 128, D_v a multiple
// of 32) in two scheduling orders (familyCoreSuite), and checks that its
// results are the core kernel's bytes: it runs the core kernel's
// arithmetic in its order, the tokens staged in blocks.
func TestEmulatedBlockedCore(t *testing.T) {
	onEmulated(t, familyCoreSuite(gdn.KernelPrefillBlocked, true))
}

// TestEmulatedPrefillCoreInPlace checks Kernels.PrefillCore on every case
// of chunkedCoreCases, in two scheduling orders: its results against both
// references, apart and in place; in place with grouped heads and a
// convolution, which the prefills refuse, Kernels.DecodeCore's bytes (it encodes
// that kernel, its grouped geometry), while the chunked prefill itself
// refuses the same call naming CoreBuffers.ConvStateOut where it takes the
// shape.
func TestEmulatedPrefillCoreInPlace(t *testing.T) {
	onEmulated(t, eachCase(chunkedCoreCases, func(t *testing.T, r *rig, c coreCase) {
		in := c.inputs(t)
		for _, inPlace := range []bool{false, true} {
			o, err := r.runCore(t, coreJob{p: c.p, in: in, pick: true, inPlace: inPlace})
			if err != nil {
				t.Fatalf("in place %v: %v", inPlace, err)
			}
			checkCore(t, fmt.Sprintf("%s in place %v", c.name, inPlace), c.p, in, o)
			if !inPlace || c.p.Core.Conv == 0 || c.p.NVHeads == c.p.NKHeads {
				continue
			}
			co, err := r.runCore(t, coreJob{p: c.p, in: in, inPlace: true})
			if err != nil {
				t.Fatal(err)
			}
			checkSameCore(t, c.name+" vs the core kernel", c.p, o, co)
			if _, err := gdn.EntryPoint(gdn.KernelPrefillChunked, c.p); err != nil {
				continue // the chunked prefill does not take the shape at all
			}
			_, err = r.runCore(t, coreJob{p: c.p, in: in, family: true, on: gdn.KernelPrefillChunked, inPlace: true})
			if err == nil || !errors.Is(err, gdn.ErrInvalidArgument) || !strings.Contains(err.Error(), "ConvStateOut") {
				t.Errorf("%s: the chunked prefill in place with grouped heads: %v, want a refusal naming CoreBuffers.ConvStateOut", c.name, err)
			}
		}
	}))
}

// TestMetalFamilyCore runs the three prefills with the layer core on the
// system's GPU (a Mac; it skips elsewhere), against the same references.
func TestMetalFamilyCore(t *testing.T) {
	for _, k := range []gdn.Kernel{gdn.KernelPrefillChunked, gdn.KernelPrefillBlocked, gdn.KernelPrefill} {
		t.Run(k.String(), func(t *testing.T) { onMetal(t, familyCoreSuite(k, false)) })
	}
}

// familyCoreSuite runs kern with the layer core on every case of
// chunkedCoreCases that kern takes (the others are logged: the refusals
// are TestChunkedCoreRefusals') against Reference32 and Oracle64
// (checkCore: every output written, padding's left poisoned, the conv
// state bit for bit), checks the traffic (checkCoreTraffic: the state and
// the conv state read and written once, the latter's key-head part by one
// value head), the grid and threadgroup memory the kernel ran with, where
// the heads are not grouped or there is no convolution that in place gives
// the same bytes, and with sameAsCore that the results are Kernels.DecodeCore's
// bytes.
func familyCoreSuite(kern gdn.Kernel, sameAsCore bool) func(t *testing.T, r *rig) {
	return eachCase(chunkedCoreCases, func(t *testing.T, r *rig, c coreCase) {
		_, err := gdn.EntryPoint(kern, c.p)
		// A D_v too small for the kernel's threads to hold the convolution's
		// channels is widened (doubled while at most 128).
		for err != nil && strings.Contains(err.Error(), "channels of a head") && 2*c.p.DV <= 128 {
			c.p.DV *= 2
			_, err = gdn.EntryPoint(kern, c.p)
			t.Logf("%s: D_v widened to %d for the %s kernel", c.name, c.p.DV, kern)
		}
		if err != nil {
			t.Logf("%s: the %s kernel does not take it: %v", c.name, kern, err)
			return
		}
		in := c.inputs(t)
		j := coreJob{p: c.p, in: in, family: true, on: kern}
		o, err := r.runCore(t, j)
		if err != nil {
			t.Fatal(err)
		}
		checkCore(t, c.name, c.p, in, o)
		if o.Counters != nil {
			checkCoreTraffic(t, c.name, c.p, in, *o.Counters, false)
			checkFamilyLaunch(t, c.name, kern, c.p, *o.Counters)
		}
		if c.p.NVHeads == c.p.NKHeads || c.p.Core.Conv == 0 {
			j.inPlace = true
			ip, err := r.runCore(t, j)
			if err != nil {
				t.Fatal(err)
			}
			checkSameCore(t, c.name+" in place", c.p, ip, o)
		}
		if sameAsCore && c.p.Core != (spec.Core{}) {
			co, err := r.runCore(t, coreJob{p: c.p, in: in})
			if err != nil {
				t.Fatal(err)
			}
			checkSameCore(t, c.name+" vs the core kernel", c.p, o, co)
		}
	})
}

// checkFamilyLaunch checks the grid, threadgroup size and threadgroup
// memory of a dispatch of kern with the core (the plain kernel's for a
// zero core): the chunked kernel's threadgroups, (n_v_heads, n_seqs, 1) of
// (4 D_v, 1, 1); the token-by-token prefill's, (n_v_heads, n_seqs, 1) of
// (D_v, 1, 1); the blocked kernel's with the core the core kernel's,
// (1, n_v_heads, n_seqs) of (32, D_v / 8, 1).
func checkFamilyLaunch(t *testing.T, name string, kern gdn.Kernel, p spec.Params, c msl.Counters) {
	t.Helper()
	core := p.Core != (spec.Core{})
	var grid, group [3]int
	var mem int
	switch {
	case kern == gdn.KernelPrefillChunked:
		grid, group = [3]int{p.NVHeads, p.NSeqs, 1}, [3]int{kernels.ChunkLanes * p.DV, 1, 1}
		mem = kernels.ChunkedThreadgroupMemory(p.DK, p.DV)
		if core {
			mem = kernels.ChunkedCoreThreadgroupMemory(p.DK, p.DV)
		}
	case kern == gdn.KernelPrefill:
		grid, group = [3]int{p.NVHeads, p.NSeqs, 1}, [3]int{p.DV, 1, 1}
		mem = (2*p.DK + 2*p.DV) * 4
		if core {
			mem = kernels.PrefillCoreThreadgroupMemory(p.DK, p.DV)
		}
		mem = (mem + 15) &^ 15
	case core:
		grid, group = [3]int{1, p.NVHeads, p.NSeqs}, [3]int{32, p.DV / 8, 1}
		mem = kernels.BlockedCoreThreadgroupMemory(p.DK, p.DV)
	default:
		grid, group = [3]int{p.DV / 32, p.NVHeads, p.NSeqs}, [3]int{32, 4, 1}
		mem = c.ThreadgroupMemory // the plain blocked kernel's: tests of its own
	}
	if c.Threadgroups != grid || c.ThreadsPerThreadgroup != group {
		t.Errorf("%s: grid %v of %v, want the %s kernel's %v of %v", name, c.Threadgroups, c.ThreadsPerThreadgroup, kern, grid, group)
	}
	if c.ThreadgroupMemory != mem {
		t.Errorf("%s: threadgroup memory %d bytes, want %d", name, c.ThreadgroupMemory, mem)
	}
}

// TestEmulatedChunkedCoreZero checks that EncodeCore with a zero core is
// today's chunked call: the same bytes as Kernels.Encode of the chunked
// kernel, whose entry point it runs.
func TestEmulatedChunkedCoreZero(t *testing.T) {
	onEmulatedIn(t, allOrders[:1], func(t *testing.T, r *rig) {
		p := spec.Params{Shape: spec.Shape{DK: 64, DV: 32, NKHeads: 1, NVHeads: 2, NTokens: 2*kernels.ChunkLen + 3, NSeqs: 2},
			QScale: 0.125, Activation: spec.BF16, Fused: spec.FusedAll}
		in, err := cpuref.RandomInputs(p, 5)
		if err != nil {
			t.Fatal(err)
		}
		viaCore, err := r.runCore(t, coreJob{p: p, in: in, family: true, on: gdn.KernelPrefillChunked})
		if err != nil {
			t.Fatal(err)
		}
		plain := r.run(t, job{kern: kChunked, p: p, in: in})
		checkSameBytes(t, "output", p.Activation, viaCore.output, plain.output)
		checkSameBytes(t, "state", p.State, viaCore.stateOut, plain.stateOut)
		entry, err := gdn.EntryPoint(gdn.KernelPrefillChunked, p)
		if err != nil || entry != kernels.PrefillChunkedOf(p.Activation, p.State) {
			t.Errorf("entry point %q, %v; want %q", entry, err, kernels.PrefillChunkedOf(p.Activation, p.State))
		}
		p.Core = spec.QwenCore()
		entry, err = gdn.EntryPoint(gdn.KernelPrefillChunked, p)
		if err != nil || entry != kernels.PrefillChunkedCoreOf(p.Activation, p.State) {
			t.Errorf("entry point with the core %q, %v; want %q", entry, err, kernels.PrefillChunkedCoreOf(p.Activation, p.State))
		}
		if err := r.k.Prepare(gdn.KernelPrefillChunked, p); err != nil {
			t.Errorf("Prepare with the core: %v", err)
		}
	})
}

// TestChunkedCoreRefusals checks what EncodeCore refuses before anything
// is encoded: a kernel that does not run the core, core buffers with a
// zero core, and the chunked kernel's own limits, each with an error
// wrapping gdn.ErrInvalidArgument that names the field.
func TestChunkedCoreRefusals(t *testing.T) {
	qwen := spec.Params{Shape: spec.Shape{DK: 128, DV: 128, NKHeads: 16, NVHeads: 32, NTokens: 64, NSeqs: 1},
		Activation: spec.BF16, Fused: spec.FusedAll, Core: spec.QwenCore()}
	for _, tc := range []struct {
		name string
		kern gdn.Kernel
		edit func(p *spec.Params)
		want string
	}{
		{"decode", gdn.KernelDecode, func(*spec.Params) {}, "kernel"},
		{"packed seq", gdn.KernelDecodePackedSeq, func(*spec.Params) {}, "kernel"},
		{"prefill D_v 160", gdn.KernelPrefill, func(p *spec.Params) { p.DV = 160 }, "Shape.DV"},
		{"prefill D_v 64 at D_k 128 with the convolution", gdn.KernelPrefill, func(p *spec.Params) { p.DV = 64 }, "channels"},
		{"blocked D_k 96", gdn.KernelPrefillBlocked, func(p *spec.Params) { p.DK = 96 }, "Shape.DK"},
		{"blocked D_v 48", gdn.KernelPrefillBlocked, func(p *spec.Params) { p.DV = 48 }, "Shape.DV"},
		{"blocked D_v 288", gdn.KernelPrefillBlocked, func(p *spec.Params) { p.DV = 288 }, "Shape.DV"},
		{"blocked D_v 256 at D_k 128: 34,944 bytes of stage", gdn.KernelPrefillBlocked, func(p *spec.Params) { p.DV = 256 }, "threadgroup memory"},
		{"D_v 256", gdn.KernelPrefillChunked, func(p *spec.Params) { p.DV = 256 }, "Shape.DV"},
		{"D_v 36 with the norm", gdn.KernelPrefillChunked, func(p *spec.Params) { p.DV, p.Core.Conv = 36, 0 }, "Shape.DV"},
		{"D_v 24 at D_k 128 with the convolution", gdn.KernelPrefillChunked, func(p *spec.Params) { p.DV = 24 }, "Shape.DV"},
		{"conv 3", gdn.KernelPrefillChunked, func(p *spec.Params) { p.Core.Conv = 3 }, "Core.Conv"},
	} {
		p := qwen
		tc.edit(&p)
		_, err := gdn.EntryPoint(tc.kern, p)
		if !errors.Is(err, gdn.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one wrapping ErrInvalidArgument naming %s", tc.name, err, tc.want)
		}
		if err := gdn.ValidateCoreOn(tc.kern, p, gdn.Buffers{}, gdn.CoreBuffers{}); !errors.Is(err, gdn.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: ValidateCoreOn error %v, want one naming %s", tc.name, err, tc.want)
		}
	}
	// Validate and Encode (without CoreBuffers) refuse a core on the chunked
	// kernel, saying where it goes.
	if err := gdn.Validate(gdn.KernelPrefillChunked, qwen, gdn.Buffers{}); !errors.Is(err, gdn.ErrInvalidArgument) || !strings.Contains(err.Error(), "EncodeCore") {
		t.Errorf("Validate with a core: %v, want one naming Kernels.EncodeCore", err)
	}
}

// TestEmulatedFamilyCoreStructure measures, from the emulator's counters,
// one Qwen3.5-shaped layer (D_k = D_v = 128, 16 key heads, 32 value heads,
// bf16 activations, f32 state, one sequence) through the chunked, the
// blocked and the token-by-token prefill for a 64-token prefill, with the
// whole core and with the core off (the plain kernel). It asserts that the recurrent state moves
// exactly SPEC section 8's floor; that the conv state is written exactly
// once, (K-1) conv_dim elements, and read (K-1) (r 2 n_k_heads D_k +
// n_v_heads D_v) (each of the r value heads of a key head reads its q and
// k: 1.5 (K-1) conv_dim at r = 2, the floor being (K-1) conv_dim);
// mixed_qkv likewise, once per token; the barriers per token and
// threadgroup: the chunked kernel's 5 per chunk of 16 (with the fused L2
// norm) with or without the core (the convolution fills the stage before
// the staging barrier, the norm's sums are read after the barrier that
// ends the chunk), the blocked kernel's 2 per block (of 32 bf16 tokens
// without the core, of 16 float-staged tokens with it), the token-by-token
// kernel's 2 per token with or without the core; and that the core adds 3
// shuffle steps per token and SIMD-group in the kernels of 4 lanes per row
// (the norm's sum over 8 rows), 5 in the token-by-token one (simd_sum over
// 32 rows). The table is logged.
func TestEmulatedFamilyCoreStructure(t *testing.T) {
	onEmulatedIn(t, allOrders[:1], func(t *testing.T, r *rig) {
		const n = 64
		t.Logf("%-8s %-5s %9s %12s %12s %12s %12s %12s %10s %11s", "kernel", "core", "tgs", "state bytes", "floor", "conv loaded", "conv stored", "mixed loaded", "barriers/t", "shuffles/sg")
		for _, kern := range []gdn.Kernel{gdn.KernelPrefillChunked, gdn.KernelPrefillBlocked, gdn.KernelPrefill} {
			var stepsOff float64
			for _, core := range []spec.Core{{}, spec.QwenCore()} {
				p := spec.Params{Shape: spec.Shape{DK: 128, DV: 128, NKHeads: 16, NVHeads: 32, NTokens: n, NSeqs: 1},
					QScale: 1 / 11.313708, Activation: spec.BF16, Fused: spec.FusedAll, Core: core}
				in, err := cpuref.RandomInputs(p, 7)
				if err != nil {
					t.Fatal(err)
				}
				o, err := r.runCore(t, coreJob{p: p, in: in, family: true, on: kern})
				if err != nil {
					t.Fatal(err)
				}
				c := *o.Counters
				tg := uint64(c.Threadgroups[0] * c.Threadgroups[1] * c.Threadgroups[2])
				sgs := tg * uint64(c.ThreadsPerThreadgroup[0]*c.ThreadsPerThreadgroup[1]/32)
				state := c.Loaded[bindStateIn] + c.Stored[bindStateOut]
				floor := uint64(2 * p.StateLen() * p.State.Size())
				barriers := float64(c.Barriers) / float64(tg) / n
				steps := float64(c.ShuffleSteps()) / float64(sgs) / n
				name := "off"
				if core.Conv > 0 {
					name = "qwen"
				}
				t.Logf("%-8s %-5s %9d %12d %12d %12d %12d %12d %10.4f %11.2f", kern, name, tg, state, floor, c.Loaded[bindConvStateIn], c.Stored[bindConvStateOut], c.Loaded[bindMixed], barriers, steps)
				if state != floor {
					t.Errorf("%s, core %s: state bytes %d, floor %d", kern, name, state, floor)
				}
				wantBarriers := 5.0 / float64(kernels.ChunkLen) // staging, two for the L2 norm, the matrices, the end
				switch kern {
				case gdn.KernelPrefillBlocked:
					wantBarriers = 2.0 / 32 // a block of 64 bytes / 2 per bf16 element
					if core.Conv > 0 {
						wantBarriers = 2.0 / kernels.BlockedCoreLen
					}
				case gdn.KernelPrefill:
					wantBarriers = 2 // staging, and before the next token restages
				}
				if barriers != wantBarriers {
					t.Errorf("%s, core %s: %.4f barriers per token and threadgroup, want %.4f", kern, name, barriers, wantBarriers)
				}
				if core.Conv == 0 {
					stepsOff = steps
					continue
				}
				a := uint64(p.Activation.Size())
				if want := uint64(3*p.ConvDim()) * a; c.Stored[bindConvStateOut] != want {
					t.Errorf("%s: conv state stored %d bytes, want (K-1) conv_dim = %d", kern, c.Stored[bindConvStateOut], want)
				}
				if want := uint64(3*(2*2*p.NKHeads*p.DK+p.NVHeads*p.DV)) * a; c.Loaded[bindConvStateIn] != want {
					t.Errorf("%s: conv state loaded %d bytes, want %d", kern, c.Loaded[bindConvStateIn], want)
				}
				if want := uint64(n*(2*2*p.NKHeads*p.DK+p.NVHeads*p.DV)) * a; c.Loaded[bindMixed] != want {
					t.Errorf("%s: mixed_qkv loaded %d bytes, want %d", kern, c.Loaded[bindMixed], want)
				}
				wantSteps := 3.0 // xor 4, 8, 16 over the 8 rows of a SIMD-group
				if kern == gdn.KernelPrefill {
					wantSteps = 5 // simd_sum over the 32 rows of a SIMD-group
				}
				if d := steps - stepsOff; d != wantSteps {
					t.Errorf("%s: the core adds %.2f shuffle steps per token and SIMD-group, want %.0f", kern, d, wantSteps)
				}
				t.Logf("%s: the core adds %.0f shuffle steps per token and SIMD-group; mixed_qkv read %.2f x its size; conv state read %.2f x, written %.2f x its size",
					kern, steps-stepsOff, float64(c.Loaded[bindMixed])/float64(uint64(p.MixedLen())*a),
					float64(c.Loaded[bindConvStateIn])/float64(uint64(p.ConvStateLen())*a), float64(c.Stored[bindConvStateOut])/float64(uint64(p.ConvStateLen())*a))
			}
		}
	})
}

// TestEmulatedDecodeCoreStructure gives, from the emulator's counters, the
// structural numbers that keep the layer core out of the one-row decode
// kernels (gdn_decode.metal), at the Qwen3.5 shape (D_k = D_v = 128, 16
// key heads, 32 value heads, bf16 activations, f32 state) for one decode
// token, beside Kernels.DecodeCore on the same step. The decode kernel splits a
// value head's D_v rows over D_v / NSG threadgroups of NSG rows (one per
// SIMD-group of 32 lanes): the norm's sum over the D_v outputs of a head
// would cross threadgroups, which one dispatch cannot order; holding the
// row set in one threadgroup at one row per SIMD-group takes 32 D_v
// threads, more than the pipeline's maxTotalThreadsPerThreadgroup (1024),
// and at 8 rows per SIMD-group it is the core kernel's packed layout. The
// convolution alone would run in every one of those threadgroups: each
// reads its key head's q and k whole, so the q and k of a key head would
// be convolved r D_v / NSG times per token (the decode kernel's q and k
// reads, measured, against the core kernel's r).
func TestEmulatedDecodeCoreStructure(t *testing.T) {
	onEmulatedIn(t, allOrders[:1], func(t *testing.T, r *rig) {
		p := spec.Params{Shape: spec.Shape{DK: 128, DV: 128, NKHeads: 16, NVHeads: 32, NTokens: 1, NSeqs: 1},
			QScale: 1 / 11.313708, Activation: spec.BF16, Fused: spec.FusedAll}
		in, err := cpuref.RandomInputs(p, 7)
		if err != nil {
			t.Fatal(err)
		}
		oneRow := kernel{"decode_one_row", func(k *gdn.Kernels, enc *mtl.ComputeCommandEncoder, p gdn.Params, b gdn.Buffers) error {
			return k.Encode(enc, gdn.KernelDecode, p, b)
		}, false}
		o := r.run(t, job{kern: oneRow, p: p, in: in})
		c := *o.Counters
		nsg := p.DK / 32
		perHead := c.Threadgroups[0]
		rows := c.ThreadsPerThreadgroup[1]
		qk := c.Loaded[0] + c.Loaded[1]
		qkSize := uint64(2 * p.QKLen() * p.Activation.Size())
		if perHead != p.DV/nsg || rows != nsg || c.ThreadsPerThreadgroup[0] != 32 {
			t.Errorf("decode grid %v of %v, want (%d, %d, 1) of (32, %d, 1)", c.Threadgroups, c.ThreadsPerThreadgroup, p.DV/nsg, p.NVHeads, nsg)
		}
		if want := uint64(p.NVHeads/p.NKHeads*p.DV/nsg) * uint64(nsg) * qkSize; qk != want {
			t.Errorf("decode kernel: q and k loaded %d bytes, want %d", qk, want)
		}
		pso, err := r.reg.Pipeline(r.dev, kernels.DecodeOf(p.Activation, p.State, nsg))
		if err != nil {
			t.Fatal(err)
		}
		maxThreads := pso.MaxTotalThreadsPerThreadgroup()
		if 32*p.DV <= maxThreads {
			t.Errorf("one row per SIMD-group, a head's %d rows take %d threads, within the pipeline's %d: the norm could stay in one threadgroup", p.DV, 32*p.DV, maxThreads)
		}
		pc := p
		pc.Core = spec.QwenCore()
		inc, err := cpuref.RandomInputs(pc, 7)
		if err != nil {
			t.Fatal(err)
		}
		co, err := r.runCore(t, coreJob{p: pc, in: inc})
		if err != nil {
			t.Fatal(err)
		}
		cc := *co.Counters
		mixed := float64(cc.Loaded[bindMixed]) / float64(pc.MixedLen()*pc.Activation.Size())
		t.Logf("decode kernel: %d threadgroups per value head of %d rows (%d threads); a head's %d rows in one threadgroup at one row per SIMD-group: %d threads, pipeline max %d",
			perHead, rows, c.ThreadsPerThreadgroup[0]*rows, p.DV, 32*p.DV, maxThreads)
		t.Logf("decode kernel: q and k read %.0f x their size per token (each key head's by the SIMD-groups of its r D_v = %d rows, in %d threadgroups); core kernel: %d threadgroup per value head of %d threads, mixed_qkv read %.2f x its size, %d barriers",
			float64(qk)/float64(qkSize), p.NVHeads/p.NKHeads*p.DV, p.NVHeads/p.NKHeads*p.DV/nsg, cc.Threadgroups[0], cc.ThreadsPerThreadgroup[0]*cc.ThreadsPerThreadgroup[1], mixed, cc.Barriers/uint64(cc.Threadgroups[1]))
	})
}
