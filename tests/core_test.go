package tests

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/emu/msl"
	"github.com/puremetal/puremetal/gdn"
	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/kernels"
	"github.com/puremetal/puremetal/mtl"
)

// Buffer binding indices of the core kernel's conv state.
const (
	bindMixed        = 14
	bindConvStateIn  = 16
	bindConvStateOut = 17
)

// coreOutcome is what one dispatch of the core kernel wrote, read back
// and widened, with the emulator's counters.
type coreOutcome struct {
	Output, StateOut, ConvState, Capture []float32
	output, stateOut, convState          []byte
	Counters                             *msl.Counters
}

// coreJob is one dispatch of gdn.Kernels.DecodeCore, or with family set of
// gdn.Kernels.EncodeCore on kernel on.
type coreJob struct {
	p       spec.Params
	in      cpuref.Inputs
	inPlace bool // StateOut = StateIn and ConvStateOut = ConvStateIn (one view each)
	capture bool // b.Capture set: the state after every token
	family  bool // EncodeCore(on) instead of Core
	on      gdn.Kernel
	pick    bool // PrefillCore instead of Core
}

// encode encodes j's dispatch.
func (j coreJob) encode(k *gdn.Kernels, enc *mtl.ComputeCommandEncoder, b gdn.Buffers, c gdn.CoreBuffers) error {
	switch {
	case j.family:
		return k.EncodeCore(enc, j.on, j.p, b, c)
	case j.pick:
		return k.PrefillCore(enc, j.p, b, c)
	}
	return k.DecodeCore(enc, j.p, b, c)
}

// prefilled reports whether a call leaves some state or conv state as it
// was (a pool, padding, an empty packed sequence): then the written state
// buffers start as copies of the inputs instead of poisoned, and only the
// states the call writes are checked written.
func prefilled(p spec.Params, in cpuref.Inputs) bool {
	if p.NSlots > 0 {
		return true
	}
	if p.Varlen {
		for s := 0; s < p.NSeqs; s++ {
			if in.CuSeqlens[s] == in.CuSeqlens[s+1] {
				return true
			}
		}
	}
	return false
}

// runCore uploads j's inputs, poisons what the kernel writes (outputs
// always; the states unless prefilled), runs one dispatch and reads back.
func (r *rig) runCore(t *testing.T, j coreJob) (coreOutcome, error) {
	t.Helper()
	o, _, _, err := r.runCoreBuffers(t, j)
	return o, err
}

// runCoreBuffers is runCore returning the dispatch's views too.
func (r *rig) runCoreBuffers(t *testing.T, j coreJob) (coreOutcome, gdn.Buffers, gdn.CoreBuffers, error) {
	t.Helper()
	p, in := j.p, j.in
	a, st := p.Activation, p.State
	b := gdn.Buffers{
		G: r.uploadTyped(t, a, in.G), Beta: r.uploadTyped(t, a, in.Beta), StateIn: r.uploadTyped(t, st, in.StateIn),
		Output: r.poisonedTyped(t, a, p.VLen()),
	}
	var c gdn.CoreBuffers
	if p.Core.Conv == 0 {
		b.Q, b.K, b.V = r.uploadTyped(t, a, in.Q), r.uploadTyped(t, a, in.K), r.uploadTyped(t, a, in.V)
	} else {
		c.MixedQKV, c.ConvWeight = r.uploadTyped(t, a, in.MixedQKV), r.uploadTyped(t, a, in.ConvWeight)
		c.ConvStateIn = r.uploadTyped(t, a, in.ConvState)
	}
	if p.Core.Norm {
		c.Z, c.NormWeight = r.uploadTyped(t, a, in.Z), r.uploadTyped(t, a, in.NormWeight)
	}
	keep := prefilled(p, in)
	switch {
	case j.inPlace:
		b.StateOut, c.ConvStateOut = b.StateIn, c.ConvStateIn
	case keep:
		b.StateOut = r.uploadTyped(t, st, in.StateIn)
		if p.Core.Conv > 0 {
			c.ConvStateOut = r.uploadTyped(t, a, in.ConvState)
		}
	default:
		b.StateOut = r.poisonedTyped(t, st, p.StateLen())
		if p.Core.Conv > 0 {
			c.ConvStateOut = r.poisonedTyped(t, a, p.ConvStateLen())
		}
	}
	if p.Fused.Gate {
		b.ALog, b.DtBias = r.uploadTyped(t, spec.F32, in.ALog), r.uploadTyped(t, spec.F32, in.DtBias)
	}
	if p.NSlots > 0 {
		b.Slots = r.uploadInt32(t, in.Slots, false)
	}
	if p.Varlen {
		b.CuSeqlens = r.uploadInt32(t, in.CuSeqlens, false)
	}
	if j.capture {
		b.Capture = r.poisonedTyped(t, st, p.CaptureLen())
	}
	cs, err := r.execute(func(enc *mtl.ComputeCommandEncoder) error { return j.encode(r.k, enc, b, c) })
	if err != nil {
		return coreOutcome{}, b, c, err
	}
	o := coreOutcome{output: viewBytes(b.Output), stateOut: viewBytes(b.StateOut)}
	o.Output, o.StateOut = decode(a, o.output), decode(st, o.stateOut)
	if p.Core.Conv > 0 {
		o.convState = viewBytes(c.ConvStateOut)
		o.ConvState = decode(a, o.convState)
	}
	if j.capture {
		o.Capture = readBack(b.Capture)
	}
	if r.emulated {
		if len(cs) != 1 {
			return coreOutcome{}, b, c, fmt.Errorf("the command buffer ran %d dispatches, want 1", len(cs))
		}
		o.Counters = &cs[0]
	}
	return o, b, c, nil
}

