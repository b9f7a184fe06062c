package gdn_test

import (
	"errors"
	"fmt"
	"log"
	"math"
	"os"
	"testing"

	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/gdn"
	"github.com/puremetal/puremetal/half"
	"github.com/puremetal/puremetal/internal/testenv"
	"github.com/puremetal/puremetal/mtl"
)

func TestMain(m *testing.M) {
	os.Exit(testenv.RunMain(m, func() error {
		d, err := device()
		if err == nil {
			d.Release()
		}
		return err
	}))
}

// device returns the system's Metal device, or the emulated one where
// there is no Metal.
func device() (*mtl.Device, error) {
	dev, err := mtl.CreateSystemDefaultDevice()
	if errors.Is(err, mtl.ErrNoDevice) {
		return emu.NewDevice()
	}
	return dev, err
}

// One decode step of one layer for a fresh sequence (state zero): 1 key
// head shared by 2 value heads, D_k = D_v = 32, q and k the same unit
// vector, so each output is scale * beta * v.
func ExampleKernels_Decode() {
	dev, err := device()
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Release()
	k, err := gdn.New(dev, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer k.Release()

	p := gdn.Params{
		Shape:   gdn.Shape{DK: 32, DV: 32, NKHeads: 1, NVHeads: 2, NTokens: 1, NSeqs: 1},
		HeadMap: gdn.Block,                  // HF / MLX weight layout
		QScale:  float32(1 / math.Sqrt(32)), // q is not scaled yet
	}
	s := p.Shape
	var buffers []*mtl.Buffer
	view := func(values ...float32) gdn.View {
		b, err := dev.NewBuffer(4*len(values), mtl.ResourceStorageModeShared)
		if err != nil {
			log.Fatal(err)
		}
		buffers = append(buffers, b)
		copy(mtl.Slice[float32](b), values)
		return gdn.F32View(b, 0, len(values))
	}
	fill := func(n int, f func(i int) float32) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = f(i)
		}
		return x
	}
	unit := fill(s.DK, func(int) float32 { return float32(1 / math.Sqrt(32)) })
	state := view(make([]float32, p.StateLen())...)
	b := gdn.Buffers{
		Q:        view(unit...),
		K:        view(unit...),
		V:        view(fill(p.VLen(), func(i int) float32 { return float32(1 + i/s.DV) })...),
		G:        view(0.1, 0.1), // alpha = exp(-g); HF's log-decay g_fla gives g = -g_fla
		Beta:     view(0.5, 0.5),
		StateIn:  state,
		StateOut: state, // updated in place
		Output:   view(fill(p.VLen(), func(int) float32 { return float32(math.NaN()) })...),
	}
	defer func() {
		for _, b := range buffers {
			b.Release()
		}
	}()

	queue, err := dev.NewCommandQueue()
	if err != nil {
		log.Fatal(err)
	}
	defer queue.Release()
	// One command buffer: encode the step, commit, wait.
	err = queue.Run(func(enc *mtl.ComputeCommandEncoder) error { return k.Decode(enc, p, b) })
	if err != nil {
		log.Fatal(err)
	}
	out := mtl.Slice[float32](b.Output.Buffer)
	fmt.Printf("head 0: %.4f, head 1: %.4f\n", out[0], out[s.DV])
	// Output: head 0: 0.0884, head 1: 0.1768
}

// The fused step of a Qwen3-Next layer in one dispatch: bf16 activations
// as the layer hands them over (raw q and k, the gate projections a and
// b), the layer's A_log and dt_bias, an f32 state. The kernel normalises q
// and k, computes g = exp(A_log) * softplus(a + dt_bias) and beta =
// sigmoid(b), runs the step and rounds the output to bf16. With a zero
// state, q = k and b = 0, each output is scale * v / 2.
func ExampleKernels_Decode_fused() {
	dev, err := device()
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Release()
	k, err := gdn.New(dev, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer k.Release()

	p := gdn.Params{
		Shape:      gdn.Shape{DK: 32, DV: 32, NKHeads: 1, NVHeads: 2, NTokens: 1, NSeqs: 1},
		QScale:     float32(1 / math.Sqrt(32)),
		Activation: gdn.BF16,
		State:      gdn.F32,
		Fused:      gdn.FusedAll, // L2 norm, gate and beta in the kernel
	}
	s := p.Shape
	var buffers []*mtl.Buffer
	view := func(t gdn.ElemType, values ...float32) gdn.View {
		b, err := dev.NewBuffer(t.Size()*len(values), mtl.ResourceStorageModeShared)
		if err != nil {
			log.Fatal(err)
		}
		buffers = append(buffers, b)
		if t == gdn.BF16 {
			half.EncodeBFloat16(mtl.Slice[byte](b), values)
		} else {
			copy(mtl.Slice[float32](b), values)
		}
		return gdn.NewView(b, 0, t, len(values))
	}
	fill := func(n int, f func(i int) float32) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = f(i)
		}
		return x
	}
	raw := fill(s.DK, func(i int) float32 { return float32(1 + i%3) }) // not normalised
	state := view(gdn.F32, make([]float32, p.StateLen())...)
	b := gdn.Buffers{
		Q:        view(gdn.BF16, raw...),
		K:        view(gdn.BF16, raw...),
		V:        view(gdn.BF16, fill(p.VLen(), func(i int) float32 { return float32(1 + i/s.DV) })...),
		G:        view(gdn.BF16, 0, 0), // a, one per value head
		Beta:     view(gdn.BF16, 0, 0), // b: beta = sigmoid(0) = 0.5
		ALog:     view(gdn.F32, 0, 0),  // the layer's A_log, [n_v_heads] f32
		DtBias:   view(gdn.F32, 0, 0),  // and its dt_bias
		StateIn:  state,
		StateOut: state,
		Output:   view(gdn.BF16, make([]float32, p.VLen())...),
	}
	defer func() {
		for _, b := range buffers {
			b.Release()
		}
	}()

	queue, err := dev.NewCommandQueue()
	if err != nil {
		log.Fatal(err)
	}
	defer queue.Release()
	err = queue.Run(func(enc *mtl.ComputeCommandEncoder) error { return k.Decode(enc, p, b) })
	if err != nil {
		log.Fatal(err)
	}
	out := make([]float32, p.VLen())
	half.DecodeBFloat16(out, mtl.Slice[byte](b.Output.Buffer))
	fmt.Printf("head 0: %.4f, head 1: %.4f\n", out[0], out[s.DV])
	// Output: head 0: 0.0884, head 1: 0.1768
}
