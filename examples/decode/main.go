// Command decode runs token-by-token decoding through a stack of Gated
// DeltaNet layers, the recurrent half of hybrid models such as Qwen3.5 and
// Qwen3-Next, and reports what one token costs.
//
// Every layer keeps its recurrent state (n_v_heads matrices of D_v x D_k
// float32) in a Metal buffer of its own for the whole run: each token's
// decode step reads the state and writes it back in place (state_in and
// state_out are the same buffer), so the state never leaves the device.
// Each token brings fresh q, k, v, g and beta for every layer, drawn like a
// real model's (cpuref.RandomInputs: L2-normalised q and k, g >= 0, beta in
// (0, 1)) and written into shared buffers. As a real engine does, one
// command buffer carries one token through every layer: one decode
// dispatch per layer, one commit, one wait.
//
// At the end it prints the per-token latency (median and p90), the GPU time
// from the command buffers' timestamps where there is a GPU, the effective
// bandwidth against the floor of the specification (each layer's state read
// once and written once per token), and a parity check: the final state of
// every layer against cpuref.Reference32 run over the same tokens on the
// CPU, within a relative error of 1e-5. It exits with status 1 when the
// check fails.
//
// Run it from the repository root:
//
//	go run ./examples/decode                  # Metal on a Mac, the CPU reference elsewhere
//	go run ./examples/decode -backend emu     # the real kernels on the emulated device (Linux)
//	go run ./examples/decode -layers 36 -tokens 256 -vheads 48
//
// Backends: metal (the system's GPU), emu (the emulated Metal device of
// package emu, which runs the kernels on the CPU; it needs the GNU
// Objective-C runtime and clang), cpu (cpuref.Reference32 itself, checked
// against the float64 oracle cpuref.Oracle64 on two heads per layer), and
// auto (metal where there is Metal, otherwise cpu). The emulator runs a
// kernel about a hundred times slower than a GPU, so with -backend emu and
// no shape flags the example uses a smaller shape and says so.
//
// The default shape is Qwen3.5's: D_k = D_v = 128, 16 key heads, 32 value
// heads, block head mapping (HF transformers, MLX); -headmap tiled is the
// mapping of GGUF files converted for llama.cpp.
package main

