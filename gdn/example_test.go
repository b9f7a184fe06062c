package gdn_test

import (
	"errors"
	"fmt"
	"log"
	"math"
	"os"
	"testing"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/gdn"
	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/half"
	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/internal/testenv"
	"github.com/puremetal/puremetal/mtl"
)

// TestMain skips the examples where no device opens, unless in strict
// mode (testenv.RunMain).
func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m, testdevice.DeviceOpens)) }

// device returns the system's Metal device, or the emulated one where
// there is no Metal.
func device() (*mtl.Device, error) {
	dev, err := mtl.CreateSystemDefaultDevice()
	if errors.Is(err, mtl.ErrNoDevice) {
		return emu.NewDevice()
	}
	return dev, err
}

// metal is what every example opens before it comes to its point: the
// device, the GDN kernels compiled for it, a command queue, and the shared
// buffers the example fills.
type metal struct {
	dev     *mtl.Device
	k       *gdn.Kernels
	queue   *mtl.CommandQueue
	buffers []*mtl.Buffer
}

// open opens the device, the kernels and a queue; Release frees them.
func open() *metal {
	dev, err := device()
	if err != nil {
		log.Fatal(err)
	}
	m := &metal{dev: dev}
	if m.k, err = gdn.New(dev, nil); err != nil {
		log.Fatal(err)
	}
	if m.queue, err = dev.NewCommandQueue(); err != nil {
		log.Fatal(err)
	}
	return m
}

// Release frees the buffers, the queue, the kernels and the device.
func (m *metal) Release() {
	for _, b := range m.buffers {
		b.Release()
	}
	m.queue.Release()
	m.k.Release()
	m.dev.Release()
}

// view returns a view of a new shared buffer holding values as elements of
// type t, rounded as the kernels round (View.Store).
func (m *metal) view(t gdn.ElemType, values ...float32) gdn.View {
	b, err := m.dev.NewBuffer(t.Size()*len(values), mtl.ResourceStorageModeShared)
	if err != nil {
		log.Fatal(err)
	}
	m.buffers = append(m.buffers, b)
	v := gdn.NewView(b, 0, t, len(values))
	if err := v.Store(values); err != nil {
		log.Fatal(err)
	}
	return v
}

// f32 is view(gdn.F32, values...).
func (m *metal) f32(values ...float32) gdn.View { return m.view(gdn.F32, values...) }

// i32 returns a view of a new shared buffer holding values.
func (m *metal) i32(values ...int32) gdn.View {
	b, err := m.dev.NewBuffer(4*len(values), mtl.ResourceStorageModeShared)
	if err != nil {
		log.Fatal(err)
	}
	m.buffers = append(m.buffers, b)
	copy(mtl.Slice[int32](b), values)
	return gdn.I32View(b, 0, len(values))
}

// fill returns n values, f(0) to f(n-1).
func fill(n int, f func(i int) float32) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = f(i)
	}
	return x
}

// same returns n copies of x.
func same(n int, x float32) []float32 { return fill(n, func(int) float32 { return x }) }

// One decode step of one layer for a fresh sequence (state zero): 1 key
// head shared by 2 value heads, D_k = D_v = 32, q and k the same unit
// vector, so each output is scale * beta * v.
func ExampleKernels_Decode() {
	m := open()
	defer m.Release()

	p := gdn.Params{
		Shape:   gdn.Shape{DK: 32, DV: 32, NKHeads: 1, NVHeads: 2, NTokens: 1, NSeqs: 1},
		HeadMap: gdn.Block,                  // HF / MLX weight layout
		QScale:  float32(1 / math.Sqrt(32)), // q is not scaled yet
	}
	s := p.Shape
	unit := same(s.DK, float32(1/math.Sqrt(32)))
	state := m.f32(make([]float32, p.StateLen())...)
	b := gdn.Buffers{
		Q:        m.f32(unit...),
		K:        m.f32(unit...),
		V:        m.f32(fill(p.VLen(), func(i int) float32 { return float32(1 + i/s.DV) })...),
		G:        m.f32(0.1, 0.1), // alpha = exp(-g); HF's log-decay g_fla gives g = -g_fla
		Beta:     m.f32(0.5, 0.5),
		StateIn:  state,
		StateOut: state, // updated in place
		Output:   m.f32(same(p.VLen(), float32(math.NaN()))...),
	}
	// One command buffer: encode the step, commit, wait.
	err := m.queue.Run(func(enc *mtl.ComputeCommandEncoder) error { return m.k.Decode(enc, p, b) })
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
	m := open()
	defer m.Release()

	p := gdn.Params{
		Shape:      gdn.Shape{DK: 32, DV: 32, NKHeads: 1, NVHeads: 2, NTokens: 1, NSeqs: 1},
		QScale:     float32(1 / math.Sqrt(32)),
		Activation: gdn.BF16,
		State:      gdn.F32,
		Fused:      gdn.FusedAll, // L2 norm, gate and beta in the kernel
	}
	s := p.Shape
	raw := fill(s.DK, func(i int) float32 { return float32(1 + i%3) }) // not normalised
	state := m.f32(make([]float32, p.StateLen())...)
	b := gdn.Buffers{
		Q:        m.view(gdn.BF16, raw...),
		K:        m.view(gdn.BF16, raw...),
		V:        m.view(gdn.BF16, fill(p.VLen(), func(i int) float32 { return float32(1 + i/s.DV) })...),
		G:        m.view(gdn.BF16, 0, 0), // a, one per value head
		Beta:     m.view(gdn.BF16, 0, 0), // b: beta = sigmoid(0) = 0.5
		ALog:     m.f32(0, 0),            // the layer's A_log, [n_v_heads] f32
		DtBias:   m.f32(0, 0),            // and its dt_bias
		StateIn:  state,
		StateOut: state,
		Output:   m.view(gdn.BF16, make([]float32, p.VLen())...),
	}
	err := m.queue.Run(func(enc *mtl.ComputeCommandEncoder) error { return m.k.Decode(enc, p, b) })
	if err != nil {
		log.Fatal(err)
	}
	out := make([]float32, p.VLen())
	half.DecodeBFloat16(out, mtl.Slice[byte](b.Output.Buffer))
	fmt.Printf("head 0: %.4f, head 1: %.4f\n", out[0], out[s.DV])
	// Output: head 0: 0.0884, head 1: 0.1768
}

