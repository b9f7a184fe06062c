package main

import (
	"fmt"
	"slices"
	"time"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/examples/internal/layerstack"
	"github.com/puremetal/puremetal/gdn"
	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/mtl"
)

// A backend keeps every layer's pool of states and runs batches on it.
type backend interface {
	// Describe says what runs the kernels.
	Describe() string
	// Open makes a pool of nSlots zeroed states of the shape one (one
	// sequence of one layer) for every layer of consts, which hold each
	// layer's conv and norm weights with the layer core (one.Core), and
	// with the convolution a pool of nSlots zeroed conv states too.
	Open(one spec.Params, consts []cpuref.Inputs, nSlots int) error
	// Reset zeroes state slot (and conv state slot) of every layer's pool.
	Reset(slot int)
	// Run runs one dispatch of kern per layer, in one command buffer,
	// over the batch p: in[l] holds layer l's activations, slots and
	// cu_seqlens (its StateIn is unused: the states are the pools'). It
	// returns every layer's output and the wall clock it took.
	Run(kern gdn.Kernel, p spec.Params, in []cpuref.Inputs) ([][]float32, time.Duration, error)
	// Alone runs one dispatch of kern (KernelPrefill: the kernel
	// Kernels.Prefill picks; KernelPrefillChunked, KernelDecode) for one
	// sequence with its own state (in.StateIn; no pool, no packing) and
	// returns its output and new state, and with the convolution its
	// new conv state (from in.ConvState), as layer l.
	Alone(kern gdn.Kernel, p spec.Params, l int, in cpuref.Inputs) (out, state, conv []float32, err error)
	// State returns a copy of state slot of layer l's pool.
	State(l, slot int) []float32
	// ConvState returns a copy of conv state slot of layer l's pool; nil
	// without the convolution.
	ConvState(l, slot int) []float32
	Close()
}

// cpuBackend runs cpuref.Reference32, which takes slots and cu_seqlens.
type cpuBackend struct {
	state int // elements of one state
	pools [][]float32
	conv  int // elements of one conv state; 0 without the convolution
	convs [][]float32
}

func (c *cpuBackend) Describe() string {
	return "cpu: cpuref.Reference32 with slots and cu_seqlens, float32 in the kernels' per-element order, rounding to the run's types as the kernels do, on the CPU"
}

func (c *cpuBackend) Open(one spec.Params, consts []cpuref.Inputs, nSlots int) error {
	c.state = one.StateLen()
	c.pools = make([][]float32, len(consts))
	c.convs = make([][]float32, len(consts))
	if one.Core.Conv > 0 {
		c.conv = one.ConvStateLen()
	}
	for l := range c.pools {
		c.pools[l] = make([]float32, nSlots*c.state)
		c.convs[l] = make([]float32, nSlots*c.conv)
	}
	return nil
}

func (c *cpuBackend) Reset(slot int) {
	for l, pool := range c.pools {
		clear(pool[slot*c.state : (slot+1)*c.state])
		clear(c.convs[l][slot*c.conv : (slot+1)*c.conv])
	}
}

func (c *cpuBackend) Run(_ gdn.Kernel, p spec.Params, in []cpuref.Inputs) ([][]float32, time.Duration, error) {
	start := time.Now()
	out := make([][]float32, len(in))
	for l, x := range in {
		x.StateIn = c.pools[l]
		if c.conv > 0 {
			x.ConvState = c.convs[l]
		}
		r, err := cpuref.Reference32(p, x, false)
		if err != nil {
			return nil, 0, fmt.Errorf("layer %d: %w", l, err)
		}
		out[l], c.pools[l] = r.Output, r.StateOut
		if c.conv > 0 {
			c.convs[l] = r.ConvState
		}
	}
	return out, time.Since(start), nil
}

func (c *cpuBackend) Alone(_ gdn.Kernel, p spec.Params, _ int, in cpuref.Inputs) ([]float32, []float32, []float32, error) {
	r, err := cpuref.Reference32(p, in, false)
	return r.Output, r.StateOut, r.ConvState, err
}

func (c *cpuBackend) State(l, slot int) []float32 {
	return slices.Clone(c.pools[l][slot*c.state : (slot+1)*c.state])
}

func (c *cpuBackend) ConvState(l, slot int) []float32 {
	if c.conv == 0 {
		return nil
	}
	return slices.Clone(c.convs[l][slot*c.conv : (slot+1)*c.conv])
}

func (c *cpuBackend) Close() {}

// deviceBackend runs the kernels on a Metal device (the GPU or the
// emulated one). Every layer's pool is one shared buffer the kernels read
// and write in place; the activations, slots and cu_seqlens of a batch go
// through shared buffers the CPU writes before each commit, grown as the
// batches need.
type deviceBackend struct {
	d      *layerstack.Device
	states *layerstack.States
	// acts holds every layer's activations of the batch being run, alone
	// those of the one sequence Alone runs.
	acts, alone *layerstack.Activations
	// sets are the buffers of the overlapped steps (overlap.go): two sets,
	// one being written while the other's step runs, each with a prefill
	// and a decode batch's.
	sets   [2][2]*layerstack.Activations
	layers int
	// core holds the conv-state pools and the core's weights with the
	// layer core (core.go); nil for the step alone.
	core *corePools
}

func (b *deviceBackend) Describe() string { return b.d.Desc }

