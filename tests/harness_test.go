package tests

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/emu/msl"
	"github.com/puremetal/puremetal/gdn"
	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/half"
	"github.com/puremetal/puremetal/internal/floats"
	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/kernels"
	"github.com/puremetal/puremetal/mtl"
)

// Error bounds, relative to the largest magnitude of the reference
// (cpuref.MaxRelErr). They are the contract's; change one only with a
// written reason.
const (
	boundRef32    = spec.TolF32       // against cpuref.Reference32 (same per-element order, float32)
	boundOracle64 = 1e-4              // against cpuref.Oracle64 (matrix form, float64)
	boundGolden   = spec.TolF32Output // against HF transformers' results (summation order only)
)

// rig is a device with the kernels, the registry of their pipeline states
// and a command queue, released when the test ends.
type rig struct {
	dev      *mtl.Device
	reg      *kernels.Registry
	k        *gdn.Kernels
	queue    *mtl.CommandQueue
	emulated bool // counters are available (emu.DispatchCounters)
}

func newRig(t testing.TB, dev *mtl.Device, emulated bool) *rig {
	return newRigWith(t, dev, emulated, kernels.NewRegistry())
}

// newRigWith is newRig with the kernels' pipeline states taken from reg,
// which the rig releases.
func newRigWith(t testing.TB, dev *mtl.Device, emulated bool, reg *kernels.Registry) *rig {
	t.Helper()
	t.Cleanup(reg.Release)
	k, err := gdn.New(dev, reg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Release)
	q, err := dev.NewCommandQueue()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Release)
	return &rig{dev: dev, reg: reg, k: k, queue: q, emulated: emulated}
}

// onEmulated runs f on a fresh emulated device in each scheduling order of
// testdevice.Orders, as subtests "forward" and "shuffled"; see onEmulatedIn.
func onEmulated(t *testing.T, f func(t *testing.T, r *rig)) {
	onEmulatedIn(t, testdevice.Orders, f)
}

// allOrders are testdevice.Orders and the reverse order, which runs the
// threadgroups, and the threads of each, last first.
var allOrders = append(slices.Clone(testdevice.Orders), emu.Options{Order: msl.Reverse})

// onEmulatedIn runs f on a fresh emulated device in each of the scheduling
// orders, as subtests named after the order. After each, with the device
// and everything made on it released, it checks that the emulator holds no
// more live objects than before.
func onEmulatedIn(t *testing.T, orders []emu.Options, f func(t *testing.T, r *rig)) {
	runs := make([]emuRun, len(orders))
	for i, o := range orders {
		runs[i] = emuRun{opts: o}
	}
	onEmulatedRuns(t, runs, f)
}

// emuRun is one run of a suite on the emulated device: a scheduling order
// and the language version the kernels are compiled as (0:
// kernels.LanguageVersion(dev); below 3.1 bf16 is converted by hand, from 3.1
// on it is MSL's bfloat).
type emuRun struct {
	opts emu.Options
	lang mtl.LanguageVersion
}

func (e emuRun) name() string {
	if e.lang == 0 {
		return e.opts.Order.String()
	}
	return fmt.Sprintf("%v_msl%d.%d", e.opts.Order, e.lang>>16, e.lang&0xffff)
}

// onEmulatedRuns is onEmulatedIn for runs that may also choose the
// kernels' language version; each run's subtest is named after its order
// and the version it forces.
func onEmulatedRuns(t *testing.T, runs []emuRun, f func(t *testing.T, r *rig)) {
	for _, run := range runs {
		before := emu.LiveObjects()
		t.Run(run.name(), func(t *testing.T) {
			reg := kernels.NewRegistry()
			if run.lang != 0 {
				reg = kernels.NewRegistryWithLanguage(run.lang)
			}
			f(t, newRigWith(t, testdevice.Emulated(t, run.opts), true, reg))
		})
		if after := emu.LiveObjects(); after != before {
			t.Errorf("%s: %d live emulated objects before, %d after everything was released", run.name(), before, after)
		}
	}
}

// onMetal runs f on the system's GPU; it skips, saying why, where there is
// no Metal.
func onMetal(t *testing.T, f func(t *testing.T, r *rig)) {
	f(t, newRig(t, testdevice.Metal(t), false))
}

