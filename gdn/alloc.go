package gdn

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/puremetal/puremetal/mtl"
)

// AllocOptions say how [NewBuffers] makes a dispatch's views.
type AllocOptions struct {
	// Storage is the resource options of every buffer; the zero value is
	// shared storage, which the CPU fills and reads through
	// mtl.Slice.
	Storage mtl.ResourceOptions
	// Capture also makes Buffers.Capture, for [Kernels.DecodeWithCapture].
	Capture bool
	// State, when it has a buffer, is used as both StateIn and StateOut
	// (such as a layer's state in a [StatePool]) and is not made;
	// otherwise one state view is made for both, the in-place update.
	State View
	// ConvState, when it has a buffer, is used as both
	// CoreBuffers.ConvStateIn and ConvStateOut (such as a layer's conv
	// state in a [StatePool]) and is not made; it needs
	// Params.Core.Conv.
	ConvState View
	// SeparateStateOut makes StateOut (and with Params.Core.Conv
	// ConvStateOut) a view of its own instead of StateIn (ConvStateIn)
	// updated in place.
	SeparateStateOut bool
}

// Allocation is the [Buffers] of one Params, and with Params.Core its
// [CoreBuffers], every view made by [NewBuffers] in a buffer of its own at
// offset 0, each exactly as long as the Params imply. Release releases
// the buffers it made.
type Allocation struct {
	Buffers
	// Core holds the layer core's views (Params.Core); without it, every
	// view is empty.
	Core  CoreBuffers
	owned []*mtl.Buffer
}

// NewBuffers makes the views a dispatch of p reads and writes, each in a
// new buffer of exactly the length p implies: Q and K (QKLen), V and
// Output (VLen), G and Beta (GateLen) of p.Activation; StateIn and
// StateOut (StateLen, one view updated in place unless
// opts.SeparateStateOut) of p.State, unless opts.State gives them; ALog
// and DtBias ([n_v_heads] f32) with p.Fused.Gate; Slots ([n_seqs] int32)
// with Shape.NSlots > 0; CuSeqlens ([n_seqs+1] int32) with Shape.Varlen;
// Capture (CaptureLen) with opts.Capture.
//
// With p.Core it makes the layer core's views in Allocation.Core, of
// p.Activation: with Core.Conv MixedQKV (MixedLen), ConvWeight
// (ConvWeightLen) and ConvStateIn and ConvStateOut (ConvStateLen, in place
// like the state, or opts.ConvState), and no Q, K and V (the convolution
// makes them); with Core.Norm Z (ZLen) and NormWeight (D_v). The views
// are what [Kernels.DecodeCore] takes; the prefills
// ([Kernels.EncodeCore]) take the conv state in place only without
// grouped heads, so give them opts.SeparateStateOut.
//
// Every buffer is zero-filled: the caller writes the inputs, the slot
// index and cu_seqlens before dispatching. Invalid parameters are an error
// wrapping [ErrInvalidArgument], as is a nil or released device.
func NewBuffers(dev *mtl.Device, p Params, opts AllocOptions) (*Allocation, error) {
	if err := checkDevice(dev, "NewBuffers"); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, asInvalid(err)
	}
	if opts.ConvState.Buffer != nil && p.Core.Conv == 0 {
		return nil, invalid("AllocOptions.ConvState", "set, but Params.Core.Conv is off: there is no conv state")
	}
	s := p.Shape
	a := &Allocation{}
	conv, norm := p.Core.Conv > 0, p.Core.Norm
	ownConvState := conv && opts.ConvState.Buffer == nil
	views := []struct {
		v   *View
		t   ElemType
		n   int
		yes bool
	}{
		{&a.Q, p.Activation, s.QKLen(), !conv},
		{&a.K, p.Activation, s.QKLen(), !conv},
		{&a.V, p.Activation, s.VLen(), !conv},
		{&a.G, p.Activation, s.GateLen(), true},
		{&a.Beta, p.Activation, s.GateLen(), true},
		{&a.Output, p.Activation, s.VLen(), true},
		{&a.StateIn, p.State, s.StateLen(), opts.State.Buffer == nil},
		{&a.StateOut, p.State, s.StateLen(), opts.State.Buffer == nil && opts.SeparateStateOut},
		{&a.Capture, p.State, s.CaptureLen(), opts.Capture},
		{&a.ALog, F32, s.NVHeads, p.Fused.Gate},
		{&a.DtBias, F32, s.NVHeads, p.Fused.Gate},
		{&a.Slots, I32, s.SlotsLen(), s.NSlots > 0},
		{&a.CuSeqlens, I32, s.CuSeqlensLen(), s.Varlen},
		{&a.Core.MixedQKV, p.Activation, s.MixedLen(), conv},
		{&a.Core.ConvWeight, p.Activation, p.ConvWeightLen(), conv},
		{&a.Core.ConvStateIn, p.Activation, p.ConvStateLen(), ownConvState},
		{&a.Core.ConvStateOut, p.Activation, p.ConvStateLen(), ownConvState && opts.SeparateStateOut},
		{&a.Core.Z, p.Activation, s.ZLen(), norm},
		{&a.Core.NormWeight, p.Activation, s.DV, norm},
	}
	for _, c := range views {
		if !c.yes {
			continue
		}
		if uint64(c.n) >= maxElems && c.v != &a.StateIn && c.v != &a.StateOut && c.v != &a.Core.ConvStateIn && c.v != &a.Core.ConvStateOut {
			a.Release()
			return nil, invalid("Shape", "%v implies %d elements in one view, at or beyond the 2^32 the kernels' 32-bit indices address", s, c.n)
		}
		b, err := dev.NewBuffer(c.n*c.t.Size(), opts.Storage)
		if err != nil {
			a.Release()
			return nil, fmt.Errorf("gdn: NewBuffers: %w", err)
		}
		a.owned = append(a.owned, b)
		*c.v = NewView(b, 0, c.t, c.n)
	}
	switch {
	case opts.State.Buffer != nil:
		a.StateIn, a.StateOut = opts.State, opts.State
	case !opts.SeparateStateOut:
		a.StateOut = a.StateIn
	}
	switch {
	case opts.ConvState.Buffer != nil:
		a.Core.ConvStateIn, a.Core.ConvStateOut = opts.ConvState, opts.ConvState
	case conv && !opts.SeparateStateOut:
		a.Core.ConvStateOut = a.Core.ConvStateIn
	}
	return a, nil
}