func (b *deviceBackend) Open(one spec.Params, consts []cpuref.Inputs, nSlots int) error {
	layers := len(consts)
	if one.Core != (spec.Core{}) {
		// The one pipeline every batch runs: Kernels.DecodeCore, for a decode
		// step, a window and a packed prefill alike.
		entry, err := gdn.DecodeCoreEntryPoint(one)
		if err != nil {
			return err
		}
		if _, err := b.d.Registry.Pipeline(b.d.Dev, entry); err != nil {
			return err
		}
		b.layers = layers
		// The states and, slot for slot, the conv states.
		if b.states, err = layerstack.NewStates(b.d.Dev, one, layers, nSlots); err != nil {
			return err
		}
		if b.core, err = newCorePools(b.d.Dev, one, consts, b.states, nSlots); err != nil {
			return err
		}
		b.core.measure = !b.d.GPU
		if b.acts, err = layerstack.NewActivations(b.d.Dev, one, layers); err != nil {
			return err
		}
		b.alone, err = layerstack.NewActivations(b.d.Dev, one, 1)
		return err
	}
	// The pipelines the batches will run, made before the first step: the
	// prefill kernels Kernels.Prefill picks below and from
	// gdn.ChunkedMinTokens tokens, and the decode kernel Kernels.Decode
	// picks for one token (views at the start of their buffers).
	long := one
	long.NTokens = gdn.ChunkedMinTokens
	for _, k := range []struct {
		kern gdn.Kernel
		p    spec.Params
	}{{gdn.PrefillKernel(one, gdn.Buffers{}), one}, {gdn.PrefillKernel(long, gdn.Buffers{}), long}, {gdn.DecodeKernel(one, gdn.Buffers{}), one}} {
		if err := b.d.Kernels.Prepare(k.kern, k.p); err != nil {
			return err
		}
	}
	b.layers = layers
	var err error
	if b.states, err = layerstack.NewStates(b.d.Dev, one, layers, nSlots); err != nil {
		return err
	}
	if b.acts, err = layerstack.NewActivations(b.d.Dev, one, layers); err != nil {
		return err
	}
	b.alone, err = layerstack.NewActivations(b.d.Dev, one, 1)
	return err
}

func (b *deviceBackend) Reset(slot int) { b.states.Reset(slot) } // the conv state too

// dispatcher returns the dispatcher of kern: Prefill, PrefillChunked or
// Decode.
func dispatcher(kern gdn.Kernel) layerstack.Dispatcher {
	switch kern {
	case gdn.KernelPrefill:
		return (*gdn.Kernels).Prefill
	case gdn.KernelPrefillChunked:
		return (*gdn.Kernels).PrefillChunked
	}
	return (*gdn.Kernels).Decode
}

func (b *deviceBackend) Run(kern gdn.Kernel, p spec.Params, in []cpuref.Inputs) ([][]float32, time.Duration, error) {
	if err := b.acts.Reshape(p); err != nil {
		return nil, 0, err
	}
	views := make([]gdn.Buffers, len(in))
	for l, x := range in {
		b.acts.Write(l, x)
		views[l] = b.acts.Buffers(l)
		pool := b.states.Pool(l)
		views[l].StateIn, views[l].StateOut = pool, pool // in place
	}
	var took time.Duration
	if b.core != nil {
		if err := b.core.stage(b.d.Dev, 0, 0, p, in); err != nil {
			return nil, 0, err
		}
		// Submitted and waited for, as the overlapped loop does: the
		// counting handler runs before the step is done (core.go).
		start := time.Now()
		sub, err := b.d.Submit(p, func(cb *mtl.CommandBuffer) error {
			return b.core.encode(b.d.Kernels, cb, 0, 0, p, func(l int) gdn.Buffers { return views[l] })
		})
		if err != nil {
			return nil, 0, err
		}
		if _, err := sub.Wait(); err != nil {
			return nil, 0, err
		}
		took = time.Since(start)
	} else {
		var err error
		if took, _, err = b.d.RunLayers(dispatcher(kern), p, len(in), func(l int) gdn.Buffers { return views[l] }); err != nil {
			return nil, 0, err
		}
	}
	out := make([][]float32, len(in))
	for l := range in {
		out[l] = b.acts.ReadOutput(l, make([]float32, p.VLen()))
	}
	return out, took, nil
}

func (b *deviceBackend) Alone(kern gdn.Kernel, p spec.Params, l int, in cpuref.Inputs) ([]float32, []float32, []float32, error) {
	if err := b.alone.Reshape(p); err != nil {
		return nil, nil, nil, err
	}
	b.alone.Write(0, in)
	state, err := layerstack.NewStates(b.d.Dev, p, 1, 1)
	if err != nil {
		return nil, nil, nil, err
	}
	defer state.Release()
	state.Set(0, 0, in.StateIn)
	bufs := b.alone.Buffers(0)
	bufs.StateIn, bufs.StateOut = state.Pool(0), state.Pool(0)
	var conv []float32
	if b.core != nil {
		conv, err = b.core.alone(b.d, p, l, in, bufs)
	} else {
		_, _, err = b.d.RunLayers(dispatcher(kern), p, 1, func(int) gdn.Buffers { return bufs })
	}
	if err != nil {
		return nil, nil, nil, err
	}
	return b.alone.ReadOutput(0, make([]float32, p.VLen())), state.Read(0, 0), conv, nil
}

func (b *deviceBackend) State(l, slot int) []float32 { return b.states.Read(l, slot) }

func (b *deviceBackend) ConvState(l, slot int) []float32 {
	if b.core == nil {
		return nil
	}
	return b.states.ReadConv(l, slot)
}

func (b *deviceBackend) Close() {
	for _, a := range []*layerstack.Activations{b.acts, b.alone, b.sets[0][0], b.sets[0][1], b.sets[1][0], b.sets[1][1]} {
		if a != nil {
			a.Release()
		}
	}
	if b.states != nil {
		b.states.Release()
	}
	if b.core != nil {
		b.core.Release()
	}
	b.d.Close()
}