// method is one of the dispatchers of gdn.Kernels.
type method func(k *gdn.Kernels, enc *mtl.ComputeCommandEncoder, p gdn.Params, b gdn.Buffers) error

// kernel is a dispatcher as the suite calls it.
type kernel struct {
	name    string
	call    method
	capture bool // writes the capture buffer
}

var (
	kPrefill = kernel{"prefill", (*gdn.Kernels).Prefill, false}
	kDecode  = kernel{"decode", (*gdn.Kernels).Decode, false} // decode at 1 token, seq from 2
	kSeq     = kernel{"seq", (*gdn.Kernels).DecodeSeq, false}
	kLegacy  = kernel{"legacy", (*gdn.Kernels).DecodeLegacy, false}
	kCapture = kernel{"capture", (*gdn.Kernels).DecodeWithCapture, true}
	kChunked = kernel{"chunked", (*gdn.Kernels).PrefillChunked, false}
	// kRecurrent is the token-by-token prefill kernel at any n_tokens,
	// which gdn.Kernels.Prefill leaves to the chunked kernel from
	// gdn.ChunkedMinTokens on.
	kRecurrent = kernel{"recurrent", func(k *gdn.Kernels, enc *mtl.ComputeCommandEncoder, p gdn.Params, b gdn.Buffers) error {
		return k.Encode(enc, gdn.KernelPrefill, p, b)
	}, false}

	allKernels    = []kernel{kPrefill, kChunked, kDecode, kSeq, kLegacy, kCapture}
	decodeFamily  = []kernel{kDecode, kSeq, kLegacy, kCapture}
	decodeKernels = map[int]bool{32: true, 64: true, 128: true} // D_k the decode family takes
)

// decodeKernel is the decode kernel itself,
// gated_delta_net_decode_{A}_{S}_{NSG}, at any n_tokens. gdn.Kernels.Decode
// picks it at one token only, so it is encoded here directly through mtl,
// with the pipeline state of the rig's registry and the geometry of SPEC
// section 6, on the arguments gdn.Validate accepts for the legacy kernel
// (the same code under another name).
func (r *rig) decodeKernel() kernel {
	call := func(_ *gdn.Kernels, enc *mtl.ComputeCommandEncoder, p gdn.Params, b gdn.Buffers) error {
		if err := gdn.Validate(gdn.KernelDecodeLegacy, p, b); err != nil {
			return err
		}
		s := p.Shape
		nsg := s.DK / 32
		pso, err := r.reg.Pipeline(r.dev, kernels.DecodeOf(p.Activation, p.State, nsg))
		if err != nil {
			return err
		}
		enc.SetComputePipelineState(pso)
		views := []gdn.View{b.Q, b.K, b.V, b.G, b.Beta, b.StateIn, b.Output, b.StateOut}
		bufs, offsets := make([]*mtl.Buffer, len(views)), make([]int, len(views))
		for i, v := range views {
			bufs[i], offsets[i] = v.Buffer, v.Offset
		}
		enc.SetBuffers(bufs, offsets, 0)
		enc.SetBytes(paramBytes(p), 8)
		// A_log and dt_bias at 10 and 11; without the fused gate the kernel
		// reads neither and G's buffer stands in, as gdn binds it.
		aLog, dtBias := b.ALog, b.DtBias
		if !p.Fused.Gate {
			aLog, dtBias = b.G, b.G
		}
		enc.SetBuffer(aLog.Buffer, aLog.Offset, 10)
		enc.SetBuffer(dtBias.Buffer, dtBias.Offset, 11)
		// The slot index and cu_seqlens at 12 and 13, or G's buffer in
		// their place, as gdn binds them.
		slots, cu := b.Slots, b.CuSeqlens
		if s.NSlots == 0 {
			slots = b.G
		}
		if !s.Varlen {
			cu = b.G
		}
		enc.SetBuffer(slots.Buffer, slots.Offset, 12)
		enc.SetBuffer(cu.Buffer, cu.Offset, 13)
		enc.DispatchThreadgroups(mtl.Size{Width: s.DV / nsg, Height: s.NVHeads, Depth: s.NSeqs},
			mtl.Size{Width: 32, Height: nsg, Depth: 1})
		return enc.Err()
	}
	return kernel{name: "decode_kernel", call: call}
}

