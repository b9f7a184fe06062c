// Package layerstack holds what the example programs share to run a stack
// of Gated DeltaNet layers: their command line (Command, the flags they take),
// the devices they open (with the emulated device's smaller defaults) and
// the command buffer of one dispatch per layer they run on them, the seeds
// of every layer's inputs and the tokens of a run, the activation buffers
// each layer's q, k, v, g, beta and output go through, every layer's pool
// of states, and the latency figures they report.
package layerstack

import (
	"fmt"
	"slices"
	"time"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/gdn"
	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/mtl"
)

// Bounds of the examples' checks, relative to the largest magnitude of the
// reference (see cpuref.MaxRelErr).
const (
	// Bound is the largest error of an f32 result against
	// cpuref.Reference32 that the examples accept: SPEC.md section 9's
	// float32 bound.
	Bound = spec.TolF32
	// BoundBF16 and BoundF16 are SPEC.md section 9's bounds on a 16-bit
	// result: an output of that type, and a 16-bit state after one token.
	BoundBF16 = spec.TolBF16
	BoundF16  = spec.TolF16
)

// BoundOf returns the bound on a result of type t: BoundBF16 or BoundF16,
// and f32 for an f32 one.
func BoundOf(t spec.ElemType, f32 float64) float64 {
	switch t {
	case spec.BF16:
		return BoundBF16
	case spec.F16:
		return BoundF16
	}
	return f32
}

// Types says what the buffers of p hold and in which types, and what the
// kernel computes itself: "bf16 activations (q, k, v, a, b, output), f32
// state; fused step: ..."; with the layer core's convolution mixed_qkv
// replaces q, k and v (the kernel makes them), and with its norm z is
// among the activations.
func Types(p spec.Params) string {
	g, b := "g", "beta"
	if p.Fused.Gate {
		g = "a"
	}
	if p.Fused.Beta {
		b = "b"
	}
	ins := "q, k, v"
	fused := "unfused: q and k normalised and g, beta computed beforehand (here on the CPU)"
	if p.Fused == spec.FusedAll {
		fused = "fused step: raw q, k, a and b in, with A_log and dt_bias; the kernel normalises q and k and computes g and beta"
	}
	if p.Core.Conv > 0 {
		// The layer core: q, k and v are made in the kernel, from mixed_qkv.
		ins = "mixed_qkv"
		fused = "unfused: g and beta computed beforehand (here on the CPU); the kernel convolves mixed_qkv into q, k and v and takes q and k as the convolution makes them"
		if p.Fused == spec.FusedAll {
			fused = "fused step: mixed_qkv, a and b in, with A_log and dt_bias; the kernel convolves mixed_qkv into q, k and v, normalises q and k and computes g and beta"
		}
	}
	if p.Core.Norm {
		ins += ", z"
	}
	return fmt.Sprintf("%s activations (%s, %s, %s, output), %s state; %s", p.Activation, ins, g, b, p.State, fused)
}

// Constants returns what each of layers layers starts from, drawn with
// cpuref.RandomInputs for p from the run's seed (at t = -1, see [Seed]):
// an initial state (StateIn, in p's state type) and, with the layer core's
// convolution, an initial conv state (ConvState, as a prefill would leave
// it); and what every token of the layer shares: with the fused gate its
// A_log and dt_bias, with the layer core its conv and norm weights.
func Constants(p spec.Params, seed uint64, layers int) ([]cpuref.Inputs, error) {
	consts := make([]cpuref.Inputs, layers)
	for l := range consts {
		in, err := cpuref.RandomInputs(p, Seed(seed, l, -1))
		if err != nil {
			return nil, err
		}
		consts[l] = cpuref.Inputs{StateIn: in.StateIn, ConvState: in.ConvState, ALog: in.ALog, DtBias: in.DtBias, ConvWeight: in.ConvWeight, NormWeight: in.NormWeight}
	}
	return consts, nil
}

// WithConstants returns in with the layer's own values of c (one layer's
// [Constants]): A_log and dt_bias, the conv and norm weights; and without
// a state or a conv state (StateIn, ConvState), which are the pools'.
func WithConstants(in, c cpuref.Inputs) cpuref.Inputs {
	in.StateIn, in.ConvState = nil, nil
	in.ALog, in.DtBias = c.ALog, c.DtBias
	in.ConvWeight, in.NormWeight = c.ConvWeight, c.NormWeight
	return in
}

