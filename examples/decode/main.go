// Command decode runs token-by-token decoding through a stack of Gated
// DeltaNet layers, the recurrent half of hybrid models such as Qwen3.5 and
// Qwen3-Next, as such a model runs it, and reports what one token costs.
//
// By default it runs a Qwen3.5 layer's whole core in one dispatch per layer
// and token (-core): the pre-convolution mixed_qkv through the short
// convolution (K = 4) with a conv state per layer kept on the device,
// SiLU, the fused step below, and the gated RMSNorm with z (SPEC section
// 13, gdn.Kernels.DecodeCore); -core=false gives the step q, k and v directly.
// The step takes what a Qwen3.5 layer hands its recurrent core: bf16
// activations (-dtype), an f32 state (-state) and the fused step (-fused):
// raw q and k, v, and the raw gate projections a and b, with the layer's
// constants A_log and dt_bias, so that one dispatch per layer and token
// normalises q and k, computes g = exp(A_log) * softplus(a + dt_bias) and
// beta = sigmoid(b), and runs the step (SPEC.md sections 9 and 10). With
// -fused=false the inputs are q and k already normalised and g and beta
// already computed, as before the fused step.
//
// Every layer keeps its recurrent state (n_v_heads matrices of D_v x D_k,
// of the -state type) in a Metal buffer of its own for the whole run: each
// token's decode step reads the state and writes it back in place
// (state_in and state_out are the same buffer), so the state never leaves
// the device; a 16-bit state is rounded once per token, when it is
// written. Each token brings fresh inputs for every layer, drawn like a
// real model's (cpuref.RandomInputs) in the activation type and written
// into shared buffers. As a real engine does, one command buffer carries
// one token through every layer: one decode dispatch per layer, one
// commit, one wait.
//
// At the end it prints the dispatches per layer and token, the per-token
// latency (median and p90), the GPU time from the command buffers'
// timestamps where there is a GPU, the effective bandwidth against the
// floor of the specification (on a GPU only: elsewhere it prints the bytes
// moved and no bandwidth) (each layer's state read once and written
// once per token; half as many bytes with a 16-bit state), and a parity
// check with SPEC.md section 9's bounds. The check compares, on the first
// and last value heads of every layer, the state after 1, 2, 4, ... and
// the last token and every token's output with the float64 oracle cpuref.Oracle64 over the
// same rounded inputs; on the device backends it also compares every
// layer's whole final state and last output with cpuref.Reference32 run
// one token per call, as the device ran them. For a 16-bit state it prints
// how the state drifts from the float64 truth over the tokens decoded. It
// exits with status 1 when a check fails.
//
// Run it from the repository root:
//
//	go run ./examples/decode                  # Metal on a Mac, else the emulated device, else the CPU reference
//	go run ./examples/decode -backend emu     # the real kernels on the emulated device (Linux)
//	go run ./examples/decode -state bf16      # a bf16 state: half the bytes per token
//	go run ./examples/decode -dtype f32 -fused=false -layers 36 -tokens 256 -vheads 48
//
// Backends: metal (the system's GPU), emu (the emulated Metal device of
// package emu, which runs the kernels on the CPU; it needs the GNU
// Objective-C runtime and clang), cpu (cpuref.Reference32 itself, with
// the same types and fused parts, checked against the float64 oracle), and
// auto (metal where there is Metal, else emu where the emulated device
// runs, else cpu, each step down said with its reason). The emulator runs a
// kernel about a hundred times slower than a GPU, so with -backend emu and
// no shape flags the example uses a smaller shape and says so.
//
// The default shape is Qwen3.5's: D_k = D_v = 128, 16 key heads, 32 value
// heads, block head mapping (HF transformers, MLX); -headmap tiled is the
// mapping of GGUF files converted for llama.cpp.
package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/examples/internal/layerstack"
	"github.com/puremetal/puremetal/gdn/spec"
)

