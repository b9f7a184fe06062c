// Command specdecode runs speculative decoding for a batch of sequences
// through a stack of Gated DeltaNet layers with the capture kernel, the
// sequences' states living in arbitrary slots of a pool, and checks that
// rolling every sequence back to its own last accepted token loses
// nothing.
//
// A recurrent layer cannot undo a token the way attention drops entries
// from its KV cache: once a draft token has gone into the state, the state
// before it is gone. The capture kernel (gdn.Kernels.DecodeWithCapture)
// therefore writes the state after every token of the draft window into a
// capture buffer. Each step of this program
//
//  1. drafts k tokens for every sequence of the batch (fresh random q, k,
//     v, g, beta per layer, as a real model's, from cpuref.RandomInputs),
//  2. runs the batch through every layer in one command buffer, one
//     capture dispatch per layer over all sequences, each reading its
//     state from its slot of the pool,
//  3. accepts a prefix of a_s tokens of each sequence s, 0 <= a_s <= k,
//     different per sequence (simulated: drawn uniformly, deterministically
//     from -seed),
//  4. makes every sequence's state after its a_s-th token its state in
//     the pool: one blit encoder for the whole batch and every layer
//     (gdn.Rollback), no host round trip per sequence.
//
// Each layer keeps two pools and a window reads one and writes the other
// (state_out), so that a sequence that accepts nothing still has its state
// from before the window: gdn.Rollback copies it across. A sequence that
// accepts its whole draft needs no copy, its state_out is the state after
// its last token; the others get the capture slot of their last accepted
// token. The next window reads the pool this one wrote.
//
// The inputs are by default what a Qwen3.5 layer hands its recurrent core,
// as in examples/decode: bf16 activations (-dtype), an f32 state (-state)
// and the fused step (-fused): raw q and k, v, and the raw gate
// projections a and b, with the layer's A_log and dt_bias, from which the
// kernels normalise q and k and compute g and beta.
//
// At the end it decodes every sequence's accepted tokens alone with the
// plain decode kernels on the same device, from the same initial states,
// with no pool: with an f32 state one token at a time; with a 16-bit
// state, which the capture kernel rounds once per window (when it writes
// the capture slot or state_out), each window's accepted tokens in one
// dispatch, so that the state is rounded where the speculative run
// rounded it. The specification makes the capture and decode kernels
// bit-identical, so every layer's final state and every accepted token's
// output must match byte for byte, whatever the types. It also compares
// both with cpuref.Reference32 over each window's accepted tokens, within
// SPEC.md section 9's bounds: 1e-5 for an f32 result, 2^-8 for bf16, 2^-10
// for f16. It exits with status 1 when a check fails.
//
// Run it from the repository root:
//
//	go run ./examples/specdecode               # Metal on a Mac, the emulated device elsewhere
//	go run ./examples/specdecode -k 8 -steps 32 -batch 8 -slots 16
//	go run ./examples/specdecode -backend emu -kheads 16 -vheads 32
//	go run ./examples/specdecode -dtype f16 -state bf16
//
// The emulated device (package emu) runs the kernels on the CPU and needs
// the GNU Objective-C runtime and clang; without shape flags it uses 2 key
// heads and 4 value heads instead of Qwen3.5's 16 and 32.
//
// The program's parts: parseFlags and cli (flags, backend), run (the
// windows, with step 3's draw, and the report), newSpeculation (every
// layer's memory), speculation.window (steps 1, 2 and 4 of one window),
// plainCalls, plainDecode and checkReference (the two checks).
package main

import (
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
	"github.com/puremetal/puremetal/mtl"
)

func main() {
	os.Exit(cli(os.Args[1:], os.Stdout, os.Stderr))
}

// config is what the flags say.
type config struct {
	*layerstack.Flags
	k, steps     int
	batch, slots int // sequences, and states in each layer's pool
	// keepLastDraft skips the rollback, so that every sequence keeps the
	// state after its last draft token whatever it accepted: the wrong
	// restore, which the checks must catch (tests only).
	keepLastDraft bool
}

