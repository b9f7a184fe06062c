package main

import (
	"cmp"
	"fmt"
	"sync"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/examples/internal/layerstack"
	"github.com/puremetal/puremetal/gdn"
	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/mtl"
)

// The layer core on a device keeps, per layer, one pool of conv states
// beside the pool of recurrent states, indexed by the same slots (both in
// layerstack.States, a gdn.StatePool), and the core kernel updates both in
// place (ConvStateOut = ConvStateIn): with
// grouped heads (n_v_heads > n_k_heads) gdn.Kernels.DecodeCore then runs one
// threadgroup per key head, the only one that reads and writes that key
// head's conv state, so each touched slot's conv state is read once and
// written once, (K-1) conv_dim elements per sequence and layer, and the
// slots a step does not touch are left as they are. On the emulated device
// the completed step's counters measure those bytes (Traffic).

// corePools are the layer core's views on the device beside the pools of
// states and conv states: every layer's conv and norm weights, the
// staged mixed_qkv and z, and the buffers of a request run alone.
type corePools struct {
	one          spec.Params // one sequence's shape, with the core
	slots        int
	states       *layerstack.States // the pools of states and conv states
	convW, normW []gdn.View
	owned        []*mtl.Buffer // every buffer made, released by Release
	mixed, z     [2][2]*mtl.Buffer
	aloneMixed   *mtl.Buffer
	aloneZ       *mtl.Buffer
	aloneConv    [2]*mtl.Buffer
	// measure sums the emulator's counters of every step (emulated
	// device only) into traffic.
	measure bool
	traffic struct {
		sync.Mutex
		state, conv uint64
		err         error
	}
	// discard, tests only, writes the conv states into a pool of their
	// own that nothing reads (two buffers without a copy back): the
	// checks must catch it.
	discard []*mtl.Buffer
}

func newCorePools(dev *mtl.Device, one spec.Params, consts []cpuref.Inputs, states *layerstack.States, slots int) (*corePools, error) {
	c := &corePools{one: one, slots: slots, states: states}
	a := one.Activation
	newBuf := func(n int) (*mtl.Buffer, error) {
		buf, err := dev.NewBuffer(max(n, 1), mtl.ResourceStorageModeShared)
		if err == nil {
			c.owned = append(c.owned, buf)
		}
		return buf, err
	}
	for _, x := range consts {
		w, err := newBuf(one.ConvWeightLen() * a.Size())
		if err != nil {
			c.Release()
			return nil, err
		}
		nw, err := newBuf(one.DV * a.Size())
		if err != nil {
			c.Release()
			return nil, err
		}
		c.convW = append(c.convW, gdn.NewView(w, 0, a, one.ConvWeightLen()))
		c.normW = append(c.normW, gdn.NewView(nw, 0, a, one.DV))
		layerstack.Store(c.convW[len(c.convW)-1], x.ConvWeight)
		layerstack.Store(c.normW[len(c.normW)-1], x.NormWeight)
	}
	return c, nil
}

// grow makes *buf at least n bytes.
func (c *corePools) grow(dev *mtl.Device, buf **mtl.Buffer, n int) error {
	if *buf != nil && (*buf).Length() >= n {
		return nil
	}
	nb, err := dev.NewBuffer(max(n, 1), mtl.ResourceStorageModeShared)
	if err != nil {
		return err
	}
	if *buf != nil {
		(*buf).Release()
	}
	*buf = nb
	return nil
}

// stage writes every layer's mixed_qkv and z of the batch p into the
// buffers of set and kind.
func (c *corePools) stage(dev *mtl.Device, set, k int, p spec.Params, in []cpuref.Inputs) error {
	a := p.Activation.Size()
	if err := c.grow(dev, &c.mixed[set][k], len(in)*p.MixedLen()*a); err != nil {
		return err
	}
	if err := c.grow(dev, &c.z[set][k], len(in)*p.ZLen()*a); err != nil {
		return err
	}
	for l, x := range in {
		m, z := c.views(set, k, p, l)
		layerstack.Store(m, x.MixedQKV)
		layerstack.Store(z, x.Z)
	}
	return nil
}

// views returns layer l's mixed_qkv and z of the batch p in set and kind.
func (c *corePools) views(set, k int, p spec.Params, l int) (mixed, z gdn.View) {
	a := p.Activation
	return gdn.NewView(c.mixed[set][k], l*p.MixedLen()*a.Size(), a, p.MixedLen()),
		gdn.NewView(c.z[set][k], l*p.ZLen()*a.Size(), a, p.ZLen())
}

// coreBuffers returns layer l's core views of the batch p staged in set
// and kind: the conv-state pool read and written in place.
func (c *corePools) coreBuffers(set, k int, p spec.Params, l int) gdn.CoreBuffers {
	m, z := c.views(set, k, p, l)
	conv := c.states.ConvPool(l)
	out := conv
	if c.discard != nil {
		out = gdn.NewView(c.discard[l], 0, conv.Type, conv.Len)
	}
	return gdn.CoreBuffers{MixedQKV: m, ConvWeight: c.convW[l], ConvStateIn: conv, ConvStateOut: out, Z: z, NormWeight: c.normW[l]}
}