// paramBytes packs the parameter words, little-endian: the nine of SPEC
// section 5 (D_k, D_v, n_k_heads, n_v_heads, n_tokens, n_seqs, head map,
// the fused parts: bit 0 L2 norm, bit 1 gate, bit 2 beta; and the bits of
// q scale, 0 for none), then n_slots (0 without a pool), 1 for packed
// sequences, and a reserved 0.
func paramBytes(p gdn.Params) []byte {
	s := p.Shape
	var scale uint32
	if p.QScale != 0 {
		scale = math.Float32bits(p.QScale)
	}
	var fused uint32
	for i, on := range []bool{p.Fused.L2Norm, p.Fused.Gate, p.Fused.Beta} {
		if on {
			fused |= 1 << i
		}
	}
	words := []uint32{uint32(s.DK), uint32(s.DV), uint32(s.NKHeads), uint32(s.NVHeads),
		uint32(s.NTokens), uint32(s.NSeqs), uint32(p.HeadMap), fused, scale,
		uint32(s.NSlots), 0, 0}
	if s.Varlen {
		words[10] = 1
	}
	b := make([]byte, 4*len(words))
	for i, w := range words {
		binary.LittleEndian.PutUint32(b[4*i:], w)
	}
	return b
}

// job is one dispatch: a kernel, its parameters and inputs (as values of
// p's element types), and how the buffers are laid out.
type job struct {
	kern         kernel
	p            spec.Params
	in           cpuref.Inputs
	inPlace      bool // StateIn and StateOut are one view of one buffer
	captureSlots int  // states the capture buffer holds per sequence; 0 means n_tokens
	private      bool // the slot index and cu_seqlens in private storage, which validation cannot read
}

// outcome is what a dispatch wrote, read back after the command buffer
// completed: the bytes of each written buffer (output, state_out and
// capture, the whole buffer of each), and its elements widened to float32.
type outcome struct {
	output, stateOut, capture []byte
	Output, StateOut, Capture []float32
	Counters                  *msl.Counters // emulated device only
}

// run encodes j on a command buffer of its own, commits it, waits, and
// returns the results; any error fails the test.
func (r *rig) run(t *testing.T, j job) outcome {
	t.Helper()
	o, err := r.tryRun(t, j)
	if err != nil {
		t.Fatalf("%s %s: %v", j.kern.name, typedName(j.p), err)
	}
	return o
}

// tryRun is run returning the error: inputs uploaded in p's element types
// (A_log and dt_bias with the fused gate, the slot index with a pool,
// cu_seqlens with packed sequences), the written buffers poisoned first.
func (r *rig) tryRun(t *testing.T, j job) (outcome, error) {
	t.Helper()
	p, in := j.p, j.in
	a, st := p.Activation, p.State
	b := gdn.Buffers{
		Q: r.uploadTyped(t, a, in.Q), K: r.uploadTyped(t, a, in.K), V: r.uploadTyped(t, a, in.V),
		G: r.uploadTyped(t, a, in.G), Beta: r.uploadTyped(t, a, in.Beta), StateIn: r.uploadTyped(t, st, in.StateIn),
		Output: r.poisonedTyped(t, a, p.VLen()),
	}
	if j.inPlace {
		b.StateOut = b.StateIn
	} else {
		b.StateOut = r.poisonedTyped(t, st, p.StateLen())
	}
	if j.kern.capture {
		n := p.CaptureLen()
		if j.captureSlots != 0 {
			n = j.captureSlots * p.NSeqs * stateSize(p)
		}
		b.Capture = r.poisonedTyped(t, st, n)
	}
	if p.Fused.Gate {
		b.ALog, b.DtBias = r.uploadTyped(t, spec.F32, in.ALog), r.uploadTyped(t, spec.F32, in.DtBias)
	}
	if p.NSlots > 0 {
		b.Slots = r.uploadInt32(t, in.Slots, j.private)
	}
	if p.Varlen {
		b.CuSeqlens = r.uploadInt32(t, in.CuSeqlens, j.private)
	}
	cs, err := r.execute(func(enc *mtl.ComputeCommandEncoder) error { return j.kern.call(r.k, enc, p, b) })
	if err != nil {
		return outcome{}, err
	}
	o := outcome{output: viewBytes(b.Output), stateOut: viewBytes(b.StateOut)}
	o.Output, o.StateOut = decode(a, o.output), decode(st, o.stateOut)
	if j.kern.capture {
		o.capture = viewBytes(b.Capture)
		o.Capture = decode(st, o.capture)
	}
	if r.emulated {
		if len(cs) != 1 {
			return outcome{}, fmt.Errorf("the command buffer ran %d dispatches, want 1", len(cs))
		}
		o.Counters = &cs[0]
	}
	return o, nil
}

