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
// By default every window is a Qwen3.5 layer's whole core (-core,
// gdn.Kernels.DecodeCore with capture, SPEC section 13): mixed_qkv through the
// short convolution (K = 4) with a conv state per slot, SiLU, the step and
// the gated RMSNorm with z; -core=false runs the capture kernel on q, k
// and v. The conv states live in two pools per layer as the states do,
// and gdn.RollbackCore restores both: the conv state after a accepted
// tokens is the newest K-1 inputs of the conv state before the window and
// the window's mixed_qkv, so it copies those K-1 rows and no conv state is
// captured per token. The report gives the conv state bytes copied, and
// both checks cover the final conv states.
//
// The inputs are by default what a Qwen3.5 layer hands its recurrent core,
// as in examples/decode: bf16 activations (-dtype), an f32 state (-state)
// and the fused step (-fused): raw q and k, v, and the raw gate
// projections a and b, with the layer's A_log and dt_bias, from which the
// kernels normalise q and k and compute g and beta.
//
// At the end it decodes every sequence's accepted tokens alone with the
// plain decode kernels (with the layer core, Kernels.DecodeCore without
// capture) on the same device, from the same initial states, with no
// pool: with an f32 state one token at a time; with a 16-bit
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
//	go run ./examples/specdecode -core=false   # the capture kernel on q, k and v, gdn.Rollback
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
	// stateOnlyRollback rolls the layer core back with gdn.Rollback,
	// which restores the recurrent state alone and leaves the conv state
	// after the whole draft: the wrong restore, which the checks must
	// catch (tests only).
	stateOnlyRollback bool
}

// cli reads the flags in args, opens the device they name, runs the
// speculative windows and checks them, and returns the exit status (see
// layerstack.Command): 1 when the rollbacks lost something too.
var cli = layerstack.Command("specdecode", parseFlags, openDevice, run)

// parseFlags returns what args say, or an error naming a bad flag: a
// device backend, windows and sequences, a pool that holds the batch, and
// a D_k the decode kernels take.
func parseFlags(args []string, stderr io.Writer) (config, error) {
	fs := layerstack.NewFlagSet("specdecode", "Speculative decoding for a batch of sequences in slots of a state pool through Gated DeltaNet layers with the capture kernel, checked against a plain decode of each sequence's accepted tokens.", stderr)
	cfg := config{Flags: layerstack.Define(fs, layerstack.Backends, 2)}
	fs.IntVar(&cfg.k, "k", 4, "draft length: tokens per speculative window")
	fs.IntVar(&cfg.steps, "steps", 12, "speculative windows")
	fs.IntVar(&cfg.batch, "batch", 3, "sequences drafting together")
	fs.IntVar(&cfg.slots, "slots", 5, "states in each layer's pool (at least -batch)")
	cfg.DefineCore(fs, "the whole layer core in each dispatch: mixed_qkv through the short convolution with a conv state per slot, and the gated RMSNorm with z, rolled back with gdn.RollbackCore (false: q, k and v given, the capture kernel and gdn.Rollback)")
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
	ConvCopied int             // conv state bytes the rollbacks copied (the layer core)
	StateBits  bool            // final states byte-identical to the plain decode's
	ConvBits   bool            // final conv states byte-identical to the plain decode's (the layer core)
	OutputBits bool            // accepted outputs byte-identical to the plain decode's
	StateErr   float64         // against cpuref.Reference32
	OutputErr  float64
	ConvErr    float64 // the final conv states against cpuref.Reference32 (bound OutputBound)
	// StateBound and OutputBound bound StateErr and OutputErr: the state
	// type's and the activation type's.
	StateBound, OutputBound float64
	FinalState              [][][]float32 // [sequence][layer]
	FinalConv               [][][]float32 // [sequence][layer], with the convolution
}

