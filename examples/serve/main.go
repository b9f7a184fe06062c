// Command serve simulates a server batching requests continuously through
// a stack of Gated DeltaNet layers, the way vLLM and MLX servers run hybrid
// models: every layer keeps a fixed pool of recurrent states on the
// device, and each step runs one dispatch per layer over a batch whose
// sequences live in arbitrary slots of that pool.
//
// Requests arrive over time, each with a prompt of its own length and a
// number of tokens to generate. Each step of the simulation
//
//  1. admits waiting requests while the pool has a free slot, handing each
//     a free slot (drawn at random among the free ones, so slots are reused
//     in no particular order) and zeroing that slot's state in every
//     layer;
//  2. prefills the admitted requests' prompts in one prefill dispatch per
//     layer: the prompts packed along one token axis with cu_seqlens
//     (variable lengths), each sequence reading and writing its slot;
//  3. decodes one token of every request admitted before this step in one
//     decode dispatch per layer over a batch of fixed width (the pool's
//     size, as servers capture fixed batch sizes), the positions no
//     request fills padded with slot -1, which the kernel skips;
//  4. retires the requests that generated all their tokens, freeing their
//     slots for the next admissions.
//
// By default every dispatch is a Qwen3.5 layer's whole core (-core,
// gdn.Kernels.DecodeCore, SPEC section 13), prefill and decode alike: the
// pre-convolution mixed_qkv through the short convolution (K = 4) with a
// conv state per slot, indexed by the same slot as the recurrent state,
// SiLU, the step, and the gated RMSNorm with z; -core=false gives the
// step q, k and v directly. The core kernel updates the conv-state pool
// in place, as it does the recurrent state pool: with grouped heads it then
// runs one threadgroup per key head, the only one that reads and writes
// the key head's q and k conv state, so every touched slot's conv state is
// read once and written once ((K-1) conv_dim activations per sequence and
// layer, 48 KiB each way at Qwen3.5's shape in bf16 beside its 2 MiB f32
// state) and the slots a step does not touch stay as they are: the bytes
// the states move are the floor, which the report says (on the emulated
// device measured by its counters).
//
// Each layer's inputs are drawn like a real model's (cpuref.RandomInputs)
// per request, layer and token, so any run can be replayed. By default
// they are what a Qwen3.5 layer hands its recurrent core, as in
// examples/decode: bf16 activations (-dtype), an f32 state (-state) and
// the fused step (-fused): raw q and k, v, and the raw gate projections a
// and b, with the layer's A_log and dt_bias, from which the kernels
// normalise q and k and compute g and beta; with -fused=false q and k come
// normalised and g and beta computed.
//
// On a device (metal, emu) the steps overlap, as a server keeps its GPU
// busy: step t's command buffers are committed without waiting
// (mtl.CommandQueue.Submit), and step t+1's admissions, retirements and
// inputs are decided, drawn, packed and written to a second set of
// buffers while the device runs step t; only what needs step t done
// (reading its outputs and the final states of the requests it finished,
// zeroing the slots step t+1 admits into) waits for it. The report says
// how much of the host's preparation ran while the device was busy
// (-overlap=false prepares each step after the previous one completed).
//
// At the end it reports tokens per second (prompt and generated tokens
// over the wall clock of the dispatches), dispatches per step (with the
// core, one per layer and batch), which kernel ran the prefills, the bytes the states moved against the
// floor, and the pool's occupancy; and it checks every finished request
// against a run of that request alone on the same backend, from a zero
// state, with no slots and no packing (a prefill of its prompt, then one
// decode per token): the same kernels on the same bytes, so every output
// and the final state of every layer (with the convolution the conv state
// too) must be bit-identical, whatever the types. (Kernels.Prefill picks
// the chunked kernel from gdn.ChunkedMinTokens packed tokens on, whose
// sums run in another order than the token-by-token kernel's, so a
// request prefilled in a batch that long is prefilled alone with the
// chunked kernel too.) Check 2 holds the outputs and final states (and
// conv states) against cpuref.Reference32 run as the
// request was (its prompt in one call, then one call per token, so that a
// 16-bit state is rounded where the kernels round it; with an f32 state
// that is the same as one call), within SPEC.md section 9's bounds: 1e-5 for
// an f32 result, 2^-8 for bf16, 2^-10 for f16. The cpu backend, which is
// Reference32 with slots and cu_seqlens, does not run check 2, and says
// so: it would compare the reference with itself (cpuref's own tests hold
// Reference32 against the float64 oracle). It exits with status 1 when a
// check fails, 2 when a flag is bad.
//
// Run it from the repository root:
//
//	go run ./examples/serve                   # Metal on a Mac, else the emulated device, else the CPU reference
//	go run ./examples/serve -backend emu      # the real kernels on the emulated device
//	go run ./examples/serve -slots 16 -requests 64 -prompt 32
//	go run ./examples/serve -dtype f32 -fused=false -state bf16
//	go run ./examples/serve -core=false       # the step alone: q, k and v given
//
// Backends as in examples/decode: metal, emu (smaller shapes unless shape
// flags are given), cpu (cpuref.Reference32 with slots and cu_seqlens) and
// auto (metal where there is Metal, else emu where the emulated device
// runs, else cpu, each step down said with its reason).
package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"time"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/examples/internal/layerstack"
	"github.com/puremetal/puremetal/gdn"
	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/internal/floats"
)