// references are a case's inputs and both CPU references' results, with
// the state after every token.
type references struct {
	in  cpuref.Inputs
	r32 cpuref.Result
	o64 cpuref.Result64
}

// refCache computes each case's references once per test binary: the
// emulated device's runs and the real device share them.
var refCache struct {
	sync.Mutex
	m map[string]*references
}

// referencesOf returns the inputs and both references' results (with the
// state after every token) of the case named key, computed once per test
// binary from the inputs that inputs returns.
func referencesOf(t *testing.T, key string, p spec.Params, inputs func() cpuref.Inputs) *references {
	t.Helper()
	refCache.Lock()
	defer refCache.Unlock()
	if r := refCache.m[key]; r != nil {
		return r
	}
	in := inputs()
	r32, o64 := bothReferences(t, p, in, true)
	r := &references{in: in, r32: r32, o64: o64}
	if refCache.m == nil {
		refCache.m = map[string]*references{}
	}
	refCache.m[key] = r
	return r
}

// bothReferences returns Reference32's and Oracle64's results of the
// step (with capture, the state after every token), failing the test on
// an error.
func bothReferences(t *testing.T, p spec.Params, in cpuref.Inputs, capture bool) (cpuref.Result, cpuref.Result64) {
	t.Helper()
	r32, err := cpuref.Reference32(p, in, capture)
	if err != nil {
		t.Fatal(err)
	}
	o64, err := cpuref.Oracle64(p, in, capture)
	if err != nil {
		t.Fatal(err)
	}
	return r32, o64
}

// runChecked runs j and checks what it wrote against the first run of
// the same dispatch in the test binary (checkAcrossRuns, keyed by the
// device, name, the kernel's name and whether the state is in place) and,
// where the emulator counted, its traffic (checkTraffic).
func (r *rig) runChecked(t *testing.T, name string, j job) outcome {
	t.Helper()
	o := r.run(t, j)
	name += "/" + j.kern.name
	if j.inPlace {
		name += " in place"
	}
	device := "metal/"
	if r.emulated {
		device = "emulated/"
	}
	checkAcrossRuns(t, device+name, j.p, o)
	if o.Counters != nil {
		checkTraffic(t, name, j.kern, j.p, *o.Counters, j.inPlace)
	}
	return o
}

// runEach runs each of kerns on p and ref's inputs (runChecked, under the
// case's name), checks what each wrote against the references with
// check, and returns the outcomes by kernel name.
func (r *rig) runEach(t *testing.T, name string, p spec.Params, ref *references, kerns []kernel,
	check func(t *testing.T, name string, p spec.Params, o outcome, ref *references)) map[string]outcome {
	t.Helper()
	res := make(map[string]outcome, len(kerns))
	for _, k := range kerns {
		o := r.runChecked(t, name, job{kern: k, p: p, in: ref.in})
		check(t, k.name, p, o, ref)
		res[k.name] = o
	}
	return res
}

// checkInPlace runs j with state_in and state_out one view of one buffer
// (runChecked) and checks that it wrote the bytes of separate, j's run
// with two buffers.
func (r *rig) checkInPlace(t *testing.T, name string, j job, separate outcome) {
	t.Helper()
	j.inPlace = true
	checkSameResults(t, j.kern.name+": in place vs separate", j.p, r.runChecked(t, name, j), separate)
}

// runKernelsFor runs the kernels of kernelsFor on a case (runEach, each
// checked against ref with check) and checks what they must agree on:
// every decode kernel writes the bytes legacy writes (one code, one
// result), and capture's last slot holds state_out's bytes. It returns the
// kernels and their outcomes by name.
func (r *rig) runKernelsFor(t *testing.T, name string, p spec.Params, ref *references,
	check func(t *testing.T, name string, p spec.Params, o outcome, ref *references)) ([]kernel, map[string]outcome) {
	t.Helper()
	kerns := r.kernelsFor(p)
	res := r.runEach(t, name, p, ref, kerns, check)
	for _, k := range kerns {
		switch k.name {
		case kPrefill.name, kChunked.name, kRecurrent.name, kLegacy.name:
			continue
		}
		checkSameResults(t, k.name+" vs legacy", p, res[k.name], res[kLegacy.name])
	}
	if capt, ok := res[kCapture.name]; ok {
		checkLastSlotBytes(t, kCapture.name, p, capt)
	}
	return kerns, res
}

