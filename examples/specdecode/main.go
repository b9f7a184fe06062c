// Command specdecode runs speculative decoding through a stack of Gated
// DeltaNet layers with the capture kernel, and checks that rolling the
// recurrent state back to the last accepted token loses nothing.
//
// A recurrent layer cannot undo a token the way attention drops entries
// from its KV cache: once a draft token has gone into the state, the state
// before it is gone. The capture kernel (gdn.Kernels.DecodeWithCapture)
// therefore writes the state after every token of the draft window into a
// capture buffer. Each step of this program
//
//  1. drafts k tokens (fresh random q, k, v, g, beta per layer, as a real
//     model's, from cpuref.RandomInputs),
//  2. runs them through every layer in one command buffer, one capture
//     dispatch per layer, the capture buffer allocated once for k tokens,
//  3. accepts a prefix of a tokens, 0 <= a <= k (simulated: a is drawn
//     uniformly, deterministically from -seed),
//  4. makes the state after the a-th token the state the next window
//     starts from, on the device, without copying a byte (see below).
//
// At the end it decodes the accepted tokens alone, one token at a time with
// the plain decode kernel on the same device, from the same initial
// states, and compares: the specification makes the capture and decode
// kernels bit-identical, so every layer's final state and every accepted
// token's output must match byte for byte. It also compares both with
// cpuref.Reference32 over the accepted tokens, within a relative error of
// 1e-5. It exits with status 1 when a check fails.
//
// # Restoring the state without a copy
//
// Metal's blit encoder is not part of this library's subset, and a copy
// kernel would move a whole state per layer and window. Instead each layer
// keeps the view it will read its state from: at first its own state
// buffer; after a window with a > 0 accepted tokens, slot a-1 of that
// window's capture buffer, a gdn.View with an offset of (a-1) state sizes.
// The next window reads state_in through that view. So that it never
// writes the capture buffer it reads from, each layer has two capture
// buffers and a window writes the one that does not hold its state. With
// a = 0 the view stays where it was. The window's state_out (the state
// after all k tokens, rarely the one kept) goes to a scratch buffer.
//
// Run it from the repository root:
//
//	go run ./examples/specdecode               # Metal on a Mac, the emulated device elsewhere
//	go run ./examples/specdecode -k 8 -steps 32
//	go run ./examples/specdecode -backend emu -kheads 16 -vheads 32
//
// The emulated device (package emu) runs the kernels on the CPU and needs
// the GNU Objective-C runtime and clang; without shape flags it uses 2 key
// heads and 4 value heads instead of Qwen3.5's 16 and 32.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"time"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/examples/internal/layerstack"
	"github.com/puremetal/puremetal/gdn"
	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/kernels"
	"github.com/puremetal/puremetal/mtl"
)

// Bound is the largest relative error (to the largest magnitude, see
// cpuref.MaxRelErr) accepted against cpuref.Reference32.
const Bound = 1e-5

func main() {
	os.Exit(cli(os.Args[1:], os.Stdout, os.Stderr))
}

// config is what the flags say.
type config struct {
	backend        string
	dk, dv, nk, nv int
	layers         int
	k, steps       int
	seed           uint64
	headMap        spec.HeadMap
	shapeSet       bool
	// keepLastDraft makes every window keep the state after its last
	// draft token whatever was accepted: the wrong restore, which the
	// checks must catch (tests only).
	keepLastDraft bool
}

// params returns the parameters of one layer over n tokens, with q scaled
// by 1/sqrt(D_k) at write-back.
func (c config) params(n int) spec.Params {
	return spec.Params{
		Shape:   spec.Shape{DK: c.dk, DV: c.dv, NKHeads: c.nk, NVHeads: c.nv, NTokens: n, NSeqs: 1},
		HeadMap: c.headMap,
		QScale:  float32(1 / math.Sqrt(float64(c.dk))),
	}
}