func main() {
	os.Exit(cli(os.Args[1:], os.Stdout, os.Stderr))
}

// config is what the flags say.
type config struct {
	*layerstack.Flags
	slots    int // states in every layer's pool
	requests int // requests in all
	prompt   int // longest prompt
	gen      int // most tokens generated per request
	arrive   int // most requests arriving per step
	// keepStale leaves a reused slot holding its last request's state
	// instead of zeroing it: the wrong admission, which the checks must
	// catch (tests only).
	keepStale bool
	// discardConv makes the core kernel write the conv states into a
	// pool of their own that nothing reads, instead of updating the pool
	// in place (see core.go): the wrong pool handling, which the checks
	// must catch (tests only).
	discardConv bool
	// overlap prepares step t+1 while the device runs step t (device
	// backends).
	overlap bool
	// consts[l] holds layer l's A_log and dt_bias with the fused gate,
	// and its conv and norm weights with the layer core, which every
	// request's tokens share (set by run; its initial states unused: the
	// pools' slots start zeroed).
	consts []cpuref.Inputs
}

// cli reads the flags in args, opens the backend they name, serves the
// requests and checks them, and returns the exit status (see
// layerstack.Command): 1 when a request differs from its run alone too.
var cli = layerstack.Command("serve", parseFlags, openBackend, run)

// parseFlags returns what args say, or an error naming a bad flag: a
// known backend, and every count of the load above zero.
func parseFlags(args []string, stderr io.Writer) (config, error) {
	fs := layerstack.NewFlagSet("serve", "Simulates continuous batching through Gated DeltaNet layers with a pool of state slots, checked against each request run alone.", stderr)
	cfg := config{Flags: layerstack.Define(fs, layerstack.BackendsWithCPU, 2)}
	fs.IntVar(&cfg.slots, "slots", 8, "states in every layer's pool: the most requests in flight")
	fs.IntVar(&cfg.requests, "requests", 24, "requests in all")
	fs.IntVar(&cfg.prompt, "prompt", 12, "longest prompt, in tokens (each request's is drawn from 1 to this)")
	fs.IntVar(&cfg.gen, "gen", 6, "most tokens a request generates (each draws from 1 to this)")
	fs.IntVar(&cfg.arrive, "arrive", 3, "most requests arriving per step (each step draws from 0 to this)")
	cfg.DefineCore(fs, "the whole layer core in each dispatch: mixed_qkv through the short convolution with a conv state per slot, and the gated RMSNorm with z (false: q, k and v given, the recurrence's output)")
	fs.BoolVar(&cfg.overlap, "overlap", true, "on a device, prepare step t+1 (admission, drawing and packing the inputs, writing them to the device's buffers) while the device runs step t")
	if err := cfg.Parse(fs, args); err != nil {
		return config{}, err
	}
	for _, f := range []struct {
		name string
		n    int
	}{{"slots", cfg.slots}, {"requests", cfg.requests}, {"prompt", cfg.prompt}, {"gen", cfg.gen}, {"arrive", cfg.arrive}} {
		if f.n <= 0 {
			return config{}, fmt.Errorf("-%s %d: must be > 0", f.name, f.n)
		}
	}
	return cfg, nil
}

