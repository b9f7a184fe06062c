package main

import (
	"fmt"
	"slices"
	"time"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/examples/internal/layerstack"
	"github.com/puremetal/puremetal/gdn"
	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/internal/floats"
	"github.com/puremetal/puremetal/kernels"
	"github.com/puremetal/puremetal/mtl"
)

// A backend keeps every layer's pool of states and runs batches on it.
type backend interface {
	// Describe says what runs the kernels.
	Describe() string
	// Open makes a pool of nSlots zeroed states of the shape one (one
	// sequence of one layer) for every layer.
	Open(one spec.Params, layers, nSlots int) error
	// Reset zeroes state slot of every layer's pool.
	Reset(slot int)
	// Run runs one dispatch of kern per layer, in one command buffer,
	// over the batch p: in[l] holds layer l's activations, slots and
	// cu_seqlens (its StateIn is unused: the states are the pools'). It
	// returns every layer's output and the wall clock it took.
	Run(kern gdn.Kernel, p spec.Params, in []cpuref.Inputs) ([][]float32, time.Duration, error)
	// Alone runs one dispatch of kern for one sequence with its own state
	// (in.StateIn; no pool, no packing) and returns its output and new
	// state.
	Alone(kern gdn.Kernel, p spec.Params, in cpuref.Inputs) (out, state []float32, err error)
	// State returns a copy of state slot of layer l's pool.
	State(l, slot int) []float32
	Close()
}

// cpuBackend runs cpuref.Reference32, which takes slots and cu_seqlens.
type cpuBackend struct {
	state int // elements of one state
	pools [][]float32
}

func (c *cpuBackend) Describe() string {
	return "cpu: cpuref.Reference32 with slots and cu_seqlens, float32 in the kernels' per-element order, on the CPU"
}

func (c *cpuBackend) Open(one spec.Params, layers, nSlots int) error {
	c.state = one.StateLen()
	c.pools = make([][]float32, layers)
	for l := range c.pools {
		c.pools[l] = make([]float32, nSlots*c.state)
	}
	return nil
}

func (c *cpuBackend) Reset(slot int) {
	for _, pool := range c.pools {
		clear(pool[slot*c.state : (slot+1)*c.state])
	}
}

func (c *cpuBackend) Run(_ gdn.Kernel, p spec.Params, in []cpuref.Inputs) ([][]float32, time.Duration, error) {
	start := time.Now()
	out := make([][]float32, len(in))
	for l, x := range in {
		x.StateIn = c.pools[l]
		r, err := cpuref.Reference32(p, x, false)
		if err != nil {
			return nil, 0, fmt.Errorf("layer %d: %w", l, err)
		}
		out[l], c.pools[l] = r.Output, r.StateOut
	}
	return out, time.Since(start), nil
}

func (c *cpuBackend) Alone(_ gdn.Kernel, p spec.Params, in cpuref.Inputs) ([]float32, []float32, error) {
	r, err := cpuref.Reference32(p, in, false)
	return r.Output, r.StateOut, err
}

func (c *cpuBackend) State(l, slot int) []float32 {
	return slices.Clone(c.pools[l][slot*c.state : (slot+1)*c.state])
}

func (c *cpuBackend) Close() {}

// deviceBackend runs the kernels on a Metal device (the GPU or the
// emulated one). Every layer's pool is one shared buffer the kernels read
// and write in place; the activations, slots and cu_seqlens of a batch go
// through shared buffers the CPU writes before each commit, grown as the
// batches need.
type deviceBackend struct {
	d     *layerstack.Device
	state int // elements of one state
	pools []*mtl.Buffer
	// scratch[l] holds layer l's activations of the batch being run.
	scratch []*scratch
	alone   *scratch
}

func (b *deviceBackend) Describe() string { return b.d.Desc }

func (b *deviceBackend) Open(one spec.Params, layers, nSlots int) error {
	nsg := one.DK / 32
	if _, err := b.d.Compile(kernels.Prefill, kernels.Decode(nsg)); err != nil {
		return err
	}
	b.state = one.StateLen()
	for range layers {
		buf, err := b.d.Dev.NewBuffer(4*nSlots*b.state, mtl.ResourceStorageModeShared)
		if err != nil {
			return err
		}
		b.pools = append(b.pools, buf)
		b.scratch = append(b.scratch, &scratch{dev: b.d.Dev})
	}
	b.alone = &scratch{dev: b.d.Dev}
	return nil
}

func (b *deviceBackend) Reset(slot int) {
	for _, pool := range b.pools {
		clear(mtl.Slice[float32](pool)[slot*b.state : (slot+1)*b.state])
	}
}

// dispatch encodes kern with p and bufs.
func (b *deviceBackend) dispatch(enc *mtl.ComputeCommandEncoder, kern gdn.Kernel, p spec.Params, bufs gdn.Buffers) error {
	if kern == gdn.KernelPrefill {
		return b.d.Kernels.Prefill(enc, p, bufs)
	}
	return b.d.Kernels.Decode(enc, p, bufs)
}

