package gdn

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/kernels"
	"github.com/puremetal/puremetal/mtl"
)

// fakeBuffers stands in for device buffers: validation asks bufferInfo,
// which reads the buffers registered here, so no device is needed.
type fakeBuffers map[*mtl.Buffer]*fakeBuffer

type fakeBuffer struct {
	length   int
	released bool
}

func useFakeBuffers(t *testing.T) fakeBuffers {
	t.Helper()
	fb := fakeBuffers{}
	old := bufferInfo
	bufferInfo = func(b *mtl.Buffer) (int, bool) {
		f, ok := fb[b]
		if !ok {
			t.Fatalf("bufferInfo of a buffer the test did not make")
		}
		return f.length, !f.released
	}
	t.Cleanup(func() { bufferInfo = old })
	return fb
}

// buffer returns a buffer of n bytes.
func (fb fakeBuffers) buffer(n int) *mtl.Buffer {
	b := new(mtl.Buffer)
	fb[b] = &fakeBuffer{length: n}
	return b
}

// release makes b a released buffer, which still answers its length.
func (fb fakeBuffers) release(b *mtl.Buffer) { fb[b].released = true }

// at places a view at a byte offset of a shared buffer.
type at struct {
	v      *View
	offset int
}

// pack moves the views into one new buffer, each at its offset, just long
// enough for all of them.
func (fb fakeBuffers) pack(views ...at) {
	n := 0
	for _, a := range views {
		n = max(n, a.offset+4*a.v.Len)
	}
	buf := fb.buffer(n)
	for _, a := range views {
		a.v.Buffer, a.v.Offset = buf, a.offset
	}
}

// view returns an f32 view of exactly n elements in a buffer of its own.
func (fb fakeBuffers) view(n int) View { return fb.typedView(F32, n) }

// typedView returns a view of exactly n elements of type t in a buffer of
// its own.
func (fb fakeBuffers) typedView(t ElemType, n int) View {
	return NewView(fb.buffer(t.Size()*n), 0, t, n)
}

// args returns valid parameters and buffers for kern and s, all f32.
func (fb fakeBuffers) args(kern Kernel, s Shape) (Params, Buffers) {
	return fb.typedArgs(kern, s, F32, F32, spec.Fused{})
}

// typedArgs returns valid parameters and buffers for kern and s with
// activation type a, state type st and the fused parts f.
func (fb fakeBuffers) typedArgs(kern Kernel, s Shape, a, st ElemType, f spec.Fused) (Params, Buffers) {
	b := Buffers{
		Q: fb.typedView(a, s.QKLen()), K: fb.typedView(a, s.QKLen()), V: fb.typedView(a, s.VLen()),
		G: fb.typedView(a, s.GateLen()), Beta: fb.typedView(a, s.GateLen()), StateIn: fb.typedView(st, s.StateLen()),
		Output: fb.typedView(a, s.VLen()), StateOut: fb.typedView(st, s.StateLen()),
	}
	if kern.captures() {
		b.Capture = fb.typedView(st, s.CaptureLen())
	}
	if f.Gate {
		b.ALog, b.DtBias = fb.view(s.NVHeads), fb.view(s.NVHeads)
	}
	return Params{Shape: s, HeadMap: Tiled, QScale: 0.125, Activation: a, State: st, Fused: f}, b
}

// fusedOptions are every combination of the fused parts.
func fusedOptions() []spec.Fused {
	var out []spec.Fused
	for i := range 8 {
		out = append(out, spec.Fused{L2Norm: i&1 != 0, Gate: i&2 != 0, Beta: i&4 != 0})
	}
	return out
}

var (
	decodeShape  = Shape{DK: 64, DV: 32, NKHeads: 2, NVHeads: 4, NTokens: 5, NSeqs: 3}
	prefillShape = Shape{DK: 48, DV: 24, NKHeads: 2, NVHeads: 6, NTokens: 5, NSeqs: 3}
	// The kernels of one threadgroup per head and sequence, then the
	// SIMD-group decode family, then the kernels of the packed layout.
	prefillKernels = []Kernel{KernelPrefill, KernelPrefillChunked}
	decodeKernels  = []Kernel{KernelDecode, KernelDecodeSeq, KernelDecodeLegacy, KernelDecodeCapture}
	packedKernels  = []Kernel{KernelDecodePacked, KernelDecodePackedSeq, KernelDecodePackedCapture, KernelPrefillBlocked}
	allKernels     = slices.Concat(prefillKernels, decodeKernels, packedKernels)
	// Every kernel but the capture kernels.
	noCapture = slices.Concat(prefillKernels, decodeKernels[:3], []Kernel{KernelDecodePacked, KernelDecodePackedSeq, KernelPrefillBlocked})
)

func shapeFor(k Kernel) Shape {
	if k.prefillFamily() {
		return prefillShape
	}
	return decodeShape
}

func size(w, h, d int) mtl.Size { return mtl.Size{Width: w, Height: h, Depth: d} }

// call is one method call on the recording encoder.
type call struct {
	method string
	args   []any
}

type recorder struct {
	calls []call
	err   error // what Err reports, as an encoder that refused an argument
}

func (r *recorder) add(m string, a ...any) { r.calls = append(r.calls, call{m, a}) }

func (r *recorder) SetComputePipelineState(p *mtl.ComputePipelineState) {
	r.add("SetComputePipelineState", p)
}

// setViews and setParams record the calls mtlEncoder makes of them.
func (r *recorder) setViews(bufs [numViews]*mtl.Buffer, offsets [numViews]int, start int) {
	r.add("SetBuffers", bufs[:], offsets[:], start)
}
func (r *recorder) SetBuffer(b *mtl.Buffer, offset, index int) { r.add("SetBuffer", b, offset, index) }
func (r *recorder) setParams(b [paramsLen]byte, n, index int)  { r.add("SetBytes", b[:n], index) }
func (r *recorder) Err() error                                 { return r.err }
func (r *recorder) SetThreadgroupMemoryLength(length, index int) {
	r.add("SetThreadgroupMemoryLength", length, index)
}
func (r *recorder) DispatchThreadgroups(grid, group mtl.Size) {
	r.add("DispatchThreadgroups", grid, group)
}

// fakePipelines hands out one distinct pipeline state per entry point.
type fakePipelines struct {
	maxThreads int
	asked      []string
	psos       map[string]*mtl.ComputePipelineState
}

func (f *fakePipelines) pipeline(entry string) (*mtl.ComputePipelineState, int, error) {
	f.asked = append(f.asked, entry)
	if f.psos == nil {
		f.psos = map[string]*mtl.ComputePipelineState{}
	}
	if f.psos[entry] == nil {
		f.psos[entry] = new(mtl.ComputePipelineState)
	}
	return f.psos[entry], f.maxThreads, nil
}