// cli runs the program with args and returns its exit status: 0 on
// success, 1 when something fails (a check included), 2 for bad flags.
func cli(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "specdecode:", err)
		return 2
	}
	dev, desc, gpu, err := openDevice(&cfg, stdout)
	if err != nil {
		fmt.Fprintln(stderr, "specdecode:", err)
		return 1
	}
	defer dev.Release()
	res, err := run(cfg, dev, desc, gpu, stdout, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "specdecode:", err)
		return 1
	}
	if !res.Pass() {
		return 1
	}
	return 0
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("specdecode", flag.ContinueOnError)
	fs.SetOutput(stderr)
	backend := fs.String("backend", "auto", "auto (metal on a Mac, emu elsewhere), metal or emu")
	dk := fs.Int("dk", 128, "D_k, the key head size: 32, 64 or 128")
	dv := fs.Int("dv", 128, "D_v, the value head size")
	nk := fs.Int("kheads", 16, "key heads (2 on the emulated device unless a shape flag is given)")
	nv := fs.Int("vheads", 32, "value heads, a multiple of -kheads (4 on the emulated device unless a shape flag is given)")
	layers := fs.Int("layers", 2, "GDN layers")
	k := fs.Int("k", 4, "draft length: tokens per speculative window")
	steps := fs.Int("steps", 12, "speculative windows")
	seed := fs.Uint64("seed", 1, "seed of the inputs and of the accepted lengths")
	headMap := fs.String("headmap", "block", "block (HF transformers, MLX) or tiled (llama.cpp GGUF)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: specdecode [flags]\n\nSpeculative decoding through Gated DeltaNet layers with the capture kernel, checked against a plain decode of the accepted tokens.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	cfg := config{backend: *backend, dk: *dk, dv: *dv, nk: *nk, nv: *nv, layers: *layers, k: *k, steps: *steps, seed: *seed}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "dk", "dv", "kheads", "vheads":
			cfg.shapeSet = true
		}
	})
	m, err := spec.ParseHeadMap(*headMap)
	if err != nil {
		return config{}, fmt.Errorf("-headmap: %w", err)
	}
	cfg.headMap = m
	switch cfg.backend {
	case "auto", "metal", "emu":
	default:
		return config{}, fmt.Errorf("-backend %q: want auto, metal or emu", cfg.backend)
	}
	if cfg.layers <= 0 || cfg.k <= 0 || cfg.steps <= 0 {
		return config{}, fmt.Errorf("-layers %d, -k %d, -steps %d: all must be > 0", cfg.layers, cfg.k, cfg.steps)
	}
	if cfg.dk != 32 && cfg.dk != 64 && cfg.dk != 128 {
		return config{}, fmt.Errorf("-dk %d: the decode kernels take D_k = 32, 64 or 128", cfg.dk)
	}
	return cfg, nil
}

// openDevice returns the device cfg.backend asks for (auto: the system's
// GPU, else the emulated device), a description, and whether its command
// buffers' timestamps are a GPU's.
func openDevice(cfg *config, stdout io.Writer) (*mtl.Device, string, bool, error) {
	var metalErr error
	if cfg.backend == "auto" || cfg.backend == "metal" {
		dev, desc, err := layerstack.OpenMetal()
		if err == nil {
			cfg.backend = "metal"
			return dev, desc, true, nil
		}
		if cfg.backend == "metal" || !errors.Is(err, mtl.ErrNoDevice) {
			return nil, "", false, fmt.Errorf("-backend %s: %w", cfg.backend, err)
		}
		metalErr = err
		fmt.Fprintf(stdout, "no Metal on %s/%s: using the emulated device, which runs the real kernels on the CPU\n", runtime.GOOS, runtime.GOARCH)
	}
	dev, desc, err := layerstack.OpenEmulated()
	if err != nil {
		if metalErr != nil {
			return nil, "", false, fmt.Errorf("neither Metal nor the emulated device is available:\n  Metal: %v\n  emulated device: %v\n%s", metalErr, err, layerstack.EmulatorNeeds)
		}
		return nil, "", false, fmt.Errorf("-backend emu: %w\n%s", err, layerstack.EmulatorNeeds)
	}
	cfg.backend = "emu"
	if !cfg.shapeSet {
		cfg.nk, cfg.nv = 2, 4
		fmt.Fprintf(stdout, "emu: the emulated device runs the kernels on the CPU, so this run uses a smaller default shape: 2 key heads, 4 value heads (Qwen3.5's: -kheads 16 -vheads 32)\n")
	}
	return dev, desc, false, nil
}

// result is what a run found.
type result struct {
	Accepted   []int           // accepted length of every window
	Window     []time.Duration // wall clock of every window
	StateBits  bool            // final states byte-identical to the plain decode's
	OutputBits bool            // accepted outputs byte-identical to the plain decode's
	StateErr   float64         // against cpuref.Reference32
	OutputErr  float64
	FinalState [][]float32
}

// Pass reports whether every check passed.
func (r result) Pass() bool {
	return r.StateBits && r.OutputBits && r.StateErr <= Bound && r.OutputErr <= Bound
}