func (b *deviceBackend) Run(kern gdn.Kernel, p spec.Params, in []cpuref.Inputs) ([][]float32, time.Duration, error) {
	views := make([]gdn.Buffers, len(in))
	for l, x := range in {
		bufs, err := b.scratch[l].write(p, x)
		if err != nil {
			return nil, 0, err
		}
		pool := gdn.F32View(b.pools[l], 0, p.StateLen())
		bufs.StateIn, bufs.StateOut = pool, pool // in place
		views[l] = bufs
	}
	start := time.Now()
	err := b.d.Queue.Run(func(enc *mtl.ComputeCommandEncoder) error {
		for l := range in {
			if err := b.dispatch(enc, kern, p, views[l]); err != nil {
				return fmt.Errorf("layer %d: %w", l, err)
			}
		}
		return nil
	})
	took := time.Since(start)
	if err != nil {
		return nil, 0, err
	}
	out := make([][]float32, len(in))
	for l := range in {
		out[l] = b.scratch[l].output(p)
	}
	return out, took, nil
}

func (b *deviceBackend) Alone(kern gdn.Kernel, p spec.Params, in cpuref.Inputs) ([]float32, []float32, error) {
	bufs, err := b.alone.write(p, in)
	if err != nil {
		return nil, nil, err
	}
	state, err := b.d.Dev.NewBufferWithBytes(floats.Bytes(in.StateIn...), mtl.ResourceStorageModeShared)
	if err != nil {
		return nil, nil, err
	}
	defer state.Release()
	bufs.StateIn = gdn.F32View(state, 0, len(in.StateIn))
	bufs.StateOut = bufs.StateIn
	if err := b.d.Queue.Run(func(enc *mtl.ComputeCommandEncoder) error { return b.dispatch(enc, kern, p, bufs) }); err != nil {
		return nil, nil, err
	}
	return b.alone.output(p), slices.Clone(mtl.Slice[float32](state)), nil
}

func (b *deviceBackend) State(l, slot int) []float32 {
	return slices.Clone(mtl.Slice[float32](b.pools[l])[slot*b.state : (slot+1)*b.state])
}

func (b *deviceBackend) Close() {
	for _, buf := range b.pools {
		buf.Release()
	}
	for _, s := range append(b.scratch, b.alone) {
		if s != nil {
			s.release()
		}
	}
	b.d.Close()
}

// scratch holds the shared buffers of one dispatch's activations, slots
// and cu_seqlens, grown when a batch needs more.
type scratch struct {
	dev  *mtl.Device
	bufs [8]*mtl.Buffer // q, k, v, g, beta, output, slots, cu_seqlens
}

// write copies x into the buffers, growing them as p needs, and returns
// the views of p (the state views unset).
func (s *scratch) write(p spec.Params, x cpuref.Inputs) (gdn.Buffers, error) {
	lens := [8]int{p.QKLen(), p.QKLen(), p.VLen(), p.GateLen(), p.GateLen(), p.VLen(), p.SlotsLen(), p.CuSeqlensLen()}
	for i, n := range lens {
		if s.bufs[i] != nil && s.bufs[i].Length() >= 4*n {
			continue
		}
		if s.bufs[i] != nil {
			s.bufs[i].Release()
		}
		buf, err := s.dev.NewBuffer(4*max(n, 1), mtl.ResourceStorageModeShared)
		if err != nil {
			return gdn.Buffers{}, err
		}
		s.bufs[i] = buf
	}
	for i, src := range [][]float32{x.Q, x.K, x.V, x.G, x.Beta} {
		copy(mtl.Slice[float32](s.bufs[i]), src)
	}
	copy(mtl.Slice[int32](s.bufs[6]), x.Slots)
	copy(mtl.Slice[int32](s.bufs[7]), x.CuSeqlens)
	floats.Poison(mtl.Slice[float32](s.bufs[5])[:lens[5]])
	b := gdn.Buffers{
		Q: gdn.F32View(s.bufs[0], 0, lens[0]), K: gdn.F32View(s.bufs[1], 0, lens[1]),
		V: gdn.F32View(s.bufs[2], 0, lens[2]), G: gdn.F32View(s.bufs[3], 0, lens[3]),
		Beta: gdn.F32View(s.bufs[4], 0, lens[4]), Output: gdn.F32View(s.bufs[5], 0, lens[5]),
	}
	if lens[6] > 0 {
		b.Slots = gdn.I32View(s.bufs[6], 0, lens[6])
	}
	if lens[7] > 0 {
		b.CuSeqlens = gdn.I32View(s.bufs[7], 0, lens[7])
	}
	return b, nil
}

// output returns a copy of the output of the dispatch p ran.
func (s *scratch) output(p spec.Params) []float32 {
	return slices.Clone(mtl.Slice[float32](s.bufs[5])[:p.VLen()])
}

func (s *scratch) release() {
	for _, b := range s.bufs {
		if b != nil {
			b.Release()
		}
	}
}