func TestValidateAcceptsValidArguments(t *testing.T) {
	fb := useFakeBuffers(t)
	shapes := map[Kernel][]Shape{}
	for _, k := range prefillKernels {
		shapes[k] = []Shape{prefillShape, {DK: 128, DV: 128, NKHeads: 16, NVHeads: 32, NTokens: 1, NSeqs: 1}, {DK: 1, DV: 1, NKHeads: 1, NVHeads: 1, NTokens: 1, NSeqs: 1}}
	}
	for _, k := range decodeKernels {
		shapes[k] = []Shape{decodeShape,
			{DK: 32, DV: 7, NKHeads: 1, NVHeads: 3, NTokens: 1, NSeqs: 1},
			{DK: 128, DV: 128, NKHeads: 16, NVHeads: 48, NTokens: 2, NSeqs: 2}}
	}
	for _, k := range packedKernels {
		shapes[k] = []Shape{decodeShape,
			{DK: 64, DV: 96, NKHeads: 1, NVHeads: 3, NTokens: 1, NSeqs: 1},
			{DK: 128, DV: 128, NKHeads: 16, NVHeads: 48, NTokens: 2, NSeqs: 2}}
	}
	for _, k := range allKernels {
		for _, s := range shapes[k] {
			p, b := fb.args(k, s)
			if err := Validate(k, p, b); err != nil {
				t.Errorf("%v %+v: %v", k, s, err)
			}
			p.HeadMap, p.QScale = Block, 0
			if err := Validate(k, p, b); err != nil {
				t.Errorf("%v %+v, block, no scale: %v", k, s, err)
			}
		}
		for _, a := range kernels.ElemTypes {
			for _, st := range kernels.ElemTypes {
				for _, f := range fusedOptions() {
					p, b := fb.typedArgs(k, shapeFor(k), a, st, f)
					if err := Validate(k, p, b); err != nil {
						t.Errorf("%v %v/%v %+v: %v", k, a, st, f, err)
					}
				}
			}
		}
	}
}

// invalidCase breaks one argument of valid arguments; the error must wrap
// ErrInvalidArgument and contain every string of want.
type invalidCase struct {
	name  string
	kerns []Kernel
	edit  func(fb fakeBuffers, p *Params, b *Buffers)
	want  []string
}