// request is one sequence served: its lengths, where it is, and what the
// server computed for it.
type request struct {
	id             int
	prompt, gen    int
	slot           int // -1 before admission and after retirement
	generated      int
	admitted, done int // steps
	// prefill is the prefill kernel of the request's batch: what
	// Kernels.Prefill picked for the batch's packed tokens.
	prefill gdn.Kernel

	// outputs[l] holds layer l's outputs of the request's tokens so far,
	// prompt first; final[l] its state when it finished.
	outputs [][]float32
	final   [][]float32
	// finalConv[l] is layer l's conv state when it finished, with the
	// convolution.
	finalConv [][]float32
}

// tokens returns the request's token count: prompt and generated.
func (r *request) tokens() int { return r.prompt + r.gen }

// result is what a run found.
type result struct {
	Steps, Dispatches int
	Tokens            int           // prompt and generated tokens processed
	Busy              time.Duration // wall clock of the dispatches
	Occupancy         []int         // slots in use after admission, per step
	Finished          int
	Bits              bool    // every finished request bit-identical to its run alone
	RefErr            float64 // worst final state against the CPU reference
	OutErr            float64 // worst output against the CPU reference
	ConvErr           float64 // worst final conv state against the CPU reference (bound OutBound: the activation type's)
	RefBound          float64 // the bound on RefErr: the state type's
	OutBound          float64 // the bound on OutErr: the activation type's
	SlotsReused       int     // admissions into a slot an earlier request had used
	// Prefills counts the prefill batches, Long those of them of
	// gdn.ChunkedMinTokens packed tokens or more, and Chunked those the
	// chunked kernel ran: without the layer core Kernels.Prefill's choice
	// for the long ones; with it none, Kernels.DecodeCore running every window.
	Prefills, Long, Chunked int
	// SeqSteps counts the sequences the batches touched (padding not
	// counted): each moves its state and conv state once per layer.
	SeqSteps int
	// Overlapped reports whether steps were prepared while the device
	// ran the previous one; HostPrep is the host's preparation of the
	// steps that had a previous one in flight, HostHidden the part of it
	// that ran while the device was still busy with that step.
	Overlapped           bool
	HostPrep, HostHidden time.Duration
	Wall                 time.Duration // the serving loop's wall clock, host and device
	// Measured says whether the core's steps were measured (the emulated
	// device's counters); StateMoved and ConvMoved are the recurrent and
	// conv state bytes they loaded and stored.
	Measured              bool
	StateMoved, ConvMoved uint64
}

// Pass reports whether every check passed.
func (r result) Pass() bool {
	return r.Bits && r.RefErr <= r.RefBound && r.OutErr <= r.OutBound && r.ConvErr <= r.OutBound && r.Finished > 0
}

// openBackend opens the backend cfg names (auto: metal, else emu, else
// cpu; see layerstack.Flags.Open), with smaller defaults on the emulated
// device.
func openBackend(cfg *config, stdout io.Writer) (backend, error) {
	d, err := cfg.Open(stdout,
		layerstack.Fallback{Backend: "cpu", Says: "running the CPU reference (cpuref.Reference32, with slots and cu_seqlens) instead"})
	if err != nil {
		return nil, err
	}
	if d == nil {
		return &cpuBackend{}, nil
	}
	return &deviceBackend{d: d}, nil
}