// layer holds one layer's device memory.
type layer struct {
	initial []float32
	base    *mtl.Buffer    // the state before the first window
	capture [2]*mtl.Buffer // k states each, used in turn
	scratch *mtl.Buffer    // the windows' state_out
	state   gdn.View       // where the state the next window starts from is

	// The accepted tokens' inputs (StateIn: initial) and outputs.
	accepted cpuref.Inputs
	outputs  []float32
}

// session is the device memory of a run, released by release.
type session struct {
	dev  *mtl.Device
	bufs []*mtl.Buffer
}

func (s *session) buffer(floats int) (*mtl.Buffer, error) {
	b, err := s.dev.NewBuffer(4*floats, mtl.ResourceStorageModeShared)
	if err == nil {
		s.bufs = append(s.bufs, b)
	}
	return b, err
}

func (s *session) bufferWith(x []float32) (*mtl.Buffer, error) {
	b, err := s.buffer(max(len(x), 1))
	if err == nil {
		copy(mtl.Slice[float32](b), x)
	}
	return b, err
}

func (s *session) release() {
	for _, b := range s.bufs {
		b.Release()
	}
}

// floats returns the elements a view covers.
func floats(v gdn.View) []float32 {
	return mtl.Slice[float32](v.Buffer)[v.Offset/4 : v.Offset/4+v.Len]
}