func invalidCases() []invalidCase {
	decode := decodeKernels
	packed := packedKernels
	prefill := prefillKernels
	cases := []invalidCase{
		{"DK zero", allKernels, func(_ fakeBuffers, p *Params, _ *Buffers) { p.Shape.DK = 0 }, []string{"Shape.DK", "0"}},
		{"DV negative", allKernels, func(_ fakeBuffers, p *Params, _ *Buffers) { p.Shape.DV = -3 }, []string{"Shape.DV", "-3"}},
		{"NKHeads zero", allKernels, func(_ fakeBuffers, p *Params, _ *Buffers) { p.Shape.NKHeads = 0 }, []string{"Shape.NKHeads", "0"}},
		{"NVHeads zero", allKernels, func(_ fakeBuffers, p *Params, _ *Buffers) { p.Shape.NVHeads = 0 }, []string{"Shape.NVHeads", "0"}},
		{"NTokens zero", allKernels, func(_ fakeBuffers, p *Params, _ *Buffers) { p.Shape.NTokens = 0 }, []string{"Shape.NTokens", "0"}},
		{"NSeqs negative", allKernels, func(_ fakeBuffers, p *Params, _ *Buffers) { p.Shape.NSeqs = -1 }, []string{"Shape.NSeqs", "-1"}},
		{"NVHeads not a multiple", allKernels, func(_ fakeBuffers, p *Params, _ *Buffers) { p.Shape.NKHeads, p.Shape.NVHeads = 4, 6 },
			[]string{"Shape.NVHeads", "6", "Shape.NKHeads", "4"}},
		{"decode DK 48", decode, func(_ fakeBuffers, p *Params, _ *Buffers) { p.Shape.DK = 48 }, []string{"Shape.DK", "48", "32, 64 or 128"}},
		{"decode DK 256", decode, func(_ fakeBuffers, p *Params, _ *Buffers) { p.Shape.DK = 256 }, []string{"Shape.DK", "256"}},
		{"decode DK 16", decode, func(_ fakeBuffers, p *Params, _ *Buffers) { p.Shape.DK = 16 }, []string{"Shape.DK", "16"}},
		{"decode DV not a multiple of NSG 2", decode, func(_ fakeBuffers, p *Params, _ *Buffers) { p.Shape.DV = 33 }, []string{"Shape.DV", "33", "NSG", "2"}},
		{"decode DV not a multiple of NSG 4", decode, func(_ fakeBuffers, p *Params, _ *Buffers) { p.Shape.DK, p.Shape.DV = 128, 66 }, []string{"Shape.DV", "66", "NSG", "4"}},
		{"packed DK 32", packed, func(_ fakeBuffers, p *Params, _ *Buffers) { p.Shape.DK = 32 }, []string{"Shape.DK", "32", "needs 64 or 128"}},
		{"packed DK 48", packed, func(_ fakeBuffers, p *Params, _ *Buffers) { p.Shape.DK = 48 }, []string{"Shape.DK", "48", "needs 64 or 128"}},
		{"packed DV 48", packed, func(_ fakeBuffers, p *Params, _ *Buffers) { p.Shape.DV = 48 }, []string{"Shape.DV", "48", "multiple of 32"}},
		{"packed K two floats in", packed, func(fb fakeBuffers, p *Params, b *Buffers) {
			kb := fb.buffer(4*b.K.Len + 8)
			b.K = NewView(kb, 8, F32, b.K.Len)
		}, []string{"K", "offset 8 bytes", "4 elements at a time", "multiple of 16"}},
		{"packed StateIn two floats in", packed, func(fb fakeBuffers, p *Params, b *Buffers) {
			sb := fb.buffer(4*b.StateIn.Len + 8)
			b.StateIn = NewView(sb, 8, F32, b.StateIn.Len)
		}, []string{"StateIn", "offset 8 bytes", "multiple of 16"}},
		{"packed capture two floats in", []Kernel{KernelDecodePackedCapture}, func(fb fakeBuffers, p *Params, b *Buffers) {
			cb := fb.buffer(4*b.Capture.Len + 8)
			b.Capture = NewView(cb, 8, F32, b.Capture.Len)
		}, []string{"Capture", "offset 8 bytes", "multiple of 16"}},
		{"prefill DK 129", prefill, func(_ fakeBuffers, p *Params, _ *Buffers) { p.Shape.DK = 129 }, []string{"Shape.DK", "129", "128"}},
		{"prefill DV 129", prefill, func(_ fakeBuffers, p *Params, _ *Buffers) { p.Shape.DV = 129 }, []string{"Shape.DV", "129", "128"}},
		{"head map unknown", allKernels, func(_ fakeBuffers, p *Params, _ *Buffers) { p.HeadMap = 2 }, []string{"HeadMap", "2"}},
		{"QScale NaN", allKernels, func(_ fakeBuffers, p *Params, _ *Buffers) { p.QScale = float32(math.NaN()) }, []string{"QScale", "NaN"}},
		{"QScale +Inf", allKernels, func(_ fakeBuffers, p *Params, _ *Buffers) { p.QScale = float32(math.Inf(1)) }, []string{"QScale", "+Inf"}},
		{"QScale -Inf", allKernels, func(_ fakeBuffers, p *Params, _ *Buffers) { p.QScale = float32(math.Inf(-1)) }, []string{"QScale", "-Inf"}},
		{"f32 views, bf16 activations", allKernels, func(_ fakeBuffers, p *Params, _ *Buffers) { p.Activation = BF16 },
			[]string{"Q: element type f32, Params.Activation is bf16"}},
		{"f32 state views, f16 state", allKernels, func(_ fakeBuffers, p *Params, _ *Buffers) { p.State = F16 },
			[]string{"StateIn: element type f32, Params.State is f16"}},
		{"bf16 output, f32 activations", allKernels, func(fb fakeBuffers, p *Params, b *Buffers) { b.Output = fb.typedView(BF16, b.Output.Len) },
			[]string{"Output: element type bf16, Params.Activation is f32"}},
		{"f32 state out, bf16 state", allKernels, func(fb fakeBuffers, p *Params, b *Buffers) {
			p.State = BF16
			b.StateIn = fb.typedView(BF16, b.StateIn.Len)
			if b.Capture.Buffer != nil {
				b.Capture = fb.typedView(BF16, b.Capture.Len)
			}
		}, []string{"StateOut: element type f32, Params.State is bf16"}},
		{"f16 capture, f32 state", []Kernel{KernelDecodeCapture}, func(fb fakeBuffers, p *Params, b *Buffers) { b.Capture = fb.typedView(F16, b.Capture.Len) },
			[]string{"Capture: element type f16, Params.State is f32"}},
		{"unknown activation type", allKernels, func(_ fakeBuffers, p *Params, _ *Buffers) { p.Activation = 3 }, []string{"Activation", "ElemType(3)"}},
		{"unknown state type", allKernels, func(_ fakeBuffers, p *Params, _ *Buffers) { p.State = 9 }, []string{"State", "ElemType(9)"}},
		{"fused gate without A_log", allKernels, func(fb fakeBuffers, p *Params, b *Buffers) { p.Fused.Gate = true; b.DtBias = fb.view(p.NVHeads) },
			[]string{"ALog", "no buffer", "Fused.Gate", "[n_v_heads] f32"}},
		{"fused gate without dt_bias", allKernels, func(fb fakeBuffers, p *Params, b *Buffers) { p.Fused.Gate = true; b.ALog = fb.view(p.NVHeads) },
			[]string{"DtBias", "no buffer"}},
		{"A_log without the fused gate", allKernels, func(fb fakeBuffers, p *Params, b *Buffers) { b.ALog = fb.view(p.NVHeads) },
			[]string{"ALog", "set, but Params.Fused.Gate is off"}},
		{"dt_bias without the fused gate", allKernels, func(fb fakeBuffers, p *Params, b *Buffers) { b.DtBias = fb.view(p.NVHeads) },
			[]string{"DtBias", "set, but Params.Fused.Gate is off"}},
		{"A_log bf16", allKernels, func(fb fakeBuffers, p *Params, b *Buffers) {
			p.Fused.Gate = true
			b.ALog, b.DtBias = fb.typedView(BF16, p.NVHeads), fb.view(p.NVHeads)
		}, []string{"ALog", "element type bf16, must be f32"}},
		{"dt_bias one short", allKernels, func(fb fakeBuffers, p *Params, b *Buffers) {
			p.Fused.Gate = true
			b.ALog, b.DtBias = fb.view(p.NVHeads), fb.view(p.NVHeads-1)
		}, []string{"DtBias", "elements", "n_v_heads"}},
		{"Output over A_log", allKernels, func(fb fakeBuffers, p *Params, b *Buffers) {
			p.Fused.Gate = true
			b.DtBias = fb.view(p.NVHeads)
			b.ALog.Len = p.NVHeads
			fb.pack(at{&b.ALog, 0}, at{&b.Output, 0})
		}, []string{"Output", "overlap ALog's bytes [0, "}},
		{"capture set on another kernel", noCapture, func(fb fakeBuffers, p *Params, b *Buffers) { b.Capture = fb.view(1) }, []string{"Capture", "set"}},
		{"capture missing", []Kernel{KernelDecodeCapture}, func(_ fakeBuffers, _ *Params, b *Buffers) { b.Capture = View{} }, []string{"Capture", "no buffer"}},
		{"capture too long for several sequences", []Kernel{KernelDecodeCapture}, func(fb fakeBuffers, p *Params, b *Buffers) {
			b.Capture = fb.view(b.Capture.Len + 64*32)
		}, []string{"Capture", "124928", "122880"}},
		{"capture too short", []Kernel{KernelDecodeCapture}, func(fb fakeBuffers, p *Params, b *Buffers) {
			p.Shape.NSeqs = 1
			*b = fb.mustArgs(KernelDecodeCapture, p.Shape)
			b.Capture = fb.view(b.Capture.Len - 1)
		}, []string{"Capture", "40959", "40960"}},
		{"capture at 2^32 for one sequence", []Kernel{KernelDecodeCapture}, func(fb fakeBuffers, p *Params, b *Buffers) {
			p.Shape.NSeqs = 1
			*b = fb.mustArgs(KernelDecodeCapture, p.Shape)
			b.Capture.Len = 1 << 32
		}, []string{"Capture", "4294967296", "2^32"}},
		{"kernel unknown", nil, nil, []string{"kernel", "99"}},
		// Counts at 2^32: 2^20 tokens of 64 heads of 64 q values. (The
		// states have 64-bit offsets: see TestStatePoolLimits.)
		{"q count at 2^32", allKernels, func(_ fakeBuffers, p *Params, _ *Buffers) {
			p.Shape = Shape{DK: 64, DV: 32, NKHeads: 64, NVHeads: 64, NTokens: 1 << 20, NSeqs: 1}
		}, []string{"Q", "4294967296", "2^32"}},
		{"gate count beyond 2^32, no wrap", allKernels, func(_ fakeBuffers, p *Params, _ *Buffers) {
			p.Shape = Shape{DK: 64, DV: 32, NKHeads: 1, NVHeads: 1, NTokens: 1 << 40, NSeqs: 1 << 40}
		}, []string{"Q", "2^32"}},
	}
	// Overlaps of a written view with another view of the same buffer.
	cases = append(cases,
		invalidCase{"Output inside StateIn", allKernels, func(fb fakeBuffers, _ *Params, b *Buffers) {
			fb.pack(at{&b.StateIn, 0}, at{&b.Output, 32})
		}, []string{"Output", "bytes [32, ", "overlap StateIn's bytes [0, "}},
		invalidCase{"StateOut one row after StateIn", allKernels, func(fb fakeBuffers, p *Params, b *Buffers) {
			fb.pack(at{&b.StateIn, 0}, at{&b.StateOut, 4 * p.Shape.DK})
		}, []string{"StateOut", "overlap StateIn's bytes [0, ", "only StateOut may alias StateIn"}},
		invalidCase{"StateOut one row before StateIn", allKernels, func(fb fakeBuffers, p *Params, b *Buffers) {
			fb.pack(at{&b.StateOut, 0}, at{&b.StateIn, 4 * p.Shape.DK})
		}, []string{"StateOut", "bytes [0, ", "overlap StateIn's bytes ["}},
		invalidCase{"StateOut over K", allKernels, func(fb fakeBuffers, _ *Params, b *Buffers) {
			fb.pack(at{&b.K, 0}, at{&b.StateOut, 0})
		}, []string{"StateOut", "bytes [0, ", "overlap K's bytes [0, "}},
		invalidCase{"Output over the last byte of G", allKernels, func(fb fakeBuffers, _ *Params, b *Buffers) {
			fb.pack(at{&b.G, 0}, at{&b.Output, 4*b.G.Len - 4})
		}, []string{"Output", "overlap G's bytes [0, "}},
		invalidCase{"Output and StateOut", allKernels, func(fb fakeBuffers, _ *Params, b *Buffers) {
			fb.pack(at{&b.StateOut, 0}, at{&b.Output, 4 * b.StateOut.Len / 2})
		}, []string{"Output", "overlap StateOut's bytes [0, "}},
		invalidCase{"Output and StateOut, StateOut in place", allKernels, func(fb fakeBuffers, _ *Params, b *Buffers) {
			fb.pack(at{&b.StateIn, 0}, at{&b.Output, 4 * b.StateIn.Len / 2})
			b.StateOut = b.StateIn
		}, []string{"Output", "overlap StateIn's bytes [0, "}},
		invalidCase{"Capture over StateOut", []Kernel{KernelDecodeCapture}, func(fb fakeBuffers, _ *Params, b *Buffers) {
			fb.pack(at{&b.Capture, 0}, at{&b.StateOut, 4 * (b.Capture.Len - b.StateOut.Len)})
		}, []string{"StateOut", "overlap Capture's bytes [0, "}},
		invalidCase{"Capture over Q", []Kernel{KernelDecodeCapture}, func(fb fakeBuffers, _ *Params, b *Buffers) {
			fb.pack(at{&b.Q, 0}, at{&b.Capture, 4})
		}, []string{"Capture", "bytes [4, ", "overlap Q's bytes [0, "}},
	)
	// Every view: missing, wrong type, bad offset, wrong count, outside its buffer.
	type field struct {
		name string
		get  func(*Buffers) *View
	}
	fields := []field{
		{"Q", func(b *Buffers) *View { return &b.Q }},
		{"K", func(b *Buffers) *View { return &b.K }},
		{"V", func(b *Buffers) *View { return &b.V }},
		{"G", func(b *Buffers) *View { return &b.G }},
		{"Beta", func(b *Buffers) *View { return &b.Beta }},
		{"StateIn", func(b *Buffers) *View { return &b.StateIn }},
		{"Output", func(b *Buffers) *View { return &b.Output }},
		{"StateOut", func(b *Buffers) *View { return &b.StateOut }},
		{"Capture", func(b *Buffers) *View { return &b.Capture }},
	}
	for _, f := range fields {
		kerns := allKernels
		if f.name == "Capture" {
			kerns = []Kernel{KernelDecodeCapture}
		}
		cases = append(cases,
			invalidCase{f.name + " released buffer", kerns, func(fb fakeBuffers, _ *Params, b *Buffers) { fb.release(f.get(b).Buffer) }, []string{f.name, "released"}},
			invalidCase{f.name + " nil buffer", kerns, func(_ fakeBuffers, _ *Params, b *Buffers) { f.get(b).Buffer = nil }, []string{f.name, "no buffer"}},
			invalidCase{f.name + " bf16", kerns, func(_ fakeBuffers, _ *Params, b *Buffers) { f.get(b).Type = BF16 }, []string{f.name, "bf16", "f32"}},
			invalidCase{f.name + " f16", kerns, func(_ fakeBuffers, _ *Params, b *Buffers) { f.get(b).Type = F16 }, []string{f.name, "f16"}},
			invalidCase{f.name + " negative offset", kerns, func(_ fakeBuffers, _ *Params, b *Buffers) { f.get(b).Offset = -4 }, []string{f.name, "offset -4"}},
			invalidCase{f.name + " unaligned offset", kerns, func(_ fakeBuffers, _ *Params, b *Buffers) { f.get(b).Offset = 6 }, []string{f.name, "offset 6"}},
			invalidCase{f.name + " one element short", kerns, func(_ fakeBuffers, _ *Params, b *Buffers) {
				v := f.get(b)
				v.Len--
			}, []string{f.name, "elements"}},
			invalidCase{f.name + " negative count", kerns, func(_ fakeBuffers, _ *Params, b *Buffers) { f.get(b).Len = -1 }, []string{f.name, "-1 elements"}},
			invalidCase{f.name + " beyond its buffer", kerns, func(_ fakeBuffers, _ *Params, b *Buffers) { f.get(b).Offset = 8 }, []string{f.name, "offset 8", "beyond the buffer"}},
		)
		if f.name != "Capture" {
			cases = append(cases, invalidCase{f.name + " one element long", kerns, func(fb fakeBuffers, _ *Params, b *Buffers) {
				v := f.get(b)
				*v = fb.view(v.Len + 1)
			}, []string{f.name, "elements"}})
		}
	}
	return cases
}

