package tests

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/gdn"
	"github.com/puremetal/puremetal/internal/floats"
	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/mtl"
)

// FuzzDispatch drives validation and dispatch together on the emulated
// device: random shapes, parameters and views (offsets, wrong counts,
// released buffers, overlaps, in-place and shared read views), each call
// predicted valid or not by the contract's rules written out here
// independently of gdn. A call gdn accepts must be one the rules call
// valid, and its results must match cpuref.Reference32 within 1e-5 with
// every element written; a call it refuses must be one the rules call
// invalid, wrap gdn.ErrInvalidArgument and encode nothing (no message
// sent, no dispatch run). The seed corpus runs in every go test; search
// for more with
//
//	go test ./tests -run '^$' -fuzz FuzzDispatch -fuzztime 5m
func FuzzDispatch(f *testing.F) {
	for _, c := range [][9]uint8{
		{0, 0, 19, 4, 2, 1, 0, 0, 0},    // prefill, D_k 32
		{1, 1, 15, 4, 1, 1, 1, 0, 1},    // decode, D_k 64, tiled, scaled
		{2, 2, 31, 5, 3, 2, 0x80, 1, 2}, // seq, D_k 128, in place
		{3, 0, 7, 1, 2, 3, 4, 0, 3},     // legacy
		{4, 1, 7, 4, 3, 1, 0, 2, 0},     // capture, one sequence, a longer capture buffer
		{4, 2, 3, 2, 2, 2, 0x81, 0, 1},  // capture, two sequences, in place
		{0, 5, 39, 7, 4, 2, 0, 0, 2},    // prefill, D_k 48
		{1, 5, 3, 1, 1, 1, 0, 0, 0},     // decode, D_k 48: refused
		{0, 0, 254, 4, 2, 1, 0, 0, 0},   // prefill, D_v 129: refused
		{2, 0, 254, 4, 2, 1, 0, 0, 0},   // seq, D_v 129: the decode family has no limit on D_v
		{3, 0, 7, 4, 0, 1, 0, 0, 0},     // no tokens
		{0, 0, 7, 4, 1, 0, 2, 0, 0},     // head map 2, no sequences
		{1, 0, 7, 4, 1, 1, 6, 0, 0},     // QScale NaN
		{2, 1, 7, 250, 2, 1, 0, 0, 0},   // n_v_heads not a multiple
		{3, 0, 7, 4, 2, 2, 0, 0x03, 0},  // Q one element short
		{4, 0, 7, 4, 2, 2, 0, 0x84, 0},  // Capture released
		{0, 0, 7, 4, 2, 1, 0, 0x65, 0},  // StateOut unaligned
		{1, 0, 7, 4, 1, 1, 0, 0x16, 0},  // K nil
		{2, 0, 7, 4, 2, 1, 0, 0x27, 0},  // V f16
		{3, 0, 7, 4, 2, 2, 0, 0x08, 0},  // Output inside StateIn
		{4, 1, 7, 4, 2, 1, 0, 0x18, 0},  // StateOut one row after StateIn
		{0, 0, 7, 4, 2, 1, 0, 0x28, 0},  // StateOut over K
		{4, 0, 7, 4, 2, 1, 0, 0x38, 0},  // Capture over V
		{1, 0, 7, 4, 2, 1, 0, 0x09, 0},  // K the same view as Q
		{2, 0, 7, 4, 2, 1, 0, 0x0a, 0},  // 2^31 tokens
		{3, 0, 7, 4, 2, 1, 0, 0x0b, 0},  // a zero Kernels
		{0, 0, 7, 4, 2, 1, 0, 0x83, 0},  // Capture set on prefill
		{1, 0, 7, 4, 2, 1, 0, 0x80, 0},  // nothing done to Capture: valid
		{0, 7, 0, 0, 1, 1, 0, 0x18, 0},  // D_k = D_v = 1, one head: StateOut over a one-element StateIn
	} {
		f.Add(uint64(c[0])*7919+1, c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8])
	}
	r := newRig(f, testdevice.Emulated(f, emu.Options{}), true)
	f.Fuzz(func(t *testing.T, seed uint64, kern, dk, dv, heads, tokens, seqs, flags, edit, pad uint8) {
		fuzzDispatch(t, r, newFuzzCall(seed, kern, dk, dv, heads, tokens, seqs, flags, edit, pad))
	})
}

