package tests

import (
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
	"github.com/puremetal/puremetal/internal/floats"
	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/kernels"
	"github.com/puremetal/puremetal/mtl"
)

// Error bounds, relative to the largest magnitude of the reference
// (cpuref.MaxRelErr). They are the contract's; change one only with a
// written reason.
const (
	boundRef32    = 1e-5 // against cpuref.Reference32 (same per-element order, float32)
	boundOracle64 = 1e-4 // against cpuref.Oracle64 (matrix form, float64)
	boundGolden   = 1e-6 // against HF transformers' results (summation order only)
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
		enc.DispatchThreadgroups(mtl.Size{Width: uint(s.DV / nsg), Height: uint(s.NVHeads), Depth: uint(s.NSeqs)},
			mtl.Size{Width: 32, Height: uint(nsg), Depth: 1})
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

// job is one dispatch: a kernel, its parameters and inputs, and how the
// buffers are laid out.
type job struct {
	kern         kernel
	p            spec.Params
	in           cpuref.Inputs
	inPlace      bool // StateIn and StateOut are one view of one buffer
	captureSlots int  // states the capture buffer holds; 0 means n_tokens
}

// outcome is what a dispatch wrote, read back after the command buffer
// completed. Capture holds the whole capture buffer, captureSlots states.
type outcome struct {
	Output, StateOut, Capture []float32
	Counters                  *msl.Counters // emulated device only
}

// run encodes j on a command buffer of its own, commits it, waits, and
// returns the results; any error fails the test.
func (r *rig) run(t *testing.T, j job) outcome {
	t.Helper()
	o, err := r.tryRun(t, j)
	if err != nil {
		t.Fatalf("%s %v %v scale=%g: %v", j.kern.name, j.p.Shape, j.p.HeadMap, j.p.QScale, err)
	}
	return o
}

func (r *rig) tryRun(t *testing.T, j job) (outcome, error) {
	t.Helper()
	p := j.p
	b := gdn.Buffers{
		Q: r.upload(t, j.in.Q), K: r.upload(t, j.in.K), V: r.upload(t, j.in.V),
		G: r.upload(t, j.in.G), Beta: r.upload(t, j.in.Beta), StateIn: r.upload(t, j.in.StateIn),
		Output: r.poisoned(t, p.VLen()),
	}
	if j.inPlace {
		b.StateOut = b.StateIn
	} else {
		b.StateOut = r.poisoned(t, p.StateLen())
	}
	if j.kern.capture {
		slots := j.captureSlots
		if slots == 0 {
			slots = p.NTokens
		}
		b.Capture = r.poisoned(t, slots*p.StateLen())
	}
	cs, err := r.execute(func(enc *mtl.ComputeCommandEncoder) error { return j.kern.call(r.k, enc, p, b) })
	if err != nil {
		return outcome{}, err
	}
	o := outcome{
		Output:   readBack(b.Output),
		StateOut: readBack(b.StateOut),
	}
	if j.kern.capture {
		o.Capture = readBack(b.Capture)
	}
	if r.emulated {
		if len(cs) != 1 {
			return outcome{}, fmt.Errorf("the command buffer ran %d dispatches, want 1", len(cs))
		}
		o.Counters = &cs[0]
	}
	return o, nil
}

// upload returns a view of a new shared buffer holding x, released when
// the test ends.
func (r *rig) upload(t testing.TB, x []float32) gdn.View {
	t.Helper()
	b, err := r.dev.NewBufferWithBytes(floats.Bytes(x...), mtl.ResourceStorageModeShared)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Release)
	return gdn.F32View(b, 0, len(x))
}

// poisoned returns a view of a new shared buffer of n elements, each
// floats.NaN, released when the test ends.
func (r *rig) poisoned(t testing.TB, n int) gdn.View {
	t.Helper()
	b, err := r.dev.NewBuffer(4*n, mtl.ResourceStorageModeShared)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Release)
	floats.Poison(mtl.Slice[float32](b))
	return gdn.F32View(b, 0, n)
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

// firstResults keeps the first result recorded under each key, so that
// later runs of the same dispatch can be compared with it byte for byte.
type firstResults[T any] struct {
	sync.Mutex
	m map[string]T
}

// first returns the result recorded under key and true, or records o under
// key and returns false.
func (f *firstResults[T]) first(key string, o T) (T, bool) {
	f.Lock()
	defer f.Unlock()
	if r, ok := f.m[key]; ok {
		return r, true
	}
	if f.m == nil {
		f.m = map[string]T{}
	}
	f.m[key] = o
	var zero T
	return zero, false
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

// captureSlot returns the slot of token t of sequence s in a capture
// buffer of p.NTokens states per sequence: the state after that token.
func captureSlot(p spec.Params, capture []float32, t, s int) []float32 {
	off := (s*p.NTokens + t) * stateSize(p)
	return capture[off : off+stateSize(p)]
}

// readBack copies a view's elements out of its buffer.
func readBack(v gdn.View) []float32 {
	all := mtl.Slice[float32](v.Buffer)
	off := v.Offset / 4
	return append([]float32(nil), all[off:off+v.Len]...)
}

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

// checkSame fails the test unless a and b hold the same bytes.
func checkSame(t *testing.T, what string, a, b []float32) {
	t.Helper()
	if i := floats.FirstDiff(a, b); i >= 0 {
		if i < len(a) && i < len(b) {
			t.Errorf("%s: not bit-identical: element %d of %d is %#08x (%g) and %#08x (%g)", what, i, len(a),
				math.Float32bits(a[i]), a[i], math.Float32bits(b[i]), b[i])
		} else {
			t.Errorf("%s: lengths %d and %d", what, len(a), len(b))
		}
	}
}