func (fb fakeBuffers) mustArgs(k Kernel, s Shape) Buffers {
	_, b := fb.args(k, s)
	return b
}

func TestValidateRejects(t *testing.T) {
	fb := useFakeBuffers(t)
	for _, c := range invalidCases() {
		kerns := c.kerns
		if kerns == nil { // the unknown kernel
			p, b := fb.args(KernelDecode, decodeShape)
			checkInvalid(t, c.name, Validate(Kernel(99), p, b), c.want)
			continue
		}
		for _, k := range kerns {
			p, b := fb.args(k, shapeFor(k))
			c.edit(fb, &p, &b)
			checkInvalid(t, fmt.Sprintf("%s (%v)", c.name, k), Validate(k, p, b), c.want)
		}
	}
}

func checkInvalid(t *testing.T, name string, err error, want []string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: accepted", name)
		return
	}
	if !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("%s: %v does not wrap ErrInvalidArgument", name, err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: %q does not mention %q", name, err, w)
		}
	}
}

func TestCaptureLongerForOneSequence(t *testing.T) {
	fb := useFakeBuffers(t)
	s := decodeShape
	s.NSeqs = 1
	p, b := fb.args(KernelDecodeCapture, s)
	b.Capture = fb.view(b.Capture.Len * 4) // pre-allocated for a draft four times longer
	if err := Validate(KernelDecodeCapture, p, b); err != nil {
		t.Fatalf("a longer capture view for one sequence: %v", err)
	}
}

func TestStateInPlace(t *testing.T) {
	fb := useFakeBuffers(t)
	for _, k := range allKernels {
		p, b := fb.args(k, shapeFor(k))
		b.StateOut = b.StateIn
		if err := Validate(k, p, b); err != nil {
			t.Errorf("%v: StateIn and StateOut as one view: %v", k, err)
		}
	}
}

func TestOverlapErrorText(t *testing.T) {
	fb := useFakeBuffers(t)
	p, b := fb.args(KernelDecode, decodeShape) // D_k 64: a state row is 256 bytes, the state 98304
	fb.pack(at{&b.StateIn, 0}, at{&b.StateOut, 256})
	err := Validate(KernelDecode, p, b)
	want := "gdn: invalid argument: StateOut: bytes [256, 98560) overlap StateIn's bytes [0, 98304) in the same buffer; only StateOut may alias StateIn, as the same view"
	if err == nil || err.Error() != want {
		t.Errorf("got  %v\nwant %s", err, want)
	}
}

// Views may share a buffer when no written byte is shared: reads over
// reads, and written views next to the others.
func TestSharedBufferWithoutOverlap(t *testing.T) {
	fb := useFakeBuffers(t)
	for _, k := range allKernels {
		p, b := fb.args(k, shapeFor(k))
		b.K = b.Q // read twice
		st, out := 4*b.StateIn.Len, 4*b.Output.Len
		views := []at{{&b.StateIn, 0}, {&b.StateOut, st}, {&b.Output, 2 * st}, {&b.V, 2*st + out}}
		if k.captures() {
			views = append(views, at{&b.Capture, 2*st + 2*out})
		}
		fb.pack(views...)
		if err := Validate(k, p, b); err != nil {
			t.Errorf("%v: views side by side in one buffer: %v", k, err)
		}
		b.StateOut = b.StateIn
		if err := Validate(k, p, b); err != nil {
			t.Errorf("%v: in place, views side by side in one buffer: %v", k, err)
		}
	}
}

// Validation is on every dispatch's path: it allocates nothing when the
// arguments are valid.
func TestValidateAllocatesNothing(t *testing.T) {
	fb := useFakeBuffers(t)
	for _, k := range allKernels {
		p, b := fb.args(k, shapeFor(k))
		fb.pack(at{&b.StateIn, 0}, at{&b.Output, 4 * b.StateIn.Len})
		b.StateOut = b.StateIn
		var err error
		if n := testing.AllocsPerRun(100, func() { err = Validate(k, p, b) }); n != 0 || err != nil {
			t.Errorf("%v: %v allocations per Validate (%v)", k, n, err)
		}
	}
}