// Release releases every buffer NewBuffers made (not opts.State's). A
// second call does nothing.
func (a *Allocation) Release() {
	for _, b := range a.owned {
		b.Release()
	}
	a.owned = nil
}

// checkDevice refuses a nil or released device.
func checkDevice(dev *mtl.Device, what string) error {
	if dev == nil {
		return invalid("device", "nil device given to gdn.%s", what)
	}
	if dev.Released() {
		return releasedArg("device", "the device given to gdn.%s was released", what)
	}
	return nil
}

// ErrNoFreeSlot is wrapped by the error of [StatePool.Acquire] when every
// slot is in use.
var ErrNoFreeSlot = errors.New("gdn: no free slot in the state pool")

// StatePool is the recurrent state of Shape.NSlots sequences for serving:
// for each layer one view of NSlots states (Shape.StateLen elements of
// Params.State), which a dispatch takes as StateIn and StateOut with
// Buffers.Slots naming each sequence's slot. A slot is the same in every
// layer: [StatePool.Acquire] gives a sequence one, zeroed (a fresh
// sequence), and [StatePool.Free] gives it back. The states are in shared
// storage, which Acquire zeroes from the CPU: free a slot only once the
// command buffers that use it have completed. A StatePool is safe for
// concurrent use.
//
// With the layer core's convolution (Params.Core.Conv) the pool holds each
// layer's conv states too, slot for slot: ConvStates, which
// [Kernels.DecodeCore] takes as CoreBuffers.ConvStateIn and ConvStateOut (the
// same view: in place), and which Acquire zeroes with the state.
type StatePool struct {
	// States holds each layer's view of NSlots states, for
	// Buffers.StateIn and Buffers.StateOut (or AllocOptions.State).
	States []View
	// ConvStates holds each layer's view of NSlots conv states
	// ([conv_dim, K-1, NSlots] of Params.Activation) with
	// Params.Core.Conv; nil without the convolution.
	ConvStates []View

	slotBytes int
	convBytes int // bytes of one slot's conv state
	mu        sync.Mutex
	free      []int32 // free slots, the next to give last
	used      []bool
}

