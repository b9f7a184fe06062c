package layerstack

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/puremetal/puremetal/gdn/spec"
)

// Flags are the flags the examples take: the backend, the shape of a layer
// (Qwen3.5's by default), the number of layers, the head mapping, the seed
// of the inputs, and the element types and fused step of what a layer
// hands its recurrent core (Qwen3.5's by default: bf16 activations, an f32
// state, the fused step).
type Flags struct {
	Backend        string // as given, until [Flags.Open] resolves "auto"
	DK, DV, NK, NV int    // D_k, D_v, key heads, value heads
	Layers         int
	Seed           uint64
	HeadMap        spec.HeadMap
	Activation     spec.ElemType // q, k, v, the gate inputs and the output
	State          spec.ElemType
	Fused          bool // raw q, k, a and b in, with A_log and dt_bias
	// Core runs the whole layer core of a Qwen3.5 layer (spec.QwenCore()) in
	// each dispatch: set by -core where the example defines it
	// ([Flags.DefineCore]).
	Core bool

	backends          []string
	headMap           string
	activation, state string
	given             map[string]bool
}

// shapeFlags are the flags of a layer's shape.
var shapeFlags = []string{"dk", "dv", "kheads", "vheads"}

// NewFlagSet returns the empty flag set of the program name, which does
// what about says. Its errors and its usage go to stderr: "usage: name
// [flags]", about, and the flags with their defaults. Parsing returns
// errors, for [Command] to turn into an exit status.
func NewFlagSet(name, about string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: %s [flags]\n\n%s\n\nflags:\n", name, about)
		fs.PrintDefaults()
		fmt.Fprintf(stderr, "\nexit status: 0 when every check passes, 1 when a check fails or the run fails, 2 when the flags are bad\n")
	}
	return fs
}

// The -backend choices, the default first: every example runs on Metal
// and on the emulated device; those with a CPU path take cpu too.
var (
	Backends        = []string{"auto", "metal", "emu"}
	BackendsWithCPU = []string{"auto", "metal", "emu", "cpu"}
)

// BackendHelp is -backend's help for backends (Backends or
// BackendsWithCPU): what auto picks, then the choices.
func BackendHelp(backends []string) string {
	if slices.Contains(backends, "cpu") {
		return "auto (metal on a Mac, else emu where the emulated device runs, else cpu), metal, emu or cpu"
	}
	return "auto (metal on a Mac, emu elsewhere), metal or emu"
}

// Define defines the shared flags on fs: -backend, one of backends (the
// first is the default; see BackendHelp); -dk, -dv, -kheads
// and -vheads, Qwen3.5's shape by default; -layers, layers by default;
// -seed; -headmap; and -dtype, -state and -fused, Qwen3.5's bf16
// activations, f32 state and fused step by default.
func Define(fs *flag.FlagSet, backends []string, layers int) *Flags {
	f := &Flags{backends: backends}
	fs.StringVar(&f.Backend, "backend", backends[0], BackendHelp(backends))
	fs.IntVar(&f.DK, "dk", 128, "D_k, the key head size: 32, 64 or 128 (the decode kernels' sizes)")
	fs.IntVar(&f.DV, "dv", 128, "D_v, the value head size")
	fs.IntVar(&f.NK, "kheads", 16, "key heads (q, k); 2 on the emulated device unless a shape flag is given")
	fs.IntVar(&f.NV, "vheads", 32, "value heads (v, g, beta, state), a multiple of -kheads; 4 on the emulated device unless a shape flag is given")
	fs.IntVar(&f.Layers, "layers", layers, "GDN layers")
	fs.Uint64Var(&f.Seed, "seed", 1, "seed of the random inputs")
	fs.StringVar(&f.headMap, "headmap", "block", "block (HF transformers, MLX) or tiled (llama.cpp GGUF)")
	fs.StringVar(&f.activation, "dtype", "bf16", "activation type of q, k, v, the gate inputs and the output: f32, f16 or bf16")
	fs.StringVar(&f.state, "state", "f32", "state type: f32, f16 or bf16 (a 16-bit state halves the bytes per token)")
	fs.BoolVar(&f.Fused, "fused", true, "the fused step: raw q, k, a and b in, with A_log and dt_bias (false: q and k normalised, g and beta computed beforehand)")
	return f
}