func TestViewAtAnOffset(t *testing.T) {
	fb := useFakeBuffers(t)
	p, b := fb.args(KernelDecode, decodeShape)
	// Q and K in one buffer, K after Q.
	n := b.Q.Len
	buf := fb.buffer(8 * n)
	b.Q, b.K = F32View(buf, 0, n), F32View(buf, 4*n, n)
	if err := Validate(KernelDecode, p, b); err != nil {
		t.Fatalf("q and k packed in one buffer: %v", err)
	}
	b.K.Offset += 4
	checkInvalid(t, "k one element past the end", Validate(KernelDecode, p, b), []string{"K", "beyond the buffer", fmt.Sprint(8 * n)})
}

// Nothing reaches the encoder, nor the pipeline cache, when validation fails.
func TestInvalidEncodesNothing(t *testing.T) {
	fb := useFakeBuffers(t)
	for _, c := range invalidCases() {
		for _, k := range c.kerns {
			pipes := &fakePipelines{maxThreads: 1024}
			kk := &Kernels{pipelines: pipes}
			rec := &recorder{}
			p, b := fb.args(k, shapeFor(k))
			c.edit(fb, &p, &b)
			err := kk.dispatch(rec, k, p, b)
			if !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("%s (%v): %v", c.name, k, err)
			}
			if len(rec.calls) != 0 || len(pipes.asked) != 0 {
				t.Errorf("%s (%v): %d encoder calls and %d pipeline lookups after a failed validation", c.name, k, len(rec.calls), len(pipes.asked))
			}
		}
	}
}

// TestThreadLimit: every kernel's threadgroup is checked against its
// pipeline's maxTotalThreadsPerThreadgroup before anything is encoded,
// the error naming what sets the size, the numbers and the entry point.
func TestThreadLimit(t *testing.T) {
	fb := useFakeBuffers(t)
	pre, dec := prefillShape, decodeShape
	pre.DV = 96
	// Threads per threadgroup by hand: the prefill kernel one per row of S,
	// the chunked one 4 per row, the packed kernels and the blocked prefill
	// 4 SIMD-groups, the decode family D_k/32 SIMD-groups.
	for _, c := range []struct {
		k       Kernel
		s       Shape
		threads int
		field   string
	}{
		{KernelPrefill, pre, 96, "Shape.DV: at {D_k=48 D_v=96"},
		{KernelPrefillChunked, pre, 384, "Shape.DV: at {D_k=48 D_v=96"},
		{KernelPrefillBlocked, dec, 128, "kernel: at {D_k=64"},
		{KernelDecodePacked, dec, 128, "kernel: at {D_k=64"},
		{KernelDecodePackedSeq, dec, 128, "kernel: at {D_k=64"},
		{KernelDecodePackedCapture, dec, 128, "kernel: at {D_k=64"},
		{KernelDecode, dec, 64, "Shape.DK: at {D_k=64 D_v=32"},
		{KernelDecodeSeq, dec, 64, "Shape.DK: at {D_k=64 D_v=32"},
		{KernelDecodeLegacy, dec, 64, "Shape.DK: at {D_k=64 D_v=32"},
		{KernelDecodeCapture, dec, 64, "Shape.DK: at {D_k=64 D_v=32"},
	} {
		k := c.k
		p, b := fb.args(k, c.s)
		kk := &Kernels{pipelines: &fakePipelines{maxThreads: c.threads - 1}}
		rec := &recorder{}
		err := kk.dispatch(rec, k, p, b)
		checkInvalid(t, k.String()+": threadgroup above maxTotalThreadsPerThreadgroup", err,
			[]string{c.field, fmt.Sprintf("= %d threads per threadgroup", c.threads), fmt.Sprintf("more than the %d the %s pipeline", c.threads-1, entryPoint(k, p))})
		if len(rec.calls) != 0 {
			t.Errorf("%v: %d encoder calls after a failed check", k, len(rec.calls))
		}
		kk = &Kernels{pipelines: &fakePipelines{maxThreads: c.threads}}
		if err := kk.dispatch(rec, k, p, b); err != nil {
			t.Errorf("%v: threadgroup equal to the limit: %v", k, err)
		}
	}
}

func TestNilEncoder(t *testing.T) {
	fb := useFakeBuffers(t)
	kk := &Kernels{pipelines: &fakePipelines{maxThreads: 1024}}
	p, b := fb.args(KernelDecode, decodeShape)
	for name, f := range map[string]func(*mtl.ComputeCommandEncoder, Params, Buffers) error{
		"Prefill": kk.Prefill, "Decode": kk.Decode, "DecodeSeq": kk.DecodeSeq,
		"DecodeLegacy": kk.DecodeLegacy, "DecodeWithCapture": kk.DecodeWithCapture,
	} {
		checkInvalid(t, name, f(nil, p, b), []string{"encoder", "nil"})
	}
}

// A nil or zero Kernels knows no device: every dispatcher says so, and
// Release does nothing.
func TestKernelsNotMadeByNew(t *testing.T) {
	fb := useFakeBuffers(t)
	p, b := fb.args(KernelDecode, decodeShape)
	enc := new(mtl.ComputeCommandEncoder)
	for name, kk := range map[string]*Kernels{"nil": nil, "zero": {}} {
		for m, f := range map[string]func(*mtl.ComputeCommandEncoder, Params, Buffers) error{
			"Prefill": kk.Prefill, "Decode": kk.Decode, "DecodeSeq": kk.DecodeSeq,
			"DecodeLegacy": kk.DecodeLegacy, "DecodeWithCapture": kk.DecodeWithCapture,
		} {
			checkInvalid(t, name+" "+m, f(enc, p, b), []string{"Kernels", "gdn.New"})
		}
		kk.Release()
	}
}

func TestWords(t *testing.T) {
	s := Shape{DK: 128, DV: 64, NKHeads: 16, NVHeads: 48, NTokens: 5, NSeqs: 3}
	cases := []struct {
		p    Params
		want [9]uint32
	}{
		{Params{Shape: s}, [9]uint32{128, 64, 16, 48, 5, 3, 0, 0, 0}},
		{Params{Shape: s, HeadMap: Tiled, QScale: 0.125}, [9]uint32{128, 64, 16, 48, 5, 3, 1, 0, 0x3e000000}},
		{Params{Shape: s, QScale: float32(math.Copysign(0, -1))}, [9]uint32{128, 64, 16, 48, 5, 3, 0, 0, 0}},
		{Params{Shape: s, QScale: -2}, [9]uint32{128, 64, 16, 48, 5, 3, 0, 0, 0xc0000000}},
		{Params{Shape: s, Fused: spec.Fused{L2Norm: true}}, [9]uint32{128, 64, 16, 48, 5, 3, 0, 1, 0}},
		{Params{Shape: s, Fused: spec.Fused{Gate: true}}, [9]uint32{128, 64, 16, 48, 5, 3, 0, 2, 0}},
		{Params{Shape: s, Fused: spec.Fused{Beta: true}, Activation: BF16, State: F16}, [9]uint32{128, 64, 16, 48, 5, 3, 0, 4, 0}},
		{Params{Shape: s, HeadMap: Tiled, Fused: spec.FusedAll}, [9]uint32{128, 64, 16, 48, 5, 3, 1, 7, 0}},
	}
	for _, c := range cases {
		if got := words(c.p); got != c.want {
			t.Errorf("%+v: words %#x, want %#x", c.p, got, c.want)
		}
		b := paramBytes(c.p)
		for i, w := range c.want {
			if got := uint32(b[4*i]) | uint32(b[4*i+1])<<8 | uint32(b[4*i+2])<<16 | uint32(b[4*i+3])<<24; got != w {
				t.Errorf("%+v: byte word %d = %#x, want %#x", c.p, i, got, w)
			}
		}
	}
}

