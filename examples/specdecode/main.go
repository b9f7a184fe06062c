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
//
// The program's parts: parseFlags and cli (flags, backend), run (the
// windows, with step 3's draw, and the report), newSpeculation (every
// layer's memory), speculation.window (steps 1, 2 and 4 of one window),
// plainDecode and checkReference (the two checks).
package main

import (
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
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

// Bound is the largest relative error (to the largest magnitude, see
// cpuref.MaxRelErr) accepted against cpuref.Reference32.
const Bound = 1e-5

func main() {
	os.Exit(cli(os.Args[1:], os.Stdout, os.Stderr))
}

// config is what the flags say.
type config struct {
	*layerstack.Flags
	k, steps int
	// keepLastDraft makes every window keep the state after its last
	// draft token whatever was accepted: the wrong restore, which the
	// checks must catch (tests only).
	keepLastDraft bool
}

// cli runs the program with args and returns its exit status: 0 on
// success, 1 when something fails (a check included), 2 for bad flags.
func cli(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	return layerstack.Status("specdecode", stderr, err, func() (bool, error) {
		d, err := cfg.Open(stdout, layerstack.Fallback{Backend: "emu", Says: "using the emulated device, which runs the real kernels on the CPU"})
		if err != nil {
			return false, err
		}
		defer d.Close()
		res, err := run(cfg, d, stdout, stderr)
		return res.Pass(), err
	})
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("specdecode", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := config{Flags: layerstack.Define(fs, []string{"auto", "metal", "emu"}, "auto (metal on a Mac, emu elsewhere), metal or emu", 2)}
	fs.IntVar(&cfg.k, "k", 4, "draft length: tokens per speculative window")
	fs.IntVar(&cfg.steps, "steps", 12, "speculative windows")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: specdecode [flags]\n\nSpeculative decoding through Gated DeltaNet layers with the capture kernel, checked against a plain decode of the accepted tokens.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := cfg.Parse(fs, args); err != nil {
		return config{}, err
	}
	if cfg.k <= 0 || cfg.steps <= 0 {
		return config{}, fmt.Errorf("-k %d, -steps %d: both must be > 0", cfg.k, cfg.steps)
	}
	if err := cfg.CheckDecodeDK(); err != nil {
		return config{}, err
	}
	return cfg, nil
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

// run drafts, verifies and restores cfg.steps windows of cfg.k tokens on
// d, then checks the result; progress goes to stderr, the report to
// stdout.
func run(cfg config, d *layerstack.Device, stdout, stderr io.Writer) (result, error) {
	pw := cfg.Params(cfg.k) // one draft window
	if err := pw.Validate(); err != nil {
		return result{}, err
	}
	nsg := pw.DK / 32
	fmt.Fprintf(stdout, "backend: %s\n", d.Desc)
	fmt.Fprintf(stdout, "shape:   D_k=%d D_v=%d n_k_heads=%d n_v_heads=%d, %s head map; layers %d, draft length k=%d, %d windows, seed %d\n",
		pw.DK, pw.DV, pw.NKHeads, pw.NVHeads, pw.HeadMap, cfg.Layers, cfg.k, cfg.steps, cfg.Seed)
	fmt.Fprintf(stdout, "restore: zero-copy: the next window reads state_in through a view of the last accepted token's capture slot (two capture buffers of %d states per layer, used in turn)\n", cfg.k)
	compile, err := d.Compile(kernels.DecodeCapture(nsg), kernels.Decode(nsg))
	if err != nil {
		return result{}, err
	}
	fmt.Fprintf(stdout, "kernels: %s and %s ready in %s\n", kernels.DecodeCapture(nsg), kernels.Decode(nsg), layerstack.Duration(compile))

	sp, err := newSpeculation(cfg, d)
	if err != nil {
		return result{}, err
	}
	defer sp.release()
	var res result
	accept := rand.New(rand.NewPCG(cfg.Seed, 0xa11ce))
	total := 0
	for step := range cfg.steps {
		a := accept.IntN(cfg.k + 1)
		wall, gpu, err := sp.window(step, a)
		if err != nil {
			return result{}, err
		}
		res.Window, res.Accepted = append(res.Window, wall), append(res.Accepted, a)
		total += a
		line := fmt.Sprintf("window %*d/%d: drafted %d, accepted %d (%d in all)  %s", len(fmt.Sprint(cfg.steps)), step+1, cfg.steps, cfg.k, a, total, layerstack.Duration(wall))
		if d.GPU {
			line += "  gpu " + layerstack.Duration(gpu)
		}
		fmt.Fprintln(stderr, line)
	}
	fmt.Fprintf(stdout, "accepted %d of %d drafted tokens (%.0f%%); window latency median %s, p90 %s (%d layers, wall clock); state bytes copied to restore: 0\n",
		total, cfg.k*cfg.steps, 100*float64(total)/float64(cfg.k*cfg.steps), layerstack.Duration(layerstack.Percentile(res.Window, 50)), layerstack.Duration(layerstack.Percentile(res.Window, 90)), cfg.Layers)
	for _, ly := range sp.layers {
		res.FinalState = append(res.FinalState, slices.Clone(viewFloats(ly.state)))
	}

	// Check 1: a plain decode of the accepted tokens alone on the same
	// device, one token at a time, from the same initial states.
	plainStates, plainOutputs, err := plainDecode(sp, total)
	if err != nil {
		return result{}, err
	}
	res.StateBits, res.OutputBits = true, true
	for l, ly := range sp.layers {
		res.StateBits = res.StateBits && floats.Equal(res.FinalState[l], plainStates[l])
		res.OutputBits = res.OutputBits && floats.Equal(ly.outputs, plainOutputs[l])
	}
	fmt.Fprintf(stdout, "check 1: against a plain decode of the %d accepted tokens on the same device (%s, one token at a time): final state of every layer %s; output of every accepted token %s\n",
		total, kernels.Decode(nsg), same(res.StateBits), same(res.OutputBits))

	// Check 2: cpuref.Reference32 over the accepted tokens.
	if err := checkReference(cfg, sp.layers, total, &res); err != nil {
		return result{}, err
	}
	verdict := "PASS"
	if !res.Pass() {
		verdict = "FAIL"
	}
	fmt.Fprintf(stdout, "check 2: against cpuref.Reference32 over the accepted tokens: max rel err %.3g (states), %.3g (outputs), bound %g\n", res.StateErr, res.OutputErr, Bound)
	fmt.Fprintln(stdout, verdict)
	return res, nil
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

// speculation is the device memory of a run: every layer's state and
// capture buffers, and the activations of a draft window.
type speculation struct {
	cfg    config
	d      *layerstack.Device
	pw     spec.Params // one window of one layer
	layers []*layer
	acts   *layerstack.Activations
	bufs   []*mtl.Buffer // every buffer it made, for release
}

// newSpeculation allocates every layer's memory, each with its initial
// state, and one shared buffer per activation with every layer's window at
// offset l * (one layer's window).
func newSpeculation(cfg config, d *layerstack.Device) (*speculation, error) {
	sp := &speculation{cfg: cfg, d: d, pw: cfg.Params(cfg.k)}
	state := sp.pw.StateLen()
	for l := range cfg.Layers {
		in, err := cpuref.RandomInputs(cfg.Params(1), layerstack.Seed(cfg.Seed, l, -1))
		if err != nil {
			sp.release()
			return nil, err
		}
		ly := &layer{initial: in.StateIn, accepted: cpuref.Inputs{StateIn: in.StateIn}}
		bufs := []**mtl.Buffer{&ly.capture[0], &ly.capture[1], &ly.scratch}
		sizes := []int{cfg.k * state, cfg.k * state, state}
		if ly.base, err = sp.bufferWith(in.StateIn); err == nil {
			for i, b := range bufs {
				if *b, err = sp.buffer(sizes[i]); err != nil {
					break
				}
			}
		}
		if err != nil {
			sp.release()
			return nil, err
		}
		ly.state = gdn.F32View(ly.base, 0, state)
		sp.layers = append(sp.layers, ly)
	}
	var err error
	if sp.acts, err = layerstack.NewActivations(d.Dev, sp.pw, cfg.Layers); err != nil {
		sp.release()
		return nil, err
	}
	return sp, nil
}

func (sp *speculation) buffer(floats int) (*mtl.Buffer, error) {
	b, err := sp.d.Dev.NewBuffer(4*floats, mtl.ResourceStorageModeShared)
	if err == nil {
		sp.bufs = append(sp.bufs, b)
	}
	return b, err
}

func (sp *speculation) bufferWith(x []float32) (*mtl.Buffer, error) {
	b, err := sp.buffer(max(len(x), 1))
	if err == nil {
		copy(mtl.Slice[float32](b), x)
	}
	return b, err
}

func (sp *speculation) release() {
	if sp.acts != nil {
		sp.acts.Release()
	}
	for _, b := range sp.bufs {
		b.Release()
	}
}

// window runs steps 1, 2 and 4 of draft window step, a tokens of which
// the caller accepted (step 3), and returns its wall clock and GPU time.
func (sp *speculation) window(step, a int) (wall, gpu time.Duration, err error) {
	// 1. Draft k tokens: every layer's inputs for the window.
	drafts := make([]cpuref.Inputs, len(sp.layers))
	for l := range sp.layers {
		if drafts[l], err = cpuref.RandomInputs(sp.pw, layerstack.Seed(sp.cfg.Seed, l, step)); err != nil {
			return 0, 0, err
		}
		sp.acts.Write(l, drafts[l])
	}

	// 2. Run the window through every layer, capturing the state after
	// every token into the capture buffer that does not hold the layer's
	// current state.
	state := sp.pw.StateLen()
	targets := make([]*mtl.Buffer, len(sp.layers))
	for l, ly := range sp.layers {
		targets[l] = ly.capture[0]
		if ly.state.Buffer == ly.capture[0] {
			targets[l] = ly.capture[1]
		}
	}
	start := time.Now()
	seconds, err := sp.d.Queue.RunTimed(func(enc *mtl.ComputeCommandEncoder) error {
		for l, ly := range sp.layers {
			b := sp.acts.Buffers(l)
			b.StateIn = ly.state
			b.StateOut = gdn.F32View(ly.scratch, 0, state)
			b.Capture = gdn.F32View(targets[l], 0, sp.cfg.k*state)
			if err := sp.d.Kernels.DecodeWithCapture(enc, sp.pw, b); err != nil {
				return fmt.Errorf("layer %d: %w", l, err)
			}
		}
		return nil
	})
	wall = time.Since(start)
	if err != nil {
		return 0, 0, fmt.Errorf("window %d: %w", step, err)
	}

	// 3. (The caller drew a, the accepted prefix.) 4. Keep the accepted
	// tokens and restore the state after the a-th.
	for l, ly := range sp.layers {
		ly.keep(sp.cfg, drafts[l], sp.acts.Output(l), a, targets[l])
	}
	return wall, time.Duration(seconds * 1e9), nil
}

// keep appends the first a tokens of a window (its inputs d and outputs
// out) to the accepted ones, and points the layer's state view at the
// capture slot of the a-th token in target. No bytes move; with a = 0 the
// view stays.
func (ly *layer) keep(cfg config, d cpuref.Inputs, out []float32, a int, target *mtl.Buffer) {
	one := cfg.Params(1)
	qk, v, gate, state := one.QKLen(), one.VLen(), one.GateLen(), one.StateLen()
	ly.accepted.Q = append(ly.accepted.Q, d.Q[:a*qk]...)
	ly.accepted.K = append(ly.accepted.K, d.K[:a*qk]...)
	ly.accepted.V = append(ly.accepted.V, d.V[:a*v]...)
	ly.accepted.G = append(ly.accepted.G, d.G[:a*gate]...)
	ly.accepted.Beta = append(ly.accepted.Beta, d.Beta[:a*gate]...)
	ly.outputs = append(ly.outputs, out[:a*v]...)
	if cfg.keepLastDraft {
		a = cfg.k
	}
	if a > 0 {
		ly.state = gdn.F32View(target, 4*(a-1)*state, state)
	}
}

// viewFloats returns the elements a view covers.
func viewFloats(v gdn.View) []float32 {
	return mtl.Slice[float32](v.Buffer)[v.Offset/4 : v.Offset/4+v.Len]
}

// plainDecode decodes the accepted tokens of every layer from its initial
// state with the decode kernel, one dispatch per token and layer in one
// command buffer, and returns the final states and the outputs.
func plainDecode(sp *speculation, total int) (states, outputs [][]float32, err error) {
	p1 := sp.cfg.Params(1)
	qk, v, gate, state := p1.QKLen(), p1.VLen(), p1.GateLen(), p1.StateLen()
	type mem1 struct{ q, k, v, g, beta, out, state *mtl.Buffer }
	bufs := make([]mem1, len(sp.layers))
	for l, ly := range sp.layers {
		b := &bufs[l]
		for _, x := range []struct {
			b    **mtl.Buffer
			data []float32
		}{{&b.q, ly.accepted.Q}, {&b.k, ly.accepted.K}, {&b.v, ly.accepted.V}, {&b.g, ly.accepted.G}, {&b.beta, ly.accepted.Beta}, {&b.state, ly.initial}} {
			if *x.b, err = sp.bufferWith(x.data); err != nil {
				return nil, nil, err
			}
		}
		if b.out, err = sp.buffer(max(total*v, 1)); err != nil {
			return nil, nil, err
		}
	}
	if total > 0 {
		err := sp.d.Queue.Run(func(enc *mtl.ComputeCommandEncoder) error {
			for t := range total {
				for l := range sp.layers {
					b := bufs[l]
					st := gdn.F32View(b.state, 0, state)
					err := sp.d.Kernels.Decode(enc, p1, gdn.Buffers{
						Q:       gdn.F32View(b.q, 4*t*qk, qk),
						K:       gdn.F32View(b.k, 4*t*qk, qk),
						V:       gdn.F32View(b.v, 4*t*v, v),
						G:       gdn.F32View(b.g, 4*t*gate, gate),
						Beta:    gdn.F32View(b.beta, 4*t*gate, gate),
						StateIn: st, StateOut: st,
						Output: gdn.F32View(b.out, 4*t*v, v),
					})
					if err != nil {
						return fmt.Errorf("token %d, layer %d: %w", t, l, err)
					}
				}
			}
			return nil
		})
		if err != nil {
			return nil, nil, fmt.Errorf("plain decode: %w", err)
		}
	}
	for _, b := range bufs {
		states = append(states, slices.Clone(mtl.Slice[float32](b.state)[:state]))
		outputs = append(outputs, slices.Clone(mtl.Slice[float32](b.out)[:total*v]))
	}
	return states, outputs, nil
}

// checkReference compares every layer's final state and accepted outputs
// with cpuref.Reference32 over the accepted tokens, into res.
func checkReference(cfg config, layers []*layer, total int, res *result) error {
	for l, ly := range layers {
		if total == 0 {
			res.StateErr = max(res.StateErr, cpuref.MaxRelErr(res.FinalState[l], ly.initial))
			continue
		}
		ref, err := cpuref.Reference32(cfg.Params(total), ly.accepted, false)
		if err != nil {
			return err
		}
		res.StateErr = max(res.StateErr, cpuref.MaxRelErr(res.FinalState[l], ref.StateOut))
		res.OutputErr = max(res.OutputErr, cpuref.MaxRelErr(ly.outputs, ref.Output))
	}
	return nil
}

func same(ok bool) string {
	if ok {
		return "bit-identical"
	}
	return "DIFFERENT"
}