// A 100-token prompt through Prefill, which takes the chunked kernel from
// gdn.ChunkedMinTokens tokens on (six chunks of 16 and one of 4), checked
// against the float32 token-by-token reference.
func ExampleKernels_Prefill() {
	m := open()
	defer m.Release()

	p := gdn.Params{
		Shape:  gdn.Shape{DK: 64, DV: 64, NKHeads: 1, NVHeads: 1, NTokens: 100, NSeqs: 1},
		QScale: 0.125, // 1/sqrt(D_k)
	}
	in, err := cpuref.RandomInputs(p, 1) // L2-normalised q and k, real gates
	if err != nil {
		log.Fatal(err)
	}
	b := gdn.Buffers{
		Q: m.f32(in.Q...), K: m.f32(in.K...), V: m.f32(in.V...), G: m.f32(in.G...), Beta: m.f32(in.Beta...),
		StateIn:  m.f32(in.StateIn...),
		Output:   m.f32(make([]float32, p.VLen())...),
		StateOut: m.f32(make([]float32, p.StateLen())...),
	}
	if err := m.queue.Run(func(enc *mtl.ComputeCommandEncoder) error { return m.k.Prefill(enc, p, b) }); err != nil {
		log.Fatal(err)
	}

	ref, err := cpuref.Reference32(p, in, false)
	if err != nil {
		log.Fatal(err)
	}
	out := cpuref.MaxRelErr(mtl.Slice[float32](b.Output.Buffer), ref.Output)
	state := cpuref.MaxRelErr(mtl.Slice[float32](b.StateOut.Buffer), ref.StateOut)
	fmt.Println("output within 1e-5:", out <= spec.TolF32)
	fmt.Println("state within 1e-5:", state <= spec.TolF32)
	// Output:
	// output within 1e-5: true
	// state within 1e-5: true
}

// A prefill of three sequences in one dispatch, as a server batches them:
// the states live in a pool of 4 slots, the prompts (2 tokens, none, 1
// token) are packed along one token axis with cu_seqlens, and the second
// sequence is padding (slot -1), which the kernel skips. One value head
// of D_k = D_v = 32 from a zero state, q and k the same unit vector, no
// decay (g = 0) and beta = 1/2: the first token outputs scale / 2, the
// second 3 scale / 4.
func ExampleKernels_Prefill_slots() {
	m := open()
	defer m.Release()

	p := gdn.Params{
		Shape: gdn.Shape{DK: 32, DV: 32, NKHeads: 1, NVHeads: 1,
			NTokens: 3, NSeqs: 3, // 3 tokens in all, packed
			NSlots: 4, Varlen: true},
		QScale: float32(1 / math.Sqrt(32)),
	}
	unit := float32(1 / math.Sqrt(32))
	pool := m.f32(make([]float32, p.StateLen())...) // 4 states
	b := gdn.Buffers{
		Q: m.f32(same(p.QKLen(), unit)...), K: m.f32(same(p.QKLen(), unit)...), V: m.f32(same(p.VLen(), 1)...),
		G: m.f32(same(p.GateLen(), 0)...), Beta: m.f32(same(p.GateLen(), 0.5)...),
		StateIn: pool, StateOut: pool, // the pool, updated in place
		Output:    m.f32(same(p.VLen(), float32(math.NaN()))...),
		Slots:     m.i32(3, -1, 0),   // sequence 0 in slot 3, sequence 1 padding, sequence 2 in slot 0
		CuSeqlens: m.i32(0, 2, 2, 3), // tokens 0-1, none, token 2
	}
	if err := m.queue.Run(func(enc *mtl.ComputeCommandEncoder) error { return m.k.Prefill(enc, p, b) }); err != nil {
		log.Fatal(err)
	}
	out := mtl.Slice[float32](b.Output.Buffer)
	fmt.Printf("sequence 0 (slot 3): %.4f %.4f\n", out[0], out[32])
	fmt.Printf("sequence 2 (slot 0): %.4f\n", out[64])
	state := mtl.Slice[float32](pool.Buffer)
	for slot := range 4 {
		fmt.Printf("slot %d: S[0][0] = %.4f\n", slot, state[slot*32*32])
	}

	// A repeated slot in shared storage is refused before anything runs.
	copy(mtl.Slice[int32](b.Slots.Buffer), []int32{3, 0, 3})
	err := m.queue.Run(func(enc *mtl.ComputeCommandEncoder) error { return m.k.Prefill(enc, p, b) })
	fmt.Println(err)
	// Output:
	// sequence 0 (slot 3): 0.0884 0.1326
	// sequence 2 (slot 0): 0.0884
	// slot 0: S[0][0] = 0.0884
	// slot 1: S[0][0] = 0.0000
	// slot 2: S[0][0] = 0.0000
	// slot 3: S[0][0] = 0.1326
	// gdn: invalid argument: Slots: sequences 0 and 2 both name slot 3: they would race on one state
}