// fuzzCall is one call FuzzDispatch makes.
type fuzzCall struct {
	seed    uint64
	kern    kernel
	p       gdn.Params
	inPlace bool
	edit    int // what is done to the views: editNone and the others
	view    int // the view an edit names: index into viewNames
	pad     int // leading elements before each view in its buffer
}

var fuzzKernels = []kernel{kPrefill, kDecode, kSeq, kLegacy, kCapture}

// D_k: the decode family's three, and others only prefill takes, or none.
var fuzzDK = []int{32, 64, 128, 32, 16, 48, 129, 1}

var fuzzScales = []float32{0, 0.125, -0.5, float32(math.Inf(1)), float32(math.NaN())}

var viewNames = []string{"Q", "K", "V", "G", "Beta", "StateIn", "Output", "StateOut", "Capture"}

// The edits of fuzzCall.edit.
const (
	editNone     = iota
	editNone2    // weighs valid calls up
	editLonger   // capture: a buffer for three more tokens
	editShort    // one element short
	editReleased // the buffer released
	editUnalign  // offset + 2 bytes
	editNil      // no buffer
	editF16      // typed f16
	editOverlap  // a written view over another: see overlap
	editSharedQK // K the same view as Q (reads may share)
	editHuge     // 2^31 tokens
	editZeroK    // a zero gdn.Kernels
	numEdits
)

func newFuzzCall(seed uint64, kern, dk, dv, heads, tokens, seqs, flags, edit, pad uint8) fuzzCall {
	nk, r := 1+int(heads)%3, 1+int(heads/3)%3
	nv := nk * r
	if heads >= 240 {
		nv++ // not a multiple unless nk is 1
	}
	d := 1 + int(dv)%40
	switch dv {
	case 254:
		d = 129
	case 255:
		d = 0
	}
	return fuzzCall{
		seed: seed,
		kern: fuzzKernels[int(kern)%len(fuzzKernels)],
		p: gdn.Params{
			Shape:   gdn.Shape{DK: fuzzDK[int(dk)%len(fuzzDK)], DV: d, NKHeads: nk, NVHeads: nv, NTokens: int(tokens) % 5, NSeqs: int(seqs) % 4},
			HeadMap: gdn.HeadMap(int(flags&0x7f) % 3),
			QScale:  fuzzScales[int(flags&0x7f)/3%len(fuzzScales)],
		},
		inPlace: flags&0x80 != 0,
		edit:    int(edit&0x0f) % numEdits,
		view:    int(edit>>4) % len(viewNames),
		pad:     int(pad),
	}
}

func (c fuzzCall) String() string {
	return fmt.Sprintf("%s %v %v scale %g, in place %v, edit %d on %s, pad %d, seed %d",
		c.kern.name, c.p.Shape, c.p.HeadMap, c.p.QScale, c.inPlace, c.edit, viewNames[c.view], c.pad, c.seed)
}

// valid says whether the contract (SPEC sections 4 to 7) allows the call,
// from the rules themselves, not from gdn's code.
func (c fuzzCall) valid() bool {
	s := c.p.Shape
	if s.DK <= 0 || s.DV <= 0 || s.NKHeads <= 0 || s.NVHeads <= 0 || s.NTokens <= 0 || s.NSeqs <= 0 || s.NVHeads%s.NKHeads != 0 {
		return false
	}
	if c.kern.name == kPrefill.name {
		if s.DK > 128 || s.DV > 128 {
			return false
		}
	} else if !decodeKernels[s.DK] || s.DV%(s.DK/32) != 0 {
		return false
	}
	if c.p.HeadMap > gdn.Tiled || math.IsNaN(float64(c.p.QScale)) || math.IsInf(float64(c.p.QScale), 0) {
		return false
	}
	switch c.edit {
	case editNone, editNone2, editSharedQK:
		return true
	case editLonger:
		return !c.kern.capture || s.NSeqs == 1
	case editOverlap:
		return false
	}
	return false
}