// coreParts returns the token ranges and states a call writes.
func coreParts(t *testing.T, p spec.Params, in cpuref.Inputs) []cpuref.Part {
	t.Helper()
	parts, err := cpuref.Split(p, in)
	if err != nil {
		t.Fatal(err)
	}
	return parts
}

// checkCore checks a core dispatch against both references: every output
// element of a sequence that runs written and within SPEC section 9's
// bound of its type, the state likewise, the conv state equal to
// Reference32's bit for bit (it holds copies of inputs), and the outputs
// of padding left poisoned.
func checkCore(t *testing.T, name string, p spec.Params, in cpuref.Inputs, o coreOutcome) {
	t.Helper()
	r32, o64 := bothReferences(t, p, in, false)
	vw := p.DV * p.NVHeads
	var got, want32 []float32
	var want64 []float64
	for _, pt := range coreParts(t, p, in) {
		lo, hi := pt.Tok0*vw, (pt.Tok0+pt.N)*vw
		if pt.Skip {
			if !slices.ContainsFunc(o.Output[lo:hi], func(x float32) bool { return x == x }) {
				continue
			}
			t.Errorf("%s: padding's outputs were written", name)
			continue
		}
		got = append(got, o.Output[lo:hi]...)
		want32 = append(want32, r32.Output[lo:hi]...)
		want64 = append(want64, o64.Output[lo:hi]...)
	}
	checkWritten(t, name+": output", got)
	checkWritten(t, name+": state_out", o.StateOut)
	checkBound(t, name+": output vs Reference32", cpuref.MaxRelErr(got, want32), typeBound(p.Activation, boundRef32))
	checkBound(t, name+": output vs Oracle64", cpuref.MaxRelErr64(got, want64), typeBound(p.Activation, boundOracle64))
	checkBound(t, name+": state_out vs Reference32", cpuref.MaxRelErr(o.StateOut, r32.StateOut), typeBound(p.State, boundRef32))
	checkBound(t, name+": state_out vs Oracle64", cpuref.MaxRelErr64(o.StateOut, o64.StateOut), typeBound(p.State, boundRef32))
	if p.Core.Conv > 0 {
		checkWritten(t, name+": conv_state_out", o.ConvState)
		checkSameBytes(t, name+": conv_state_out vs Reference32", p.Activation, o.convState, encode(p.Activation, r32.ConvState))
	}
}

// coreCase is one call of the core suite: its parameters, and its inputs
// made from them (inputs).
type coreCase struct {
	name  string
	p     spec.Params
	seed  uint64                    // cpuref.RandomInputs's seed
	edits []func(in *cpuref.Inputs) // then applied in order (slots, cu_seqlens)
}

func (c coreCase) subtest() string { return c.name }

// inputs returns the case's inputs: random ones for c.p, then c.edits.
func (c coreCase) inputs(t *testing.T) cpuref.Inputs {
	t.Helper()
	in, err := cpuref.RandomInputs(c.p, c.seed)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range c.edits {
		e(&in)
	}
	return in
}

