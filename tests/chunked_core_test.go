package tests

import (
	"errors"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/gdn"
	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/kernels"
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
		QScale: 0.125, Activation: spec.BF16, Fused: spec.FusedAll, Core: spec.Qwen}
	add := func(name string, edit func(p *spec.Params), edits ...func(in *cpuref.Inputs)) {
		p := base
		edit(&p)
		seed := uint64(100 + len(cs))
		cs = append(cs, coreCase{name, p, func(t *testing.T) cpuref.Inputs {
			in, err := cpuref.RandomInputs(p, seed)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range edits {
				e(&in)
			}
			return in
		}})
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
// scheduling orders against Reference32 and Oracle64 (checkCore: every
// output written, padding's left poisoned, the conv state bit for bit),
// checks the traffic (checkCoreTraffic: the state and the conv state
// read and written once, the latter's key-head part by one value head),
// that the chunked kernel's threadgroups ran, and, where the heads are
// not grouped or there is no convolution, that in place gives the same
// bytes.
func TestEmulatedChunkedCore(t *testing.T) {
	onEmulated(t, eachCase(chunkedCoreCases, func(t *testing.T, r *rig, c coreCase) {
		in := c.in(t)
		j := coreJob{p: c.p, in: in, family: true, on: gdn.KernelPrefillChunked}
		o, err := r.runCore(t, j)
		if err != nil {
			t.Fatal(err)
		}
		checkCore(t, c.name, c.p, in, o)
		if o.Counters != nil {
			checkCoreTraffic(t, c.name, c.p, in, *o.Counters, false)
			cnt := *o.Counters
			if g, tg := cnt.Threadgroups, cnt.ThreadsPerThreadgroup; g != [3]int{c.p.NVHeads, c.p.NSeqs, 1} || tg != [3]int{kernels.ChunkLanes * c.p.DV, 1, 1} {
				t.Errorf("%s: grid %v of %v, want the chunked kernel's (%d, %d, 1) of (%d, 1, 1)", c.name, g, tg, c.p.NVHeads, c.p.NSeqs, kernels.ChunkLanes*c.p.DV)
			}
			mem := kernels.ChunkedThreadgroupMemory(c.p.DK, c.p.DV)
			if c.p.Core != (spec.Core{}) {
				mem = kernels.ChunkedCoreThreadgroupMemory(c.p.DK, c.p.DV)
			}
			if cnt.ThreadgroupMemory != mem {
				t.Errorf("%s: threadgroup memory %d bytes, want %d", c.name, cnt.ThreadgroupMemory, mem)
			}
		}
		if c.p.NVHeads == c.p.NKHeads || c.p.Core.Conv == 0 {
			j.inPlace = true
			ip, err := r.runCore(t, j)
			if err != nil {
				t.Fatal(err)
			}
			checkSameBytes(t, c.name+": output in place", c.p.Activation, ip.output, o.output)
			checkSameBytes(t, c.name+": state in place", c.p.State, ip.stateOut, o.stateOut)
			if c.p.Core.Conv > 0 {
				checkSameBytes(t, c.name+": conv state in place", c.p.Activation, ip.convState, o.convState)
			}
		}
	}))
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
		p.Core = spec.Qwen
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
		Activation: spec.BF16, Fused: spec.FusedAll, Core: spec.Qwen}
	for _, tc := range []struct {
		name string
		kern gdn.Kernel
		edit func(p *spec.Params)
		want string
	}{
		{"blocked", gdn.KernelPrefillBlocked, func(*spec.Params) {}, "kernel"},
		{"decode", gdn.KernelDecode, func(*spec.Params) {}, "kernel"},
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

// TestEmulatedChunkedCoreStructure measures, from the emulator's counters,
// one Qwen3.5-shaped layer (D_k = D_v = 128, 16 key heads, 32 value heads,
// bf16 activations, f32 state, one sequence) through the chunked prefill
// for a 64-token prefill (four chunks), with the whole core and with the
// core off. It asserts that the recurrent state moves exactly SPEC
// section 8's floor; that the conv state is written exactly once, (K-1)
// conv_dim elements, and read (K-1) (r 2 n_k_heads D_k + n_v_heads D_v)
// (each of the r value heads of a key head reads its q and k: 1.5 (K-1)
// conv_dim at r = 2, the floor being (K-1) conv_dim); mixed_qkv likewise,
// once per token; that the core adds no threadgroup barrier (the
// convolution fills the stage before the staging barrier, the norm's sums
// are read after the barrier that ends the chunk) and 3 shuffle steps per
// token and SIMD-group (the norm's sum over 8 rows). The table is logged.
func TestEmulatedChunkedCoreStructure(t *testing.T) {
	onEmulatedIn(t, allOrders[:1], func(t *testing.T, r *rig) {
		const n = 64
		t.Logf("%-7s %12s %12s %12s %12s %12s %14s %11s", "core", "state bytes", "floor", "conv loaded", "conv stored", "mixed loaded", "barriers/chunk", "shuffles/sg")
		var stepsOff, barriersOff float64
		for _, core := range []spec.Core{{}, spec.Qwen} {
			p := spec.Params{Shape: spec.Shape{DK: 128, DV: 128, NKHeads: 16, NVHeads: 32, NTokens: n, NSeqs: 1},
				QScale: 1 / 11.313708, Activation: spec.BF16, Fused: spec.FusedAll, Core: core}
			in, err := cpuref.RandomInputs(p, 7)
			if err != nil {
				t.Fatal(err)
			}
			o, err := r.runCore(t, coreJob{p: p, in: in, family: true, on: gdn.KernelPrefillChunked})
			if err != nil {
				t.Fatal(err)
			}
			c := *o.Counters
			tg := uint64(c.Threadgroups[0] * c.Threadgroups[1] * c.Threadgroups[2])
			sgs := tg * uint64(c.ThreadsPerThreadgroup[0]/32)
			state := c.Loaded[bindStateIn] + c.Stored[bindStateOut]
			floor := uint64(2 * p.StateLen() * p.State.Size())
			chunks := float64(n / kernels.ChunkLen)
			barriers := float64(c.Barriers) / float64(tg) / chunks
			steps := float64(c.ShuffleSteps()) / float64(sgs) / n
			name := "off"
			if core.Conv > 0 {
				name = "qwen"
			}
			t.Logf("%-7s %12d %12d %12d %12d %12d %14.2f %11.2f", name, state, floor, c.Loaded[bindConvStateIn], c.Stored[bindConvStateOut], c.Loaded[bindMixed], barriers, steps)
			if state != floor {
				t.Errorf("core %s: state bytes %d, floor %d", name, state, floor)
			}
			if core.Conv == 0 {
				stepsOff, barriersOff = steps, barriers
				continue
			}
			a := uint64(p.Activation.Size())
			if want := uint64(3*p.ConvDim()) * a; c.Stored[bindConvStateOut] != want {
				t.Errorf("conv state stored %d bytes, want (K-1) conv_dim = %d", c.Stored[bindConvStateOut], want)
			}
			if want := uint64(3*(2*2*p.NKHeads*p.DK+p.NVHeads*p.DV)) * a; c.Loaded[bindConvStateIn] != want {
				t.Errorf("conv state loaded %d bytes, want %d", c.Loaded[bindConvStateIn], want)
			}
			if want := uint64(n*(2*2*p.NKHeads*p.DK+p.NVHeads*p.DV)) * a; c.Loaded[bindMixed] != want {
				t.Errorf("mixed_qkv loaded %d bytes, want %d", c.Loaded[bindMixed], want)
			}
			if barriers != barriersOff {
				t.Errorf("the core adds %.2f barriers per chunk, want 0", barriers-barriersOff)
			}
			if d := steps - stepsOff; d != 3 {
				t.Errorf("the core adds %.2f shuffle steps per token and SIMD-group, want 3 (xor 4, 8, 16)", d)
			}
			t.Logf("the core adds %.2f barriers per chunk and %.0f shuffle steps per token and SIMD-group; mixed_qkv read %.2f x its size; conv state read %.2f x, written %.2f x its size",
				barriers-barriersOff, steps-stepsOff, float64(c.Loaded[bindMixed])/float64(uint64(p.MixedLen())*a),
				float64(c.Loaded[bindConvStateIn])/float64(uint64(p.ConvStateLen())*a), float64(c.Stored[bindConvStateOut])/float64(uint64(p.ConvStateLen())*a))
		}
	})
}