// Buffer binding indices (SPEC section 4).
const (
	bindStateIn  = 5
	bindOutput   = 6
	bindStateOut = 7
	bindCapture  = 9
	bindALog     = 10
	bindDtBias   = 11
)

// checkTraffic checks the emulator's byte counts of one dispatch, in the
// state's and the activations' own element sizes: every kernel reads each
// state cell once and writes it once, whatever n_tokens is, writes each
// output element once, and capture writes one state per token on top;
// A_log and dt_bias are read only with the fused gate, four bytes of each
// per thread. In place, both state accesses are charged to binding 5, the
// lower of the two (msl.Counters).
func checkTraffic(t *testing.T, name string, k kernel, p spec.Params, c msl.Counters, inPlace bool) {
	t.Helper()
	state := uint64(p.State.Size() * p.StateLen())
	want := func(what string, got, want uint64) {
		t.Helper()
		if got != want {
			t.Errorf("%s, %d tokens: %s %d bytes, want %d", name, p.NTokens, what, got, want)
		}
	}
	if inPlace {
		want("state loaded at index 5", c.Loaded[bindStateIn], state)
		want("state stored at index 5", c.Stored[bindStateIn], state)
	} else {
		want("state loaded at index 5", c.Loaded[bindStateIn], state)
		want("state stored at index 5", c.Stored[bindStateIn], 0)
		want("state loaded at index 7", c.Loaded[bindStateOut], 0)
		want("state stored at index 7", c.Stored[bindStateOut], state)
	}
	want("output stored at index 6", c.Stored[bindOutput], uint64(p.Activation.Size()*p.VLen()))
	want("output loaded at index 6", c.Loaded[bindOutput], 0)
	var capture uint64
	if k.capture {
		capture = uint64(p.NTokens) * state
	}
	want("capture stored at index 9", c.Stored[bindCapture], capture)
	want("capture loaded at index 9", c.Loaded[bindCapture], 0)
	var consts uint64
	if p.Fused.Gate {
		consts = 4 * threadsOf(c)
	}
	want("A_log loaded at index 10", c.Loaded[bindALog], consts)
	want("dt_bias loaded at index 11", c.Loaded[bindDtBias], consts)
}

// threadsOf returns the threads of the dispatch the counters are of (the
// automatic choices pick a kernel, and so a geometry, by shape).
func threadsOf(c msl.Counters) uint64 {
	n := uint64(1)
	for k := range 3 {
		n *= uint64(c.Threadgroups[k] * c.ThreadsPerThreadgroup[k])
	}
	return n
}

// codecs are the little-endian byte encodings of each element type: f16
// and bf16 through package half (x holds values of the type, so encoding
// is exact), f32 as the IEEE 754 bits.
var codecs = map[spec.ElemType]struct {
	encode func(dst []byte, src []float32) int
	decode func(dst []float32, src []byte) int
}{
	spec.F16:  {half.EncodeFloat16, half.DecodeFloat16},
	spec.BF16: {half.EncodeBFloat16, half.DecodeBFloat16},
	spec.F32:  {encodeFloat32, decodeFloat32},
}

func encodeFloat32(dst []byte, src []float32) int { return copy(dst, floats.Bytes(src...)) / 4 }

func decodeFloat32(dst []float32, src []byte) int { return copy(dst, floats.FromBytes(src)) }

// encode returns the bytes of x as elements of type t, little-endian (x
// holds values of t).
func encode(t spec.ElemType, x []float32) []byte {
	b := make([]byte, t.Size()*len(x))
	codecs[t].encode(b, x)
	return b
}

// decode widens little-endian elements of type t to float32.
func decode(t spec.ElemType, b []byte) []float32 {
	x := make([]float32, len(b)/t.Size())
	codecs[t].decode(x, b)
	return x
}