// inputs draws request r's inputs of layer l for tokens [t0, t0+n), as one
// call (its StateIn unset), with the layer's A_log and dt_bias.
func inputs(cfg config, r *request, l, t0, n int) (cpuref.Inputs, error) {
	in, err := cpuref.RandomInputs(cfg.Params(n), layerstack.Seed(cfg.Seed, l, r.id*(cfg.prompt+cfg.gen)+t0))
	return layerstack.WithConstants(in, cfg.consts[l]), err
}

// run serves cfg.requests requests on be and checks them, a line per
// step on stderr and the report on stdout.
func run(cfg config, be backend, stdout, stderr io.Writer) (result, error) {
	one := cfg.Params(1)
	if err := one.Validate(); err != nil {
		return result{}, err
	}
	var err error
	if cfg.consts, err = layerstack.Constants(one, cfg.Seed, cfg.Layers); err != nil {
		return result{}, err
	}
	fmt.Fprintf(stdout, "backend: %s\n", be.Describe())
	fmt.Fprintf(stdout, "shape:   D_k=%d D_v=%d n_k_heads=%d n_v_heads=%d, %s head map; layers %d; pool of %d slots per layer (%.2f MB of state per layer)\n",
		one.DK, one.DV, one.NKHeads, one.NVHeads, one.HeadMap, cfg.Layers, cfg.slots, float64(one.State.Size()*one.StateLen()*cfg.slots)/1e6)
	fmt.Fprintf(stdout, "types:   %s\n", layerstack.Types(one))
	if one.Core != (spec.Core{}) {
		fmt.Fprintf(stdout, "core:    the whole layer core in each dispatch: mixed_qkv (%d channels) through the short convolution (K = %d) with a %s conv state per slot (%.2f MB per layer), SiLU, the step, the gated RMSNorm with z (silu, eps %g)\n",
			one.ConvDim(), one.Core.Conv, one.Activation, float64(one.Activation.Size()*one.ConvStateLen()*cfg.slots)/1e6, one.Core.NormEps)
	}
	fmt.Fprintf(stdout, "load:    %d requests, prompts of 1 to %d tokens, 1 to %d generated, 0 to %d arriving per step, seed %d\n",
		cfg.requests, cfg.prompt, cfg.gen, cfg.arrive, cfg.Seed)
	if err := be.Open(one, cfg.consts, cfg.slots); err != nil {
		return result{}, err
	}
	if db, ok := be.(*deviceBackend); ok && db.core != nil && cfg.discardConv {
		if err := db.core.discardConvStates(db.d.Dev); err != nil {
			return result{}, err
		}
	}

	var (
		res      result
		finished []*request
	)
	start := time.Now()
	if ob, ok := be.(overlapper); ok && cfg.overlap {
		res, finished, err = serveOverlapped(cfg, ob, stderr)
	} else {
		res, finished, err = serveSerial(cfg, be, stderr)
	}
	if err != nil {
		return result{}, err
	}
	res.Wall = time.Since(start)
	res.Finished = len(finished)
	if db, ok := be.(*deviceBackend); ok && db.core != nil {
		if res.StateMoved, res.ConvMoved, res.Measured, err = db.core.Traffic(); err != nil {
			return result{}, err
		}
	}
	report(cfg, res, stdout)

	res.RefBound, res.OutBound = layerstack.BoundOf(one.State, layerstack.Bound), layerstack.BoundOf(one.Activation, layerstack.Bound)
	if err := check(cfg, be, finished, &res, stdout); err != nil {
		return result{}, err
	}
	verdict := "PASS"
	if !res.Pass() {
		verdict = "FAIL"
	}
	fmt.Fprintln(stdout, verdict)
	return res, nil
}