// coreCases are the core suite's calls: every activation and state type
// with the whole Qwen core at one token and at a window; then, in bf16 /
// f32, each part alone, the sigmoid gate, every D_k, the tiled map,
// grouped and ungrouped heads, a state pool with padding and packed
// sequences of 0, 1, 2 and more tokens.
func coreCases() []coreCase {
	var cs []coreCase
	base := spec.Params{Shape: spec.Shape{DK: 64, DV: 32, NKHeads: 1, NVHeads: 2, NTokens: 1, NSeqs: 2},
		QScale: 0.125, Fused: spec.FusedAll, Core: spec.QwenCore()}
	for _, a := range kernels.ElemTypes {
		for _, st := range kernels.ElemTypes {
			for _, n := range []int{1, 3} {
				p := base
				p.Activation, p.State, p.NTokens = a, st, n
				cs = append(cs, coreCase{fmt.Sprintf("%v_%v_t%d", a, st, n), p, uint64(10*n) + uint64(a)*3 + uint64(st), nil})
			}
		}
	}
	variant := func(name string, edit func(p *spec.Params), edits ...func(in *cpuref.Inputs)) {
		p := base
		p.Activation, p.NTokens = spec.BF16, 4
		edit(&p)
		cs = append(cs, coreCase{name, p, uint64(len(cs)), edits})
	}
	variant("conv_only", func(p *spec.Params) { p.Core = spec.Core{Conv: 4} })
	variant("norm_only_sigmoid", func(p *spec.Params) {
		p.Core = spec.Core{Norm: true, NormGate: spec.GateSigmoid, NormEps: 1e-5}
	})
	variant("neither", func(p *spec.Params) { p.Core = spec.Core{} })
	variant("dk128_dv64_tiled", func(p *spec.Params) {
		p.DK, p.DV, p.NKHeads, p.NVHeads, p.HeadMap = 128, 64, 2, 4, spec.Tiled
	})
	variant("dk128_mha_f32", func(p *spec.Params) {
		p.DK, p.DV, p.NKHeads, p.NVHeads, p.Activation = 128, 48, 2, 2, spec.F32
	})
	variant("dk32_gqa3", func(p *spec.Params) {
		p.DK, p.DV, p.NKHeads, p.NVHeads, p.State = 32, 32, 1, 3, spec.F16
	})
	// r value heads of 4 D_v threads each over the emulator's 1024: in
	// place, the grouped geometry runs them in passes (r = 3 at D_v = 96:
	// 3 passes of 1; the tiled map at D_v = 160: 2 passes of 1), and
	// packed sequences of odd lengths carry the norm's parity across them.
	variant("dk32_dv96_gqa3_passes", func(p *spec.Params) {
		p.DK, p.DV, p.NKHeads, p.NVHeads, p.NTokens = 32, 96, 2, 6, 3
	})
	variant("dk64_dv160_tiled_passes", func(p *spec.Params) {
		p.DK, p.DV, p.NKHeads, p.NVHeads, p.HeadMap, p.State = 64, 160, 2, 4, spec.Tiled, spec.BF16
	})
	variant("passes_varlen_slots", func(p *spec.Params) {
		p.DK, p.DV, p.NKHeads, p.NVHeads, p.NSeqs, p.NTokens, p.Varlen, p.NSlots = 32, 96, 1, 3, 4, 7, true, 5
	}, func(in *cpuref.Inputs) {
		in.CuSeqlens = []int32{0, 1, 4, 4, 7}
		in.Slots = []int32{4, 1, 0, -1}
	})
	variant("slots_padding", func(p *spec.Params) {
		p.NSeqs, p.NSlots, p.NVHeads = 3, 5, 4
	}, func(in *cpuref.Inputs) { in.Slots = []int32{3, -1, 0} })
	variant("varlen_short", func(p *spec.Params) {
		p.NSeqs, p.NTokens, p.Varlen = 4, 8, true
	}, func(in *cpuref.Inputs) { in.CuSeqlens = []int32{0, 1, 1, 3, 8} })
	variant("varlen_slots", func(p *spec.Params) {
		p.NSeqs, p.NTokens, p.Varlen, p.NSlots = 3, 6, true, 4
	}, func(in *cpuref.Inputs) {
		in.CuSeqlens = []int32{0, 2, 3, 6}
		in.Slots = []int32{2, 0, -1}
	})
	return cs
}