// poisonBytes fills b with a quiet NaN of type t that no arithmetic
// produces (for f32, floats.NaN).
func poisonBytes(t spec.ElemType, b []byte) {
	pattern := map[spec.ElemType][]byte{
		spec.F32: {0xad, 0xde, 0xc0, 0x7f}, spec.F16: {0x5b, 0x7e}, spec.BF16: {0xdb, 0x7f},
	}[t]
	for i := range b {
		b[i] = pattern[i%len(pattern)]
	}
}

// upload returns a view of a new shared buffer holding x as f32 elements,
// released when the test ends.
func (r *rig) upload(t testing.TB, x []float32) gdn.View {
	t.Helper()
	return r.uploadTyped(t, spec.F32, x)
}

// uploadTyped returns a view of a new shared buffer holding x as elements
// of type et, released when the test ends.
func (r *rig) uploadTyped(t testing.TB, et spec.ElemType, x []float32) gdn.View {
	t.Helper()
	b, err := r.dev.NewBufferWithBytes(encode(et, x), mtl.ResourceStorageModeShared)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Release)
	return gdn.NewView(b, 0, et, len(x))
}

// poisoned returns a view of a new shared buffer of n f32 elements, each
// floats.NaN, released when the test ends.
func (r *rig) poisoned(t testing.TB, n int) gdn.View {
	t.Helper()
	return r.poisonedTyped(t, spec.F32, n)
}

// poisonedTyped returns a view of a new shared buffer of n elements of
// type et, each a NaN no arithmetic produces (poisonBytes), released when
// the test ends.
func (r *rig) poisonedTyped(t testing.TB, et spec.ElemType, n int) gdn.View {
	t.Helper()
	b, err := r.dev.NewBuffer(et.Size()*n, mtl.ResourceStorageModeShared)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Release)
	poisonBytes(et, mtl.Slice[byte](b))
	return gdn.NewView(b, 0, et, n)
}

// uploadInt32 returns an int32 view of x in a new buffer, released when the
// test ends: shared storage, or private storage filled by a blit copy.
func (r *rig) uploadInt32(t testing.TB, x []int32, private bool) gdn.View {
	t.Helper()
	raw := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(raw[4*i:], uint32(v))
	}
	shared, err := r.dev.NewBufferWithBytes(raw, mtl.ResourceStorageModeShared)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(shared.Release)
	if !private {
		return gdn.I32View(shared, 0, len(x))
	}
	g := &testdevice.GPU{T: t, D: r.dev, Q: r.queue}
	priv := g.Buffer(len(raw), mtl.ResourceStorageModePrivate)
	cb, blit := g.Blit()
	blit.CopyFromBuffer(shared, 0, priv, 0, len(raw))
	err = blit.EndEncoding()
	if err == nil {
		err = completed(cb)
	}
	if err != nil {
		t.Fatal(err)
	}
	return gdn.I32View(priv, 0, len(x))
}

// execute runs encode on one command buffer of r's queue and waits for it
// to complete. On the system's GPU that is mtl.CommandQueue.Run. On the
// emulated device it returns the counters of every dispatch the command
// buffer ran (emu.DispatchCounters), which are the command buffer's, so
// there it makes, commits and checks the command buffer itself.
func (r *rig) execute(encode func(enc *mtl.ComputeCommandEncoder) error) ([]msl.Counters, error) {
	if !r.emulated {
		return nil, r.queue.Run(encode)
	}
	cb, err := r.queue.CommandBuffer()
	if err != nil {
		return nil, err
	}
	defer cb.Release()
	enc, err := cb.ComputeCommandEncoder()
	if err != nil {
		return nil, err
	}
	err = encode(enc)
	if endErr := enc.EndEncoding(); err == nil {
		err = endErr
	}
	if err == nil {
		err = completed(cb)
	}
	if err != nil {
		return nil, err
	}
	return emu.DispatchCounters(cb)
}

// completed commits cb, waits for it and returns its error, or one saying
// its status where it did not complete.
func completed(cb *mtl.CommandBuffer) error {
	cb.Commit()
	cb.WaitUntilCompleted()
	if err := cb.Error(); err != nil {
		return err
	}
	if st := cb.Status(); st != mtl.CommandBufferStatusCompleted {
		return fmt.Errorf("command buffer status %v, want completed", st)
	}
	return nil
}

