// Package layerstack holds what the example programs share to run a stack
// of Gated DeltaNet layers: the flags they take, the devices they open
// (with the emulated device's smaller defaults), the seeds of every layer's
// inputs, the activation buffers each layer's q, k, v, g, beta and output
// go through, and the latency figures they report.
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

// Seed derives the seed of layer l's inputs at step t (a token or a draft
// window; t = -1: the layer's initial state) from the run's seed, with the
// SplitMix64 finaliser.
func Seed(run uint64, l, t int) uint64 {
	x := run ^ uint64(l+1)*0x9e3779b97f4a7c15 ^ uint64(t+2)*0xbf58476d1ce4e5b9
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// Activations are the per-token buffers of a stack of layers: one shared
// buffer each for q, k, v, g, beta and the output, with layer l's window
// of tokens at offset l * (one window). In an engine the layers'
// projections write q, k, v, g and beta on the device; the examples write
// them from the CPU before each commit.
type Activations struct {
	p                        spec.Params // one layer's window
	q, k, v, g, beta, output *mtl.Buffer
}

// NewActivations allocates the activations of layers layers, each a window
// of the shape p.
func NewActivations(dev *mtl.Device, p spec.Params, layers int) (*Activations, error) {
	a := &Activations{p: p}
	for _, b := range []struct {
		buf **mtl.Buffer
		len int
	}{{&a.q, p.QKLen()}, {&a.k, p.QKLen()}, {&a.v, p.VLen()}, {&a.g, p.GateLen()}, {&a.beta, p.GateLen()}, {&a.output, p.VLen()}} {
		buf, err := dev.NewBuffer(4*layers*b.len, mtl.ResourceStorageModeShared)
		if err != nil {
			a.Release()
			return nil, err
		}
		*b.buf = buf
	}
	return a, nil
}

// Write copies in's q, k, v, g and beta into layer l's window.
func (a *Activations) Write(l int, in cpuref.Inputs) {
	qk, v, gate := a.p.QKLen(), a.p.VLen(), a.p.GateLen()
	copy(mtl.Slice[float32](a.q)[l*qk:], in.Q)
	copy(mtl.Slice[float32](a.k)[l*qk:], in.K)
	copy(mtl.Slice[float32](a.v)[l*v:], in.V)
	copy(mtl.Slice[float32](a.g)[l*gate:], in.G)
	copy(mtl.Slice[float32](a.beta)[l*gate:], in.Beta)
}

// Buffers returns the views of layer l's window: q, k, v, g, beta and the
// output. The state views are the caller's to set.
func (a *Activations) Buffers(l int) gdn.Buffers {
	qk, v, gate := a.p.QKLen(), a.p.VLen(), a.p.GateLen()
	return gdn.Buffers{
		Q:      gdn.F32View(a.q, 4*l*qk, qk),
		K:      gdn.F32View(a.k, 4*l*qk, qk),
		V:      gdn.F32View(a.v, 4*l*v, v),
		G:      gdn.F32View(a.g, 4*l*gate, gate),
		Beta:   gdn.F32View(a.beta, 4*l*gate, gate),
		Output: gdn.F32View(a.output, 4*l*v, v),
	}
}

// Output returns layer l's output window, in the buffer's memory.
func (a *Activations) Output(l int) []float32 {
	v := a.p.VLen()
	return mtl.Slice[float32](a.output)[l*v : (l+1)*v]
}

// Release releases the buffers.
func (a *Activations) Release() {
	for _, b := range []*mtl.Buffer{a.q, a.k, a.v, a.g, a.beta, a.output} {
		if b != nil {
			b.Release()
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