// serveSerial serves cfg.requests requests on be, one step after another:
// each step's batches are drawn, written, run and waited for before the
// next step is prepared. It returns what it counted and the finished
// requests, in the order they finished.
func serveSerial(cfg config, be backend, stderr io.Writer) (result, []*request, error) {
	var res result
	s := newScheduler(cfg)
	for step := 0; ; step++ {
		// 1. Admission, the slots zeroed at once.
		admitted, decoding := s.admit(step, &res, be.Reset)
		// 2. Prefill of the admitted prompts, 3. a decode step of the others.
		if len(admitted) > 0 {
			if err := prefill(cfg, be, admitted, &res); err != nil {
				return result{}, nil, fmt.Errorf("step %d: prefill: %w", step, err)
			}
		}
		if len(decoding) > 0 {
			if err := decode(cfg, be, decoding, &res); err != nil {
				return result{}, nil, fmt.Errorf("step %d: decode: %w", step, err)
			}
		}
		// 4. Retirement, the final states read at once.
		s.retire(step, func(r *request, slot int) {
			for l := range r.final {
				r.final[l] = be.State(l, slot)
				r.finalConv[l] = be.ConvState(l, slot)
			}
		})
		over, err := s.end(step, &res, admitted, decoding, stderr)
		if err != nil {
			return result{}, nil, err
		}
		if over {
			return res, s.finished, nil
		}
	}
}

// batchPlan is one batch of a step, drawn and packed on the host: its
// dispatcher's kernel, its shape, every layer's inputs, and the requests
// whose tokens it holds (request s has tokens cu[s] to cu[s+1]).
type batchPlan struct {
	kern  gdn.Kernel
	p     gdn.Params
	batch []cpuref.Inputs
	reqs  []*request
	cu    []int32
}

// prefill runs the admitted requests' prompts: one prefill dispatch per
// layer over the prompts packed with cu_seqlens, in their slots.
func prefill(cfg config, be backend, admitted []*request, res *result) error {
	plan, err := prefillBatch(cfg, admitted, res)
	if err != nil {
		return err
	}
	return dispatch(be, plan, res)
}

// prefillBatch draws and packs the admitted requests' prompts.
func prefillBatch(cfg config, admitted []*request, res *result) (batchPlan, error) {
	p := cfg.Params(0)
	p.NSeqs, p.NSlots, p.Varlen = len(admitted), cfg.slots, true
	batch := make([]cpuref.Inputs, cfg.Layers)
	for _, r := range admitted {
		p.NTokens += r.prompt
	}
	for l := range batch {
		batch[l] = layerstack.WithConstants(cpuref.Inputs{}, cfg.consts[l])
		b := &batch[l]
		b.CuSeqlens = []int32{0}
		for _, r := range admitted {
			in, err := inputs(cfg, r, l, 0, r.prompt)
			if err != nil {
				return batchPlan{}, err
			}
			layerstack.AppendTokens(b, in)
			b.Slots = append(b.Slots, int32(r.slot))
			b.CuSeqlens = append(b.CuSeqlens, b.CuSeqlens[len(b.CuSeqlens)-1]+int32(r.prompt))
		}
	}
	kern := gdn.KernelPrefill
	res.Prefills++
	if p.NTokens >= gdn.ChunkedMinTokens {
		res.Long++
		if p.Core == (spec.Core{}) { // Kernels.DecodeCore runs any window itself
			kern = gdn.KernelPrefillChunked
			res.Chunked++
		}
	}
	for _, r := range admitted {
		r.prefill = kern
	}
	return batchPlan{gdn.KernelPrefill, p, batch, admitted, batch[0].CuSeqlens}, nil
}

// decode runs one token of every request in decoding: one decode dispatch
// per layer over a batch of the pool's width, padded with slot -1.
func decode(cfg config, be backend, decoding []*request, res *result) error {
	plan, err := decodeBatch(cfg, decoding)
	if err != nil {
		return err
	}
	return dispatch(be, plan, res)
}