func TestGeometry(t *testing.T) {
	for _, c := range []struct {
		s           Shape
		grid, group mtl.Size
	}{
		{Shape{DK: 32, DV: 96, NKHeads: 2, NVHeads: 6, NTokens: 1, NSeqs: 1}, size(96, 6, 1), size(32, 1, 1)},
		{Shape{DK: 64, DV: 96, NKHeads: 2, NVHeads: 6, NTokens: 5, NSeqs: 3}, size(48, 6, 3), size(32, 2, 1)},
		{Shape{DK: 128, DV: 128, NKHeads: 16, NVHeads: 32, NTokens: 1, NSeqs: 2}, size(32, 32, 2), size(32, 4, 1)},
	} {
		grid, group := decodeGeometry(c.s)
		if grid != c.grid || group != c.group {
			t.Errorf("decode %+v: grid %v group %v, want %v %v", c.s, grid, group, c.grid, c.group)
		}
	}
	grid, group := prefillGeometry(Shape{DK: 100, DV: 72, NKHeads: 3, NVHeads: 9, NTokens: 7, NSeqs: 2})
	if want := (size(9, 2, 1)); grid != want {
		t.Errorf("prefill grid %v, want %v", grid, want)
	}
	if want := (size(72, 1, 1)); group != want {
		t.Errorf("prefill group %v, want %v", group, want)
	}
	for _, c := range []struct{ dk, dv, want int }{
		{128, 128, 2048}, // (2*128 + 2*128) * 4
		{64, 32, 768},
		{3, 4, 64}, // 56 bytes, rounded up to Metal's multiple of 16
		{1, 1, 16},
	} {
		if got := prefillThreadgroupMemory(Shape{DK: c.dk, DV: c.dv}); got != c.want {
			t.Errorf("threadgroup memory for D_k %d, D_v %d: %d bytes, want %d", c.dk, c.dv, got, c.want)
		}
	}
}

func TestPrefillChoice(t *testing.T) {
	fb := useFakeBuffers(t)
	for _, c := range []struct {
		dk, dv, n int
		want      Kernel
	}{
		{128, 128, 1, KernelPrefillBlocked},
		{128, 128, ChunkedMinTokens - 1, KernelPrefillBlocked},
		{128, 128, ChunkedMinTokens, KernelPrefillChunked},
		{64, 32, 8192, KernelPrefillChunked},
		{48, 24, 1, KernelPrefill},
		{128, 20, ChunkedMinTokens - 1, KernelPrefill},
		{48, 24, ChunkedMinTokens, KernelPrefillChunked},
	} {
		s := Shape{DK: c.dk, DV: c.dv, NKHeads: 2, NVHeads: 4, NTokens: c.n, NSeqs: 1}
		p, b := fb.typedArgs(KernelPrefill, s, F32, F32, spec.Fused{})
		if got := PrefillKernel(p, b); got != c.want {
			t.Errorf("%+v: %v, want %v", c, got, c.want)
		}
	}
}

// The automatic choice: the packed layout where it applies (D_k 64 or
// 128, D_v a multiple of 32, Q, K and the states at offsets of 4
// elements), decode at one token and seq from two.
func TestDecodeChoice(t *testing.T) {
	fb := useFakeBuffers(t)
	for _, c := range []struct {
		dk, dv, n int
		kOffset   int // bytes
		a         ElemType
		want      Kernel
	}{
		{128, 128, 1, 0, F32, KernelDecodePacked},
		{128, 128, 2, 0, BF16, KernelDecodePackedSeq},
		{64, 32, 512, 0, F16, KernelDecodePackedSeq},
		{64, 32, 1, 8, BF16, KernelDecodePacked}, // 4 bf16 elements
		{64, 32, 1, 8, F32, KernelDecode},        // 2 f32 elements: not a vector's
		{32, 32, 1, 0, F32, KernelDecode},        // D_k 32
		{128, 20, 5, 0, F32, KernelDecodeSeq},    // D_v not a multiple of 32
		{128, 96, 5, 0, F32, KernelDecodePackedSeq},
	} {
		s := Shape{DK: c.dk, DV: c.dv, NKHeads: 2, NVHeads: 4, NTokens: c.n, NSeqs: 1}
		p, b := fb.typedArgs(KernelDecode, s, c.a, F32, spec.Fused{})
		b.K.Offset = c.kOffset
		if got := DecodeKernel(p, b); got != c.want {
			t.Errorf("%+v: %v, want %v", c, got, c.want)
		}
	}
	// Packed sequences: seq of either layout, whatever n_tokens is.
	for dv, want := range map[int]Kernel{32: KernelDecodePackedSeq, 8: KernelDecodeSeq} {
		s := Shape{DK: 64, DV: dv, NKHeads: 1, NVHeads: 2, NTokens: 1, NSeqs: 2, Varlen: true}
		p, b := fb.typedArgs(KernelDecode, s, F32, F32, spec.Fused{})
		if got := DecodeKernel(p, b); got != want {
			t.Errorf("varlen, D_v %d: %v, want %v", dv, got, want)
		}
	}
}

// The capture choice: the packed capture kernel where Decode would pick
// the packed layout and Capture's offset is a multiple of 4 elements too.
func TestCaptureChoice(t *testing.T) {
	fb := useFakeBuffers(t)
	for _, c := range []struct {
		dk, dv, capOffset int // capOffset in bytes
		st                ElemType
		want              Kernel
	}{
		{128, 128, 0, F32, KernelDecodePackedCapture},
		{64, 32, 8, BF16, KernelDecodePackedCapture}, // 4 bf16 elements
		{64, 32, 8, F32, KernelDecodeCapture},        // 2 f32 elements
		{32, 32, 0, F32, KernelDecodeCapture},        // D_k 32
		{128, 20, 0, F32, KernelDecodeCapture},       // D_v not a multiple of 32
	} {
		s := Shape{DK: c.dk, DV: c.dv, NKHeads: 2, NVHeads: 4, NTokens: 3, NSeqs: 1}
		p, b := fb.typedArgs(KernelDecodeCapture, s, F32, c.st, spec.Fused{})
		b.Capture.Offset = c.capOffset
		if got := CaptureKernel(p, b); got != c.want {
			t.Errorf("%+v: %v, want %v", c, got, c.want)
		}
	}
}

// EntryPoint names the pipeline each choice runs, and refuses what no
// pipeline runs; Prepare makes exactly that pipeline, and nothing for a
// refused kernel.
func TestEntryPointAndPrepare(t *testing.T) {
	qwen := Params{Shape: Shape{DK: 128, DV: 128, NKHeads: 16, NVHeads: 32, NTokens: 1, NSeqs: 1}, Activation: BF16, State: F32, Fused: spec.FusedAll}
	for _, c := range []struct {
		kern Kernel
		p    Params
		want string
	}{
		{DecodeKernel(qwen, Buffers{}), qwen, "gated_delta_net_decode_packed_bf16_f32_4"},
		{KernelDecode, qwen, "gated_delta_net_decode_bf16_f32_4"},
		{CaptureKernel(qwen, Buffers{}), qwen, "gated_delta_net_decode_packed_capture_bf16_f32_4"},
		{KernelPrefill, Params{Shape: prefillShape}, kernels.Prefill},
		{KernelPrefillChunked, Params{Shape: prefillShape}, kernels.PrefillChunked},
	} {
		got, err := EntryPoint(c.kern, c.p)
		if err != nil || got != c.want {
			t.Errorf("EntryPoint(%v): %q, %v; want %q", c.kern, got, err, c.want)
		}
		pipes := &fakePipelines{maxThreads: 1024}
		if err := (&Kernels{pipelines: pipes}).Prepare(c.kern, c.p); err != nil || !slices.Equal(pipes.asked, []string{c.want}) {
			t.Errorf("Prepare(%v): %v, made %q; want %q", c.kern, err, pipes.asked, c.want)
		}
	}
	odd := qwen
	odd.DK = 48
	noShape := qwen
	noShape.NVHeads = 0
	for _, c := range []struct {
		name string
		kern Kernel
		p    Params
		want []string
	}{
		{"unknown kernel", Kernel(99), qwen, []string{"kernel", "99"}},
		{"no value heads", KernelDecode, noShape, []string{"Shape.NVHeads: 0"}},
		{"D_k the decode kernels do not take", KernelDecode, odd, []string{"Shape.DK", "48"}},
		{"unknown state type", KernelPrefill, Params{Shape: prefillShape, State: 7}, []string{"State"}},
	} {
		_, err := EntryPoint(c.kern, c.p)
		checkInvalid(t, "EntryPoint: "+c.name, err, c.want)
		pipes := &fakePipelines{maxThreads: 1024}
		err = (&Kernels{pipelines: pipes}).Prepare(c.kern, c.p)
		checkInvalid(t, "Prepare: "+c.name, err, c.want)
		if len(pipes.asked) != 0 {
			t.Errorf("Prepare: %s: made %q", c.name, pipes.asked)
		}
	}
	var none *Kernels
	checkInvalid(t, "Prepare on nil Kernels", none.Prepare(KernelDecode, qwen), []string{"Kernels"})
}