// run drafts, verifies and restores cfg.steps windows of cfg.k tokens on
// dev, then checks the result; progress goes to stderr, the report to
// stdout.
func run(cfg config, dev *mtl.Device, desc string, gpu bool, stdout, stderr io.Writer) (result, error) {
	pw := cfg.params(cfg.k) // one draft window
	p1 := cfg.params(1)
	if err := pw.Validate(); err != nil {
		return result{}, err
	}
	qk, v, gate, state := p1.QKLen(), p1.VLen(), p1.GateLen(), p1.StateLen()

	fmt.Fprintf(stdout, "backend: %s\n", desc)
	fmt.Fprintf(stdout, "shape:   D_k=%d D_v=%d n_k_heads=%d n_v_heads=%d, %s head map; layers %d, draft length k=%d, %d windows, seed %d\n",
		pw.DK, pw.DV, pw.NKHeads, pw.NVHeads, pw.HeadMap, cfg.layers, cfg.k, cfg.steps, cfg.seed)
	fmt.Fprintf(stdout, "restore: zero-copy: the next window reads state_in through a view of the last accepted token's capture slot (two capture buffers of %d states per layer, used in turn)\n", cfg.k)

	reg := kernels.NewRegistry()
	defer reg.Release()
	kern, err := gdn.New(dev, reg)
	if err != nil {
		return result{}, err
	}
	defer kern.Release()
	queue, err := dev.NewCommandQueue()
	if err != nil {
		return result{}, err
	}
	defer queue.Release()
	mem := &session{dev: dev}
	defer mem.release()

	// Compile both kernels before the first window, as an engine does at
	// load time.
	start := time.Now()
	for _, e := range []string{kernels.DecodeCapture(pw.DK / 32), kernels.Decode(pw.DK / 32)} {
		if _, err := reg.Pipeline(dev, e); err != nil {
			return result{}, err
		}
	}
	fmt.Fprintf(stdout, "kernels: %s and %s ready in %s\n", kernels.DecodeCapture(pw.DK/32), kernels.Decode(pw.DK/32), layerstack.Duration(time.Since(start)))

	// Per-layer state memory, and one shared buffer per activation with
	// every layer's window at offset l * (one layer's window).
	layers := make([]*layer, cfg.layers)
	for l := range layers {
		in, err := cpuref.RandomInputs(p1, layerstack.Seed(cfg.seed, l, -1))
		if err != nil {
			return result{}, err
		}
		ly := &layer{initial: in.StateIn, accepted: cpuref.Inputs{StateIn: in.StateIn}}
		if ly.base, err = mem.bufferWith(in.StateIn); err != nil {
			return result{}, err
		}
		for i := range ly.capture {
			if ly.capture[i], err = mem.buffer(cfg.k * state); err != nil {
				return result{}, err
			}
		}
		if ly.scratch, err = mem.buffer(state); err != nil {
			return result{}, err
		}
		ly.state = gdn.F32View(ly.base, 0, state)
		layers[l] = ly
	}
	acts, err := layerstack.NewActivations(dev, pw, cfg.layers)
	if err != nil {
		return result{}, err
	}
	defer acts.Release()

	var res result
	accept := rand.New(rand.NewPCG(cfg.seed, 0xa11ce))
	total := 0
	for step := range cfg.steps {
		// 1. Draft k tokens: every layer's inputs for the window.
		drafts := make([]cpuref.Inputs, cfg.layers)
		for l := range layers {
			in, err := cpuref.RandomInputs(pw, layerstack.Seed(cfg.seed, l, step))
			if err != nil {
				return result{}, err
			}
			drafts[l] = in
			acts.Write(l, in)
		}

		// 2. Run the window through every layer, capturing the state
		// after every token into the capture buffer that does not hold
		// the layer's current state.
		targets := make([]*mtl.Buffer, cfg.layers)
		t0 := time.Now()
		cb, err := queue.CommandBuffer()
		if err != nil {
			return result{}, err
		}
		enc, err := cb.ComputeCommandEncoder()
		if err != nil {
			cb.Release()
			return result{}, err
		}
		for l, ly := range layers {
			targets[l] = ly.capture[0]
			if ly.state.Buffer == ly.capture[0] {
				targets[l] = ly.capture[1]
			}
			b := acts.Buffers(l)
			b.StateIn = ly.state
			b.StateOut = gdn.F32View(ly.scratch, 0, state)
			b.Capture = gdn.F32View(targets[l], 0, cfg.k*state)
			if err := kern.DecodeWithCapture(enc, pw, b); err != nil {
				enc.EndEncoding()
				cb.Release()
				return result{}, fmt.Errorf("window %d, layer %d: %w", step, l, err)
			}
		}
		if err := enc.EndEncoding(); err != nil {
			cb.Release()
			return result{}, err
		}
		cb.Commit()
		cb.WaitUntilCompleted()
		wall := time.Since(t0)
		gpuTime := time.Duration((cb.GPUEndTime() - cb.GPUStartTime()) * 1e9)
		err = cb.Error()
		cb.Release()
		if err != nil {
			return result{}, fmt.Errorf("window %d: %w", step, err)
		}
		res.Window = append(res.Window, wall)

		// 3. Accept a prefix of a tokens.
		a := accept.IntN(cfg.k + 1)
		res.Accepted = append(res.Accepted, a)
		total += a

		// 4. Keep the accepted tokens and restore the state after the
		// a-th: point the layer's state view at its capture slot. No
		// bytes move; with a = 0 the view stays.
		for l, ly := range layers {
			d := drafts[l]
			ly.accepted.Q = append(ly.accepted.Q, d.Q[:a*qk]...)
			ly.accepted.K = append(ly.accepted.K, d.K[:a*qk]...)
			ly.accepted.V = append(ly.accepted.V, d.V[:a*v]...)
			ly.accepted.G = append(ly.accepted.G, d.G[:a*gate]...)
			ly.accepted.Beta = append(ly.accepted.Beta, d.Beta[:a*gate]...)
			ly.outputs = append(ly.outputs, acts.Output(l)[:a*v]...)
			keep := a
			if cfg.keepLastDraft {
				keep = cfg.k
			}
			if keep > 0 {
				ly.state = gdn.F32View(targets[l], 4*(keep-1)*state, state)
			}
		}
		line := fmt.Sprintf("window %*d/%d: drafted %d, accepted %d (%d in all)  %s", len(fmt.Sprint(cfg.steps)), step+1, cfg.steps, cfg.k, a, total, layerstack.Duration(wall))
		if gpu {
			line += "  gpu " + layerstack.Duration(gpuTime)
		}
		fmt.Fprintln(stderr, line)
	}
	fmt.Fprintf(stdout, "accepted %d of %d drafted tokens (%.0f%%); window latency median %s, p90 %s (%d layers, wall clock); state bytes copied to restore: 0\n",
		total, cfg.k*cfg.steps, 100*float64(total)/float64(cfg.k*cfg.steps), layerstack.Duration(layerstack.Percentile(res.Window, 50)), layerstack.Duration(layerstack.Percentile(res.Window, 90)), cfg.layers)
	for _, ly := range layers {
		res.FinalState = append(res.FinalState, slices.Clone(floats(ly.state)))
	}

	// Check 1: a plain decode of the accepted tokens alone on the same
	// device, one token at a time, from the same initial states.
	plainStates, plainOutputs, err := plainDecode(mem, queue, kern, p1, layers, total)
	if err != nil {
		return result{}, err
	}
	res.StateBits, res.OutputBits = true, true
	for l, ly := range layers {
		res.StateBits = res.StateBits && bitsEqual(res.FinalState[l], plainStates[l])
		res.OutputBits = res.OutputBits && bitsEqual(ly.outputs, plainOutputs[l])
	}
	fmt.Fprintf(stdout, "check 1: against a plain decode of the %d accepted tokens on the same device (%s, one token at a time): final state of every layer %s; output of every accepted token %s\n",
		total, kernels.Decode(pw.DK/32), same(res.StateBits), same(res.OutputBits))

	// Check 2: cpuref.Reference32 over the accepted tokens.
	for l, ly := range layers {
		p := cfg.params(total)
		if total == 0 {
			res.StateErr = max(res.StateErr, cpuref.MaxRelErr(res.FinalState[l], ly.initial))
			continue
		}
		ref, err := cpuref.Reference32(p, ly.accepted, false)
		if err != nil {
			return result{}, err
		}
		res.StateErr = max(res.StateErr, cpuref.MaxRelErr(res.FinalState[l], ref.StateOut))
		res.OutputErr = max(res.OutputErr, cpuref.MaxRelErr(ly.outputs, ref.Output))
	}
	verdict := "PASS"
	if !res.Pass() {
		verdict = "FAIL"
	}
	fmt.Fprintf(stdout, "check 2: against cpuref.Reference32 over the accepted tokens: max rel err %.3g (states), %.3g (outputs), bound %g\n", res.StateErr, res.OutputErr, Bound)
	fmt.Fprintln(stdout, verdict)
	return res, nil
}