// TestEmulatedCore runs the layer-core kernel on every case of coreCases in
// two scheduling orders against both references (checkCore), then in
// place (one view for StateOut and StateIn, one for ConvStateOut and
// ConvStateIn; with grouped heads and the convolution that is the grouped
// geometry, one threadgroup per key head), whose outputs, state and conv
// state must equal the first run's byte for byte, and whose conv state
// traffic must be exactly the floor.
func TestEmulatedCore(t *testing.T) { onEmulated(t, eachCase(coreCases, coreSuiteCase)) }

// TestMetalCore runs the same on the system's GPU (a Mac; it skips
// elsewhere), where the traffic is not measured.
func TestMetalCore(t *testing.T) { onMetal(t, eachCase(coreCases, coreSuiteCase)) }

// coreSuiteCase is TestEmulatedCore's check of one case.
func coreSuiteCase(t *testing.T, r *rig, c coreCase) {
	in := c.inputs(t)
	o, err := r.runCore(t, coreJob{p: c.p, in: in})
	if err != nil {
		t.Fatal(err)
	}
	checkCore(t, c.name, c.p, in, o)
	if o.Counters != nil {
		checkCoreTraffic(t, c.name, c.p, in, *o.Counters, false)
	}
	ip, err := r.runCore(t, coreJob{p: c.p, in: in, inPlace: true})
	if err != nil {
		t.Fatal(err)
	}
	checkSameCore(t, c.name+" in place", c.p, ip, o)
	if ip.Counters != nil {
		checkCoreTraffic(t, c.name+" in place", c.p, in, *ip.Counters, true)
	}
}

// checkSameCore fails the test unless a and b, two core dispatches of p,
// wrote the same bytes: output, state and, with a convolution, conv state.
func checkSameCore(t *testing.T, what string, p spec.Params, a, b coreOutcome) {
	t.Helper()
	checkSameBytes(t, what+": output", p.Activation, a.output, b.output)
	checkSameBytes(t, what+": state", p.State, a.stateOut, b.stateOut)
	if p.Core.Conv > 0 {
		checkSameBytes(t, what+": conv state", p.Activation, a.convState, b.convState)
	}
}

// checkCoreTraffic checks the emulator's byte counts of a core dispatch:
// the recurrent state read once and written once (the floor of SPEC
// section 8) for every sequence that runs; the conv state written exactly
// once, (K-1) conv_dim elements per sequence that runs; and read, in place
// (inPlace: with grouped heads the grouped geometry) exactly as much, apart
// (one threadgroup per value head) (K-1) (r 2 n_k_heads D_k + n_v_heads
// D_v) elements per sequence: each of the r value heads of a key head
// reads its q and k.
func checkCoreTraffic(t *testing.T, name string, p spec.Params, in cpuref.Inputs, c msl.Counters, inPlace bool) {
	t.Helper()
	running := 0
	for _, pt := range coreParts(t, p, in) {
		if !pt.Skip && pt.N > 0 {
			running++
		}
	}
	state := uint64(p.State.Size()*p.DK*p.DV*p.NVHeads) * uint64(running)
	want := func(what string, got, want uint64) {
		t.Helper()
		if got != want {
			t.Errorf("%s: %s %d bytes, want %d", name, what, got, want)
		}
	}
	// In place one view is bound at both indices, and the emulator charges
	// its bytes to the lower one: sum the two.
	both := func(n [msl.MaxBindings]uint64, i, j int) uint64 {
		if inPlace {
			return n[i] + n[j]
		}
		return n[i]
	}
	want("state loaded at index 5", both(c.Loaded, bindStateIn, bindStateOut), state)
	want("state stored at index 7", both(c.Stored, bindStateOut, bindStateIn), state)
	if p.Core.Conv == 0 {
		return
	}
	a := uint64(p.Activation.Size())
	km1 := uint64(p.Core.Conv - 1)
	r := uint64(p.NVHeads / p.NKHeads)
	if inPlace {
		r = 1
	}
	want("conv state stored at index 17", both(c.Stored, bindConvStateOut, bindConvStateIn), uint64(running)*km1*uint64(p.ConvDim())*a)
	want("conv state loaded at index 16", both(c.Loaded, bindConvStateIn, bindConvStateOut),
		uint64(running)*km1*(r*2*uint64(p.NKHeads*p.DK)+uint64(p.NVHeads*p.DV))*a)
}

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