// Bounds of the parity check, relative to the largest magnitude of the
// reference (see cpuref.MaxRelErr).
const (
	// Bound is the bound on an f32 result: an f32 state against either
	// reference, an f32 output against cpuref.Reference32 (SPEC.md section 9).
	Bound = layerstack.Bound
	// BoundOutput64 is the bound on an f32 output against the float64
	// oracle, whose order of operations differs more (the test suite's).
	// A 16-bit result has its type's bound (layerstack.BoundOf).
	BoundOutput64 = 1e-4
)

// FloorBandwidth is the memory bandwidth the specification's floor is
// stated at: 400 GB/s, an M2 or M3 Max.
const FloorBandwidth = 400e9

// DriftTokens is the run over which the CPU reference's own drift of a
// 16-bit state is quoted (SPEC.md section 9 documents it over 64 tokens).
const DriftTokens = 64

func main() {
	os.Exit(cli(os.Args[1:], os.Stdout, os.Stderr))
}

// config is what the flags say.
type config struct {
	*layerstack.Flags
	tokens int
	every  int // progress line every this many tokens
}

// cli reads the flags in args, opens the backend they name, decodes the
// tokens through the layers and checks them, and returns the exit status
// (see layerstack.Command): 1 when the parity check fails too.
var cli = layerstack.Command("decode", parseFlags, openBackend, run)

// parseFlags returns what args say, or an error naming a bad flag: a
// known backend, -dtype and -state among the types, tokens to decode.
func parseFlags(args []string, stderr io.Writer) (config, error) {
	fs := layerstack.NewFlagSet("decode", "Decodes tokens through a stack of Gated DeltaNet layers and checks the states and outputs against the CPU references.", stderr)
	cfg := config{Flags: layerstack.Define(fs, layerstack.BackendsWithCPU, 4)}
	fs.IntVar(&cfg.tokens, "tokens", 32, "tokens to decode")
	fs.IntVar(&cfg.every, "every", 0, "print progress every this many tokens (0: about eight lines)")
	cfg.DefineCore(fs, "the whole layer core in the dispatch: mixed_qkv through the short convolution with its conv state, and the gated RMSNorm with z (false: q, k and v given, the recurrence's output)")
	if err := cfg.Parse(fs, args); err != nil {
		return config{}, err
	}
	if cfg.tokens <= 0 || cfg.every < 0 {
		return config{}, fmt.Errorf("-tokens %d, -every %d: need tokens > 0, every >= 0", cfg.tokens, cfg.every)
	}
	return cfg, nil
}

// openBackend opens the backend cfg names (auto: metal, else emu, else
// cpu; see layerstack.Flags.Open), with smaller defaults on the emulated
// device.
func openBackend(cfg *config, stdout io.Writer) (backend, error) {
	d, err := cfg.Open(stdout,
		layerstack.Fallback{Backend: "cpu", Says: "running the CPU reference (cpuref.Reference32, same types and fused step) instead"},
		layerstack.Smaller{Flags: []string{"layers", "tokens"}, Apply: func() { cfg.Layers, cfg.tokens = 4, 16 }, Says: "4 layers, 16 tokens", Full: "-layers 4 -tokens 32"})
	if err != nil {
		return nil, err
	}
	if d == nil {
		return &cpuBackend{}, nil
	}
	return &deviceBackend{d: d, log: stdout}, nil
}

// A check is one comparison of the parity check.
type check struct {
	What       string
	Err, Bound float64
	Pass       bool
}

// result is what a run found.
type result struct {
	Latency    []time.Duration // wall clock per token
	Device     []time.Duration // device time per token; nil without a GPU
	Dispatches int             // encoded, -1 on the cpu backend
	Checks     []check
	Drift      *drift      // the errors against the float64 oracle
	FinalState [][]float32 // every layer's final state
}

// Pass reports whether every check passed.
func (r result) Pass() bool {
	for _, c := range r.Checks {
		if !c.Pass {
			return false
		}
	}
	return true
}

// Worst returns the largest ratio of a check's error to its bound: above
// 1, a check failed.
func (r result) Worst() (worst float64) {
	for _, c := range r.Checks {
		worst = max(worst, c.Err/c.Bound)
	}
	return worst
}