import (
	"flag"
	"fmt"
	"io"
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
// cpuref.MaxRelErr) the parity check accepts.
const Bound = 1e-5

// FloorBandwidth is the memory bandwidth the specification's floor is
// stated at: 400 GB/s, an M2 or M3 Max.
const FloorBandwidth = 400e9

func main() {
	os.Exit(cli(os.Args[1:], os.Stdout, os.Stderr))
}

// config is what the flags say.
type config struct {
	*layerstack.Flags
	tokens int
	every  int // progress line every this many tokens
}

// cli runs the program with args and returns its exit status: 0 on
// success, 1 when something fails (the parity check included), 2 for bad
// flags.
func cli(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	return layerstack.Status("decode", stderr, err, func() (bool, error) {
		be, err := openBackend(&cfg, stdout)
		if err != nil {
			return false, err
		}
		defer be.Close()
		res, err := run(cfg, be, stdout, stderr)
		return res.Pass, err
	})
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("decode", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := config{Flags: layerstack.Define(fs, []string{"auto", "metal", "emu", "cpu"}, "auto, metal, emu or cpu", 4)}
	fs.IntVar(&cfg.tokens, "tokens", 32, "tokens to decode")
	fs.IntVar(&cfg.every, "every", 0, "print progress every this many tokens (0: about eight lines)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: decode [flags]\n\nDecodes tokens through a stack of Gated DeltaNet layers and checks the final state against the CPU reference.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := cfg.Parse(fs, args); err != nil {
		return config{}, err
	}
	if cfg.tokens <= 0 || cfg.every < 0 {
		return config{}, fmt.Errorf("-tokens %d, -every %d: need tokens > 0, every >= 0", cfg.tokens, cfg.every)
	}
	return cfg, nil
}

// A backend runs decode steps of every layer and keeps the layers' states.
type backend interface {
	// Describe says what runs the kernels.
	Describe() string
	// Init sets every layer's state (states[l] for layer l) before the
	// first token.
	Init(p spec.Params, states [][]float32) error
	// Step decodes one token through every layer: in[l] holds layer l's
	// q, k, v, g and beta (its StateIn is not used).
	Step(in []cpuref.Inputs) (stepTime, error)
	// States returns a copy of every layer's state.
	States() ([][]float32, error)
	// Timed says what the latency covers.
	Timed() string
	// Oracle reports that the backend is cpuref.Reference32 itself, which
	// the parity check then compares with cpuref.Oracle64.
	Oracle() bool
	Close()
}

// stepTime is the time one token took: wall clock from the start of
// encoding to the end of the wait, and the device's own time from the
// command buffer's timestamps when it has them.
type stepTime struct {
	wall      time.Duration
	device    time.Duration
	hasDevice bool
}

// openBackend opens the backend cfg names (auto: metal where there is
// Metal, otherwise cpu), with smaller defaults on the emulated device.
func openBackend(cfg *config, stdout io.Writer) (backend, error) {
	d, err := cfg.Open(stdout,
		layerstack.Fallback{Backend: "cpu", Says: "running the CPU reference (cpuref.Reference32) instead; -backend emu runs the real kernels on the emulated device"},
		layerstack.Smaller{Flags: []string{"layers", "tokens"}, Apply: func() { cfg.Layers, cfg.tokens = 4, 16 }, Says: "4 layers, 16 tokens", Full: "-layers 4 -tokens 32, about 30 s"})
	if err != nil {
		return nil, err
	}
	if d == nil {
		return &cpuBackend{}, nil
	}
	return &deviceBackend{d: d}, nil
}

// result is what a run found.
type result struct {
	Latency    []time.Duration // wall clock per token
	Device     []time.Duration // device time per token; nil without a GPU
	MaxRelErr  float64         // the parity check's worst error
	Pass       bool
	FinalState [][]float32 // every layer's final state
}

// run decodes cfg.tokens tokens through cfg.Layers layers on be, printing
// progress to stderr and the report to stdout.
func run(cfg config, be backend, stdout, stderr io.Writer) (result, error) {
	p := cfg.Params(1) // one decode step of one layer
	if err := p.Validate(); err != nil {
		return result{}, err
	}
	stateBytes := p.StateLen() * 4
	fmt.Fprintf(stdout, "backend: %s\n", be.Describe())
	fmt.Fprintf(stdout, "shape:   D_k=%d D_v=%d n_k_heads=%d n_v_heads=%d, %s head map, q scale 1/sqrt(%d); layers %d, tokens %d, seed %d\n",
		p.DK, p.DV, p.NKHeads, p.NVHeads, p.HeadMap, p.DK, cfg.Layers, cfg.tokens, cfg.Seed)
	fmt.Fprintf(stdout, "state:   %s per layer, %s in all, kept on the device and updated in place\n",
		mb(stateBytes), mb(stateBytes*cfg.Layers))

	// The state each layer starts from, as if left by a prefill.
	initial := make([][]float32, cfg.Layers)
	for l := range initial {
		in, err := cpuref.RandomInputs(p, layerstack.Seed(cfg.Seed, l, -1))
		if err != nil {
			return result{}, err
		}
		initial[l] = in.StateIn
	}
	if err := be.Init(p, initial); err != nil {
		return result{}, err
	}
	if d, ok := be.(*deviceBackend); ok {
		fmt.Fprintf(stdout, "kernel:  %s, pipeline ready in %s (compiled, or taken from a cache); one command buffer per token, one dispatch per layer\n", kernels.Decode(p.DK/32), layerstack.Duration(d.compile))
	}

	var res result
	inputs, err := decodeTokens(cfg, p, be, &res, stderr)
	if err != nil {
		return result{}, err
	}
	reportTiming(cfg, stateBytes, be.Timed(), res, stdout)

	states, err := be.States()
	if err != nil {
		return result{}, err
	}
	res.FinalState = states
	if be.Oracle() {
		res.MaxRelErr, err = parityOracle(p, initial, inputs, states, stdout)
	} else {
		res.MaxRelErr, err = parityReference(p, initial, inputs, states, stdout)
	}
	if err != nil {
		return result{}, err
	}
	res.Pass = res.MaxRelErr <= Bound
	verdict := "PASS"
	if !res.Pass {
		verdict = "FAIL"
	}
	fmt.Fprintf(stdout, "parity: max rel err %.3g over %d layers, bound %g: %s\n", res.MaxRelErr, cfg.Layers, Bound, verdict)
	return res, nil
}

// decodeTokens runs cfg.tokens decode steps through every layer on be,
// with fresh inputs for every layer and token, recording each token's
// time in res and a progress line on stderr about eight times. It returns
// the inputs, [layer][token], for the parity check.
func decodeTokens(cfg config, p spec.Params, be backend, res *result, stderr io.Writer) ([][]cpuref.Inputs, error) {
	every := cfg.every
	if every == 0 {
		every = max(1, cfg.tokens/8)
	}
	inputs := make([][]cpuref.Inputs, cfg.Layers)
	for l := range inputs {
		inputs[l] = make([]cpuref.Inputs, cfg.tokens)
	}
	step := make([]cpuref.Inputs, cfg.Layers)
	start := time.Now()
	for t := range cfg.tokens {
		for l := range step {
			in, err := cpuref.RandomInputs(p, layerstack.Seed(cfg.Seed, l, t))
			if err != nil {
				return nil, err
			}
			in.StateIn = nil // the state is the backend's
			step[l], inputs[l][t] = in, in
		}
		st, err := be.Step(step)
		if err != nil {
			return nil, fmt.Errorf("token %d: %w", t, err)
		}
		res.Latency = append(res.Latency, st.wall)
		if st.hasDevice {
			res.Device = append(res.Device, st.device)
		}
		if (t+1)%every == 0 || t+1 == cfg.tokens {
			line := fmt.Sprintf("token %*d/%d  latency %s", len(fmt.Sprint(cfg.tokens)), t+1, cfg.tokens, layerstack.Duration(st.wall))
			if st.hasDevice {
				line += "  gpu " + layerstack.Duration(st.device)
			}
			fmt.Fprintf(stderr, "%s  (%.1f s elapsed)\n", line, time.Since(start).Seconds())
		}
	}
	return inputs, nil
}

// reportTiming prints the latency per token, the GPU time where there is
// one, and the bandwidth against the floor of SPEC section 8.
func reportTiming(cfg config, stateBytes int, timed string, res result, stdout io.Writer) {
	med, p90 := layerstack.Percentile(res.Latency, 50), layerstack.Percentile(res.Latency, 90)
	fmt.Fprintf(stdout, "latency per token (%d layers): median %s, p90 %s (%s)\n", cfg.Layers, layerstack.Duration(med), layerstack.Duration(p90), timed)
	if len(res.Device) > 0 {
		fmt.Fprintf(stdout, "GPU time per token: median %s, p90 %s (command-buffer timestamps)\n",
			layerstack.Duration(layerstack.Percentile(res.Device, 50)), layerstack.Duration(layerstack.Percentile(res.Device, 90)))
		med = layerstack.Percentile(res.Device, 50)
	}
	moved := 2 * stateBytes * cfg.Layers
	floor := time.Duration(float64(moved) / FloorBandwidth * 1e9)
	fmt.Fprintf(stdout, "bandwidth: %s of state per token (read once, written once per layer: the floor of SPEC section 8); %.2f GB/s at the median %s; the floor at 400 GB/s is %s per token\n",
		mb(moved), float64(moved)/med.Seconds()/1e9, timeName(len(res.Device) > 0), layerstack.Duration(floor))
}

// parityReference compares every layer's final state with
// cpuref.Reference32 run over the layer's whole token sequence at once.
func parityReference(p spec.Params, initial [][]float32, inputs [][]cpuref.Inputs, states [][]float32, stdout io.Writer) (float64, error) {
	fmt.Fprintf(stdout, "parity: final state of every layer against cpuref.Reference32 over the same %d tokens\n", len(inputs[0]))
	worst := 0.0
	for l := range inputs {
		pw, in := window(p, initial[l], inputs[l])
		ref, err := cpuref.Reference32(pw, in, false)
		if err != nil {
			return 0, err
		}
		e := cpuref.MaxRelErr(states[l], ref.StateOut)
		fmt.Fprintf(stdout, "  layer %d: max rel err %.3g\n", l, e)
		worst = max(worst, e)
	}
	return worst, nil
}

// parityOracle checks the cpu backend, which is cpuref.Reference32 itself,
// against the float64 oracle cpuref.Oracle64 (the matrix form of the
// paper, no shared code). The oracle costs D_k times more per token, so it
// runs on the first and last value heads of every layer.
func parityOracle(p spec.Params, initial [][]float32, inputs [][]cpuref.Inputs, states [][]float32, stdout io.Writer) (float64, error) {
	heads := []int{0, p.NVHeads - 1}
	if p.NVHeads == 1 {
		heads = heads[:1]
	}
	fmt.Fprintf(stdout, "parity: the cpu backend is cpuref.Reference32; its final state against the float64 oracle cpuref.Oracle64 over the same %d tokens, value heads %v of every layer\n",
		len(inputs[0]), heads)
	worst := 0.0
	cells := p.StateLen() / p.NVHeads // one head's state
	for l := range inputs {
		for _, h := range heads {
			ph, in := oneHead(p, h, initial[l], inputs[l])
			want, err := cpuref.Oracle64(ph, in, false)
			if err != nil {
				return 0, err
			}
			e := cpuref.MaxRelErr64(states[l][h*cells:(h+1)*cells], want.StateOut)
			fmt.Fprintf(stdout, "  layer %d, value head %d: max rel err %.3g\n", l, h, e)
			worst = max(worst, e)
		}
	}
	return worst, nil
}

// window joins one layer's per-token inputs into one call over all tokens
// from the given initial state. The layouts put the token outside the
// heads, so the per-token slices simply follow each other.
func window(p spec.Params, initial []float32, steps []cpuref.Inputs) (spec.Params, cpuref.Inputs) {
	p.NTokens = len(steps)
	in := cpuref.Inputs{StateIn: initial}
	for _, s := range steps {
		in.Q = append(in.Q, s.Q...)
		in.K = append(in.K, s.K...)
		in.V = append(in.V, s.V...)
		in.G = append(in.G, s.G...)
		in.Beta = append(in.Beta, s.Beta...)
	}
	return p, in
}

// oneHead extracts value head h (and the key head it reads) of one layer's
// tokens as a call with one key head and one value head.
func oneHead(p spec.Params, h int, initial []float32, steps []cpuref.Inputs) (spec.Params, cpuref.Inputs) {
	kh := p.HeadMap.KeyHead(h, p.NKHeads, p.NVHeads)
	cells := p.StateLen() / p.NVHeads
	ph := p
	ph.NKHeads, ph.NVHeads, ph.NTokens = 1, 1, len(steps)
	in := cpuref.Inputs{StateIn: initial[h*cells : (h+1)*cells]}
	for _, s := range steps {
		in.Q = append(in.Q, s.Q[kh*p.DK:(kh+1)*p.DK]...)
		in.K = append(in.K, s.K[kh*p.DK:(kh+1)*p.DK]...)
		in.V = append(in.V, s.V[h*p.DV:(h+1)*p.DV]...)
		in.G = append(in.G, s.G[h])
		in.Beta = append(in.Beta, s.Beta[h])
	}
	return ph, in
}

func timeName(gpu bool) string {
	if gpu {
		return "GPU time"
	}
	return "latency"
}

func mb(n int) string { return fmt.Sprintf("%.2f MB", float64(n)/1e6) }

// cpuBackend runs cpuref.Reference32 one token at a time.
type cpuBackend struct {
	p      spec.Params
	states [][]float32
}

func (c *cpuBackend) Describe() string {
	return "cpu: cpuref.Reference32, float32 in the kernels' per-element order, on the CPU"
}

func (c *cpuBackend) Init(p spec.Params, states [][]float32) error {
	c.p = p
	c.states = make([][]float32, len(states))
	for l, s := range states {
		c.states[l] = slices.Clone(s)
	}
	return nil
}

func (c *cpuBackend) Step(in []cpuref.Inputs) (stepTime, error) {
	if len(in) != len(c.states) {
		return stepTime{}, fmt.Errorf("%d layers of inputs for %d layers", len(in), len(c.states))
	}
	start := time.Now()
	for l := range in {
		x := in[l]
		x.StateIn = c.states[l]
		r, err := cpuref.Reference32(c.p, x, false)
		if err != nil {
			return stepTime{}, fmt.Errorf("layer %d: %w", l, err)
		}
		c.states[l] = r.StateOut
	}
	return stepTime{wall: time.Since(start)}, nil
}

func (c *cpuBackend) States() ([][]float32, error) {
	out := make([][]float32, len(c.states))
	for l, s := range c.states {
		out[l] = slices.Clone(s)
	}
	return out, nil
}

func (c *cpuBackend) Timed() string { return "wall clock of the layers' Reference32 calls" }
func (c *cpuBackend) Oracle() bool  { return true }
func (c *cpuBackend) Close()        {}

// deviceBackend runs the decode kernel on a Metal device (the GPU or the
// emulated one).
type deviceBackend struct {
	d       *layerstack.Device
	p       gdn.Params
	compile time.Duration // time to get the decode pipeline state

	// Per-layer activations live in one shared buffer each, layer l at
	// offset l * (one layer's bytes): q, k, v, g, beta and the output.
	// In an engine the layer's projections write them on the device;
	// here the CPU writes them before each token's commit.
	acts *layerstack.Activations
	// One state buffer per layer, read and written in place every token.
	states []*mtl.Buffer
}

func (b *deviceBackend) Describe() string { return b.d.Desc }
func (b *deviceBackend) Oracle() bool     { return false }

func (b *deviceBackend) Timed() string {
	return "wall clock from encoding to the end of the wait, one command buffer per token"
}

func (b *deviceBackend) Init(p spec.Params, states [][]float32) error {
	b.p = p
	var err error
	if b.compile, err = b.d.Compile(kernels.Decode(p.DK / 32)); err != nil {
		return err
	}
	if b.acts, err = layerstack.NewActivations(b.d.Dev, p, len(states)); err != nil {
		return err
	}
	for _, s := range states {
		buf, err := b.d.Dev.NewBufferWithBytes(floats.Bytes(s...), mtl.ResourceStorageModeShared)
		if err != nil {
			return err
		}
		b.states = append(b.states, buf)
	}
	return nil
}

// buffers returns layer l's views.
func (b *deviceBackend) buffers(l int) gdn.Buffers {
	bufs := b.acts.Buffers(l)
	st := gdn.F32View(b.states[l], 0, b.p.StateLen())
	bufs.StateIn, bufs.StateOut = st, st // in place
	return bufs
}

// Step runs one command buffer: one decode dispatch per layer, one commit,
// one wait.
func (b *deviceBackend) Step(in []cpuref.Inputs) (stepTime, error) {
	if len(in) != len(b.states) {
		return stepTime{}, fmt.Errorf("%d layers of inputs for %d layers", len(in), len(b.states))
	}
	for l, x := range in {
		b.acts.Write(l, x)
	}
	start := time.Now()
	gpu, err := b.d.Queue.RunTimed(func(enc *mtl.ComputeCommandEncoder) error {
		for l := range in {
			if err := b.d.Kernels.Decode(enc, b.p, b.buffers(l)); err != nil {
				return fmt.Errorf("layer %d: %w", l, err)
			}
		}
		return nil
	})
	st := stepTime{wall: time.Since(start)}
	if err != nil {
		return stepTime{}, err
	}
	if b.d.GPU {
		st.device, st.hasDevice = time.Duration(gpu*1e9), true
	}
	return st, nil
}

func (b *deviceBackend) States() ([][]float32, error) {
	out := make([][]float32, len(b.states))
	for l, s := range b.states {
		out[l] = slices.Clone(mtl.Slice[float32](s))
	}
	return out, nil
}

func (b *deviceBackend) Close() {
	if b.acts != nil {
		b.acts.Release()
	}
	for _, buf := range b.states {
		buf.Release()
	}
	b.d.Close()
}