// DefineCore defines -core on fs, on by default, as help describes what
// it does in the example: the whole layer core in each dispatch, the short
// convolution with its conv state and the gated RMSNorm (false: the step
// alone, q, k and v given).
func (f *Flags) DefineCore(fs *flag.FlagSet, help string) {
	fs.BoolVar(&f.Core, "core", true, help)
}

// types are the element types -dtype and -state take.
var types = map[string]spec.ElemType{"f32": spec.F32, "f16": spec.F16, "bf16": spec.BF16}

// ParseType returns the element type s names (f32, f16 or bf16), or an
// error naming flag.
func ParseType(flag, s string) (spec.ElemType, error) {
	t, ok := types[s]
	if !ok {
		return 0, fmt.Errorf("-%s %q: want f32, f16 or bf16", flag, s)
	}
	return t, nil
}

// Parse parses args with fs, which [Define] was given, and checks the
// shared flags: no arguments besides flags, a known backend and head
// mapping, at least one layer, -dtype and -state among the types.
func (f *Flags) Parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	f.given = map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { f.given[fl.Name] = true })
	m, err := spec.ParseHeadMap(f.headMap)
	if err != nil {
		return fmt.Errorf("-headmap: %w", err)
	}
	f.HeadMap = m
	if !slices.Contains(f.backends, f.Backend) {
		return fmt.Errorf("-backend %q: want %s", f.Backend, oneOf(f.backends))
	}
	if f.Layers <= 0 {
		return fmt.Errorf("-layers %d: must be > 0", f.Layers)
	}
	if f.Activation, err = ParseType("dtype", f.activation); err != nil {
		return err
	}
	f.State, err = ParseType("state", f.state)
	return err
}

// oneOf lists words as "a, b or c".
func oneOf(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

// Given reports whether the command line set any of the named flags.
func (f *Flags) Given(names ...string) bool {
	for _, n := range names {
		if f.given[n] {
			return true
		}
	}
	return false
}

// Params returns the parameters of one layer over n tokens of one
// sequence, with q scaled by 1/sqrt(D_k) at write-back, in the types of
// -dtype and -state, with every part of the fused step (spec.FusedAll)
// under -fused, and the whole core of a Qwen3.5 layer (spec.QwenCore()) under
// -core.
func (f *Flags) Params(n int) spec.Params {
	p := spec.Params{
		Shape:      spec.Shape{DK: f.DK, DV: f.DV, NKHeads: f.NK, NVHeads: f.NV, NTokens: n, NSeqs: 1},
		HeadMap:    f.HeadMap,
		QScale:     float32(1 / math.Sqrt(float64(f.DK))),
		Activation: f.Activation,
		State:      f.State,
	}
	if f.Fused {
		p.Fused = spec.FusedAll
	}
	if f.Core {
		p.Core = spec.QwenCore()
	}
	return p
}

// CheckDecodeDK returns an error naming -dk unless D_k is one the decode
// kernels take: 32, 64 or 128.
func (f *Flags) CheckDecodeDK() error {
	if f.DK != 32 && f.DK != 64 && f.DK != 128 {
		return fmt.Errorf("-dk %d: the decode kernels take D_k = 32, 64 or 128", f.DK)
	}
	return nil
}

// Command returns the command line of the example program name: a
// function that runs it with args and returns its exit status, for
// os.Exit. parse reads the flags, 2 when they are bad (0 for -help); open
// opens what runs the kernels for them (it may change them, as
// [Flags.Open] does with the emulated device's smaller defaults); run runs
// the program on it and reports on stdout and stderr; then the command
// closes what open returned. The status is 1 when open or run fails or the
// run's checks do not pass, 0 otherwise. Errors go to stderr after the
// program's name.
func Command[C any, B interface{ Close() }, R interface{ Pass() bool }](name string,
	parse func(args []string, stderr io.Writer) (C, error),
	open func(cfg *C, stdout io.Writer) (B, error),
	run func(cfg C, be B, stdout, stderr io.Writer) (R, error)) func(args []string, stdout, stderr io.Writer) int {
	return func(args []string, stdout, stderr io.Writer) int {
		cfg, err := parse(args, stderr)
		if err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return 0
			}
			fmt.Fprintf(stderr, "%s: %v\n", name, err)
			return 2
		}
		be, err := open(&cfg, stdout)
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", name, err)
			return 1
		}
		defer be.Close()
		res, err := run(cfg, be, stdout, stderr)
		switch {
		case err != nil:
			fmt.Fprintf(stderr, "%s: %v\n", name, err)
			return 1
		case !res.Pass():
			return 1
		}
		return 0
	}
}