// cli reads the flags in args, opens the device they name, runs the
// speculative windows and checks them, and returns the exit status (see
// layerstack.Main): 1 when the rollbacks lost something too.
func cli(args []string, stdout, stderr io.Writer) int {
	return layerstack.Main("specdecode", args, stdout, stderr, parseFlags, openDevice, run)
}

// parseFlags returns what args say, or an error naming a bad flag: a
// device backend, windows and sequences, a pool that holds the batch, and
// a D_k the decode kernels take.
func parseFlags(args []string, stderr io.Writer) (config, error) {
	fs := layerstack.NewFlagSet("specdecode", "Speculative decoding for a batch of sequences in slots of a state pool through Gated DeltaNet layers with the capture kernel, checked against a plain decode of each sequence's accepted tokens.", stderr)
	cfg := config{Flags: layerstack.Define(fs, []string{"auto", "metal", "emu"}, "auto (metal on a Mac, emu elsewhere), metal or emu", 2)}
	fs.IntVar(&cfg.k, "k", 4, "draft length: tokens per speculative window")
	fs.IntVar(&cfg.steps, "steps", 12, "speculative windows")
	fs.IntVar(&cfg.batch, "batch", 3, "sequences drafting together")
	fs.IntVar(&cfg.slots, "slots", 5, "states in each layer's pool (at least -batch)")
	if err := cfg.Parse(fs, args); err != nil {
		return config{}, err
	}
	if cfg.k <= 0 || cfg.steps <= 0 || cfg.batch <= 0 {
		return config{}, fmt.Errorf("-k %d, -steps %d, -batch %d: all must be > 0", cfg.k, cfg.steps, cfg.batch)
	}
	if cfg.slots < cfg.batch {
		return config{}, fmt.Errorf("-slots %d: fewer than the -batch %d sequences", cfg.slots, cfg.batch)
	}
	if err := cfg.CheckDecodeDK(); err != nil {
		return config{}, err
	}
	return cfg, nil
}

// openDevice opens the device cfg names (auto: metal where there is
// Metal, otherwise emu), with smaller defaults on the emulated device.
func openDevice(cfg *config, stdout io.Writer) (*layerstack.Device, error) {
	return cfg.Open(stdout, layerstack.Fallback{})
}

// result is what a run found.
type result struct {
	Accepted   [][]int         // accepted length of every window, per sequence
	Window     []time.Duration // wall clock of every window and its rollback
	Copied     int             // state bytes the rollbacks copied
	StateBits  bool            // final states byte-identical to the plain decode's
	OutputBits bool            // accepted outputs byte-identical to the plain decode's
	StateErr   float64         // against cpuref.Reference32
	OutputErr  float64
	// StateBound and OutputBound bound StateErr and OutputErr: the state
	// type's and the activation type's.
	StateBound, OutputBound float64
	FinalState              [][][]float32 // [sequence][layer]
}

// Pass reports whether every check passed.
func (r result) Pass() bool {
	return r.StateBits && r.OutputBits && r.StateErr <= r.StateBound && r.OutputErr <= r.OutputBound
}

