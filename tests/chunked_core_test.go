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
