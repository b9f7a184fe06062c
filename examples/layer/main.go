// Command layer runs one Qwen3.5 / Qwen3-Next linear-attention layer as a
// model runs it, from a safetensors checkpoint: in_proj on the CPU, then
// the whole layer core in one puremetal dispatch (gdn.Kernels.DecodeCore: the
// short convolution with its conv state, the L2 norm, the gates, the
// recurrence and the gated RMSNorm), then out_proj on the CPU. It prefills
// -prefill tokens from empty caches and decodes -decode tokens one at a
// time with both caches kept on the device, and checks every step's core
// output, the final recurrent state and the final conv state against
// cpuref.Reference32 run the same way (SPEC section 9's bounds; the conv
// state bit for bit).
//
// The weights come from -file, named as HF names them under -prefix
// (Qwen3-Next's in_proj_qkvz / in_proj_ba, whose rows are permuted once at
// load time, or Qwen3.5's in_proj_qkv / in_proj_z / in_proj_b /
// in_proj_a; package checkpoint). Given no -file, it first writes a file
// of random weights with a real checkpoint's names and layout (-format
// qwen3.5 or qwen3-next) to a temporary folder, and says so.
//
//	go run ./examples/layer                               # Metal on a Mac, the emulated device elsewhere
//	go run ./examples/layer -file model.safetensors -prefix model.layers.0.linear_attn. -dk 128 -dv 128 -kheads 16 -vheads 32
//
// It prints the dispatches per token (1 for the whole core), the bytes the
// core must move per decode token (the recurrent state in and out and the
// conv state in and out) and, on the emulated device, the bytes it
// measured; and PASS or FAIL (exit status 1; 2 when a flag is bad).
// -backend auto is metal where there is Metal, else emu, the step down
// said with its reason, as in the other examples (layerstack.OpenDevice).
package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"

	"github.com/puremetal/puremetal/checkpoint"
	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/examples/internal/layerstack"
	"github.com/puremetal/puremetal/gdn"
	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/mtl"
)

func main() { os.Exit(cli(os.Args[1:], os.Stdout, os.Stderr)) }

// config is what the flags say.
type config struct {
	backend, file, prefix, format string
	heads                         checkpoint.Heads
	hidden, prefill, decode       int
	act, state                    spec.ElemType
	seed                          uint64
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	fs := layerstack.NewFlagSet("layer", "Runs one linear-attention layer from a safetensors file (given none, one of random weights in a real checkpoint's names): projections on the CPU, the whole layer core in one dispatch, out_proj; prefill then decode, checked against cpuref.", stderr)
	var c config
	var act, state string
	fs.StringVar(&c.backend, "backend", layerstack.Backends[0], layerstack.BackendHelp(layerstack.Backends))
	fs.StringVar(&c.file, "file", "", "safetensors file of the layer (none: write one of random weights first)")
	fs.StringVar(&c.prefix, "prefix", "model.language_model.layers.0.linear_attn.", "prefix of the layer's tensor names")
	fs.StringVar(&c.format, "format", "qwen3.5", "names and layout of the random file: qwen3.5 or qwen3-next")
	fs.IntVar(&c.heads.DK, "dk", 128, "D_k")
	fs.IntVar(&c.heads.DV, "dv", 128, "D_v")
	fs.IntVar(&c.heads.NKHeads, "kheads", 16, "key heads")
	fs.IntVar(&c.heads.NVHeads, "vheads", 32, "value heads")
	fs.IntVar(&c.hidden, "hidden", 256, "hidden size of the random file")
	fs.IntVar(&c.prefill, "prefill", 16, "tokens to prefill")
	fs.IntVar(&c.decode, "decode", 8, "tokens to decode after the prefill")
	fs.StringVar(&act, "dtype", "bf16", "activation type: f32, f16 or bf16")
	fs.StringVar(&state, "state", "f32", "state type: f32, f16 or bf16")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the random weights and hidden states")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if c.act, err = layerstack.ParseType("dtype", act); err != nil {
		return c, err
	}
	if c.state, err = layerstack.ParseType("state", state); err != nil {
		return c, err
	}
	if c.prefill < 1 || c.decode < 0 {
		return c, fmt.Errorf("-prefill %d, -decode %d: want at least 1 and 0", c.prefill, c.decode)
	}
	if !slices.Contains(layerstack.Backends, c.backend) {
		return c, fmt.Errorf("-backend %q: want auto, metal or emu", c.backend)
	}
	if c.format != "qwen3.5" && c.format != "qwen3-next" {
		return c, fmt.Errorf("-format %q: want qwen3.5 or qwen3-next", c.format)
	}
	return c, nil
}