// run drafts, verifies and restores cfg.steps windows of cfg.k tokens for
// cfg.batch sequences on d, then checks the result; progress goes to
// stderr, the report to stdout.
func run(cfg config, d *layerstack.Device, stdout, stderr io.Writer) (result, error) {
	rng := rand.New(rand.NewPCG(cfg.Seed, 0xa11ce))
	slots := make([]int32, cfg.batch)
	for s, slot := range rng.Perm(cfg.slots)[:cfg.batch] {
		slots[s] = int32(slot)
	}
	pw := windowParams(cfg)
	if err := pw.Validate(); err != nil {
		return result{}, err
	}
	fmt.Fprintf(stdout, "backend: %s\n", d.Desc)
	fmt.Fprintf(stdout, "shape:   D_k=%d D_v=%d n_k_heads=%d n_v_heads=%d, %s head map; layers %d, draft length k=%d, %d windows, seed %d\n",
		pw.DK, pw.DV, pw.NKHeads, pw.NVHeads, pw.HeadMap, cfg.Layers, cfg.k, cfg.steps, cfg.Seed)
	fmt.Fprintf(stdout, "types:   %s\n", layerstack.Types(pw))
	fmt.Fprintf(stdout, "batch:   %d sequences in slots %v of a pool of %d per layer; one capture dispatch per layer per window, one blit encoder per rollback\n",
		cfg.batch, slots, cfg.slots)
	sp, err := newSpeculation(cfg, d, slots)
	if err != nil {
		return result{}, err
	}
	defer sp.release()
	// The pipelines the windows and the plain decode will run, made before
	// the first window: what Kernels.DecodeWithCapture picks for the
	// windows' views, and what Kernels.Decode picks for one token of views
	// at the start of their buffers (the packed kernels at D_k 64 and 128).
	p1 := cfg.Params(1)
	capture, err := gdn.EntryPoint(gdn.CaptureKernel(pw, sp.buffers(0)), pw)
	if err != nil {
		return result{}, err
	}
	decode, err := gdn.EntryPoint(gdn.DecodeKernel(p1, gdn.Buffers{}), p1)
	if err != nil {
		return result{}, err
	}
	compile, err := d.Compile(stdout, capture, decode)
	if err != nil {
		return result{}, err
	}
	fmt.Fprintf(stdout, "kernels: %s and %s ready in %s\n", capture, decode, layerstack.Duration(compile))
	res := result{Accepted: make([][]int, cfg.batch)}
	total := 0
	for step := range cfg.steps {
		accepted := make([]int32, cfg.batch)
		for s := range accepted {
			accepted[s] = int32(rng.IntN(cfg.k + 1))
			res.Accepted[s] = append(res.Accepted[s], int(accepted[s]))
			total += int(accepted[s])
		}
		wall, copied, err := sp.window(step, accepted)
		if err != nil {
			return result{}, err
		}
		res.Window = append(res.Window, wall)
		res.Copied += copied
		fmt.Fprintf(stderr, "window %*d/%d: drafted %d per sequence, accepted %v (%d in all)  %s\n",
			len(fmt.Sprint(cfg.steps)), step+1, cfg.steps, cfg.k, accepted, total, layerstack.Duration(wall))
	}
	fmt.Fprintf(stdout, "accepted %d of %d drafted tokens (%.0f%%); window latency median %s, p90 %s (%d layers, the window and its rollback, wall clock); state bytes copied to restore: %d (%d states)\n",
		total, cfg.k*cfg.steps*cfg.batch, 100*float64(total)/float64(cfg.k*cfg.steps*cfg.batch),
		layerstack.Duration(layerstack.Percentile(res.Window, 50)), layerstack.Duration(layerstack.Percentile(res.Window, 90)), cfg.Layers,
		res.Copied, res.Copied/(pw.State.Size()*cfg.Params(1).StateLen()))
	for s := range cfg.batch {
		var states [][]float32
		for l := range sp.layers {
			states = append(states, sp.state(l, s))
		}
		res.FinalState = append(res.FinalState, states)
	}

	// Check 1: a plain decode of each sequence's accepted tokens alone on
	// the same device, from the same initial states.
	res.StateBits, res.OutputBits = true, true
	for s := range cfg.batch {
		plainStates, plainOutputs, err := plainDecode(sp, s, plainCalls(pw, res.Accepted[s]))
		if err != nil {
			return result{}, err
		}
		for l, ly := range sp.layers {
			res.StateBits = res.StateBits && floats.Equal(res.FinalState[s][l], plainStates[l])
			res.OutputBits = res.OutputBits && floats.Equal(ly.seqs[s].outputs, plainOutputs[l])
		}
	}
	how := decode + ", one token at a time"
	if pw.State != spec.F32 {
		how = fmt.Sprintf("gdn.Kernels.Decode, each window's accepted tokens in one dispatch, as the capture kernel rounds a %s state once per window", pw.State)
	}
	fmt.Fprintf(stdout, "check 1: every sequence against a plain decode of its accepted tokens alone on the same device (%s; no pool): final state of every layer %s; output of every accepted token %s\n",
		how, same(res.StateBits), same(res.OutputBits))

	// Check 2: cpuref.Reference32 over the accepted tokens.
	res.StateBound, res.OutputBound = layerstack.BoundOf(pw.State, layerstack.Bound), layerstack.BoundOf(pw.Activation, layerstack.Bound)
	if err := checkReference(cfg, sp.layers, &res); err != nil {
		return result{}, err
	}
	verdict := "PASS"
	if !res.Pass() {
		verdict = "FAIL"
	}
	fmt.Fprintf(stdout, "check 2: against cpuref.Reference32 over each window's accepted tokens: max rel err %.3g (%s states, bound %.3g), %.3g (%s outputs, bound %.3g)\n",
		res.StateErr, pw.State, res.StateBound, res.OutputErr, pw.Activation, res.OutputBound)
	fmt.Fprintln(stdout, verdict)
	return res, nil
}