// TestEncoding checks the exact call sequence of every dispatcher.
func TestEncoding(t *testing.T) {
	fb := useFakeBuffers(t)
	type method func(*Kernels, encoder, Params, Buffers) error
	byKernel := func(k Kernel) method {
		return func(kk *Kernels, e encoder, p Params, b Buffers) error { return kk.dispatch(e, k, p, b) }
	}
	auto := func(kk *Kernels, e encoder, p Params, b Buffers) error {
		return kk.dispatch(e, DecodeKernel(p, b), p, b)
	}
	autoPrefill := func(kk *Kernels, e encoder, p Params, b Buffers) error {
		return kk.dispatch(e, PrefillKernel(p, b), p, b)
	}
	cases := []struct {
		name  string
		m     method
		kern  Kernel
		s     Shape
		entry string
		a, st ElemType
		fused spec.Fused
	}{
		{"prefill", byKernel(KernelPrefill), KernelPrefill, prefillShape, kernels.Prefill, F32, F32, spec.Fused{}},
		{"prefill bf16/f16 fused", byKernel(KernelPrefill), KernelPrefill, prefillShape, "gated_delta_net_bf16_f16", BF16, F16, spec.FusedAll},
		{"chunked", byKernel(KernelPrefillChunked), KernelPrefillChunked, prefillShape, kernels.PrefillChunked, F32, F32, spec.Fused{}},
		{"chunked f16/bf16 fused, D_k 128", byKernel(KernelPrefillChunked), KernelPrefillChunked, Shape{DK: 128, DV: 64, NKHeads: 1, NVHeads: 2, NTokens: 3, NSeqs: 1}, "gated_delta_net_chunked_f16_bf16", F16, BF16, spec.FusedAll},
		{"prefill auto, 63 tokens", autoPrefill, KernelPrefill, Shape{DK: 48, DV: 64, NKHeads: 1, NVHeads: 2, NTokens: ChunkedMinTokens - 1, NSeqs: 1}, kernels.Prefill, F32, F32, spec.Fused{}},
		{"prefill auto, 63 tokens, packed layout", autoPrefill, KernelPrefillBlocked, Shape{DK: 64, DV: 64, NKHeads: 1, NVHeads: 2, NTokens: ChunkedMinTokens - 1, NSeqs: 1}, "gated_delta_net_prefill_blocked_f32_2", F32, F32, spec.Fused{}},
		{"prefill auto, 64 tokens", autoPrefill, KernelPrefillChunked, Shape{DK: 64, DV: 64, NKHeads: 1, NVHeads: 2, NTokens: ChunkedMinTokens, NSeqs: 1}, kernels.PrefillChunked, F32, F32, spec.Fused{}},
		{"decode f16/bf16, fused gate", auto, KernelDecode, Shape{DK: 64, DV: 8, NKHeads: 1, NVHeads: 2, NTokens: 1, NSeqs: 1}, "gated_delta_net_decode_f16_bf16_2", F16, BF16, spec.Fused{Gate: true}},
		{"capture f32/bf16, fused", byKernel(KernelDecodeCapture), KernelDecodeCapture, Shape{DK: 32, DV: 8, NKHeads: 2, NVHeads: 2, NTokens: 3, NSeqs: 2}, "gated_delta_net_decode_capture_f32_bf16_1", F32, BF16, spec.FusedAll},
		{"decode auto, 1 token", auto, KernelDecode, Shape{DK: 32, DV: 8, NKHeads: 1, NVHeads: 2, NTokens: 1, NSeqs: 1}, "gated_delta_net_decode_f32_1", F32, F32, spec.Fused{}},
		{"decode auto, 5 tokens", auto, KernelDecodePackedSeq, decodeShape, "gated_delta_net_decode_packed_seq_f32_2", F32, F32, spec.Fused{}},
		{"decode auto, 5 tokens, D_v 24", auto, KernelDecodeSeq, Shape{DK: 64, DV: 24, NKHeads: 2, NVHeads: 4, NTokens: 5, NSeqs: 3}, "gated_delta_net_decode_seq_f32_2", F32, F32, spec.Fused{}},
		{"packed bf16/f32, fused", byKernel(KernelDecodePacked), KernelDecodePacked, Shape{DK: 128, DV: 64, NKHeads: 2, NVHeads: 4, NTokens: 1, NSeqs: 2}, "gated_delta_net_decode_packed_bf16_f32_4", BF16, F32, spec.FusedAll},
		{"packed capture", byKernel(KernelDecodePackedCapture), KernelDecodePackedCapture, Shape{DK: 64, DV: 32, NKHeads: 2, NVHeads: 2, NTokens: 3, NSeqs: 2}, "gated_delta_net_decode_packed_capture_f32_2", F32, F32, spec.Fused{}},
		{"blocked f16/bf16", byKernel(KernelPrefillBlocked), KernelPrefillBlocked, Shape{DK: 128, DV: 32, NKHeads: 2, NVHeads: 2, NTokens: 40, NSeqs: 2}, "gated_delta_net_prefill_blocked_f16_bf16_4", F16, BF16, spec.Fused{}},
		{"seq", byKernel(KernelDecodeSeq), KernelDecodeSeq, Shape{DK: 128, DV: 8, NKHeads: 1, NVHeads: 2, NTokens: 1, NSeqs: 1}, "gated_delta_net_decode_seq_f32_4", F32, F32, spec.Fused{}},
		{"legacy", byKernel(KernelDecodeLegacy), KernelDecodeLegacy, decodeShape, "gated_delta_net_decode_legacy_f32_2", F32, F32, spec.Fused{}},
		{"capture", byKernel(KernelDecodeCapture), KernelDecodeCapture, Shape{DK: 128, DV: 8, NKHeads: 2, NVHeads: 2, NTokens: 3, NSeqs: 2}, "gated_delta_net_decode_capture_f32_4", F32, F32, spec.Fused{}},
	}
	for _, c := range cases {
		pipes := &fakePipelines{maxThreads: 1024}
		kk := &Kernels{pipelines: pipes}
		rec := &recorder{}
		p, b := fb.typedArgs(c.kern, c.s, c.a, c.st, c.fused)
		// Give K an offset into a larger buffer to see offsets passed through.
		kb := fb.buffer(c.a.Size()*b.K.Len + 64)
		b.K = NewView(kb, 64, c.a, b.K.Len)
		if err := c.m(kk, rec, p, b); err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if !reflect.DeepEqual(pipes.asked, []string{c.entry}) {
			t.Errorf("%s: pipelines asked for %v, want [%s]", c.name, pipes.asked, c.entry)
		}
		params := paramBytes(p)
		// Q's buffer stands in at 8 (setBytes binds it next), G's at 9
		// but for capture, and at 10 and 11 without the fused gate.
		capture, aLog, dtBias := b.G.Buffer, b.G.Buffer, b.G.Buffer
		if c.kern == KernelDecodeCapture || c.kern == KernelDecodePackedCapture {
			capture = b.Capture.Buffer
		}
		if c.fused.Gate {
			aLog, dtBias = b.ALog.Buffer, b.DtBias.Buffer
		}
		want := []call{
			{"SetComputePipelineState", []any{pipes.psos[c.entry]}},
			{"SetBuffers", []any{
				[]*mtl.Buffer{b.Q.Buffer, b.K.Buffer, b.V.Buffer, b.G.Buffer, b.Beta.Buffer, b.StateIn.Buffer, b.Output.Buffer, b.StateOut.Buffer,
					b.Q.Buffer, capture, aLog, dtBias, b.G.Buffer, b.G.Buffer}, // no slot index, no cu_seqlens
				[]int{0, 64, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 0}},
			{"SetBytes", []any{params[:], 8}},
		}
		var grid, group mtl.Size
		switch c.kern {
		case KernelPrefill:
			want = append(want, call{"SetThreadgroupMemoryLength", []any{(2*c.s.DK + 2*c.s.DV) * 4, 0}})
			grid, group = size(c.s.NVHeads, c.s.NSeqs, 1), size(c.s.DV, 1, 1)
		case KernelPrefillBlocked:
			// 64 bytes of tokens (16 of f32, 32 of f16): k and q (D_k each)
			// and v (32 rows) in the activation type, f32 g and beta
			a := c.a.Size()
			want = append(want, call{"SetThreadgroupMemoryLength", []any{64/a*(2*c.s.DK+32)*a + 64/a*2*4, 0}})
			grid, group = size(c.s.DV/32, c.s.NVHeads, c.s.NSeqs), size(32, 4, 1)
		case KernelDecodePacked, KernelDecodePackedSeq, KernelDecodePackedCapture:
			grid, group = size(c.s.DV/32, c.s.NVHeads, c.s.NSeqs), size(32, 4, 1)
		case KernelPrefillChunked:
			// k, q and v of C = 16 tokens, A and M (C x C), 6C floats; 4 threads per row.
			want = append(want, call{"SetThreadgroupMemoryLength", []any{(2*16*c.s.DK + 16*c.s.DV + 2*16*16 + 6*16) * 4, 0}})
			grid, group = size(c.s.NVHeads, c.s.NSeqs, 1), size(4*c.s.DV, 1, 1)
		default:
			nsg := c.s.DK / 32
			grid, group = size(c.s.DV/nsg, c.s.NVHeads, c.s.NSeqs), size(32, nsg, 1)
		}
		want = append(want, call{"DispatchThreadgroups", []any{grid, group}})
		if !reflect.DeepEqual(rec.calls, want) {
			t.Errorf("%s: calls\n%v\nwant\n%v", c.name, rec.calls, want)
		}
	}
}

func TestKernelNames(t *testing.T) {
	for _, k := range allKernels {
		for _, a := range kernels.ElemTypes {
			for _, st := range kernels.ElemTypes {
				name := entryPoint(k, Params{Shape: shapeFor(k), Activation: a, State: st})
				if _, ok := kernels.SourceFile(name); !ok {
					t.Errorf("%v %v/%v: entry point %q is not in package kernels", k, a, st, name)
				}
				if !strings.Contains(name, "_"+a.String()) || !strings.Contains(name, "_"+st.String()) {
					t.Errorf("%v %v/%v: entry point %q does not name both types", k, a, st, name)
				}
			}
		}
	}
	if got := Kernel(99).String(); got != "Kernel(99)" {
		t.Errorf("unknown kernel prints %q", got)
	}
	if Block.String() != "block" || Tiled.String() != "tiled" || HeadMap(5).String() != "HeadMap(5)" {
		t.Errorf("head map names: %v %v %v", Block, Tiled, HeadMap(5))
	}
}

func TestEncoderErrorIsReturned(t *testing.T) {
	fb := useFakeBuffers(t)
	refused := errors.New("mtl: SetBuffers: buffer for index 3 is nil or released")
	kk := &Kernels{pipelines: &fakePipelines{maxThreads: 1024}}
	p, b := fb.args(KernelDecode, decodeShape)
	err := kk.dispatch(&recorder{err: refused}, KernelDecode, p, b)
	if !errors.Is(err, refused) || errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("encoder error: got %v", err)
	}
}