// NewStatePool makes the state views of layers layers for p's heads,
// types and slots (Shape.NSlots, which must be positive): each
// D_k*D_v*n_v_heads*NSlots elements of p.State, zero-filled, every slot
// free; with p.Core.Conv also the conv state views, each
// conv_dim*(K-1)*NSlots elements of p.Activation, zero-filled. What only a
// dispatch has (NTokens, NSeqs, Varlen, QScale, HeadMap, Fused) is not
// looked at, so the Params of any step over the pool will do. Invalid
// heads, types or Core, a shape without slots or a layer count below 1
// are an error wrapping [ErrInvalidArgument].
func NewStatePool(dev *mtl.Device, p Params, layers int) (*StatePool, error) {
	if err := checkDevice(dev, "NewStatePool"); err != nil {
		return nil, err
	}
	s := p.Shape
	if s.NSlots <= 0 {
		return nil, invalid("Shape.NSlots", "%d, a state pool needs at least one slot", s.NSlots)
	}
	// A pool's own parameters: those of a one-token step of one sequence.
	p = Params{Shape: Shape{DK: s.DK, DV: s.DV, NKHeads: s.NKHeads, NVHeads: s.NVHeads, NTokens: 1, NSeqs: 1, NSlots: s.NSlots},
		Activation: p.Activation, State: p.State, Core: p.Core}
	if err := p.Validate(); err != nil {
		return nil, asInvalid(err)
	}
	s = p.Shape
	if layers < 1 {
		return nil, invalid("layers", "%d, a state pool needs at least one layer", layers)
	}
	n := s.StateLen()
	sp := &StatePool{slotBytes: n / s.NSlots * p.State.Size(), used: make([]bool, s.NSlots)}
	var err error
	sp.States, err = appendLayerViews(sp.States, dev, layers, p.State, n)
	if err == nil && p.Core.Conv > 0 {
		nc := p.ConvStateLen()
		sp.convBytes = nc / s.NSlots * p.Activation.Size()
		sp.ConvStates, err = appendLayerViews(sp.ConvStates, dev, layers, p.Activation, nc)
	}
	if err != nil {
		sp.Release()
		return nil, fmt.Errorf("gdn: NewStatePool: %w", err)
	}
	for slot := s.NSlots - 1; slot >= 0; slot-- {
		sp.free = append(sp.free, int32(slot))
	}
	return sp, nil
}

// appendLayerViews appends to views one view per layer of n elements of
// type t, each the whole of a zero-filled shared buffer of its own, and
// returns them with the first error: the views made before it are
// appended, for the caller to release.
func appendLayerViews(views []View, dev *mtl.Device, layers int, t ElemType, n int) ([]View, error) {
	for range layers {
		b, err := dev.NewBuffer(n*t.Size(), mtl.ResourceStorageModeShared)
		if err != nil {
			return views, err
		}
		views = append(views, NewView(b, 0, t, n))
	}
	return views, nil
}

// Slots returns the number of slots.
func (sp *StatePool) Slots() int { return len(sp.used) }

// InUse returns the number of slots acquired and not freed.
func (sp *StatePool) InUse() int {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return len(sp.used) - len(sp.free)
}

// Acquire takes a free slot, the lowest first, and zeroes its state (and
// conv state) in every layer. With every slot in use it returns an error
// wrapping [ErrNoFreeSlot].
func (sp *StatePool) Acquire() (int32, error) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if len(sp.free) == 0 {
		return -1, fmt.Errorf("%w: all %d slots are in use", ErrNoFreeSlot, len(sp.used))
	}
	slot := sp.free[len(sp.free)-1]
	for _, v := range slices.Concat(sp.States, sp.ConvStates) {
		if v.Buffer.Released() {
			return -1, releasedArg("StatePool", "its state buffer was released")
		}
	}
	sp.free = sp.free[:len(sp.free)-1]
	sp.used[slot] = true
	for _, v := range sp.States {
		clear(v.Buffer.Contents()[int(slot)*sp.slotBytes:][:sp.slotBytes])
	}
	for _, v := range sp.ConvStates {
		clear(v.Buffer.Contents()[int(slot)*sp.convBytes:][:sp.convBytes])
	}
	return slot, nil
}

// Free gives a slot back to the pool. A slot out of range or not in use is
// an error wrapping [ErrInvalidArgument].
func (sp *StatePool) Free(slot int32) error {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if slot < 0 || int(slot) >= len(sp.used) {
		return invalid("slot", "%d is outside the pool's slots [0, %d)", slot, len(sp.used))
	}
	if !sp.used[slot] {
		return invalid("slot", "%d is not in use: freed twice, or never acquired", slot)
	}
	sp.used[slot] = false
	sp.free = append(sp.free, slot)
	return nil
}

// Release releases the state (and conv state) buffers. A second call does
// nothing.
func (sp *StatePool) Release() {
	for _, v := range slices.Concat(sp.States, sp.ConvStates) {
		v.Buffer.Release()
	}
}