// windowParams returns the parameters of one draft window of one layer:
// cfg.k tokens of each of cfg.batch sequences, in a pool of cfg.slots.
func windowParams(cfg config) spec.Params {
	p := cfg.Params(cfg.k)
	p.NSeqs, p.NSlots = cfg.batch, cfg.slots
	return p
}

// sequence is what one layer keeps of one sequence for the checks: its
// initial state and accepted tokens (StateIn: initial) with the layer's
// A_log and dt_bias, and their outputs.
type sequence struct {
	accepted cpuref.Inputs
	outputs  []float32
}

// layer holds what one layer keeps beyond its pools.
type layer struct {
	capture *mtl.Buffer   // k states per sequence, in the state type
	consts  cpuref.Inputs // A_log and dt_bias with the fused gate
	seqs    []sequence
}

// speculation is the device memory of a run: every layer's pools and
// capture buffer, and the activations and slots of a draft window.
type speculation struct {
	cfg    config
	d      *layerstack.Device
	pw     spec.Params // one window of one layer
	slots  []int32
	pools  [2]*layerstack.States // a window reads pools[cur] and writes the other
	cur    int                   // the pool the next window reads
	layers []*layer
	acts   *layerstack.Activations
	bufs   []*mtl.Buffer // every other buffer it made, for release
}

// newSpeculation allocates every layer's memory, each sequence's initial
// state in its slot of pool 0, and one shared buffer per activation with
// every layer's window at offset l * (one layer's window).
func newSpeculation(cfg config, d *layerstack.Device, slots []int32) (*speculation, error) {
	sp := &speculation{cfg: cfg, d: d, pw: windowParams(cfg), slots: slots}
	if err := sp.alloc(); err != nil {
		sp.release()
		return nil, err
	}
	one := cfg.Params(1)
	consts, err := layerstack.Constants(one, cfg.Seed, cfg.Layers)
	if err != nil {
		sp.release()
		return nil, err
	}
	for l := range cfg.Layers {
		ly := &layer{consts: consts[l], seqs: make([]sequence, cfg.batch)}
		var err error
		if ly.capture, err = sp.buffer(sp.pw.CaptureLen() * one.State.Size()); err != nil {
			sp.release()
			return nil, err
		}
		for s, slot := range slots {
			in, err := cpuref.RandomInputs(one, layerstack.Seed(cfg.Seed, l*cfg.batch+s, -1))
			if err != nil {
				sp.release()
				return nil, err
			}
			ly.seqs[s].accepted = cpuref.Inputs{StateIn: in.StateIn, ALog: ly.consts.ALog, DtBias: ly.consts.DtBias}
			sp.pools[0].Set(l, int(slot), in.StateIn)
		}
		sp.layers = append(sp.layers, ly)
	}
	return sp, nil
}

// alloc allocates both pools of every layer and the activations.
func (sp *speculation) alloc() error {
	var err error
	for i := range sp.pools {
		if sp.pools[i], err = layerstack.NewStates(sp.d.Dev, sp.cfg.Params(1), sp.cfg.Layers, sp.cfg.slots); err != nil {
			return err
		}
	}
	sp.acts, err = layerstack.NewActivations(sp.d.Dev, sp.pw, sp.cfg.Layers)
	return err
}