// Decode picks the packed kernel at D_k = 128 and D_v = 32 (8 rows of the
// state per SIMD-group); Encode runs the kernel of one row per SIMD-group
// on the same inputs, the reference the packed kernels are checked
// against. The two sum in different orders and agree to float32 rounding.
func ExampleKernels_Encode() {
	m := open()
	defer m.Release()

	p := gdn.Params{
		Shape:  gdn.Shape{DK: 128, DV: 32, NKHeads: 1, NVHeads: 2, NTokens: 1, NSeqs: 1},
		QScale: float32(1 / math.Sqrt(128)),
	}
	wave := func(i int) float32 { return float32(math.Sin(float64(i))) / 12 }
	in := gdn.Buffers{
		Q: m.f32(fill(p.QKLen(), wave)...), K: m.f32(fill(p.QKLen(), func(i int) float32 { return wave(3*i + 1) })...),
		V: m.f32(fill(p.VLen(), wave)...), G: m.f32(same(p.GateLen(), 0.2)...),
		Beta: m.f32(same(p.GateLen(), 0.7)...), StateIn: m.f32(fill(p.StateLen(), wave)...),
	}
	run := func(encode func(enc *mtl.ComputeCommandEncoder, b gdn.Buffers) error) []float32 {
		b := in
		b.Output = m.f32(same(p.VLen(), float32(math.NaN()))...)
		b.StateOut = m.f32(same(p.StateLen(), float32(math.NaN()))...)
		if err := m.queue.Run(func(enc *mtl.ComputeCommandEncoder) error { return encode(enc, b) }); err != nil {
			log.Fatal(err)
		}
		return mtl.Slice[float32](b.Output.Buffer)
	}
	packed := run(func(enc *mtl.ComputeCommandEncoder, b gdn.Buffers) error { return m.k.Decode(enc, p, b) })
	oneRow := run(func(enc *mtl.ComputeCommandEncoder, b gdn.Buffers) error {
		return m.k.Encode(enc, gdn.KernelDecode, p, b)
	})
	largest, diff := 0.0, 0.0
	for i := range packed {
		largest = max(largest, math.Abs(float64(oneRow[i])))
		diff = max(diff, math.Abs(float64(packed[i]-oneRow[i])))
	}
	fmt.Printf("%d outputs, within 1e-6 of the largest: %v\n", len(packed), diff <= spec.TolF32Output*largest)
	// Output: 64 outputs, within 1e-6 of the largest: true
}

// A server makes the pipelines of its first request's kernels before the
// request arrives, so that the first token does not wait for Metal's
// compiler: the kernels Prefill and Decode will pick for a Qwen3.5 layer
// with bf16 activations, an f32 state and the fused step, views at the
// start of their buffers (zero Buffers).
func ExampleKernels_Prepare() {
	m := open()
	defer m.Release()

	prompt := gdn.Params{
		Shape:      gdn.Shape{DK: 128, DV: 128, NKHeads: 16, NVHeads: 32, NTokens: 200, NSeqs: 1},
		Activation: gdn.BF16, Fused: gdn.FusedAll,
	}
	step := prompt
	step.NTokens = 1
	for _, c := range []struct {
		kern gdn.Kernel
		p    gdn.Params
	}{{gdn.PrefillKernel(prompt, gdn.Buffers{}), prompt}, {gdn.DecodeKernel(step, gdn.Buffers{}), step}} {
		if err := m.k.Prepare(c.kern, c.p); err != nil {
			log.Fatal(err)
		}
		entry, _ := gdn.EntryPoint(c.kern, c.p)
		fmt.Printf("%s: %s\n", c.kern, entry)
	}
	// Output:
	// chunked: gated_delta_net_chunked_bf16_f32
	// packed: gated_delta_net_decode_packed_bf16_f32_4
}
