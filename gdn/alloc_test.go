package gdn_test

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/gdn"
	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/tensor"
)

// argErr checks that err wraps gdn.ErrInvalidArgument and is a
// *spec.ArgumentError naming arg, its message holding every one of want.
func argErr(t *testing.T, what string, err error, arg string, want ...string) {
	t.Helper()
	var ae *spec.ArgumentError
	switch {
	case err == nil:
		t.Errorf("%s: no error", what)
		return
	case !errors.Is(err, gdn.ErrInvalidArgument):
		t.Errorf("%s: %v does not wrap gdn.ErrInvalidArgument", what, err)
	case !errors.As(err, &ae):
		t.Errorf("%s: %v is not a *spec.ArgumentError", what, err)
	case ae.Arg != arg:
		t.Errorf("%s: argument %q, want %q (%v)", what, ae.Arg, arg, err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: %q does not mention %q", what, err, w)
		}
	}
}

var decodeParams = gdn.Params{Shape: gdn.Shape{DK: 32, DV: 32, NKHeads: 1, NVHeads: 2, NTokens: 1, NSeqs: 1}, QScale: 0.5}

// gdn's refusals match both gdn.ErrInvalidArgument and
// *spec.ArgumentError, with the message they always had.
func TestErrorsMatchSpecArgumentError(t *testing.T) {
	bad := decodeParams
	bad.Shape.DK = 48
	_, err := gdn.EntryPoint(gdn.KernelDecode, bad)
	argErr(t, "D_k 48", err, "Shape.DK", "gdn: invalid argument: Shape.DK: 48")
	if errors.Is(err, tensor.ErrInvalidArgument) {
		t.Errorf("D_k 48: %v matches tensor.ErrInvalidArgument, package tensor's sentinel", err)
	}
	bad = decodeParams
	bad.Shape.NVHeads = 3
	bad.Shape.NKHeads = 2
	err = gdn.Validate(gdn.KernelPrefill, bad, gdn.Buffers{})
	argErr(t, "heads", err, "Shape.NVHeads", "not a multiple of Shape.NKHeads = 2")
	err = gdn.Validate(gdn.KernelDecode, decodeParams, gdn.Buffers{})
	argErr(t, "no buffers", err, "Q", "no buffer")
}