// Pass reports whether every check passed.
func (r result) Pass() bool {
	return r.StateBits && r.OutputBits && r.ConvBits && r.StateErr <= r.StateBound && r.OutputErr <= r.OutputBound && r.ConvErr <= r.OutputBound
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
	if pw.Core != (spec.Core{}) {
		fmt.Fprintf(stdout, "core:    the whole layer core in each dispatch (gdn.Kernels.DecodeCore with capture): mixed_qkv (%d channels) through the short convolution (K = %d) with a %s conv state per slot, SiLU, the step, the gated RMSNorm with z; gdn.RollbackCore restores both states\n",
			pw.ConvDim(), pw.Core.Conv, pw.Activation)
	}
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
	capture, decode, err := entryPoints(pw, p1, sp.buffers(0))
	if err != nil {
		return result{}, err
	}
	entries, kernelsSay := []string{capture, decode}, capture+" and "+decode
	if decode == capture {
		entries, kernelsSay = entries[:1], capture+" (the windows and the plain decode)"
	}
	compile, err := d.Compile(stdout, entries...)
	if err != nil {
		return result{}, err
	}
	fmt.Fprintf(stdout, "kernels: %s ready in %s\n", kernelsSay, layerstack.Duration(compile))
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
		res.Copied += copied.state
		res.ConvCopied += copied.conv
		fmt.Fprintf(stderr, "window %*d/%d: drafted %d per sequence, accepted %v (%d in all)  %s\n",
			len(fmt.Sprint(cfg.steps)), step+1, cfg.steps, cfg.k, accepted, total, layerstack.Duration(wall))
	}
	fmt.Fprintf(stdout, "accepted %d of %d drafted tokens (%.0f%%); window latency median %s, p90 %s (%d layers, the window and its rollback, wall clock); state bytes copied to restore: %d (%d states)\n",
		total, cfg.k*cfg.steps*cfg.batch, 100*float64(total)/float64(cfg.k*cfg.steps*cfg.batch),
		layerstack.Duration(layerstack.Percentile(res.Window, 50)), layerstack.Duration(layerstack.Percentile(res.Window, 90)), cfg.Layers,
		res.Copied, res.Copied/(pw.State.Size()*cfg.Params(1).StateLen()))
	if pw.Core.Conv > 0 {
		one := pw.Activation.Size() * cfg.Params(1).ConvStateLen()
		fmt.Fprintf(stdout, "conv:    conv state bytes copied to restore: %d (%d conv states of %d bytes: K-1 rows of the conv state before the window and of the accepted tokens' mixed_qkv; no per-token capture of the conv state)\n",
			res.ConvCopied, res.ConvCopied/one, one)
	}
	for s := range cfg.batch {
		var states, convs [][]float32
		for l := range sp.layers {
			states = append(states, sp.state(l, s))
			convs = append(convs, sp.convState(l, s))
		}
		res.FinalState = append(res.FinalState, states)
		res.FinalConv = append(res.FinalConv, convs)
	}

	// Check 1: a plain decode of each sequence's accepted tokens alone on
	// the same device, from the same initial states.
	res.StateBits, res.OutputBits, res.ConvBits = true, true, true
	for s := range cfg.batch {
		plainStates, plainConvs, plainOutputs, err := plainDecode(sp, s, plainCalls(pw, res.Accepted[s]))
		if err != nil {
			return result{}, err
		}
		for l, ly := range sp.layers {
			res.StateBits = res.StateBits && floats.Equal(res.FinalState[s][l], plainStates[l])
			res.ConvBits = res.ConvBits && floats.Equal(res.FinalConv[s][l], plainConvs[l])
			res.OutputBits = res.OutputBits && floats.Equal(ly.seqs[s].outputs, plainOutputs[l])
		}
	}
	plain := "gdn.Kernels.Decode"
	if pw.Core != (spec.Core{}) {
		plain = "gdn.Kernels.DecodeCore without capture"
	}
	how := decode + ", one token at a time"
	if pw.State != spec.F32 {
		how = fmt.Sprintf("%s, each window's accepted tokens in one dispatch, as the capture kernel rounds a %s state once per window", plain, pw.State)
	}
	conv := ""
	if pw.Core.Conv > 0 {
		conv = "; final conv state of every layer " + same(res.ConvBits)
	}
	fmt.Fprintf(stdout, "check 1: every sequence against a plain decode of its accepted tokens alone on the same device (%s; no pool): final state of every layer %s; output of every accepted token %s%s\n",
		how, same(res.StateBits), same(res.OutputBits), conv)

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
	if pw.Core.Conv > 0 {
		fmt.Fprintf(stdout, "         final conv states: max rel err %.3g (%s, bound %.3g)\n", res.ConvErr, pw.Activation, res.OutputBound)
	}
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