// eachCase returns the suite that runs check on every one of cases, each
// in a subtest named after it.
func eachCase[C interface{ subtest() string }](cases func() []C, check func(t *testing.T, r *rig, c C)) func(t *testing.T, r *rig) {
	return func(t *testing.T, r *rig) {
		for _, c := range cases() {
			t.Run(c.subtest(), func(t *testing.T) { check(t, r, c) })
		}
	}
}

// kernelsFor returns the kernels a case runs on: prefill (the automatic
// choice), the chunked prefill, the token-by-token prefill kernel where
// the automatic choice is another, and for D_k of 32, 64 or 128 the
// decode family, with the decode kernel itself at two tokens or more
// (where the automatic choice is seq). Where the packed layout applies
// (D_k 64 or 128, D_v a multiple of 32) the automatic choices run the
// packed kernels, so the packed decode and seq kernels, the blocked
// prefill and the decode kernels of one row per SIMD-group are run by
// name as well.
func (r *rig) kernelsFor(p spec.Params) []kernel {
	kerns := []kernel{kPrefill, kChunked}
	if p.NTokens >= gdn.ChunkedMinTokens || packedShape(p.Shape) {
		kerns = append(kerns, kRecurrent)
	}
	if decodeKernels[p.DK] {
		kerns = append(kerns, decodeFamily...)
		if p.NTokens >= 2 {
			kerns = append(kerns, r.decodeKernel())
		}
	}
	if packedShape(p.Shape) {
		kerns = append(kerns, kPacked, kPackedSeq, kBlocked, kOneRowDecode, kOneRowCapture)
	}
	return kerns
}

// stateSize is the elements of one sequence's state, D_k * D_v *
// n_v_heads: the stride of the capture buffer's slots.
func stateSize(p spec.Params) int { return perToken(p).StateLen() }

// perToken is the shape of one token of one sequence of p.
func perToken(p spec.Params) spec.Shape {
	s := p.Shape
	s.NTokens, s.NSeqs = 1, 1
	return s
}

// seqState returns the bytes of sequence s's state in the bytes of a
// state_out of p's state type.
func seqState(p spec.Params, stateOut []byte, s int) []byte {
	n := stateSize(p) * p.State.Size()
	return stateOut[s*n : (s+1)*n]
}

// captureSlot returns the bytes of the slot of token tok of sequence s in
// the bytes of a capture buffer of p.NTokens states per sequence: the
// state after that token.
func captureSlot(p spec.Params, capture []byte, tok, s int) []byte {
	return seqState(p, capture, s*p.NTokens+tok)
}

// viewBytes copies a view's bytes out of its buffer.
func viewBytes(v gdn.View) []byte {
	all := mtl.Slice[byte](v.Buffer)
	return append([]byte(nil), all[v.Offset:v.Offset+v.Len*v.Type.Size()]...)
}

// readBack copies a view's elements out of its buffer, widened to float32.
func readBack(v gdn.View) []float32 { return decode(v.Type, viewBytes(v)) }

// checkWritten fails the test when an element of a result still holds the
// poison or is not finite.
func checkWritten(t *testing.T, what string, x []float32) {
	t.Helper()
	bad := 0
	for _, v := range x {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			bad++
		}
	}
	if bad != 0 {
		t.Errorf("%s: %d of %d elements not finite (%d still hold the poison)", what, bad, len(x), floats.Unwritten(x))
	}
}

// checkBound fails the test when err exceeds bound (a NaN err fails too).
func checkBound(t *testing.T, what string, err, bound float64) {
	t.Helper()
	if !(err <= bound) {
		t.Errorf("%s: relative error %.3g, bound %g", what, err, bound)
	}
}

// checkSameBytes fails the test unless a and b, little-endian elements of
// type et, are the same bytes; it names the first element that differs,
// its bits and its value on both sides.
func checkSameBytes(t *testing.T, what string, et spec.ElemType, a, b []byte) {
	t.Helper()
	if bytes.Equal(a, b) {
		return
	}
	n := et.Size()
	if len(a) != len(b) {
		t.Errorf("%s: lengths %d and %d bytes (%d and %d elements of %v)", what, len(a), len(b), len(a)/n, len(b)/n, et)
		return
	}
	i := 0
	for a[i] == b[i] {
		i++
	}
	i /= n
	elem := func(x []byte) (uint32, float32) {
		e := x[i*n : (i+1)*n]
		var bits uint32
		for k := n - 1; k >= 0; k-- {
			bits = bits<<8 | uint32(e[k])
		}
		return bits, decode(et, e)[0]
	}
	ab, av := elem(a)
	bb, bv := elem(b)
	t.Errorf("%s: not bit-identical: %v element %d of %d is %#0*x (%g) and %#0*x (%g)", what, et, i, len(a)/n, 2*n, ab, av, 2*n, bb, bv)
}