// gdn.New refuses a nil or a released device; a view in a buffer of a
// released device's, or of another device, is refused naming both.
func TestReleasedAndOtherDevices(t *testing.T) {
	_, err := gdn.New(nil, nil)
	argErr(t, "nil device", err, "device", "nil device")
	gone := testdevice.Emulated(t, emu.Options{})
	gone.Release()
	_, err = gdn.New(gone, nil)
	argErr(t, "released device", err, "device", "was released")
	if !errors.Is(err, mtl.ErrReleased) {
		t.Errorf("released device: %v does not match mtl.ErrReleased", err)
	}
	_, err = gdn.NewBuffers(gone, decodeParams, gdn.AllocOptions{})
	argErr(t, "NewBuffers on a released device", err, "device", "gdn.NewBuffers was released")

	g := testdevice.NewEmulated(t, emu.Options{})
	other := testdevice.Emulated(t, emu.Options{})
	k, err := gdn.New(g.D, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Release()
	mine, err := gdn.NewBuffers(g.D, decodeParams, gdn.AllocOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer mine.Release()
	theirs, err := gdn.NewBuffers(other, decodeParams, gdn.AllocOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer theirs.Release()
	b := mine.Buffers
	b.V = theirs.V
	cb, enc := g.Encoder()
	err = k.Decode(enc, decodeParams, b)
	argErr(t, "buffer of another device", err, "V", "its buffer belongs to device", "the kernels to device", emu.Name)
	if enc.Sends() != 0 || enc.Err() != nil {
		t.Errorf("after the refusal the encoder sent %d messages, error %v", enc.Sends(), enc.Err())
	}
	// A buffer released since it was placed in a view.
	b = mine.Buffers
	dead, err := g.D.NewBuffer(mine.Q.Len*4, 0)
	if err != nil {
		t.Fatal(err)
	}
	dead.Release()
	b.Q.Buffer = dead
	err = k.Decode(enc, decodeParams, b)
	argErr(t, "released buffer", err, "Q", "the buffer was released")
	if !errors.Is(err, mtl.ErrReleased) {
		t.Errorf("released buffer: %v does not match mtl.ErrReleased", err)
	}
	if err := enc.EndEncoding(); err != nil {
		t.Error(err)
	}
	cb.Release()
}

// NewBuffers makes every view the Params imply, each exactly as long, and
// Release releases them all; the Params' own errors come through.
func TestNewBuffers(t *testing.T) {
	g := testdevice.NewEmulated(t, emu.Options{})
	p := gdn.Params{
		Shape:      gdn.Shape{DK: 32, DV: 64, NKHeads: 1, NVHeads: 2, NTokens: 5, NSeqs: 3, NSlots: 6, Varlen: true},
		QScale:     0.25,
		Activation: gdn.BF16,
		State:      gdn.F16,
		Fused:      gdn.FusedAll,
	}
	a, err := gdn.NewBuffers(g.D, p, gdn.AllocOptions{Capture: true, SeparateStateOut: true})
	if err != nil {
		t.Fatal(err)
	}
	s := p.Shape
	for _, c := range []struct {
		name string
		v    gdn.View
		t    gdn.ElemType
		n    int
	}{
		{"Q", a.Q, gdn.BF16, s.QKLen()}, {"K", a.K, gdn.BF16, s.QKLen()}, {"V", a.V, gdn.BF16, s.VLen()},
		{"G", a.G, gdn.BF16, s.GateLen()}, {"Beta", a.Beta, gdn.BF16, s.GateLen()}, {"Output", a.Output, gdn.BF16, s.VLen()},
		{"StateIn", a.StateIn, gdn.F16, s.StateLen()}, {"StateOut", a.StateOut, gdn.F16, s.StateLen()},
		{"Capture", a.Capture, gdn.F16, s.CaptureLen()}, {"ALog", a.ALog, gdn.F32, 2}, {"DtBias", a.DtBias, gdn.F32, 2},
		{"Slots", a.Slots, gdn.I32, 3}, {"CuSeqlens", a.CuSeqlens, gdn.I32, 4},
	} {
		if c.v.Buffer == nil || c.v.Type != c.t || c.v.Len != c.n || c.v.Offset != 0 || c.v.Buffer.Length() != c.n*c.t.Size() {
			t.Errorf("%s: %+v, want %d elements of %v in a buffer of %d bytes", c.name, c.v, c.n, c.t, c.n*c.t.Size())
		}
	}
	if a.StateIn.Buffer == a.StateOut.Buffer {
		t.Error("SeparateStateOut: StateOut shares StateIn's buffer")
	}
	// Exactly the views Validate wants once cu_seqlens and the slots
	// hold valid values.
	copy(mtl.Slice[int32](a.CuSeqlens.Buffer), []int32{0, 2, 2, 5})
	copy(mtl.Slice[int32](a.Slots.Buffer), []int32{5, -1, 0})
	if err := gdn.Validate(gdn.KernelDecodeCapture, p, a.Buffers); err != nil {
		t.Errorf("the views NewBuffers made do not validate: %v", err)
	}
	bufs := []*mtl.Buffer{a.Q.Buffer, a.StateOut.Buffer, a.CuSeqlens.Buffer}
	a.Release()
	a.Release()
	for i, b := range bufs {
		if !b.Released() {
			t.Errorf("buffer %d not released", i)
		}
	}

	// Without the options and fused parts: no Capture, no ALog, no
	// serving views, the state updated in place.
	plain, err := gdn.NewBuffers(g.D, decodeParams, gdn.AllocOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Release()
	if plain.Capture != (gdn.View{}) || plain.ALog != (gdn.View{}) || plain.Slots != (gdn.View{}) || plain.CuSeqlens != (gdn.View{}) || plain.StateIn != plain.StateOut {
		t.Errorf("views made that the Params do not imply: %+v", plain.Buffers)
	}

	bad := decodeParams
	bad.QScale = float32(bad.QScale) / 0
	_, err = gdn.NewBuffers(g.D, bad, gdn.AllocOptions{})
	argErr(t, "infinite QScale", err, "QScale", "not finite")
	_, err = gdn.NewBuffers(nil, decodeParams, gdn.AllocOptions{})
	argErr(t, "nil device", err, "device", "nil device")
}

// The pool's slots go out lowest first and come back; a slot acquired
// again is zeroed in every layer; bad slots and full pools are refused.
func TestStatePool(t *testing.T) {
	g := testdevice.NewEmulated(t, emu.Options{})
	p := decodeParams
	p.Shape.NSlots = 3
	p.State = gdn.BF16
	pool, err := gdn.NewStatePool(g.D, p, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Release()
	perSlot := p.StateLen() / 3 * 2 // bytes
	if len(pool.States) != 2 || pool.States[1].Len != p.StateLen() || pool.States[0].Type != gdn.BF16 || pool.Slots() != 3 || pool.ConvStates != nil {
		t.Fatalf("pool of %d layers, %+v, conv states %+v", len(pool.States), pool.States, pool.ConvStates)
	}
	for want := range int32(3) {
		if slot, err := pool.Acquire(); slot != want || err != nil {
			t.Fatalf("Acquire gave slot %d, %v; want %d", slot, err, want)
		}
	}
	if _, err := pool.Acquire(); !errors.Is(err, gdn.ErrNoFreeSlot) || !strings.Contains(err.Error(), "all 3 slots") {
		t.Errorf("full pool: %v", err)
	}
	for _, v := range pool.States {
		b := v.Buffer.Contents()
		for i := range b {
			b[i] = 0xAB
		}
	}
	if err := pool.Free(1); err != nil {
		t.Fatal(err)
	}
	argErr(t, "freed twice", pool.Free(1), "slot", "1 is not in use")
	argErr(t, "slot -1", pool.Free(-1), "slot", "-1 is outside the pool's slots [0, 3)")
	if pool.InUse() != 2 {
		t.Errorf("%d slots in use, want 2", pool.InUse())
	}
	if slot, err := pool.Acquire(); slot != 1 || err != nil {
		t.Fatalf("Acquire after Free gave %d, %v; want 1", slot, err)
	}
	for layer, v := range pool.States {
		b := v.Buffer.Contents()
		for i, x := range b {
			zero := i >= perSlot && i < 2*perSlot
			if zero != (x == 0) {
				t.Fatalf("layer %d, byte %d (slot %d) is %#x after slot 1 was acquired again", layer, i, i/perSlot, x)
			}
		}
	}

	_, err = gdn.NewStatePool(g.D, decodeParams, 1)
	argErr(t, "no slots", err, "Shape.NSlots", "0, a state pool needs at least one slot")
	_, err = gdn.NewStatePool(g.D, p, 0)
	argErr(t, "no layers", err, "layers", "0, a state pool needs at least one layer")
}

// With the layer core's convolution the pool holds every layer's conv
// states as well, slot for slot, of the activation type: Acquire zeroes a
// slot's conv state with its state, and Release releases both.
func TestStatePoolConvStates(t *testing.T) {
	g := testdevice.NewEmulated(t, emu.Options{})
	p := gdn.Params{Shape: gdn.Shape{DK: 32, DV: 32, NKHeads: 1, NVHeads: 2, NTokens: 1, NSeqs: 1, NSlots: 3},
		Activation: gdn.BF16, Fused: gdn.FusedAll, Core: gdn.QwenCore()}
	pool, err := gdn.NewStatePool(g.D, p, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(pool.ConvStates) != 2 || pool.ConvStates[1].Len != p.ConvStateLen() || pool.ConvStates[0].Type != gdn.BF16 ||
		pool.ConvStates[0].Buffer == pool.ConvStates[1].Buffer || pool.ConvStates[0].Buffer.Length() != 2*p.ConvStateLen() {
		t.Fatalf("conv states %+v, want 2 layers of %d bf16 elements", pool.ConvStates, p.ConvStateLen())
	}
	for range 3 {
		if _, err := pool.Acquire(); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range slices.Concat(pool.States, pool.ConvStates) {
		b := v.Buffer.Contents()
		for i := range b {
			b[i] = 0xAB
		}
	}
	if err := pool.Free(2); err != nil {
		t.Fatal(err)
	}
	if slot, err := pool.Acquire(); slot != 2 || err != nil {
		t.Fatalf("Acquire after Free gave %d, %v; want 2", slot, err)
	}
	perSlot := p.ConvStateLen() / 3 * 2 // bytes
	for layer, v := range pool.ConvStates {
		for i, x := range v.Buffer.Contents() {
			if zero := i >= 2*perSlot; zero != (x == 0) {
				t.Fatalf("layer %d, conv state byte %d (slot %d) is %#x after slot 2 was acquired again", layer, i, i/perSlot, x)
			}
		}
	}
	pool.Release()
	for _, v := range slices.Concat(pool.States, pool.ConvStates) {
		if !v.Buffer.Released() {
			t.Errorf("a buffer of the pool is not released: %+v", v)
		}
	}
	pool.Release() // a second call does nothing
}

// With Params.Core, NewBuffers makes what the core kernel takes: no Q, K
// and V with the convolution (it makes them from MixedQKV), the core's
// views in Allocation.Core, the conv state in place unless
// SeparateStateOut, or AllocOptions.ConvState (a pool's) when given; the
// views validate for Kernels.DecodeCore as they are.
func TestNewBuffersCore(t *testing.T) {
	g := testdevice.NewEmulated(t, emu.Options{})
	shape := gdn.Shape{DK: 32, DV: 32, NKHeads: 1, NVHeads: 2, NTokens: 3, NSeqs: 2}
	p := gdn.Params{Shape: shape, QScale: 0.25, Activation: gdn.BF16, Fused: gdn.FusedAll, Core: gdn.QwenCore()}
	normOnly := p
	normOnly.Core.Conv = 0
	convOnly := p
	convOnly.Core = gdn.Core{Conv: spec.ConvKernel}
	pooled := p
	pooled.NSlots = 4
	pool, err := gdn.NewStatePool(g.D, pooled, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Release()
	for _, c := range []struct {
		name string
		p    gdn.Params
		opts gdn.AllocOptions
	}{
		{"qwen, in place", p, gdn.AllocOptions{}},
		{"qwen, separate", p, gdn.AllocOptions{SeparateStateOut: true}},
		{"norm only", normOnly, gdn.AllocOptions{}},
		{"conv only", convOnly, gdn.AllocOptions{}},
		{"pool", pooled, gdn.AllocOptions{State: pool.States[0], ConvState: pool.ConvStates[0]}},
	} {
		a, err := gdn.NewBuffers(g.D, c.p, c.opts)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		conv, norm, act := c.p.Core.Conv > 0, c.p.Core.Norm, c.p.Activation
		for _, v := range []struct {
			name string
			v    gdn.View
			n    int
			want bool
		}{
			{"Q", a.Q, c.p.QKLen(), !conv}, {"K", a.K, c.p.QKLen(), !conv}, {"V", a.V, c.p.VLen(), !conv},
			{"Core.MixedQKV", a.Core.MixedQKV, c.p.MixedLen(), conv},
			{"Core.ConvWeight", a.Core.ConvWeight, c.p.ConvWeightLen(), conv},
			{"Core.ConvStateIn", a.Core.ConvStateIn, c.p.ConvStateLen(), conv},
			{"Core.ConvStateOut", a.Core.ConvStateOut, c.p.ConvStateLen(), conv},
			{"Core.Z", a.Core.Z, c.p.ZLen(), norm}, {"Core.NormWeight", a.Core.NormWeight, c.p.DV, norm},
		} {
			switch {
			case !v.want && v.v != (gdn.View{}):
				t.Errorf("%s: %s made, but the params do not read it: %+v", c.name, v.name, v.v)
			case v.want && (v.v.Buffer == nil || v.v.Type != act || v.v.Len != v.n):
				t.Errorf("%s: %s is %+v, want %d elements of %v", c.name, v.name, v.v, v.n, act)
			}
		}
		if conv && (a.Core.ConvStateOut == a.Core.ConvStateIn) == c.opts.SeparateStateOut {
			t.Errorf("%s: ConvStateOut = ConvStateIn is %v with SeparateStateOut %v", c.name, a.Core.ConvStateOut == a.Core.ConvStateIn, c.opts.SeparateStateOut)
		}
		if c.opts.ConvState.Buffer != nil && (a.Core.ConvStateIn != c.opts.ConvState || a.Core.ConvStateOut != c.opts.ConvState) {
			t.Errorf("%s: conv state %+v, %+v; want the pool's %+v", c.name, a.Core.ConvStateIn, a.Core.ConvStateOut, c.opts.ConvState)
		}
		if c.p.NSlots > 0 {
			copy(mtl.Slice[int32](a.Slots.Buffer), []int32{3, 0})
		}
		if err := gdn.ValidateCore(c.p, a.Buffers, a.Core); err != nil {
			t.Errorf("%s: the views NewBuffers made do not validate: %v", c.name, err)
		}
		a.Release()
		if conv && c.opts.ConvState.Buffer == nil && !a.Core.MixedQKV.Buffer.Released() {
			t.Errorf("%s: Release left MixedQKV's buffer", c.name)
		}
	}
	if pool.ConvStates[0].Buffer.Released() {
		t.Error("Release released the pool's conv state")
	}
	noConv := normOnly
	_, err = gdn.NewBuffers(g.D, noConv, gdn.AllocOptions{ConvState: pool.ConvStates[0]})
	argErr(t, "ConvState without the convolution", err, "AllocOptions.ConvState", "Params.Core.Conv is off")
}

// A state pool depends on the heads, the types and the slots alone: the
// tokens, sequences, q scale and head map of a dispatch are not asked for.
func TestStatePoolNeedsNoDispatch(t *testing.T) {
	g := testdevice.NewEmulated(t, emu.Options{})
	p := gdn.Params{Shape: gdn.Shape{DK: 32, DV: 32, NKHeads: 1, NVHeads: 2, NSlots: 3}, State: gdn.BF16, Activation: gdn.F16, Core: gdn.QwenCore()}
	p.QScale = float32(math.Inf(1)) // not the pool's business
	pool, err := gdn.NewStatePool(g.D, p, 1)
	if err != nil {
		t.Fatalf("a pool of %v: %v", p.Shape, err)
	}
	defer pool.Release()
	dispatch := p
	dispatch.NTokens, dispatch.NSeqs, dispatch.QScale = 1, 1, 0
	if pool.States[0].Len != dispatch.StateLen() || pool.ConvStates[0].Len != dispatch.ConvStateLen() || pool.ConvStates[0].Type != gdn.F16 {
		t.Errorf("pool of %+v, %+v; want %d and %d elements", pool.States[0], pool.ConvStates[0], dispatch.StateLen(), dispatch.ConvStateLen())
	}
	for _, c := range []struct {
		name, arg string
		edit      func(*gdn.Params)
	}{
		{"no D_k", "Shape.DK", func(p *gdn.Params) { p.DK = 0 }},
		{"heads", "Shape.NVHeads", func(p *gdn.Params) { p.NVHeads = 3; p.NKHeads = 2 }},
		{"state type", "State", func(p *gdn.Params) { p.State = 9 }},
		{"core", "Core.Conv", func(p *gdn.Params) { p.Core.Conv = 3 }},
	} {
		bad := p
		c.edit(&bad)
		_, err := gdn.NewStatePool(g.D, bad, 1)
		argErr(t, c.name, err, c.arg)
	}
}

// A dispatcher that needs a pipeline after the device's Release refuses
// the device as the other arguments are refused: matching both
// gdn.ErrInvalidArgument and mtl.ErrReleased, naming the device.
func TestDispatchAfterDeviceRelease(t *testing.T) {
	dev := testdevice.Emulated(t, emu.Options{})
	k, err := gdn.New(dev, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Release()
	a, err := gdn.NewBuffers(dev, decodeParams, gdn.AllocOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release()
	q, err := dev.NewCommandQueue()
	if err != nil {
		t.Fatal(err)
	}
	defer q.Release()
	dev.Release()
	err = q.Run(func(enc *mtl.ComputeCommandEncoder) error { return k.Decode(enc, decodeParams, a.Buffers) })
	argErr(t, "Decode after the device's Release", err, "device", "the device given to gdn.New was released")
	if !errors.Is(err, mtl.ErrReleased) {
		t.Errorf("Decode after the device's Release: %v does not match mtl.ErrReleased", err)
	}
}