func (sp *speculation) buffer(bytes int) (*mtl.Buffer, error) {
	b, err := sp.d.Dev.NewBuffer(max(bytes, 1), mtl.ResourceStorageModeShared)
	if err == nil {
		sp.bufs = append(sp.bufs, b)
	}
	return b, err
}

func (sp *speculation) release() {
	for _, p := range sp.pools {
		if p != nil {
			p.Release()
		}
	}
	if sp.acts != nil {
		sp.acts.Release()
	}
	for _, b := range sp.bufs {
		b.Release()
	}
}

// buffers returns layer l's views of a window: the activations and
// slots, the pool it reads, the pool it writes and the capture buffer.
func (sp *speculation) buffers(l int) gdn.Buffers {
	b := sp.acts.Buffers(l)
	b.StateIn, b.StateOut = sp.pools[sp.cur].Pool(l), sp.pools[1-sp.cur].Pool(l)
	b.Capture = gdn.NewView(sp.layers[l].capture, 0, sp.pw.State, sp.pw.CaptureLen())
	return b
}

// window runs steps 1, 2 and 4 of draft window step, of which sequence s
// accepted accepted[s] tokens (step 3, the caller's), and returns its wall
// clock and the state bytes the rollback copied.
func (sp *speculation) window(step int, accepted []int32) (wall time.Duration, copied int, err error) {
	// 1. Draft k tokens of every sequence: every layer's inputs.
	drafts := make([]cpuref.Inputs, len(sp.layers))
	for l := range sp.layers {
		if drafts[l], err = cpuref.RandomInputs(sp.pw, layerstack.Seed(sp.cfg.Seed, l, step)); err != nil {
			return 0, 0, err
		}
		drafts[l].Slots = sp.slots // the sequences' own, not the draw's
		drafts[l].ALog, drafts[l].DtBias = sp.layers[l].consts.ALog, sp.layers[l].consts.DtBias
		sp.acts.Write(l, drafts[l])
	}

	// 2. Run the window through every layer, capturing the state after
	// every token of every sequence.
	start := time.Now()
	if _, _, err = sp.d.RunLayers((*gdn.Kernels).DecodeWithCapture, sp.pw, len(sp.layers), sp.buffers); err != nil {
		return 0, 0, fmt.Errorf("window %d: %w", step, err)
	}

	// 4. Every sequence's state after its accepted prefix, in the pool the
	// window wrote: one blit encoder for the batch and every layer.
	if !sp.cfg.keepLastDraft {
		if copied, err = sp.rollback(accepted); err != nil {
			return 0, 0, fmt.Errorf("window %d: rollback: %w", step, err)
		}
	}
	wall = time.Since(start)
	for l, ly := range sp.layers {
		out := sp.acts.ReadOutput(l, make([]float32, sp.pw.VLen()))
		for s := range ly.seqs {
			ly.seqs[s].keep(sp.cfg, drafts[l], out, s, int(accepted[s]))
		}
	}
	sp.cur = 1 - sp.cur
	return wall, copied, nil
}

// rollback encodes gdn.Rollback for every layer on one blit encoder, runs
// it, and returns the state bytes it copied.
func (sp *speculation) rollback(accepted []int32) (int, error) {
	err := sp.d.Queue.RunCommandBuffer(func(cb *mtl.CommandBuffer) error {
		blit, err := cb.BlitCommandEncoder()
		if err != nil {
			return err
		}
		for l := range sp.layers {
			if err := gdn.Rollback(blit, sp.pw, sp.buffers(l), accepted); err != nil {
				blit.EndEncoding()
				return fmt.Errorf("layer %d: %w", l, err)
			}
		}
		return blit.EndEncoding()
	})
	if err != nil {
		return 0, err
	}
	copies := 0
	for _, a := range accepted {
		if int(a) < sp.cfg.k {
			copies++
		}
	}
	return copies * len(sp.layers) * sp.pw.State.Size() * sp.cfg.Params(1).StateLen(), nil
}

// keep appends the first a tokens of sequence s of a window (its inputs d
// and outputs out) to the accepted ones.
func (q *sequence) keep(cfg config, d cpuref.Inputs, out []float32, s, a int) {
	one := cfg.Params(1)
	t0 := s * cfg.k // the sequence's first token in the window
	layerstack.AppendTokens(&q.accepted, layerstack.Tokens(one, d, t0, a))
	q.outputs = append(q.outputs, out[t0*one.VLen():(t0+a)*one.VLen()]...)
}