// run decodes cfg.tokens tokens through cfg.Layers layers on be, printing
// progress to stderr and the report to stdout.
func run(cfg config, be backend, stdout, stderr io.Writer) (result, error) {
	p := cfg.Params(1) // one decode step of one layer
	if err := p.Validate(); err != nil {
		return result{}, err
	}
	stateBytes := p.StateLen() * p.State.Size()
	fmt.Fprintf(stdout, "backend: %s\n", be.Describe())
	fmt.Fprintf(stdout, "shape:   D_k=%d D_v=%d n_k_heads=%d n_v_heads=%d, %s head map, q scale 1/sqrt(%d); layers %d, tokens %d, seed %d\n",
		p.DK, p.DV, p.NKHeads, p.NVHeads, p.HeadMap, p.DK, cfg.Layers, cfg.tokens, cfg.Seed)
	fmt.Fprintf(stdout, "types:   %s\n", layerstack.Types(p))
	fmt.Fprintf(stdout, "state:   %s per layer (%s), %s in all, %s\n",
		mb(stateBytes), p.State, mb(stateBytes*cfg.Layers), be.Keeps())

	// What each layer starts from: its state, as if left by a prefill,
	// and with the fused gate its constants A_log and dt_bias; with the
	// core its convolution and norm weights and its conv state, as a
	// prefill would leave it.
	consts, err := layerstack.Constants(p, cfg.Seed, cfg.Layers)
	if err != nil {
		return result{}, err
	}
	if p.Core != (spec.Core{}) {
		fmt.Fprintf(stdout, "core:    the whole layer core in the dispatch: mixed_qkv (%d channels) through the short convolution (K = %d) with a %s conv state per layer, SiLU, the step, the gated RMSNorm with z (silu, eps %g)\n",
			p.ConvDim(), p.Core.Conv, p.Activation, p.Core.NormEps)
	}
	if err := be.Init(p, consts); err != nil {
		return result{}, err
	}
	if d, ok := be.(*deviceBackend); ok {
		fmt.Fprintf(stdout, "kernel:  %s, pipeline ready in %s (compiled, or taken from a cache); one command buffer per token, one dispatch per layer\n", d.entry, layerstack.Duration(d.compile))
	}

	var res result
	heads := driftHeads(p)
	inputs, snaps, err := decodeTokens(cfg, p, be, consts, heads, &res, stderr)
	if err != nil {
		return result{}, err
	}
	res.Dispatches = be.Dispatches()
	reportDispatches(cfg, p, res.Dispatches, stdout)
	reportTiming(cfg, stateBytes, p.State, be.Timed(), res, stdout)

	states, err := be.States()
	if err != nil {
		return result{}, err
	}
	res.FinalState = states
	if !be.Oracle() {
		outputs, err := be.Outputs()
		if err != nil {
			return result{}, err
		}
		c, err := parityReference(p, consts, inputs, states, outputs, stdout)
		if err != nil {
			return result{}, err
		}
		res.Checks = append(res.Checks, c...)
	}
	c, drift, err := parityOracle(p, consts, inputs, heads, snaps, be.Oracle(), stdout)
	if err != nil {
		return result{}, err
	}
	res.Checks, res.Drift = append(res.Checks, c...), drift
	if p.State != spec.F32 {
		if err := reportDrift(p, cfg.Seed, drift, stdout); err != nil {
			return result{}, err
		}
	}
	fmt.Fprintf(stdout, "parity: %s\n", verdict(res.Pass()))
	return res, nil
}

func verdict(pass bool) string {
	if pass {
		return "PASS"
	}
	return "FAIL"
}