// decodeBatch draws and packs one token of every request in decoding,
// padded to the pool's width, and counts that token generated.
func decodeBatch(cfg config, decoding []*request) (batchPlan, error) {
	p := cfg.Params(1)
	p.NSeqs, p.NSlots = cfg.slots, cfg.slots
	batch := make([]cpuref.Inputs, cfg.Layers)
	for l := range batch {
		batch[l] = layerstack.WithConstants(cpuref.Inputs{}, cfg.consts[l])
		b := &batch[l]
		for s := range p.NSeqs {
			if s >= len(decoding) {
				pad, err := cpuref.RandomInputs(cfg.Params(1), 0) // any values: the kernel reads none
				if err != nil {
					return batchPlan{}, err
				}
				layerstack.AppendTokens(b, pad)
				b.Slots = append(b.Slots, -1)
				continue
			}
			r := decoding[s]
			in, err := inputs(cfg, r, l, r.prompt+r.generated, 1)
			if err != nil {
				return batchPlan{}, err
			}
			layerstack.AppendTokens(b, in)
			b.Slots = append(b.Slots, int32(r.slot))
		}
	}
	cu := make([]int32, len(decoding)+1) // one token each
	for s := range cu {
		cu[s] = int32(s)
	}
	for _, r := range decoding {
		r.generated++
	}
	return batchPlan{gdn.KernelDecode, p, batch, decoding, cu}, nil
}

// dispatch runs the plan's kernel over its batch on every layer and
// records what it computed (see record).
func dispatch(be backend, plan batchPlan, res *result) error {
	out, took, err := be.Run(plan.kern, plan.p, plan.batch)
	if err != nil {
		return err
	}
	record(plan, out, res)
	res.Busy += took
	return nil
}

// record appends to each of the plan's requests the outputs of its tokens
// (out[l] holds layer l's), and counts the tokens and the dispatches in
// res.
func record(plan batchPlan, out [][]float32, res *result) {
	vw := plan.p.DV * plan.p.NVHeads
	cu := plan.cu
	for l := range out {
		for s, r := range plan.reqs {
			r.outputs[l] = append(r.outputs[l], out[l][int(cu[s])*vw:int(cu[s+1])*vw]...)
		}
	}
	res.Tokens += int(cu[len(plan.reqs)])
	res.SeqSteps += len(plan.reqs)
	res.Dispatches += len(plan.batch)
}

func report(cfg config, res result, stdout io.Writer) {
	peak, sum := 0, 0
	for _, o := range res.Occupancy {
		peak, sum = max(peak, o), sum+o
	}
	fmt.Fprintf(stdout, "served:  %d requests in %d steps, %d tokens (prompt and generated) at %.0f tokens/s (wall clock of the dispatches, %s)\n",
		res.Finished, res.Steps, res.Tokens, float64(res.Tokens)/res.Busy.Seconds(), layerstack.Duration(res.Busy))
	fmt.Fprintf(stdout, "steps:   %.2f dispatches per step (one prefill and one decode dispatch per layer at most, %d layers)\n",
		float64(res.Dispatches)/float64(res.Steps), cfg.Layers)
	fmt.Fprintf(stdout, "prefill: %s\n", prefills(cfg, res))
	if p := cfg.Params(1); p.Core != (spec.Core{}) {
		reportCore(cfg, p, res, stdout)
	}
	if res.Overlapped {
		pct := 0.0
		if res.HostPrep > 0 {
			pct = 100 * res.HostHidden.Seconds() / res.HostPrep.Seconds()
		}
		fmt.Fprintf(stdout, "overlap: step t+1 prepared (admission, inputs drawn and packed, written to the second set of buffers) while the device ran step t: %s of the %s of host preparation hidden behind the device (%.0f%%)\n",
			layerstack.Duration(res.HostHidden), layerstack.Duration(res.HostPrep), pct)
	}
	mode := "each step prepared after the previous one completed (-overlap=false, or a backend that waits)"
	if res.Overlapped {
		mode = "steps overlapped"
	}
	fmt.Fprintf(stdout, "loop:    the serving loop took %s of wall clock, host and device, %s\n", layerstack.Duration(res.Wall), mode)
	fmt.Fprintf(stdout, "pool:    occupancy %.1f of %d slots on average, %d at the peak; %d admissions reused a freed slot\n",
		float64(sum)/float64(len(res.Occupancy)), cfg.slots, peak, res.SlotsReused)
}