// state returns sequence s's state in layer l: its slot of the pool the
// next window reads.
func (sp *speculation) state(l, s int) []float32 {
	return sp.pools[sp.cur].Read(l, int(sp.slots[s]))
}

// plainCalls returns the tokens of each call of the plain decode of a
// sequence that accepted accepted[w] tokens of window w: with an f32 state,
// one token a call; with a 16-bit state, which the capture kernel rounds
// once per window, each window's accepted tokens in one call (none for a
// window that accepted none).
func plainCalls(pw spec.Params, accepted []int) []int {
	var calls []int
	for _, a := range accepted {
		switch {
		case pw.State == spec.F32:
			calls = append(calls, slices.Repeat([]int{1}, a)...)
		case a > 0:
			calls = append(calls, a)
		}
	}
	return calls
}

// plainDecode decodes sequence s's accepted tokens of every layer from its
// initial state with gdn.Kernels.Decode, one command buffer per call of
// calls[i] tokens with one dispatch per layer, with no pool, and returns
// the final states and the outputs.
func plainDecode(sp *speculation, s int, calls []int) (states, outputs [][]float32, err error) {
	p1 := sp.cfg.Params(1)
	layers := len(sp.layers)
	acts, err := layerstack.NewActivations(sp.d.Dev, p1, layers)
	if err != nil {
		return nil, nil, err
	}
	defer acts.Release()
	st, err := layerstack.NewStates(sp.d.Dev, p1, layers, 1)
	if err != nil {
		return nil, nil, err
	}
	defer st.Release()
	for l, ly := range sp.layers {
		st.Set(l, 0, ly.seqs[s].accepted.StateIn)
	}
	outputs = make([][]float32, layers)
	t := 0
	for _, n := range calls {
		pn := sp.cfg.Params(n)
		if err := acts.Reshape(pn); err != nil {
			return nil, nil, err
		}
		for l, ly := range sp.layers {
			acts.Write(l, layerstack.Tokens(p1, ly.seqs[s].accepted, t, n))
		}
		_, _, err := sp.d.RunLayers((*gdn.Kernels).Decode, pn, layers, func(l int) gdn.Buffers {
			b := acts.Buffers(l)
			b.StateIn, b.StateOut = st.Pool(l), st.Pool(l)
			return b
		})
		if err != nil {
			return nil, nil, fmt.Errorf("plain decode of sequence %d, tokens %d to %d: %w", s, t, t+n-1, err)
		}
		for l := range outputs {
			outputs[l] = append(outputs[l], acts.ReadOutput(l, make([]float32, pn.VLen()))...)
		}
		t += n
	}
	for l := range layers {
		states = append(states, st.Read(l, 0))
	}
	return states, outputs, nil
}

// checkReference compares every sequence's final state and accepted
// outputs in every layer with cpuref.Reference32 run over each window's
// accepted tokens in one call (a 16-bit state rounded once per window, as
// the speculative run rounds it), into res.
func checkReference(cfg config, layers []*layer, res *result) error {
	one := cfg.Params(1)
	for l, ly := range layers {
		for s, q := range ly.seqs {
			state, t := q.accepted.StateIn, 0
			var outs []float32
			for _, a := range res.Accepted[s] {
				if a == 0 {
					continue
				}
				in := layerstack.Tokens(one, q.accepted, t, a)
				in.StateIn = state
				ref, err := cpuref.Reference32(cfg.Params(a), in, false)
				if err != nil {
					return err
				}
				state, outs, t = ref.StateOut, append(outs, ref.Output...), t+a
			}
			res.StateErr = max(res.StateErr, cpuref.MaxRelErr(res.FinalState[s][l], state))
			res.OutputErr = max(res.OutputErr, cpuref.MaxRelErr(q.outputs, outs))
		}
	}
	return nil
}

func same(ok bool) string {
	if ok {
		return "bit-identical"
	}
	return "DIFFERENT"
}