// cli reads the flags in args, opens the device they name, runs the layer
// and checks it, and returns the exit status (see layerstack.Command).
var cli = layerstack.Command("layer", parseFlags, openDevice, run)

// openDevice opens the device c names (auto: metal, else emu; see
// layerstack.OpenDevice) and sets c.backend to it.
func openDevice(c *config, stdout io.Writer) (*layerstack.Device, error) {
	d, backend, err := layerstack.OpenDevice(stdout, c.backend, layerstack.Fallback{})
	c.backend = backend
	return d, err
}

// result is what a run found.
type result struct {
	pass                   bool
	coreErr, stateErr      float64 // largest over the steps, against Reference32
	convSame               bool
	stateBytes, floorBytes uint64 // per decode token, measured (emulated device) and the floor
	dispatchesPerToken     int
	format                 string
	measured               bool
	wroteFile              string
}

// Pass reports whether every check passed.
func (r result) Pass() bool { return r.pass }

// randomFile writes a layer of random weights named as c.format names them.
func randomFile(c config, path string) error {
	h := c.heads
	rng := rand.New(rand.NewPCG(c.seed, 2))
	normal := func(n int, sd float64) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(sd * rng.NormFloat64())
		}
		return x
	}
	dt := map[spec.ElemType]string{spec.F32: "F32", spec.F16: "F16", spec.BF16: "BF16"}[c.act]
	hid, cd, vd, nv := c.hidden, h.ConvDim(), h.NVHeads*h.DV, h.NVHeads
	sd := 1 / math.Sqrt(float64(hid))
	var ts []checkpoint.Tensor
	add := func(name, dtype string, shape []int, x []float32) error {
		t, err := checkpoint.NewTensor(c.prefix+name, dtype, shape, x)
		ts = append(ts, t)
		return err
	}
	aLog := make([]float32, nv)
	for i := range aLog {
		aLog[i] = float32(math.Log(1 + 15*rng.Float64()))
	}
	norm := normal(h.DV, 0.1)
	for i := range norm {
		norm[i]++
	}
	errs := []error{}
	if c.format == "qwen3-next" {
		errs = append(errs, add("in_proj_qkvz.weight", dt, []int{cd + vd, hid}, normal((cd+vd)*hid, sd)),
			add("in_proj_ba.weight", dt, []int{2 * nv, hid}, normal(2*nv*hid, sd)))
	} else {
		errs = append(errs, add("in_proj_qkv.weight", dt, []int{cd, hid}, normal(cd*hid, sd)),
			add("in_proj_z.weight", dt, []int{vd, hid}, normal(vd*hid, sd)),
			add("in_proj_b.weight", dt, []int{nv, hid}, normal(nv*hid, sd)),
			add("in_proj_a.weight", dt, []int{nv, hid}, normal(nv*hid, sd)))
	}
	errs = append(errs, add("conv1d.weight", dt, []int{cd, 1, 4}, normal(cd*4, 0.5)),
		add("A_log", "F32", []int{nv}, aLog),
		add("dt_bias", "F32", []int{nv}, normal(nv, 1)),
		add("norm.weight", dt, []int{h.DV}, norm),
		add("out_proj.weight", dt, []int{hid, vd}, normal(hid*vd, 1/math.Sqrt(float64(vd)))))
	if err := errors.Join(errs...); err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := checkpoint.WriteSafetensors(&buf, ts); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// run runs the layer on d and checks it, the report on w.