// entryPoints returns the entry points of the windows (pw, views b) and
// of the plain decode (p1): what Kernels.DecodeWithCapture and
// Kernels.Decode pick for them (the packed kernels at D_k 64 and 128), or
// with the layer core the core kernel, which runs both.
func entryPoints(pw, p1 spec.Params, b gdn.Buffers) (capture, decode string, err error) {
	if pw.Core != (spec.Core{}) {
		e, err := gdn.DecodeCoreEntryPoint(pw)
		return e, e, err
	}
	if capture, err = gdn.EntryPoint(gdn.CaptureKernel(pw, b), pw); err != nil {
		return "", "", err
	}
	decode, err = gdn.EntryPoint(gdn.DecodeKernel(p1, gdn.Buffers{}), p1)
	return capture, decode, err
}

// sequence is what one layer keeps of one sequence for the checks: its
// initial state (and conv state) and accepted tokens (StateIn: initial)
// with the layer's A_log and dt_bias (and conv and norm weights), and
// their outputs.
type sequence struct {
	accepted cpuref.Inputs
	outputs  []float32
}

// layer holds what one layer keeps beyond its pools.
type layer struct {
	capture *mtl.Buffer   // k states per sequence, in the state type
	consts  cpuref.Inputs // A_log and dt_bias with the fused gate; conv and norm weights with the core
	seqs    []sequence
	// With the layer core: the window's mixed_qkv and z, the weights, and
	// the two pools' conv states (layerstack.States.ConvPool), read and
	// written as the states are.
	mixed, z, convW, normW gdn.View
	conv                   [2]gdn.View
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
// state (and conv state, as a prefill would leave it) in its slot of pool
// 0, and one shared buffer per activation with every layer's window at
// offset l * (one layer's window).
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
		if one.Core != (spec.Core{}) {
			if err := sp.allocCore(l, ly); err != nil {
				sp.release()
				return nil, err
			}
		}
		for s, slot := range slots {
			in, err := cpuref.RandomInputs(one, layerstack.Seed(cfg.Seed, l*cfg.batch+s, -1))
			if err != nil {
				sp.release()
				return nil, err
			}
			ly.seqs[s].accepted = cpuref.Inputs{StateIn: in.StateIn, ALog: ly.consts.ALog, DtBias: ly.consts.DtBias,
				ConvState: in.ConvState, ConvWeight: ly.consts.ConvWeight, NormWeight: ly.consts.NormWeight}
			sp.pools[0].Set(l, int(slot), in.StateIn)
			if one.Core.Conv > 0 {
				layerstack.Store(sp.convSlot(ly.conv[0], int(slot)), in.ConvState)
			}
		}
		sp.layers = append(sp.layers, ly)
	}
	return sp, nil
}

// allocCore makes layer l's views of the layer core and draws its conv
// and norm weights.
func (sp *speculation) allocCore(l int, ly *layer) error {
	p, a := sp.pw, sp.pw.Activation
	w, err := cpuref.RandomInputs(sp.cfg.Params(1), layerstack.Seed(sp.cfg.Seed, l, -2))
	if err != nil {
		return err
	}
	ly.consts.ConvWeight, ly.consts.NormWeight = w.ConvWeight, w.NormWeight
	view := func(n int) (gdn.View, error) {
		b, err := sp.buffer(n * a.Size())
		return gdn.NewView(b, 0, a, n), err
	}
	for _, v := range []struct {
		dst *gdn.View
		n   int
	}{{&ly.mixed, p.MixedLen()}, {&ly.z, p.ZLen()}, {&ly.convW, p.ConvWeightLen()}, {&ly.normW, p.DV}} {
		if *v.dst, err = view(v.n); err != nil {
			return err
		}
	}
	for i, pool := range sp.pools {
		ly.conv[i] = pool.ConvPool(l) // beside the states, slot for slot
	}
	if ly.conv[0].Len != p.ConvStateLen() {
		return fmt.Errorf("layer %d: a conv-state pool of %d elements, the window reads %d", l, ly.conv[0].Len, p.ConvStateLen())
	}
	layerstack.Store(ly.convW, w.ConvWeight)
	layerstack.Store(ly.normW, w.NormWeight)
	return nil
}