// Seed derives the seed of layer l's inputs at step t (a token or a draft
// window; t = -1: the layer's initial state) from the run's seed, with the
// SplitMix64 finaliser.
func Seed(run uint64, l, t int) uint64 {
	x := run ^ uint64(l+1)*0x9e3779b97f4a7c15 ^ uint64(t+2)*0xbf58476d1ce4e5b9
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// Tokens returns tokens [t0, t0+n) of in's q, k, v, g and beta (and the
// layer core's mixed_qkv and z), in in's memory, each token of the shape
// one (one token of one sequence), with in's A_log and dt_bias (and conv
// and norm weights), which are the layer's, no token's.
func Tokens(one spec.Params, in cpuref.Inputs, t0, n int) cpuref.Inputs {
	qk, v, gate := one.QKLen(), one.VLen(), one.GateLen()
	// tokens returns tokens [t0, t0+n) of x, w elements each; nothing of
	// an empty x (q, k and v with the convolution, the core's views
	// without the core).
	tokens := func(x []float32, w int) []float32 {
		if len(x) == 0 {
			return nil
		}
		return x[t0*w : (t0+n)*w]
	}
	return cpuref.Inputs{
		Q: tokens(in.Q, qk), K: tokens(in.K, qk), V: tokens(in.V, v),
		G: in.G[t0*gate : (t0+n)*gate], Beta: in.Beta[t0*gate : (t0+n)*gate],
		ALog: in.ALog, DtBias: in.DtBias,
		MixedQKV: tokens(in.MixedQKV, one.MixedLen()), Z: tokens(in.Z, one.ZLen()),
		ConvWeight: in.ConvWeight, NormWeight: in.NormWeight,
	}
}

// AppendTokens appends the tokens of in (its q, k, v, g and beta, and
// the layer core's mixed_qkv and z) to those of dst.
func AppendTokens(dst *cpuref.Inputs, in cpuref.Inputs) {
	dst.MixedQKV = append(dst.MixedQKV, in.MixedQKV...)
	dst.Z = append(dst.Z, in.Z...)
	dst.Q = append(dst.Q, in.Q...)
	dst.K = append(dst.K, in.K...)
	dst.V = append(dst.V, in.V...)
	dst.G = append(dst.G, in.G...)
	dst.Beta = append(dst.Beta, in.Beta...)
}

// Activations are the per-token buffers of a stack of layers: one shared
// buffer each for q, k, v, g, beta and the output, with layer l's window
// of tokens at offset l * (one window), in the activation type of the
// window's parameters. With the fused gate (Params.Fused.Gate) g and beta
// hold the raw projections a and b, and two more buffers hold every
// layer's A_log and dt_bias ([n_v_heads] f32 each, layer l at offset l *
// n_v_heads); a window of a pool (Params.NSlots) has its slots, and a
// window of packed sequences (Params.Varlen) its cu_seqlens, in two more
// (int32, layer l at offset l * (one window's)). In an engine the layers'
// projections write q, k, v, g and beta on the device; the examples write
// them from the CPU before each commit.
type Activations struct {
	dev                      *mtl.Device
	layers                   int
	p                        spec.Params // one layer's window
	q, k, v, g, beta, output *mtl.Buffer
	aLog, dtBias             *mtl.Buffer // with p.Fused.Gate
	slots, cuSeqlens         *mtl.Buffer // with p.NSlots, p.Varlen
}

// NewActivations allocates the activations of layers layers, each a window
// of the shape, activation type and fused parts of p.
func NewActivations(dev *mtl.Device, p spec.Params, layers int) (*Activations, error) {
	a := &Activations{dev: dev, layers: layers}
	if err := a.Reshape(p); err != nil {
		a.Release()
		return nil, err
	}
	return a, nil
}

// Reshape makes every layer's window one of p, as for [NewActivations],
// and grows the buffers too small for it; what they held is lost.
func (a *Activations) Reshape(p spec.Params) error {
	a.p = p
	for _, b := range a.parts() {
		if b.bytes == 0 || *b.buf != nil && (*b.buf).Length() >= a.layers*b.bytes {
			continue
		}
		if *b.buf != nil {
			(*b.buf).Release()
			*b.buf = nil
		}
		buf, err := a.dev.NewBuffer(a.layers*b.bytes, mtl.ResourceStorageModeShared)
		if err != nil {
			return err
		}
		*b.buf = buf
	}
	return nil
}

// part is one of the buffers and the bytes of one layer's window in it: 0
// for a part the window does not have.
type part struct {
	buf   **mtl.Buffer
	bytes int
}

// parts returns every buffer with the bytes of one window of a.p.
func (a *Activations) parts() []part {
	p := a.p
	size, gate := p.Activation.Size(), 0
	if p.Fused.Gate {
		gate = 4 * p.NVHeads
	}
	return []part{
		{&a.q, size * p.QKLen()}, {&a.k, size * p.QKLen()}, {&a.v, size * p.VLen()},
		{&a.g, size * p.GateLen()}, {&a.beta, size * p.GateLen()}, {&a.output, size * p.VLen()},
		{&a.aLog, gate}, {&a.dtBias, gate}, {&a.slots, 4 * p.SlotsLen()}, {&a.cuSeqlens, 4 * p.CuSeqlensLen()},
	}
}

// Write stores in's q, k, v, g and beta (a and b with the fused gate and
// beta) into layer l's window, rounded to the activation type; with the
// fused gate in.ALog and in.DtBias as layer l's constants; and the window's
// in.Slots and in.CuSeqlens where it has them. It poisons the window's
// output (see [Poison]), so that an element the kernel leaves unwritten
// shows.
func (a *Activations) Write(l int, in cpuref.Inputs) {
	b := a.Buffers(l)
	Store(b.Q, in.Q)
	Store(b.K, in.K)
	Store(b.V, in.V)
	Store(b.G, in.G)
	Store(b.Beta, in.Beta)
	if a.p.Fused.Gate {
		Store(b.ALog, in.ALog)
		Store(b.DtBias, in.DtBias)
	}
	for _, x := range []struct {
		view gdn.View
		src  []int32
	}{{b.Slots, in.Slots}, {b.CuSeqlens, in.CuSeqlens}} {
		if x.view.Len > 0 {
			copy(mtl.Slice[int32](x.view.Buffer)[x.view.Offset/4:][:x.view.Len], x.src)
		}
	}
	Poison(b.Output)
}

// Buffers returns the views of layer l's window: q, k, v, g, beta and the
// output; A_log and dt_bias with the fused gate; the slots and cu_seqlens
// where the window has them. The state views are the caller's to set.
func (a *Activations) Buffers(l int) gdn.Buffers {
	qk, v, gate := a.p.QKLen(), a.p.VLen(), a.p.GateLen()
	t := a.p.Activation
	view := func(b *mtl.Buffer, n int) gdn.View { return gdn.NewView(b, t.Size()*l*n, t, n) }
	b := gdn.Buffers{
		Q:      view(a.q, qk),
		K:      view(a.k, qk),
		V:      view(a.v, v),
		G:      view(a.g, gate),
		Beta:   view(a.beta, gate),
		Output: view(a.output, v),
	}
	if a.p.Fused.Gate {
		h := a.p.NVHeads
		b.ALog, b.DtBias = gdn.F32View(a.aLog, 4*l*h, h), gdn.F32View(a.dtBias, 4*l*h, h)
	}
	if n := a.p.SlotsLen(); n > 0 {
		b.Slots = gdn.I32View(a.slots, 4*l*n, n)
	}
	if n := a.p.CuSeqlensLen(); n > 0 {
		b.CuSeqlens = gdn.I32View(a.cuSeqlens, 4*l*n, n)
	}
	return b
}

// Output returns layer l's output window, in the buffer's memory; the
// activation type must be f32 (see [Activations.ReadOutput] for any).
func (a *Activations) Output(l int) []float32 {
	v := a.p.VLen()
	return mtl.Slice[float32](a.output)[l*v : (l+1)*v]
}

// ReadOutput widens layer l's output window into dst, whatever the
// activation type, and returns it.
func (a *Activations) ReadOutput(l int, dst []float32) []float32 {
	return Load(a.Buffers(l).Output, dst)
}

// Release releases the buffers.
func (a *Activations) Release() {
	for _, b := range a.parts() {
		if *b.buf != nil {
			(*b.buf).Release()
		}
	}
}

// Percentile returns the q-th percentile of d (nearest rank), 0 for none.
func Percentile(d []time.Duration, q int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := (q*len(s) + 99) / 100
	return s[max(i, 1)-1]
}

// Duration formats d in microseconds, milliseconds or seconds.
func Duration(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.1f us", float64(d)/1e3)
	case d < time.Second:
		return fmt.Sprintf("%.2f ms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}