// prefills says which kernel ran the prefill batches: with the layer core
// gdn.Kernels.DecodeCore, whatever their length; without it Kernels.Prefill's
// choice, the chunked kernel from gdn.ChunkedMinTokens packed tokens on.
func prefills(cfg config, res result) string {
	long := fmt.Sprintf("%d of them of %d packed tokens or more", res.Long, gdn.ChunkedMinTokens)
	switch {
	case cfg.Backend == "cpu" && cfg.Core:
		return fmt.Sprintf("%d batches, all run by cpuref.Reference32; %s, which a device runs with gdn.Kernels.DecodeCore as the others", res.Prefills, long)
	case cfg.Backend == "cpu":
		return fmt.Sprintf("%d batches, all run by cpuref.Reference32; %s, which a device runs with the chunked kernel of gdn.Kernels.Prefill", res.Prefills, long)
	case cfg.Core:
		return fmt.Sprintf("%d batches, every one run by gdn.Kernels.DecodeCore, which takes a window of any length: %s, none chunked", res.Prefills, long)
	}
	return fmt.Sprintf("%d batches run by gdn.Kernels.Prefill, %d of them with the chunked kernel (those of %d packed tokens or more)", res.Prefills, res.Chunked, gdn.ChunkedMinTokens)
}

// reportCore says what the layer core dispatches cost: one dispatch per
// layer and batch, and the bytes the states move against the floor.
func reportCore(cfg config, p spec.Params, res result, stdout io.Writer) {
	state := p.State.Size() * p.StateLen()
	conv := p.Activation.Size() * p.ConvStateLen()
	touched := res.SeqSteps * cfg.Layers // sequences times layers
	floor := 2 * (state + conv) * touched
	fmt.Fprintf(stdout, "kernel:  1 dispatch per layer and batch (prefill or decode): the short convolution with its conv state, SiLU, the fused step and the gated RMSNorm in it (gdn.Kernels.DecodeCore); peers run the convolution and the norm as dispatches of their own\n")
	fmt.Fprintf(stdout, "traffic: %s of %s state and %s conv state over the run (%d sequences x %d layers, each state read once and written once: the floor, %d + %d bytes each way per sequence and layer)\n",
		mb(floor), p.State, p.Activation, res.SeqSteps, cfg.Layers, state, conv)
	if cfg.Backend != "cpu" && p.Core.Conv > 0 {
		fmt.Fprintf(stdout, "         the conv-state pool updated in place (ConvStateOut = ConvStateIn; with grouped heads the kernel runs one threadgroup per key head, which reads and writes that key head's conv state once), no copy back\n")
	}
	if res.Measured {
		moved := res.StateMoved + res.ConvMoved
		fmt.Fprintf(stdout, "         measured by the emulator's counters: %s of state and %s of conv state loaded and stored, %s in all: %s\n",
			mb(int(res.StateMoved)), mb(int(res.ConvMoved)), mb(int(moved)), versusFloor(moved, uint64(floor)))
	}
}

// versusFloor says how bytes moved compare with the floor.
func versusFloor(moved, floor uint64) string {
	if moved == floor {
		return "exactly the floor"
	}
	side := "over"
	if moved < floor {
		side = "under"
	}
	return fmt.Sprintf("%.2f%% %s the floor (%d bytes against %d)", 100*math.Abs(float64(moved)-float64(floor))/float64(floor), side, moved, floor)
}

// mb formats n bytes in MB.
func mb(n int) string { return fmt.Sprintf("%.3f MB", float64(n)/1e6) }

