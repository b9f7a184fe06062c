package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/examples/internal/layerstack"
	"github.com/puremetal/puremetal/gdn"
	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/mtl"
)

// A backend runs decode steps of every layer and keeps the layers' states.
type backend interface {
	// Describe says what runs the kernels.
	Describe() string
	// Init sets every layer's state before the first token: consts[l]
	// holds layer l's initial state (StateIn) and, with the fused gate,
	// its A_log and dt_bias.
	Init(p spec.Params, consts []cpuref.Inputs) error
	// Step decodes one token through every layer: in[l] holds layer l's
	// q, k, v, g and beta (or a and b) and its constants; its StateIn is
	// not used.
	Step(in []cpuref.Inputs) (stepTime, error)
	// States returns a copy of every layer's state, widened to float32.
	States() ([][]float32, error)
	// Outputs returns a copy of every layer's output of the last token.
	Outputs() ([][]float32, error)
	// Heads returns, for every layer, the last token's output of value
	// head h and, when state is set, its state, widened to float32.
	Heads(h int, state bool) (states, outputs [][]float32, err error)
	// Dispatches returns the dispatches encoded so far; -1 for a backend
	// that runs none.
	Dispatches() int
	// Timed says what the latency covers.
	Timed() string
	// Keeps says where the states live.
	Keeps() string
	// Oracle reports that the backend is cpuref.Reference32 itself, so
	// only the float64 oracle checks it.
	Oracle() bool
	Close()
}

// stepTime is the time one token took: wall clock from the start of
// encoding to the end of the wait, and the device's own time from the
// command buffer's timestamps when it has them.
type stepTime struct {
	wall      time.Duration
	device    time.Duration
	hasDevice bool
}

// cloneAll returns a copy of every slice of x.
func cloneAll(x [][]float32) [][]float32 {
	out := make([][]float32, len(x))
	for l, s := range x {
		out[l] = slices.Clone(s)
	}
	return out
}

// cpuBackend runs cpuref.Reference32 one token at a time, with the run's
// types and fused parts.
type cpuBackend struct {
	p       spec.Params
	states  [][]float32
	conv    [][]float32 // the conv states, with the layer core
	outputs [][]float32
}

func (c *cpuBackend) Describe() string {
	return "cpu: cpuref.Reference32, float32 in the kernels' per-element order, rounding to the run's types as the kernels do, on the CPU"
}

func (c *cpuBackend) Init(p spec.Params, consts []cpuref.Inputs) error {
	c.p = p
	c.states = make([][]float32, len(consts))
	c.outputs = make([][]float32, len(consts))
	c.conv = make([][]float32, len(consts))
	for l, x := range consts {
		c.states[l] = slices.Clone(x.StateIn)
		c.conv[l] = slices.Clone(x.ConvState)
	}
	return nil
}

func (c *cpuBackend) Step(in []cpuref.Inputs) (stepTime, error) {
	if len(in) != len(c.states) {
		return stepTime{}, fmt.Errorf("%d layers of inputs for %d layers", len(in), len(c.states))
	}
	start := time.Now()
	for l := range in {
		x := in[l]
		x.StateIn, x.ConvState = c.states[l], c.conv[l]
		r, err := cpuref.Reference32(c.p, x, false)
		if err != nil {
			return stepTime{}, fmt.Errorf("layer %d: %w", l, err)
		}
		c.states[l], c.conv[l], c.outputs[l] = r.StateOut, r.ConvState, r.Output
	}
	return stepTime{wall: time.Since(start)}, nil
}

func (c *cpuBackend) States() ([][]float32, error)  { return cloneAll(c.states), nil }
func (c *cpuBackend) Outputs() ([][]float32, error) { return cloneAll(c.outputs), nil }

func (c *cpuBackend) Heads(h int, state bool) (states, outputs [][]float32, err error) {
	cells := c.p.DK * c.p.DV
	for l := range c.states {
		if state {
			states = append(states, slices.Clone(c.states[l][h*cells:(h+1)*cells]))
		}
		outputs = append(outputs, slices.Clone(c.outputs[l][h*c.p.DV:(h+1)*c.p.DV]))
	}
	return states, outputs, nil
}