// checkSameResults fails the test unless a and b, two dispatches of p,
// wrote the same bytes: output, state_out and, where both wrote one,
// capture.
func checkSameResults(t *testing.T, what string, p spec.Params, a, b outcome) {
	t.Helper()
	checkSameBytes(t, what+": output", p.Activation, a.output, b.output)
	checkSameBytes(t, what+": state_out", p.State, a.stateOut, b.stateOut)
	if a.capture != nil && b.capture != nil {
		checkSameBytes(t, what+": capture", p.State, a.capture, b.capture)
	}
}

// firstRuns holds the first outcome of each dispatch run in the test
// binary, by key, so that later runs of it (another scheduling order, the
// other bf16 path) can be compared with it byte for byte: each thread
// computes the same values whatever order the threads run in, unless they
// race.
var firstRuns struct {
	sync.Mutex
	m map[string]outcome
}

// checkAcrossRuns compares o, what the dispatch of p named key (device,
// case and kernel) wrote, byte for byte with the first run of the same
// key; the first run is recorded.
func checkAcrossRuns(t *testing.T, key string, p spec.Params, o outcome) {
	t.Helper()
	firstRuns.Lock()
	first, ok := firstRuns.m[key]
	if !ok {
		if firstRuns.m == nil {
			firstRuns.m = map[string]outcome{}
		}
		firstRuns.m[key] = o
	}
	firstRuns.Unlock()
	if ok {
		checkSameResults(t, key+" vs the first run", p, o, first)
	}
}

// checkLastSlotBytes checks that the capture kernel named name left in
// each sequence's last capture slot the bytes of its state_out.
func checkLastSlotBytes(t *testing.T, name string, p spec.Params, o outcome) {
	t.Helper()
	for s := range p.NSeqs {
		checkSameBytes(t, fmt.Sprintf("%s: last slot vs state_out, sequence %d", name, s), p.State,
			captureSlot(p, o.capture, p.NTokens-1, s), seqState(p, o.stateOut, s))
	}
}

// checkPrefixSlots checks every capture slot but the last (which
// checkLastSlotBytes checks) of capt, what the capture kernel named name
// wrote over p's tokens and inputs in: slot t of each sequence holds the
// bytes of the state_out that k leaves after a run over the first t+1
// tokens alone.
func (r *rig) checkPrefixSlots(t *testing.T, name string, k kernel, p spec.Params, in cpuref.Inputs, capt outcome) {
	t.Helper()
	for n := 1; n < p.NTokens; n++ {
		pp, pin := prefix(p, in, n)
		pre := r.run(t, job{kern: k, p: pp, in: pin})
		for s := range p.NSeqs {
			checkSameBytes(t, fmt.Sprintf("%s: slot %d vs %s over the first %d tokens, sequence %d", name, n-1, k.name, n, s), p.State,
				captureSlot(p, capt.capture, n-1, s), seqState(pp, pre.stateOut, s))
		}
	}
}

// prefix returns the parameters and inputs of the first n tokens of every
// sequence.
func prefix(p spec.Params, in cpuref.Inputs, n int) (spec.Params, cpuref.Inputs) {
	q := p
	q.NTokens = n
	take := func(x []float32, perToken int) []float32 {
		var y []float32
		for s := range p.NSeqs {
			off := s * p.NTokens * perToken
			y = append(y, x[off:off+n*perToken]...)
		}
		return y
	}
	one := perToken(p)
	qk, v, g := one.QKLen(), one.VLen(), one.GateLen()
	return q, cpuref.Inputs{
		Q: take(in.Q, qk), K: take(in.K, qk), V: take(in.V, v),
		G: take(in.G, g), Beta: take(in.Beta, g),
		StateIn: in.StateIn, ALog: in.ALog, DtBias: in.DtBias,
	}
}