// check runs every finished request alone on be and compares (check 1),
// then holds its outputs and final states against the CPU reference
// (check 2), into res.
func check(cfg config, be backend, finished []*request, res *result, stdout io.Writer) error {
	res.Bits = true
	differ := 0
	for _, r := range finished {
		same, err := checkRequest(cfg, be, r, res)
		if err != nil {
			return fmt.Errorf("request %d: %w", r.id, err)
		}
		if !same {
			differ++
		}
		res.Bits = res.Bits && same
	}
	verdict := "bit-identical"
	if !res.Bits {
		verdict = fmt.Sprintf("%d of them differ", differ)
	}
	one := cfg.Params(1)
	prefill := "a prefill, chunked where its batch's was" // Kernels.Prefill chose by the batch's tokens
	if cfg.Core {
		prefill = "a prefill with Kernels.DecodeCore, as its batch's"
	}
	fmt.Fprintf(stdout, "check 1: every finished request (%d) against itself run alone on the same backend (no slots, no packing; %s, then one decode per token): outputs and final states of every layer %s\n",
		len(finished), prefill, verdict)
	if _, ok := be.(*cpuBackend); ok {
		fmt.Fprintf(stdout, "check 2: not run: the cpu backend is cpuref.Reference32 itself (cpuref's tests hold it against the float64 oracle); -backend emu or metal holds the kernels against it\n")
		return nil
	}
	fmt.Fprintf(stdout, "check 2: outputs and final states against cpuref.Reference32 run as each request was (its prompt in one call, then one call per token): max rel err %.3g (%s states, bound %.3g), %.3g (%s outputs, bound %.3g)\n",
		res.RefErr, one.State, res.RefBound, res.OutErr, one.Activation, res.OutBound)
	if one.Core.Conv > 0 {
		fmt.Fprintf(stdout, "         final conv states: max rel err %.3g (%s, bound %.3g)\n", res.ConvErr, one.Activation, res.OutBound)
	}
	return nil
}

// checkRequest runs r alone, layer by layer, and compares; it runs
// cpuref.Reference32 on the same calls, into res.
func checkRequest(cfg config, be backend, r *request, res *result) (same bool, err error) {
	same = true
	one := cfg.Params(1)
	sw := one.StateLen()
	for l := range cfg.Layers {
		var outs, refOuts []float32
		state, refState := make([]float32, sw), make([]float32, sw)
		var conv, refConv []float32
		if one.Core.Conv > 0 {
			conv, refConv = make([]float32, one.ConvStateLen()), make([]float32, one.ConvStateLen())
		}
		for t := 0; t < r.tokens(); {
			n, kern := r.prompt, r.prefill
			if t > 0 {
				n, kern = 1, gdn.KernelDecode
			}
			in, err := inputs(cfg, r, l, t, n)
			if err != nil {
				return false, err
			}
			in.StateIn, in.ConvState = state, conv
			out, newState, newConv, err := be.Alone(kern, cfg.Params(n), l, in)
			if err != nil {
				return false, err
			}
			outs, state, conv = append(outs, out...), newState, newConv
			in.StateIn, in.ConvState = refState, refConv
			want, err := cpuref.Reference32(cfg.Params(n), in, false)
			if err != nil {
				return false, err
			}
			refOuts, refState, refConv = append(refOuts, want.Output...), want.StateOut, want.ConvState
			t += n
		}
		same = same && floats.Equal(outs, r.outputs[l]) && floats.Equal(state, r.final[l]) && floats.Equal(conv, r.finalConv[l])
		res.RefErr = max(res.RefErr, cpuref.MaxRelErr(r.final[l], refState))
		res.OutErr = max(res.OutErr, cpuref.MaxRelErr(r.outputs[l], refOuts))
		if conv != nil {
			res.ConvErr = max(res.ConvErr, cpuref.MaxRelErr(r.finalConv[l], refConv))
		}
	}
	return same, nil
}