func (c *cpuBackend) Dispatches() int { return -1 }
func (c *cpuBackend) Timed() string   { return "wall clock of the layers' Reference32 calls" }
func (c *cpuBackend) Oracle() bool    { return true }
func (c *cpuBackend) Keeps() string {
	return "kept in Go slices, rounded to the state type once per token"
}
func (c *cpuBackend) Close() {}

// deviceBackend runs the decode kernel on a Metal device (the GPU or the
// emulated one).
type deviceBackend struct {
	log        io.Writer // where it says what it compiles
	d          *layerstack.Device
	p          gdn.Params
	entry      string        // the entry point of the decode kernel Kernels.Decode picks
	compile    time.Duration // time to get the decode pipeline state
	dispatches int

	// Per-layer activations live in one shared buffer each, layer l at
	// offset l * (one layer's bytes): q, k, v, g, beta (or a and b) and
	// the output, in the activation type, and with the fused gate A_log
	// and dt_bias. In an engine the layer's projections write them on
	// the device; here the CPU writes them before each token's commit.
	acts *layerstack.Activations
	// Every layer's state, a pool of one in the state type, read and
	// written in place every token.
	states *layerstack.States
	layers int
	// With the layer core, per layer: mixed_qkv and z (written every
	// token), the conv weight and norm weight, and the conv state in two
	// buffers that swap every token (so that Kernels.DecodeCore keeps one
	// threadgroup per value head: one sequence alone fills the device
	// better that way than with the in-place geometry's one per key head).
	core     []coreViews
	tokens   int
	coreBufs []*mtl.Buffer
}

// coreViews are one layer's views of the layer core.
type coreViews struct {
	mixed, z, convW, normW gdn.View
	conv                   [2]gdn.View
}

func (b *deviceBackend) Describe() string { return b.d.Desc }
func (b *deviceBackend) Oracle() bool     { return false }
func (b *deviceBackend) Dispatches() int  { return b.dispatches }
func (b *deviceBackend) Keeps() string    { return "kept on the device and updated in place" }

func (b *deviceBackend) Timed() string {
	return "wall clock from encoding to the end of the wait, one command buffer per token"
}

func (b *deviceBackend) Init(p spec.Params, consts []cpuref.Inputs) error {
	b.p = p
	b.layers = len(consts)
	var err error
	if b.acts, err = layerstack.NewActivations(b.d.Dev, p, b.layers); err != nil {
		return err
	}
	if b.states, err = layerstack.NewStates(b.d.Dev, p, b.layers, 1); err != nil {
		return err
	}
	for l, x := range consts {
		b.states.Set(l, 0, x.StateIn)
	}
	if p.Core != (spec.Core{}) {
		return b.initCore(p, consts)
	}
	// The pipelines Kernels.Decode will pick for the layers' views (the
	// packed kernel where it applies), made before the first token.
	var entries []string
	for l := range b.layers {
		entry, err := gdn.EntryPoint(gdn.DecodeKernel(p, b.buffers(l)), p)
		if err != nil {
			return err
		}
		if !slices.Contains(entries, entry) {
			entries = append(entries, entry)
		}
	}
	b.entry = strings.Join(entries, " and ")
	b.compile, err = b.d.Compile(b.log, entries...)
	return err
}

// initCore allocates and fills the layer core's views of every layer and
// makes the core kernel's pipeline.
func (b *deviceBackend) initCore(p spec.Params, consts []cpuref.Inputs) error {
	a := p.Activation
	view := func(n int, x []float32) (gdn.View, error) {
		buf, err := b.d.Dev.NewBuffer(n*a.Size(), mtl.ResourceStorageModeShared)
		if err != nil {
			return gdn.View{}, err
		}
		b.coreBufs = append(b.coreBufs, buf)
		v := gdn.NewView(buf, 0, a, n)
		layerstack.Store(v, x)
		return v, nil
	}
	b.core = make([]coreViews, b.layers)
	for l, x := range consts {
		c := &b.core[l]
		var errs [6]error
		c.mixed, errs[0] = view(p.MixedLen(), nil)
		c.z, errs[1] = view(p.ZLen(), nil)
		c.convW, errs[2] = view(p.ConvWeightLen(), x.ConvWeight)
		c.normW, errs[3] = view(p.DV, x.NormWeight)
		c.conv[0], errs[4] = view(p.ConvStateLen(), x.ConvState)
		c.conv[1], errs[5] = view(p.ConvStateLen(), nil)
		if err := errors.Join(errs[:]...); err != nil {
			return err
		}
	}
	entry, err := gdn.DecodeCoreEntryPoint(p)
	if err != nil {
		return err
	}
	b.entry = entry
	b.compile, err = b.d.Compile(b.log, entry)
	return err
}