// nopEncoder takes every call and keeps nothing.
type nopEncoder struct{}

func (nopEncoder) SetComputePipelineState(*mtl.ComputePipelineState)  {}
func (nopEncoder) setViews([numViews]*mtl.Buffer, [numViews]int, int) {}
func (nopEncoder) setParams([paramsLen]byte, int, int)                {}
func (nopEncoder) SetThreadgroupMemoryLength(int, int)                {}
func (nopEncoder) DispatchThreadgroups(mtl.Size, mtl.Size)            {}
func (nopEncoder) Err() error                                         { return nil }

// onePipeline hands out one pipeline state for every entry point.
type onePipeline struct{ pso *mtl.ComputePipelineState }

func (o onePipeline) pipeline(string) (*mtl.ComputePipelineState, int, error) {
	return o.pso, 1024, nil
}

// A dispatch costs the host no allocation: validation and encoding are on
// every token's path.
func TestDispatchAllocatesNothing(t *testing.T) {
	fb := useFakeBuffers(t)
	kk := &Kernels{pipelines: onePipeline{new(mtl.ComputePipelineState)}}
	for _, k := range allKernels {
		for _, f := range []spec.Fused{{}, spec.FusedAll} {
			p, b := fb.typedArgs(k, shapeFor(k), BF16, F16, f)
			b.StateOut = b.StateIn
			var err error
			if n := testing.AllocsPerRun(100, func() { err = kk.dispatch(nopEncoder{}, k, p, b) }); n != 0 || err != nil {
				t.Errorf("%v %+v: %v allocations per dispatch (%v)", k, f, n, err)
			}
		}
	}
}

// BenchmarkDispatch measures gdn's own host cost of one decode dispatch of
// a Qwen3.5 layer (validation, kernel choice, pipeline lookup, the
// encoder calls), against an encoder that does nothing: f32, and bf16
// activations with a bf16 state and the whole fused step.
func BenchmarkDispatch(b *testing.B) {
	fb := fakeBuffers{}
	old := bufferInfo
	bufferInfo = func(buf *mtl.Buffer) (int, bool) { return fb[buf].length, true }
	defer func() { bufferInfo = old }()
	kk := &Kernels{pipelines: onePipeline{new(mtl.ComputePipelineState)}}
	s := Shape{DK: 128, DV: 128, NKHeads: 16, NVHeads: 32, NTokens: 1, NSeqs: 1}
	for _, c := range []struct {
		name  string
		a, st ElemType
		f     spec.Fused
	}{{"f32", F32, F32, spec.Fused{}}, {"bf16_fused", BF16, BF16, spec.FusedAll}} {
		p, bufs := fb.typedArgs(KernelDecode, s, c.a, c.st, c.f)
		bufs.StateOut = bufs.StateIn
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := kk.dispatch(nopEncoder{}, KernelDecode, p, bufs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