// discardConvStates makes every step write the conv states into a pool
// of their own that nothing reads (tests only).
func (c *corePools) discardConvStates(dev *mtl.Device) error {
	for range c.convW {
		buf, err := dev.NewBuffer(max(c.slots*c.one.ConvStateLen()*c.one.Activation.Size(), 1), mtl.ResourceStorageModeShared)
		if err != nil {
			return err
		}
		c.owned = append(c.owned, buf)
		c.discard = append(c.discard, buf)
	}
	return nil
}

// encode encodes one step of the batch p on every layer into cb: one
// compute encoder with one core dispatch per layer (acts(l) the layer's
// views of the step), each updating its layer's recurrent and conv states
// in place. With measure set, a completed handler adds the step's state
// and conv state bytes (the emulator's counters) to traffic; cb must be
// committed by layerstack.Device.Submit, whose step is done only after
// that handler has run, so a step waited for is counted.
func (c *corePools) encode(k *gdn.Kernels, cb *mtl.CommandBuffer, set, kind int, p spec.Params, acts func(l int) gdn.Buffers) error {
	enc, err := cb.ComputeCommandEncoder()
	if err != nil {
		return err
	}
	for l := range c.convW {
		b := acts(l)
		b.Q, b.K, b.V = gdn.View{}, gdn.View{}, gdn.View{} // the convolution makes them
		if err := k.DecodeCore(enc, p, b, c.coreBuffers(set, kind, p, l)); err != nil {
			enc.EndEncoding()
			return fmt.Errorf("layer %d: %w", l, err)
		}
	}
	if err := enc.EndEncoding(); err != nil {
		return err
	}
	if !c.measure {
		return nil
	}
	return cb.AddCompletedHandler(func(mtl.Completion) { c.count(cb) })
}

// Buffer bindings of the core kernel's states (gdn.Kernels.DecodeCore): the
// recurrent state in and out, the conv state in and out. In place one view
// is bound at both of a pair, and the emulator charges its bytes to the
// lower index: count both.
var stateBindings, convBindings = [2]int{5, 7}, [2]int{16, 17}

// count adds the state and conv state bytes the dispatches of cb, a
// completed command buffer of the emulated device, loaded and stored.
func (c *corePools) count(cb *mtl.CommandBuffer) {
	cs, err := emu.DispatchCounters(cb)
	c.traffic.Lock()
	defer c.traffic.Unlock()
	if err != nil {
		c.traffic.err = cmp.Or(c.traffic.err, err)
		return
	}
	for _, d := range cs {
		for i := range 2 {
			c.traffic.state += d.Loaded[stateBindings[i]] + d.Stored[stateBindings[i]]
			c.traffic.conv += d.Loaded[convBindings[i]] + d.Stored[convBindings[i]]
		}
	}
}

// Traffic returns the state and conv state bytes every step moved, as the
// emulator counted them, and false when they were not measured (a GPU).
func (c *corePools) Traffic() (state, conv uint64, ok bool, err error) {
	c.traffic.Lock()
	defer c.traffic.Unlock()
	return c.traffic.state, c.traffic.conv, c.measure, c.traffic.err
}

// alone runs layer l's core for one sequence (no pool, no packing) on
// bufs from its conv state in.ConvState and returns its new conv state;
// the output and the state are in bufs.
func (c *corePools) alone(d *layerstack.Device, p spec.Params, l int, in cpuref.Inputs, bufs gdn.Buffers) ([]float32, error) {
	a := p.Activation.Size()
	for _, g := range []struct {
		buf **mtl.Buffer
		n   int
	}{{&c.aloneMixed, p.MixedLen() * a}, {&c.aloneZ, p.ZLen() * a}, {&c.aloneConv[0], p.ConvStateLen() * a}, {&c.aloneConv[1], p.ConvStateLen() * a}} {
		if err := c.grow(d.Dev, g.buf, g.n); err != nil {
			return nil, err
		}
	}
	view := func(buf *mtl.Buffer, n int) gdn.View { return gdn.NewView(buf, 0, p.Activation, n) }
	core := gdn.CoreBuffers{MixedQKV: view(c.aloneMixed, p.MixedLen()), ConvWeight: c.convW[l], ConvStateIn: view(c.aloneConv[0], p.ConvStateLen()),
		ConvStateOut: view(c.aloneConv[1], p.ConvStateLen()), Z: view(c.aloneZ, p.ZLen()), NormWeight: c.normW[l]}
	layerstack.Store(core.MixedQKV, in.MixedQKV)
	layerstack.Store(core.Z, in.Z)
	layerstack.Store(core.ConvStateIn, in.ConvState)
	layerstack.Poison(core.ConvStateOut)
	bufs.Q, bufs.K, bufs.V = gdn.View{}, gdn.View{}, gdn.View{}
	if err := d.Queue.Run(func(enc *mtl.ComputeCommandEncoder) error { return d.Kernels.DecodeCore(enc, p, bufs, core) }); err != nil {
		return nil, err
	}
	return layerstack.Load(core.ConvStateOut, make([]float32, p.ConvStateLen())), nil
}

// Release releases every buffer.
func (c *corePools) Release() {
	for _, b := range c.owned {
		b.Release()
	}
	for _, b := range []*mtl.Buffer{c.mixed[0][0], c.mixed[0][1], c.mixed[1][0], c.mixed[1][1], c.z[0][0], c.z[0][1], c.z[1][0], c.z[1][1],
		c.aloneMixed, c.aloneZ, c.aloneConv[0], c.aloneConv[1]} {
		if b != nil {
			b.Release()
		}
	}
}