// coreBuffers returns layer l's views for the core kernel at token t.
func (b *deviceBackend) coreBuffers(l, t int) (gdn.Buffers, gdn.CoreBuffers) {
	bufs := b.buffers(l)
	bufs.Q, bufs.K, bufs.V = gdn.View{}, gdn.View{}, gdn.View{} // the convolution makes them
	c := b.core[l]
	return bufs, gdn.CoreBuffers{MixedQKV: c.mixed, ConvWeight: c.convW, ConvStateIn: c.conv[t%2], ConvStateOut: c.conv[(t+1)%2],
		Z: c.z, NormWeight: c.normW}
}

// stepCore runs one command buffer: one core dispatch per layer.
func (b *deviceBackend) stepCore(in []cpuref.Inputs) (stepTime, error) {
	for l, x := range in {
		b.acts.Write(l, x)
		layerstack.Store(b.core[l].mixed, x.MixedQKV)
		layerstack.Store(b.core[l].z, x.Z)
	}
	start := time.Now()
	seconds, err := b.d.Queue.RunTimed(func(enc *mtl.ComputeCommandEncoder) error {
		for l := range b.layers {
			bufs, core := b.coreBuffers(l, b.tokens)
			if err := b.d.Kernels.DecodeCore(enc, b.p, bufs, core); err != nil {
				return fmt.Errorf("layer %d: %w", l, err)
			}
		}
		return nil
	})
	wall := time.Since(start)
	if err != nil {
		return stepTime{}, err
	}
	b.tokens++
	b.dispatches += b.layers
	st := stepTime{wall: wall, hasDevice: b.d.GPU}
	if b.d.GPU {
		st.device = time.Duration(seconds * 1e9)
	}
	return st, nil
}

// buffers returns layer l's views.
func (b *deviceBackend) buffers(l int) gdn.Buffers {
	bufs := b.acts.Buffers(l)
	st := b.states.Pool(l)
	bufs.StateIn, bufs.StateOut = st, st // in place
	return bufs
}

// Step runs one command buffer: one decode dispatch per layer, one commit,
// one wait.
func (b *deviceBackend) Step(in []cpuref.Inputs) (stepTime, error) {
	if len(in) != b.layers {
		return stepTime{}, fmt.Errorf("%d layers of inputs for %d layers", len(in), b.layers)
	}
	if b.core != nil {
		return b.stepCore(in)
	}
	for l, x := range in {
		b.acts.Write(l, x)
	}
	wall, gpu, err := b.d.RunLayers((*gdn.Kernels).Decode, b.p, b.layers, b.buffers)
	if err != nil {
		return stepTime{}, err
	}
	b.dispatches += b.layers
	return stepTime{wall: wall, device: gpu, hasDevice: b.d.GPU}, nil
}

func (b *deviceBackend) States() ([][]float32, error) {
	out := make([][]float32, b.layers)
	for l := range out {
		out[l] = b.states.Read(l, 0)
	}
	return out, nil
}

func (b *deviceBackend) Outputs() ([][]float32, error) {
	out := make([][]float32, b.layers)
	for l := range out {
		out[l] = b.acts.ReadOutput(l, make([]float32, b.p.VLen()))
	}
	return out, nil
}

func (b *deviceBackend) Heads(h int, state bool) (states, outputs [][]float32, err error) {
	// head widens value head h's part of v, n elements a head.
	head := func(v gdn.View, n int) []float32 {
		return layerstack.Load(gdn.NewView(v.Buffer, v.Offset+h*n*v.Type.Size(), v.Type, n), make([]float32, n))
	}
	for l := range b.layers {
		if state {
			states = append(states, head(b.states.Slot(l, 0), b.p.DK*b.p.DV))
		}
		outputs = append(outputs, head(b.acts.Buffers(l).Output, b.p.DV))
	}
	return states, outputs, nil
}

func (b *deviceBackend) Close() {
	if b.acts != nil {
		b.acts.Release()
	}
	if b.states != nil {
		b.states.Release()
	}
	for _, buf := range b.coreBufs {
		buf.Release()
	}
	b.d.Close()
}