func run(c config, d *layerstack.Device, w, _ io.Writer) (result, error) {
	var res result
	path := c.file
	if path == "" {
		dir, err := os.MkdirTemp("", "puremetal-layer")
		if err != nil {
			return res, err
		}
		defer os.RemoveAll(dir)
		path = filepath.Join(dir, "layer.safetensors")
		if err := randomFile(c, path); err != nil {
			return res, err
		}
		res.wroteFile = path
		fmt.Fprintf(w, "no -file: wrote random weights with %s's tensor names and layout to %s\n", c.format, path)
	}
	st, err := checkpoint.ReadSafetensors(path)
	if err != nil {
		return res, err
	}
	l, err := checkpoint.LoadLayer(st, c.prefix, c.heads)
	if err != nil {
		return res, err
	}
	if l.Conv != spec.ConvKernel {
		return res, fmt.Errorf("the layer's convolution has K = %d; the core kernel takes %d", l.Conv, spec.ConvKernel)
	}
	res.format = l.Format
	h := c.heads
	fmt.Fprintf(w, "%s, layer %s (%s): D_k=%d D_v=%d, %d key and %d value heads, hidden %d, %v activations, %v state\n",
		d.Desc, c.prefix, l.Format, h.DK, h.DV, h.NKHeads, h.NVHeads, l.Hidden, c.act, c.state)

	params := func(n int) spec.Params {
		return spec.Params{Shape: spec.Shape{DK: h.DK, DV: h.DV, NKHeads: h.NKHeads, NVHeads: h.NVHeads, NTokens: n, NSeqs: 1},
			QScale: float32(1 / math.Sqrt(float64(h.DK))), Activation: c.act, State: c.state, Fused: spec.FusedAll, Core: spec.QwenCore()}
	}
	p0 := params(1)
	round := func(x []float32) []float32 { cpuref.Round(c.act, x); return x }
	weights := cpuref.Inputs{ALog: l.ALog, DtBias: l.DtBias, ConvWeight: round(l.ConvWeight), NormWeight: round(l.NormWeight)}

	// The caches on the device: the recurrent state in place, the conv
	// state in two buffers swapped every step (so that Kernels.DecodeCore keeps
	// one threadgroup per value head: one sequence alone fills the device
	// better that way than with the in-place geometry's one per key head).
	newBuf := func(t spec.ElemType, n int) (gdn.View, error) {
		b, err := d.Dev.NewBuffer(max(1, n*t.Size()), mtl.ResourceStorageModeShared)
		if err != nil {
			return gdn.View{}, err
		}
		return gdn.NewView(b, 0, t, n), nil
	}
	var views []gdn.View
	defer func() {
		for _, v := range views {
			v.Buffer.Release()
		}
	}()
	alloc := func(t spec.ElemType, n int) gdn.View {
		v, e := newBuf(t, n)
		if e != nil && err == nil {
			err = e
		}
		if e == nil {
			views = append(views, v)
		}
		return v
	}
	state := alloc(c.state, p0.StateLen())
	conv := [2]gdn.View{alloc(c.act, p0.ConvStateLen()), alloc(c.act, p0.ConvStateLen())}
	aLog, dtBias := alloc(spec.F32, h.NVHeads), alloc(spec.F32, h.NVHeads)
	convW, normW := alloc(c.act, len(weights.ConvWeight)), alloc(c.act, h.DV)
	if err != nil {
		return res, err
	}
	put(state, make([]float32, state.Len)) // empty caches: a new sequence
	put(conv[0], make([]float32, conv[0].Len))
	put(aLog, l.ALog)
	put(dtBias, l.DtBias)
	put(convW, weights.ConvWeight)
	put(normW, weights.NormWeight)

	// The core's pipeline, made before the first step (and said, with
	// where it is cached).
	entry, err := gdn.DecodeCoreEntryPoint(p0)
	if err != nil {
		return res, err
	}
	if _, err := d.Compile(w, entry); err != nil {
		return res, err
	}

	rng := rand.New(rand.NewPCG(c.seed, 3))
	refState := make([]float32, p0.StateLen())
	refConv := make([]float32, p0.ConvStateLen())
	res.convSame = true
	steps := append([]int{c.prefill}, make([]int, c.decode)...)
	for i := range steps[1:] {
		steps[i+1] = 1
	}
	for i, n := range steps {
		p := params(n)
		hidden := make([]float32, n*l.Hidden)
		for j := range hidden {
			hidden[j] = float32(rng.NormFloat64())
		}
		mixed, z, a, b, err := l.Project(round(hidden))
		if err != nil {
			return res, err
		}
		in := weights
		in.MixedQKV, in.Z, in.G, in.Beta = round(mixed), round(z), round(a), round(b)
		in.StateIn, in.ConvState = refState, refConv
		ref, err := cpuref.Reference32(p, in, false)
		if err != nil {
			return res, err
		}
		refState, refConv = ref.StateOut, ref.ConvState

		var step []gdn.View
		mk := func(t spec.ElemType, x []float32) gdn.View {
			v, e := newBuf(t, len(x))
			if e == nil {
				put(v, x)
				step = append(step, v)
			} else if err == nil {
				err = e
			}
			return v
		}
		out := func(t spec.ElemType, n int) gdn.View {
			v, e := newBuf(t, n)
			if e == nil {
				step = append(step, v)
			} else if err == nil {
				err = e
			}
			return v
		}
		bufs := gdn.Buffers{G: mk(c.act, in.G), Beta: mk(c.act, in.Beta), StateIn: state, StateOut: state,
			Output: out(c.act, p.VLen()), ALog: aLog, DtBias: dtBias}
		cb := gdn.CoreBuffers{MixedQKV: mk(c.act, in.MixedQKV), ConvWeight: convW, ConvStateIn: conv[i%2], ConvStateOut: conv[(i+1)%2],
			Z: mk(c.act, in.Z), NormWeight: normW}
		if err != nil {
			return res, err
		}
		counted, err := runCore(d, p, bufs, cb)
		for _, v := range step {
			defer v.Buffer.Release()
		}
		if err != nil {
			return res, fmt.Errorf("step %d: %w", i, err)
		}
		core := get(bufs.Output)
		e := cpuref.MaxRelErr(core, ref.Output)
		res.coreErr = max(res.coreErr, e)
		y, err := l.Out(core)
		if err != nil {
			return res, err
		}
		if i == 0 {
			fmt.Fprintf(w, "prefill %d tokens: 1 dispatch; core %.3g from Reference32; out_proj gives %d values per token\n", n, e, len(y)/n)
		}
		if counted != nil && n == 1 {
			res.measured = true
			res.stateBytes = counted.Loaded[5] + counted.Stored[5] + counted.Loaded[16] + counted.Stored[17]
		}
	}
	stateNow := get(state)
	convNow := get(conv[len(steps)%2])
	res.stateErr = cpuref.MaxRelErr(stateNow, refState)
	for j := range convNow {
		res.convSame = res.convSame && math.Float32bits(convNow[j]) == math.Float32bits(refConv[j])
	}
	r := uint64(h.NVHeads / h.NKHeads)
	a := uint64(c.act.Size())
	res.floorBytes = 2*uint64(p0.StateLen()*c.state.Size()) + 2*uint64(3*h.ConvDim())*a
	res.dispatchesPerToken = 1
	bound := func(t spec.ElemType) float64 { return layerstack.BoundOf(t, layerstack.Bound) }
	res.pass = res.coreErr <= bound(c.act) && res.stateErr <= bound(c.state) && res.convSame
	fmt.Fprintf(w, "decode %d tokens: %d dispatch per token for the whole core (conv, step, gated norm)\n", c.decode, res.dispatchesPerToken)
	fmt.Fprintf(w, "bytes per decode token, floor: %d (state in and out %d, conv state in and out %d)\n",
		res.floorBytes, 2*p0.StateLen()*c.state.Size(), 2*3*h.ConvDim()*c.act.Size())
	if res.measured {
		fmt.Fprintf(w, "bytes per decode token, measured by the emulator: %d (%.3f x the floor: each of the r = %d value heads of a key head reads its q and k conv state)\n",
			res.stateBytes, float64(res.stateBytes)/float64(res.floorBytes), r)
	}
	fmt.Fprintf(w, "against cpuref.Reference32: core %.3g (bound %.3g), state %.3g (bound %.3g), conv state bit-identical %v\n",
		res.coreErr, bound(c.act), res.stateErr, bound(c.state), res.convSame)
	if res.pass {
		fmt.Fprintln(w, "PASS")
	} else {
		fmt.Fprintln(w, "FAIL")
	}
	return res, nil
}