// decodeTokens runs cfg.tokens decode steps through every layer on be,
// with fresh inputs for every layer and token, recording each token's
// time in res and a progress line on stderr about eight times. It returns
// the inputs, [layer][token], for the parity check, and snapshots of the
// value heads heads: snaps[i][t] holds head heads[i]'s output in every
// layer after token t, and its state after the checkpoints (see
// checkpoints) only, which keeps a long run's snapshots small.
func decodeTokens(cfg config, p spec.Params, be backend, consts []cpuref.Inputs, heads []int, res *result, stderr io.Writer) ([][]cpuref.Inputs, [][]snapshot, error) {
	every := cfg.every
	if every == 0 {
		every = max(1, cfg.tokens/8)
	}
	inputs := make([][]cpuref.Inputs, cfg.Layers)
	for l := range inputs {
		inputs[l] = make([]cpuref.Inputs, cfg.tokens)
	}
	snaps := make([][]snapshot, len(heads))
	at := checkpoints(cfg.tokens)
	step := make([]cpuref.Inputs, cfg.Layers)
	start := time.Now()
	for t := range cfg.tokens {
		for l := range step {
			in, err := cpuref.RandomInputs(p, layerstack.Seed(cfg.Seed, l, t))
			if err != nil {
				return nil, nil, err
			}
			in = layerstack.WithConstants(in, consts[l]) // the states are the backend's
			step[l], inputs[l][t] = in, in
		}
		st, err := be.Step(step)
		if err != nil {
			return nil, nil, fmt.Errorf("token %d: %w", t, err)
		}
		res.Latency = append(res.Latency, st.wall)
		if st.hasDevice {
			res.Device = append(res.Device, st.device)
		}
		for i, h := range heads { // after the timing: not part of a step
			var s snapshot
			if s.states, s.outputs, err = be.Heads(h, slices.Contains(at, t+1)); err != nil {
				return nil, nil, err
			}
			snaps[i] = append(snaps[i], s)
		}
		if (t+1)%every == 0 || t+1 == cfg.tokens {
			line := fmt.Sprintf("token %*d/%d  latency %s", len(fmt.Sprint(cfg.tokens)), t+1, cfg.tokens, layerstack.Duration(st.wall))
			if st.hasDevice {
				line += "  gpu " + layerstack.Duration(st.device)
			}
			fmt.Fprintf(stderr, "%s  (%.1f s elapsed)\n", line, time.Since(start).Seconds())
		}
	}
	return inputs, snaps, nil
}

// A snapshot is one value head's output in every layer after one token,
// and its state after a checkpoint.
type snapshot struct {
	states, outputs [][]float32 // [layer]; states nil but at a checkpoint
}

// checkpoints are the token counts after which the oracle check compares
// states: 1, 2, 4, 8, ... and the last, n.
func checkpoints(n int) []int {
	var at []int
	for t := 1; t < n; t *= 2 {
		at = append(at, t)
	}
	return append(at, n)
}

// tokenList formats token counts as "1, 2, 4".
func tokenList(at []int) string {
	s := make([]string, len(at))
	for i, t := range at {
		s[i] = fmt.Sprint(t)
	}
	return strings.Join(s, ", ")
}

// drift is the error of the decode loop against the float64 truth, each
// figure relative to the largest magnitude of the truth at that token,
// over the checked heads of every layer.
type drift struct {
	Tokens []int     // the checkpoints
	State  []float64 // [checkpoint]: the state after Tokens[i] tokens
	Output []float64 // [token]: the output of every token
}

// reportDispatches prints the dispatches per layer and token, counted,
// and what the step would need unfused.
func reportDispatches(cfg config, p spec.Params, n int, stdout io.Writer) {
	steps := cfg.Layers * cfg.tokens
	if n < 0 {
		fmt.Fprintf(stdout, "dispatches: none (the cpu backend); the device backends encode 1 per layer and token\n")
	} else {
		fmt.Fprintf(stdout, "dispatches: %.3g per layer and token (%d counted for %d layers x %d tokens)\n", float64(n)/float64(steps), n, cfg.Layers, cfg.tokens)
	}
	if p.Core != (spec.Core{}) {
		fmt.Fprintf(stdout, "  core: the short convolution with its conv state, SiLU and the gated RMSNorm with z run inside that one dispatch as well (gdn.Kernels.DecodeCore); peers run them as dispatches of their own (llama.cpp: ssm_conv, its GDN op, a norm and a multiply)\n")
	}
	if p.Fused == spec.FusedAll {
		fmt.Fprintf(stdout, "  fused: the L2 norm of q and k, g = exp(A_log) * softplus(a + dt_bias) and beta = sigmoid(b) run inside that one dispatch, which reads the %s activations as the layer hands them over; unfused, a model runs them before it as dispatches of their own, 3 more per layer and token (norm, gate, sigmoid), and with kernels that take only f32 conversions in and out besides (said, not measured)\n", p.Activation)
		return
	}
	fmt.Fprintf(stdout, "  unfused: this run normalises q and k and computes g and beta on the CPU, outside the timing; a model runs them on the device before each step, 3 more dispatches per layer and token (norm, gate, sigmoid; said, not measured); -fused does them inside the one dispatch\n")
}