func fuzzDispatch(t *testing.T, r *rig, c fuzzCall) {
	s := c.p.Shape
	if s.NTokens > 0 && s.NSeqs > 0 && s.DK > 0 && s.DV > 0 && uint64(s.CaptureLen()) > 1<<22 {
		t.Skip("too large for the emulated device")
	}
	// Inputs for the shape, or placeholders where the shape is not one.
	var in cpuref.Inputs
	if err := c.p.Validate(); err == nil {
		if in, err = cpuref.RandomInputs(c.p, c.seed); err != nil {
			t.Fatal(err)
		}
	} else {
		n := func(x int) []float32 { return make([]float32, max(x, 1)) }
		in = cpuref.Inputs{Q: n(s.QKLen()), K: n(s.QKLen()), V: n(s.VLen()), G: n(s.GateLen()), Beta: n(s.GateLen()), StateIn: n(s.StateLen())}
	}
	if c.edit == editSharedQK {
		in.K = in.Q
	}
	lead := func(i int) int { return (c.pad + 3*i) % 5 } // elements before view i
	place := func(i int, x []float32) gdn.View {
		buf := make([]float32, lead(i)+len(x)+1)
		floats.Poison(buf)
		copy(buf[lead(i):], x)
		v := r.upload(t, buf)
		v.Offset, v.Len = 4*lead(i), len(x)
		return v
	}
	poisoned := func(i, n int) gdn.View {
		v := r.poisoned(t, lead(i)+max(n, 1)+1)
		v.Offset, v.Len = 4*lead(i), n
		return v
	}
	b := gdn.Buffers{
		Q: place(0, in.Q), K: place(1, in.K), V: place(2, in.V), G: place(3, in.G), Beta: place(4, in.Beta),
		StateIn: place(5, in.StateIn), Output: poisoned(6, s.VLen()), StateOut: poisoned(7, s.StateLen()),
	}
	if c.inPlace {
		b.StateOut = b.StateIn
	}
	slots := s.NTokens
	if c.kern.capture {
		if c.edit == editLonger {
			slots += 3
		}
		b.Capture = poisoned(8, slots*stateSize(c.p)*s.NSeqs)
	}
	p := c.p
	k := r.k
	views := []*gdn.View{&b.Q, &b.K, &b.V, &b.G, &b.Beta, &b.StateIn, &b.Output, &b.StateOut, &b.Capture}
	v := views[c.view]
	if *v == (gdn.View{}) && c.edit >= editShort && c.edit <= editF16 {
		*v = poisoned(8, 1) // Capture of a kernel that takes none: set it
	}
	switch c.edit {
	case editShort:
		v.Len--
	case editReleased:
		v.Buffer.Release()
	case editUnalign:
		v.Offset += 2
	case editNil:
		v.Buffer = nil
	case editF16:
		v.Type = gdn.F16
	case editOverlap:
		overlap(t, r, c, &b)
	case editSharedQK:
		b.K = b.Q
	case editHuge:
		p.NTokens = 1 << 31
	case editZeroK:
		k = &gdn.Kernels{}
	}

	want := c.valid()
	sent, accepted := -1, false
	var callErr error
	cs, err := r.execute(func(enc *mtl.ComputeCommandEncoder) error {
		callErr = c.kern.call(k, enc, p, b)
		sent, accepted = enc.Sends(), callErr == nil
		if callErr != nil && !errors.Is(callErr, gdn.ErrInvalidArgument) {
			return callErr
		}
		return nil // commit either way: a refused call leaves the command buffer empty
	})
	switch {
	case err != nil:
		t.Fatalf("%v: %v", c, err)
	case accepted != want:
		t.Fatalf("%v: accepted %v, but the contract says valid %v (error: %v)", c, accepted, want, callErr)
	case !accepted && sent != 0:
		t.Fatalf("%v: refused (%v) after sending %d messages", c, callErr, sent)
	case !accepted && len(cs) != 0:
		t.Fatalf("%v: refused (%v), but the command buffer ran %d dispatches", c, callErr, len(cs))
	case accepted && len(cs) != 1:
		t.Fatalf("%v: accepted, but the command buffer ran %d dispatches", c, len(cs))
	}
	if !accepted {
		t.Logf("%v: refused: %v", c, callErr)
		return
	}
	t.Logf("%v: accepted", c)

	ref, err := cpuref.Reference32(p, in, true)
	if err != nil {
		t.Fatalf("%v: reference: %v", c, err)
	}
	check := func(what string, got, want []float32) {
		checkWritten(t, c.String()+": "+what, got)
		checkBound(t, c.String()+": "+what+" vs Reference32", cpuref.MaxRelErr(got, want), boundRef32)
	}
	out := readBack(b.Output)
	checkWritten(t, c.String()+": output", out)
	checkBound(t, c.String()+": output vs Reference32, relative to the larger of its largest magnitude and its largest sum of term magnitudes",
		maxAbsErr(out, ref.Output)/max(maxAbs(ref.Output), outputTerms(p, in, ref.Capture)), boundRef32)
	check("state_out", readBack(b.StateOut), ref.StateOut)
	if c.kern.capture {
		got := readBack(b.Capture)
		n := s.CaptureLen()
		check("capture", got[:n], ref.Capture)
		if u := floats.Unwritten(got[n:]); u != len(got)-n {
			t.Errorf("%v: %d capture elements past the draft written", c, len(got)-n-u)
		}
	}
}