// plainDecode decodes the accepted tokens of every layer from its initial
// state with the decode kernel, one dispatch per token and layer in one
// command buffer, and returns the final states and the outputs.
func plainDecode(mem *session, queue *mtl.CommandQueue, kern *gdn.Kernels, p1 spec.Params, layers []*layer, total int) (states, outputs [][]float32, err error) {
	qk, v, gate, state := p1.QKLen(), p1.VLen(), p1.GateLen(), p1.StateLen()
	type mem1 struct{ q, k, v, g, beta, out, state *mtl.Buffer }
	bufs := make([]mem1, len(layers))
	for l, ly := range layers {
		b := &bufs[l]
		for _, x := range []struct {
			b    **mtl.Buffer
			data []float32
		}{{&b.q, ly.accepted.Q}, {&b.k, ly.accepted.K}, {&b.v, ly.accepted.V}, {&b.g, ly.accepted.G}, {&b.beta, ly.accepted.Beta}, {&b.state, ly.initial}} {
			if *x.b, err = mem.bufferWith(x.data); err != nil {
				return nil, nil, err
			}
		}
		if b.out, err = mem.buffer(max(total*v, 1)); err != nil {
			return nil, nil, err
		}
	}
	if total > 0 {
		cb, err := queue.CommandBuffer()
		if err != nil {
			return nil, nil, err
		}
		defer cb.Release()
		enc, err := cb.ComputeCommandEncoder()
		if err != nil {
			return nil, nil, err
		}
		for t := range total {
			for l := range layers {
				b := bufs[l]
				st := gdn.F32View(b.state, 0, state)
				err := kern.Decode(enc, p1, gdn.Buffers{
					Q:       gdn.F32View(b.q, 4*t*qk, qk),
					K:       gdn.F32View(b.k, 4*t*qk, qk),
					V:       gdn.F32View(b.v, 4*t*v, v),
					G:       gdn.F32View(b.g, 4*t*gate, gate),
					Beta:    gdn.F32View(b.beta, 4*t*gate, gate),
					StateIn: st, StateOut: st,
					Output: gdn.F32View(b.out, 4*t*v, v),
				})
				if err != nil {
					enc.EndEncoding()
					return nil, nil, fmt.Errorf("plain decode, token %d, layer %d: %w", t, l, err)
				}
			}
		}
		if err := enc.EndEncoding(); err != nil {
			return nil, nil, err
		}
		cb.Commit()
		cb.WaitUntilCompleted()
		if err := cb.Error(); err != nil {
			return nil, nil, fmt.Errorf("plain decode: %w", err)
		}
	}
	for _, b := range bufs {
		states = append(states, slices.Clone(mtl.Slice[float32](b.state)[:state]))
		outputs = append(outputs, slices.Clone(mtl.Slice[float32](b.out)[:total*v]))
	}
	return states, outputs, nil
}

// bitsEqual reports whether a and b hold the same bytes.
func bitsEqual(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

func same(ok bool) string {
	if ok {
		return "bit-identical"
	}
	return "DIFFERENT"
}