// reportTiming prints the latency per token, the GPU time where there is
// one, and on a GPU the bandwidth against the floor of SPEC.md section 8.
func reportTiming(cfg config, stateBytes int, st spec.ElemType, timed string, res result, stdout io.Writer) {
	med, p90 := layerstack.Percentile(res.Latency, 50), layerstack.Percentile(res.Latency, 90)
	fmt.Fprintf(stdout, "latency per token (%d layers): median %s, p90 %s (%s)\n", cfg.Layers, layerstack.Duration(med), layerstack.Duration(p90), timed)
	if len(res.Device) > 0 {
		fmt.Fprintf(stdout, "GPU time per token: median %s, p90 %s (command-buffer timestamps)\n",
			layerstack.Duration(layerstack.Percentile(res.Device, 50)), layerstack.Duration(layerstack.Percentile(res.Device, 90)))
		med = layerstack.Percentile(res.Device, 50)
	}
	moved := 2 * stateBytes * cfg.Layers
	half := ""
	if st != spec.F32 {
		half = ", half an f32 state's"
	}
	conv := ""
	if p := cfg.Params(1); p.Core.Conv > 0 {
		// The conv state, (K-1) conv_dim elements, once in and once out.
		moved += 2 * (p.Core.Conv - 1) * p.ConvDim() * p.Activation.Size() * cfg.Layers
		conv = fmt.Sprintf(" with the %s conv state", p.Activation)
	}
	if len(res.Device) == 0 {
		// Off a GPU a bandwidth against a GPU's floor means nothing.
		fmt.Fprintf(stdout, "traffic: %s of %s state per token%s (read once, written once per layer: the floor of SPEC.md section 8%s); no bandwidth figure: this backend is not a GPU\n",
			mb(moved), st, conv, half)
		return
	}
	floor := time.Duration(float64(moved) / FloorBandwidth * 1e9)
	fmt.Fprintf(stdout, "bandwidth: %s of %s state per token%s (read once, written once per layer: the floor of SPEC.md section 8%s); %.2f GB/s at the median GPU time; the floor at 400 GB/s is %s per token\n",
		mb(moved), st, conv, half, float64(moved)/med.Seconds()/1e9, layerstack.Duration(floor))
}

// newCheck returns the check of err against bound, printed on stdout.
func newCheck(stdout io.Writer, what string, err, bound float64) check {
	c := check{What: what, Err: err, Bound: bound, Pass: err <= bound}
	fmt.Fprintf(stdout, "  %s: max rel err %.3g, bound %.3g: %s\n", what, err, bound, verdict(c.Pass))
	return c
}

// parityReference compares every layer's final state and last output
// with cpuref.Reference32 run one token per call, as the device ran them
// (a 16-bit state is rounded after every token in both).
func parityReference(p spec.Params, consts []cpuref.Inputs, inputs [][]cpuref.Inputs, states, outputs [][]float32, stdout io.Writer) ([]check, error) {
	fmt.Fprintf(stdout, "parity: every layer's final state and last output against cpuref.Reference32 (float32, the kernels' order), one token per call over the same %d tokens\n", len(inputs[0]))
	var st, out float64
	for l := range inputs {
		x := consts[l]
		var r cpuref.Result
		for _, in := range inputs[l] {
			in.StateIn, in.ConvState = x.StateIn, x.ConvState
			var err error
			if r, err = cpuref.Reference32(p, in, false); err != nil {
				return nil, fmt.Errorf("layer %d: %w", l, err)
			}
			x.StateIn, x.ConvState = r.StateOut, r.ConvState
		}
		st = max(st, cpuref.MaxRelErr(states[l], r.StateOut))
		out = max(out, cpuref.MaxRelErr(outputs[l], r.Output))
	}
	return []check{
		newCheck(stdout, fmt.Sprintf("%s state, worst of %d layers", p.State, len(inputs)), st, layerstack.BoundOf(p.State, Bound)),
		newCheck(stdout, fmt.Sprintf("%s output, worst of %d layers", p.Activation, len(inputs)), out, layerstack.BoundOf(p.Activation, Bound)),
	}, nil
}