// convSlot returns the view of slot of the conv-state pool v.
func (sp *speculation) convSlot(v gdn.View, slot int) gdn.View {
	n := sp.cfg.Params(1).ConvStateLen()
	return gdn.NewView(v.Buffer, v.Offset+slot*n*v.Type.Size(), v.Type, n)
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
// slots, the pool it reads, the pool it writes and the capture buffer
// (with the convolution q, k and v empty: it makes them).
func (sp *speculation) buffers(l int) gdn.Buffers {
	b := sp.acts.Buffers(l)
	b.StateIn, b.StateOut = sp.pools[sp.cur].Pool(l), sp.pools[1-sp.cur].Pool(l)
	b.Capture = gdn.NewView(sp.layers[l].capture, 0, sp.pw.State, sp.pw.CaptureLen())
	if sp.pw.Core.Conv > 0 {
		b.Q, b.K, b.V = gdn.View{}, gdn.View{}, gdn.View{}
	}
	return b
}

// coreBuffers returns layer l's views of the layer core in a window: the
// conv-state pool it reads and the one it writes, as for the states.
func (sp *speculation) coreBuffers(l int) gdn.CoreBuffers {
	ly := sp.layers[l]
	return gdn.CoreBuffers{MixedQKV: ly.mixed, ConvWeight: ly.convW, ConvStateIn: ly.conv[sp.cur], ConvStateOut: ly.conv[1-sp.cur], Z: ly.z, NormWeight: ly.normW}
}

// copied counts the bytes a rollback copied.
type copied struct{ state, conv int }

// window runs steps 1, 2 and 4 of draft window step, of which sequence s
// accepted accepted[s] tokens (step 3, the caller's), and returns its wall
// clock and the bytes the rollback copied.
func (sp *speculation) window(step int, accepted []int32) (wall time.Duration, c copied, err error) {
	core := sp.pw.Core != (spec.Core{})
	// 1. Draft k tokens of every sequence: every layer's inputs.
	drafts := make([]cpuref.Inputs, len(sp.layers))
	for l, ly := range sp.layers {
		if drafts[l], err = cpuref.RandomInputs(sp.pw, layerstack.Seed(sp.cfg.Seed, l, step)); err != nil {
			return 0, copied{}, err
		}
		drafts[l].Slots = sp.slots // the sequences' own, not the draw's
		drafts[l].ALog, drafts[l].DtBias = ly.consts.ALog, ly.consts.DtBias
		drafts[l].ConvWeight, drafts[l].NormWeight, drafts[l].ConvState = ly.consts.ConvWeight, ly.consts.NormWeight, nil
		sp.acts.Write(l, drafts[l])
		if core {
			layerstack.Store(ly.mixed, drafts[l].MixedQKV)
			layerstack.Store(ly.z, drafts[l].Z)
		}
	}

	// 2. Run the window through every layer, capturing the state after
	// every token of every sequence.
	start := time.Now()
	if core {
		err = sp.d.Queue.Run(func(enc *mtl.ComputeCommandEncoder) error {
			for l := range sp.layers {
				if err := sp.d.Kernels.DecodeCore(enc, sp.pw, sp.buffers(l), sp.coreBuffers(l)); err != nil {
					return fmt.Errorf("layer %d: %w", l, err)
				}
			}
			return nil
		})
	} else {
		_, _, err = sp.d.RunLayers((*gdn.Kernels).DecodeWithCapture, sp.pw, len(sp.layers), sp.buffers)
	}
	if err != nil {
		return 0, copied{}, fmt.Errorf("window %d: %w", step, err)
	}

	// 4. Every sequence's state after its accepted prefix, in the pool the
	// window wrote: one blit encoder for the batch and every layer.
	if !sp.cfg.keepLastDraft {
		if c, err = sp.rollback(accepted); err != nil {
			return 0, copied{}, fmt.Errorf("window %d: rollback: %w", step, err)
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
	return wall, c, nil
}

// rollback encodes gdn.Rollback (with the layer core gdn.RollbackCore,
// both states) for every layer on one blit encoder, runs it, and returns
// the bytes it copied.
func (sp *speculation) rollback(accepted []int32) (copied, error) {
	err := sp.d.Queue.RunCommandBuffer(func(cb *mtl.CommandBuffer) error {
		blit, err := cb.BlitCommandEncoder()
		if err != nil {
			return err
		}
		for l := range sp.layers {
			if sp.pw.Core != (spec.Core{}) && !sp.cfg.stateOnlyRollback {
				err = gdn.RollbackCore(blit, sp.pw, sp.buffers(l), sp.coreBuffers(l), accepted)
			} else if sp.pw.Core != (spec.Core{}) {
				// The wrong restore (tests only): the recurrent state alone,
				// with the parameters and views of a dispatch without the core.
				p, b, full := sp.pw, sp.buffers(l), sp.acts.Buffers(l)
				p.Core, b.Q, b.K, b.V = spec.Core{}, full.Q, full.K, full.V
				err = gdn.Rollback(blit, p, b, accepted)
			} else {
				err = gdn.Rollback(blit, sp.pw, sp.buffers(l), accepted)
			}
			if err != nil {
				blit.EndEncoding()
				return fmt.Errorf("layer %d: %w", l, err)
			}
		}
		return blit.EndEncoding()
	})
	if err != nil {
		return copied{}, err
	}
	copies := 0
	for _, a := range accepted {
		if int(a) < sp.cfg.k {
			copies++
		}
	}
	one := sp.cfg.Params(1)
	c := copied{state: copies * len(sp.layers) * sp.pw.State.Size() * one.StateLen()}
	if one.Core.Conv > 0 && !sp.cfg.stateOnlyRollback {
		c.conv = copies * len(sp.layers) * sp.pw.Activation.Size() * one.ConvStateLen()
	}
	return c, nil
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

// convState returns sequence s's conv state in layer l (its slot of the
// conv-state pool the next window reads); nil without the convolution.
func (sp *speculation) convState(l, s int) []float32 {
	if sp.pw.Core.Conv == 0 {
		return nil
	}
	one := sp.cfg.Params(1)
	return layerstack.Load(sp.convSlot(sp.layers[l].conv[sp.cur], int(sp.slots[s])), make([]float32, one.ConvStateLen()))
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
// initial state with gdn.Kernels.Decode (with the layer core
// gdn.Kernels.DecodeCore without capture, its conv state in two buffers that
// swap every call), one command buffer per call of calls[i] tokens with
// one dispatch per layer, with no pool, and returns the final states and
// conv states and the outputs.
func plainDecode(sp *speculation, s int, calls []int) (states, convs, outputs [][]float32, err error) {
	p1 := sp.cfg.Params(1)
	layers := len(sp.layers)
	acts, err := layerstack.NewActivations(sp.d.Dev, p1, layers)
	if err != nil {
		return nil, nil, nil, err
	}
	defer acts.Release()
	st, err := layerstack.NewStates(sp.d.Dev, p1, layers, 1)
	if err != nil {
		return nil, nil, nil, err
	}
	defer st.Release()
	core := p1.Core != (spec.Core{})
	// With the core: per layer mixed_qkv and z of the longest call, and
	// two conv states.
	type coreViews struct {
		mixed, z *mtl.Buffer
		conv     [2]gdn.View
	}
	var cv []coreViews
	var bufs []*mtl.Buffer
	defer func() {
		for _, b := range bufs {
			b.Release()
		}
	}()
	newBuf := func(n int) (*mtl.Buffer, error) {
		b, err := sp.d.Dev.NewBuffer(max(n*p1.Activation.Size(), 1), mtl.ResourceStorageModeShared)
		if err == nil {
			bufs = append(bufs, b)
		}
		return b, err
	}
	if core {
		longest := slices.Max(append([]int{1}, calls...))
		pl := sp.cfg.Params(longest)
		for range layers {
			var c coreViews
			var errs [4]error
			var conv [2]*mtl.Buffer
			c.mixed, errs[0] = newBuf(pl.MixedLen())
			c.z, errs[1] = newBuf(pl.ZLen())
			conv[0], errs[2] = newBuf(p1.ConvStateLen())
			conv[1], errs[3] = newBuf(p1.ConvStateLen())
			for _, e := range errs {
				if e != nil {
					return nil, nil, nil, e
				}
			}
			for i := range conv {
				c.conv[i] = gdn.NewView(conv[i], 0, p1.Activation, p1.ConvStateLen())
			}
			cv = append(cv, c)
		}
	}
	for l, ly := range sp.layers {
		st.Set(l, 0, ly.seqs[s].accepted.StateIn)
		if core {
			layerstack.Store(cv[l].conv[0], ly.seqs[s].accepted.ConvState)
		}
	}
	outputs = make([][]float32, layers)
	t := 0
	for call, n := range calls {
		pn := sp.cfg.Params(n)
		if err := acts.Reshape(pn); err != nil {
			return nil, nil, nil, err
		}
		for l, ly := range sp.layers {
			in := layerstack.Tokens(p1, ly.seqs[s].accepted, t, n)
			acts.Write(l, in)
			if core {
				layerstack.Store(gdn.NewView(cv[l].mixed, 0, p1.Activation, pn.MixedLen()), in.MixedQKV)
				layerstack.Store(gdn.NewView(cv[l].z, 0, p1.Activation, pn.ZLen()), in.Z)
			}
		}
		views := func(l int) gdn.Buffers {
			b := acts.Buffers(l)
			b.StateIn, b.StateOut = st.Pool(l), st.Pool(l)
			if core {
				b.Q, b.K, b.V = gdn.View{}, gdn.View{}, gdn.View{}
			}
			return b
		}
		if core {
			err = sp.d.Queue.Run(func(enc *mtl.ComputeCommandEncoder) error {
				for l := range layers {
					c := cv[l]
					cb := gdn.CoreBuffers{MixedQKV: gdn.NewView(c.mixed, 0, p1.Activation, pn.MixedLen()), ConvWeight: sp.layers[l].convW,
						ConvStateIn: c.conv[call%2], ConvStateOut: c.conv[(call+1)%2], Z: gdn.NewView(c.z, 0, p1.Activation, pn.ZLen()), NormWeight: sp.layers[l].normW}
					if err := sp.d.Kernels.DecodeCore(enc, pn, views(l), cb); err != nil {
						return fmt.Errorf("layer %d: %w", l, err)
					}
				}
				return nil
			})
		} else {
			_, _, err = sp.d.RunLayers((*gdn.Kernels).Decode, pn, layers, views)
		}
		if err != nil {
			return nil, nil, nil, fmt.Errorf("plain decode of sequence %d, tokens %d to %d: %w", s, t, t+n-1, err)
		}
		for l := range outputs {
			outputs[l] = append(outputs[l], acts.ReadOutput(l, make([]float32, pn.VLen()))...)
		}
		t += n
	}
	for l := range layers {
		states = append(states, st.Read(l, 0))
		var conv []float32
		if core {
			conv = layerstack.Load(cv[l].conv[len(calls)%2], make([]float32, p1.ConvStateLen()))
		}
		convs = append(convs, conv)
	}
	return states, convs, outputs, nil
}

// checkReference compares every sequence's final state (and conv state)
// and accepted outputs in every layer with cpuref.Reference32 run over
// each window's accepted tokens in one call (a 16-bit state rounded once
// per window, as the speculative run rounds it), into res.
func checkReference(cfg config, layers []*layer, res *result) error {
	one := cfg.Params(1)
	for l, ly := range layers {
		for s, q := range ly.seqs {
			state, conv, t := q.accepted.StateIn, q.accepted.ConvState, 0
			var outs []float32
			for _, a := range res.Accepted[s] {
				if a == 0 {
					continue
				}
				in := layerstack.Tokens(one, q.accepted, t, a)
				in.StateIn, in.ConvState = state, conv
				ref, err := cpuref.Reference32(cfg.Params(a), in, false)
				if err != nil {
					return err
				}
				state, conv, outs, t = ref.StateOut, ref.ConvState, append(outs, ref.Output...), t+a
			}
			res.StateErr = max(res.StateErr, cpuref.MaxRelErr(res.FinalState[s][l], state))
			res.OutputErr = max(res.OutputErr, cpuref.MaxRelErr(q.outputs, outs))
			if one.Core.Conv > 0 {
				res.ConvErr = max(res.ConvErr, cpuref.MaxRelErr(res.FinalConv[s][l], conv))
			}
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