// runCore runs one dispatch of the core on a command buffer of its own,
// submitted and waited for as the other examples' steps are
// (layerstack.Device.Submit), and returns the emulator's counters of it
// (nil on a GPU), which a completed handler reads before the wait ends.
func runCore(d *layerstack.Device, p spec.Params, b gdn.Buffers, c gdn.CoreBuffers) (*emuCounters, error) {
	var counted *emuCounters
	var countErr error
	sub, err := d.Submit(p, func(cb *mtl.CommandBuffer) error {
		if !d.GPU {
			if err := cb.AddCompletedHandler(func(mtl.Completion) {
				cs, err := emu.DispatchCounters(cb)
				if err == nil && len(cs) == 1 {
					counted = &emuCounters{Loaded: cs[0].Loaded[:], Stored: cs[0].Stored[:]}
				}
				countErr = err
			}); err != nil {
				return err
			}
		}
		enc, err := cb.ComputeCommandEncoder()
		if err != nil {
			return err
		}
		if err := d.Kernels.DecodeCore(enc, p, b, c); err != nil {
			enc.EndEncoding()
			return err
		}
		return enc.EndEncoding()
	})
	if err != nil {
		return nil, err
	}
	if _, err := sub.Wait(); err != nil {
		return nil, err
	}
	return counted, countErr
}

// emuCounters are the emulator's byte counts of a dispatch, by binding.
type emuCounters struct{ Loaded, Stored []uint64 }

// put writes x into v's buffer as v's element type.
func put(v gdn.View, x []float32) { layerstack.Store(v, x) }

// get reads v's elements back, widened.
func get(v gdn.View) []float32 { return layerstack.Load(v, make([]float32, v.Len)) }