// driftHeads are the value heads the float64 oracle checks: the first and
// the last of every layer (it costs D_k times more per token than
// Reference32).
func driftHeads(p spec.Params) []int {
	if p.NVHeads == 1 {
		return []int{0}
	}
	return []int{0, p.NVHeads - 1}
}

// parityOracle compares, for the value heads heads of every layer, the
// state after every checkpoint and every token's output with the float64
// oracle cpuref.Oracle64 (the matrix form of the paper, no shared code)
// over the same rounded inputs, with SPEC.md section 9's bounds: with an f32
// state, the state within Bound and the output within its type's bound at
// every token; with a 16-bit state, after t tokens the state within t
// times its type's bound and the output within t times the larger of its
// type's and the state type's bounds. It returns the checks and the
// errors.
func parityOracle(p spec.Params, consts []cpuref.Inputs, inputs [][]cpuref.Inputs, heads []int, snaps [][]snapshot, self bool, stdout io.Writer) ([]check, *drift, error) {
	n := len(inputs[0])
	at := checkpoints(n)
	who := "the backend's"
	if self {
		who = "the cpu backend (cpuref.Reference32 itself):"
	}
	fmt.Fprintf(stdout, "parity: %s states after tokens %s and every output against the float64 oracle cpuref.Oracle64 over the same rounded inputs, value heads %v of every layer\n", who, tokenList(at), heads)
	d := &drift{Tokens: at, State: make([]float64, len(at)), Output: make([]float64, n)}
	cells := p.DK * p.DV
	for l := range inputs {
		for i, h := range heads {
			ph, in := oneHead(p, h, consts[l], inputs[l])
			want, err := cpuref.Oracle64(ph, in, true)
			if err != nil {
				return nil, nil, fmt.Errorf("layer %d: %w", l, err)
			}
			for t, s := range snaps[i] {
				d.Output[t] = max(d.Output[t], cpuref.MaxRelErr64(s.outputs[l], want.Output[t*p.DV:(t+1)*p.DV]))
			}
			for c, tok := range at {
				t := tok - 1
				d.State[c] = max(d.State[c], cpuref.MaxRelErr64(snaps[i][t].states[l], want.Capture[t*cells:(t+1)*cells]))
			}
		}
	}
	// A 16-bit state is rounded once per token, and the transition
	// alpha (I - beta k k^T) never grows a state (alpha <= 1, beta in
	// (0, 1), |k| = 1), so after t tokens its error, and that of the
	// output computed from it, is within t times the one-token bound;
	// with an f32 state every token is held to the one-token bound.
	perToken := func(e []float64, tokens func(i int) int) float64 {
		worst := 0.0
		for i, x := range e {
			if p.State != spec.F32 {
				x /= float64(tokens(i))
			}
			worst = max(worst, x)
		}
		return worst
	}
	after, every := "after tokens "+tokenList(at), "every token"
	if p.State != spec.F32 {
		after, every = "after t = "+tokenList(at)+" tokens, rel err / t", "every token t, rel err / t"
	}
	sc := newCheck(stdout, fmt.Sprintf("%s state, %s", p.State, after), perToken(d.State, func(i int) int { return at[i] }), layerstack.BoundOf(p.State, Bound))
	// The output is computed from the state before it is rounded, so with
	// a 16-bit state it carries the state's error as well as its own
	// rounding: the larger of the two bounds, per token decoded.
	outBound := layerstack.BoundOf(p.Activation, BoundOutput64)
	if p.State != spec.F32 {
		outBound = max(outBound, layerstack.BoundOf(p.State, Bound))
	}
	oc := newCheck(stdout, fmt.Sprintf("%s output, %s", p.Activation, every), perToken(d.Output, func(t int) int { return t + 1 }), outBound)
	return []check{sc, oc}, d, nil
}

