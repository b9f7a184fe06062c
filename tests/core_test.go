package tests

import (
	"fmt"
	"slices"
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