// outputTerms returns the largest sum of the magnitudes of the terms of an
// output element, |scale| * sum_j |S[i][j] q_j| over the state S after the
// token, from the capture of Reference32. A float32 sum of n terms is
// within about n * 2^-24 of that sum of magnitudes, not of the result: an
// output that is a near cancellation (a handful of outputs of one head,
// with q nearly orthogonal to every row of S) can be far smaller than its
// terms, and then the float32 sums of the kernels and of Reference32,
// which differ in order (simd_sum against a loop), differ by more than
// 1e-5 of the output itself while both are within that bound of the exact
// result.
func outputTerms(p gdn.Params, in cpuref.Inputs, capture []float32) float64 {
	s := p.Shape
	m := 0.0
	for seq := range s.NSeqs {
		for tok := range s.NTokens {
			for h := range s.NVHeads {
				kh := p.HeadMap.KeyHead(h, s.NKHeads, s.NVHeads)
				q := in.Q[((seq*s.NTokens+tok)*s.NKHeads+kh)*s.DK:][:s.DK]
				st := capture[((seq*s.NTokens+tok)*s.NVHeads+h)*s.DV*s.DK:][:s.DV*s.DK]
				for i := range s.DV {
					sum := 0.0
					for j, qj := range q {
						sum += math.Abs(float64(st[i*s.DK+j]) * float64(qj))
					}
					m = max(m, sum*math.Abs(float64(p.Scale())))
				}
			}
		}
	}
	return m
}

func maxAbs(x []float32) float64 {
	m := 0.0
	for _, v := range x {
		m = max(m, math.Abs(float64(v)))
	}
	return m
}

// maxAbsErr is the largest |got - want|, NaN where an element is NaN.
func maxAbsErr(got, want []float32) float64 {
	m := 0.0
	for i := range want {
		d := math.Abs(float64(got[i]) - float64(want[i]))
		if d != d {
			return d
		}
		m = max(m, d)
	}
	return m
}

// overlap makes a written view overlap another view of one buffer, by the
// view the call names: Output inside StateIn, StateOut one row after
// StateIn (Output over it when the state is one element), StateOut over K,
// or Capture over V (which, for a kernel without a capture, is a capture
// set where none is taken: refused as well).
func overlap(t *testing.T, r *rig, c fuzzCall, b *gdn.Buffers) {
	var first, second *gdn.View
	shift := 0 // bytes from first's offset to second's
	switch c.view % 4 {
	case 0:
		first, second, shift = &b.StateIn, &b.Output, 4*min(3, max(b.StateIn.Len-1, 0))
	case 1:
		first, second, shift = &b.StateIn, &b.StateOut, 4*min(c.p.DK, max(b.StateIn.Len-1, 0))
		if shift == 0 { // a state of one element: StateOut on it is the in-place alias
			second = &b.Output
		}
	case 2:
		first, second = &b.K, &b.StateOut
	case 3:
		first, second = &b.V, &b.Capture
		if second.Len == 0 {
			*second = gdn.F32View(nil, 0, 1)
		}
	}
	second.Offset = first.Offset + shift
	n := max(first.Offset+4*first.Len, second.Offset+4*second.Len)
	shared := r.poisoned(t, n/4+1)
	first.Buffer, second.Buffer = shared.Buffer, shared.Buffer
}