// reportDrift prints how far a 16-bit state drifted from the float64
// truth over the tokens decoded, at 1, 2, 4, ... tokens and the last, and
// for comparison the CPU reference's own drift over DriftTokens tokens
// (cpuref.DecodeDrift) in one value head of the same types.
func reportDrift(p spec.Params, seed uint64, d *drift, stdout io.Writer) error {
	var at []string
	for i, t := range d.Tokens {
		at = append(at, fmt.Sprintf("%d: %.3g", t, d.State[i]))
	}
	fmt.Fprintf(stdout, "drift:  the %s state against the float64 oracle after tokens %s (max rel err; rounded once per token, the truth never)\n", p.State, strings.Join(at, ", "))
	one := p
	one.NKHeads, one.NVHeads, one.NTokens = 1, 1, DriftTokens
	one.Core = spec.Core{} // the state's drift is the recurrence's
	ref, err := cpuref.DecodeDrift(one, seed)
	if err != nil {
		return err
	}
	st, _ := ref.Max()
	fmt.Fprintf(stdout, "        cpuref.DecodeDrift, the same types over %d tokens (one value head, its own inputs): %.3g after %d, %.3g at worst\n",
		DriftTokens, ref.State[DriftTokens-1], DriftTokens, st)
	return nil
}

// oneHead extracts value head h (and the key head it reads) of one layer's
// tokens as a call of all the tokens with one key head and one value
// head, from the layer's initial state and constants consts.
func oneHead(p spec.Params, h int, consts cpuref.Inputs, steps []cpuref.Inputs) (spec.Params, cpuref.Inputs) {
	kh := p.HeadMap.KeyHead(h, p.NKHeads, p.NVHeads)
	cells := p.DK * p.DV
	ph := p
	ph.NKHeads, ph.NVHeads, ph.NTokens = 1, 1, len(steps)
	in := cpuref.Inputs{StateIn: consts.StateIn[h*cells : (h+1)*cells]}
	if p.Fused.Gate {
		in.ALog, in.DtBias = consts.ALog[h:h+1], consts.DtBias[h:h+1]
	}
	// With the core, the head's channels of mixed_qkv (q and k of key head
	// kh, v of value head h), of the conv weight and of the conv state.
	qk := p.NKHeads * p.DK
	channels := func(x []float32, width int) []float32 {
		var out []float32
		for t := 0; t+p.ConvDim()*width <= len(x); t += p.ConvDim() * width {
			row := x[t:]
			for _, r := range [][2]int{{kh * p.DK, p.DK}, {qk + kh*p.DK, p.DK}, {2*qk + h*p.DV, p.DV}} {
				out = append(out, row[r[0]*width:(r[0]+r[1])*width]...)
			}
		}
		return out
	}
	if p.Core.Conv > 0 {
		in.ConvWeight = channels(consts.ConvWeight, p.Core.Conv)
		for j := 0; j < p.Core.Conv-1; j++ {
			in.ConvState = append(in.ConvState, channels(consts.ConvState[j*p.ConvDim():(j+1)*p.ConvDim()], 1)...)
		}
	}
	if p.Core.Norm {
		in.NormWeight = consts.NormWeight
	}
	for _, s := range steps {
		if p.Core.Conv > 0 {
			in.MixedQKV = append(in.MixedQKV, channels(s.MixedQKV, 1)...)
		} else {
			in.Q = append(in.Q, s.Q[kh*p.DK:(kh+1)*p.DK]...)
			in.K = append(in.K, s.K[kh*p.DK:(kh+1)*p.DK]...)
			in.V = append(in.V, s.V[h*p.DV:(h+1)*p.DV]...)
		}
		if p.Core.Norm {
			in.Z = append(in.Z, s.Z[h*p.DV:(h+1)*p.DV]...)
		}
		in.G = append(in.G, s.G[h])
		in.Beta = append(in.Beta, s.Beta[h])
	}
	return ph, in
}

func mb(n int) string { return fmt.Sprintf("%.2f MB", float64(n)/1e6) }
