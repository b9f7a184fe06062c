package main

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/emu/msl"
	"github.com/puremetal/puremetal/examples/internal/layerstack"
	"github.com/puremetal/puremetal/examples/internal/layerstack/layerstacktest"
	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/kernels"
)

// tiny is a shape the tests run in well under a second: D_k = D_v = 32,
// two key heads, four value heads, three layers, five tokens.
var tiny = []string{"-dk", "32", "-dv", "32", "-kheads", "2", "-vheads", "4", "-layers", "3", "-tokens", "5", "-seed", "7"}

// typeFlags are the flags of one combination of types and fused step.
func typeFlags(act, state string, fused bool) []string {
	return []string{"-dtype", act, "-state", state, fmt.Sprintf("-fused=%v", fused)}
}

// The defaults are what a Qwen3.5 model runs: bf16 activations, an f32
// state, the fused step, the whole layer core.
func TestDefaults(t *testing.T) {
	cfg, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Params(1)
	if p.Activation != spec.BF16 || p.State != spec.F32 || p.Fused != spec.FusedAll || p.Core != spec.QwenCore() {
		t.Errorf("defaults: %v activations, %v state, fused %+v, core %+v; want bf16, f32, all, the Qwen core", p.Activation, p.State, p.Fused, p.Core)
	}
}

// The program on the cpu backend, every combination of activation type,
// state type and fused step: exit status 0, the types in the report, the
// oracle's checks of every token, a drift line exactly for a 16-bit
// state, PASS.
func TestCPUBackend(t *testing.T) {
	names := []string{"f32", "f16", "bf16"}
	for _, act := range names {
		for _, st := range names {
			for _, fused := range []bool{true, false} {
				t.Run(fmt.Sprintf("%s-%s-fused=%v", act, st, fused), func(t *testing.T) {
					var out, errs bytes.Buffer
					args := append(append([]string{"-backend", "cpu"}, tiny...), typeFlags(act, st, fused)...)
					if code := cli(args, &out, &errs); code != 0 {
						t.Fatalf("exit status %d\nstdout:\n%s\nstderr:\n%s", code, &out, &errs)
					}
					s := out.String()
					want := []string{
						fmt.Sprintf("%s activations", act), fmt.Sprintf("%s state;", st),
						"cpuref.Oracle64", "value heads [0 3]", st + " state, after ", act + " output, every token",
						"dispatches: none", "latency per token", st + " state per token", "parity: PASS",
					}
					// The whole layer core (the default): mixed_qkv and z in.
					if fused {
						want = append(want, "fused step: mixed_qkv, a and b", "(mixed_qkv, z, a, b, output)")
					} else {
						want = append(want, "unfused: g and beta computed beforehand", "(mixed_qkv, z, g, beta, output)")
					}
					if st != "f32" {
						want = append(want, "drift:  the "+st+" state against the float64 oracle after tokens 1: ", ", 4: ", ", 5: ", "cpuref.DecodeDrift", "half an f32 state's")
					} else if strings.Contains(s, "drift:") {
						t.Errorf("a drift line for an f32 state:\n%s", s)
					}
					for _, w := range want {
						if !strings.Contains(s, w) {
							t.Errorf("stdout lacks %q:\n%s", w, s)
						}
					}
					if strings.Contains(s, "FAIL") {
						t.Errorf("a check failed:\n%s", s)
					}
					if !strings.Contains(errs.String(), "token 5/5") {
						t.Errorf("no progress line for the last token on stderr:\n%s", &errs)
					}
				})
			}
		}
	}
}

// Both head maps on the cpu backend.
func TestCPUBackendHeadMaps(t *testing.T) {
	for _, m := range []string{"block", "tiled"} {
		var out bytes.Buffer
		args := append([]string{"-backend", "cpu", "-headmap", m}, tiny...)
		if code := cli(args, &out, io.Discard); code != 0 || !strings.Contains(out.String(), m+" head map") || !strings.Contains(out.String(), "parity: PASS") {
			t.Errorf("-headmap %s: exit status %d\n%s", m, code, &out)
		}
	}
}

// checkMoved checks that the run moved every layer's state away from
// where it started: a backend that did nothing must not pass.
func checkMoved(t *testing.T, cfg config, states [][]float32) {
	t.Helper()
	for l, s := range states {
		in, err := cpuref.RandomInputs(cfg.Params(1), layerstack.Seed(cfg.Seed, l, -1))
		if err != nil {
			t.Fatal(err)
		}
		if e := cpuref.MaxRelErr(s, in.StateIn); !(e > 1e-2) {
			t.Errorf("layer %d: final state within %.3g of the initial state: the decode steps did not run", l, e)
		}
		for i, x := range s {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				t.Fatalf("layer %d: state[%d] = %v", l, i, x)
			}
		}
	}
}

// The real kernels on the emulated device (the layer core, the default):
// the programs' type
// cases (f32 unfused, the defaults: bf16 activations, f32 state, fused;
// f16 activations with a bf16 state, fused) and f16 activations and state
// unfused; every check passes, one dispatch per layer and token, the
// report names the types and the kernel, and the states moved.
func TestEmulatedBackend(t *testing.T) {
	f16 := layerstacktest.TypeCase{Name: "f16-f16-unfused", Args: typeFlags("f16", "f16", false), Types: "types:   f16 activations (q, k, v, g, beta, output), f16 state; unfused: "}
	for _, c := range append(slices.Clone(layerstacktest.TypeCases), f16) {
		for _, core := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/core=%v", c.Name, core), func(t *testing.T) {
				var log strings.Builder
				be := &deviceBackend{d: layerstacktest.Device(t), log: &log}
				defer be.Close()
				cfg := layerstacktest.Flags(t, parseFlags, tiny, append([]string{"-backend", "emu", fmt.Sprintf("-core=%v", core)}, c.Args...)...)
				res, out := layerstacktest.Run(t, run, cfg, backend(be))
				// Before the first compile the program says what it compiles
				// and where the emulated device caches it; off a GPU it
				// prints no bandwidth.
				if said := log.String(); !strings.HasPrefix(said, "compiling ") || !strings.Contains(said, "cached in "+msl.DefaultCacheDir()) {
					t.Errorf("before compiling it said %q", said)
				}
				if strings.Contains(out, "GB/s") || !strings.Contains(out, "no bandwidth figure: this backend is not a GPU") {
					t.Errorf("the report gives a bandwidth off a GPU:\n%s", out)
				}
				if !res.Pass() || !(res.Worst() <= 1) || len(res.Checks) != 4 {
					t.Fatalf("parity failed (%d checks, worst %.3g of its bound)\n%s", len(res.Checks), res.Worst(), out)
				}
				if len(res.Latency) != cfg.tokens {
					t.Errorf("%d latencies for %d tokens", len(res.Latency), cfg.tokens)
				}
				if res.Dispatches != cfg.Layers*cfg.tokens {
					t.Errorf("%d dispatches for %d layers x %d tokens", res.Dispatches, cfg.Layers, cfg.tokens)
				}
				p := cfg.Params(1)
				entry := kernels.CorePackedOf(p.Activation, p.State, 1) // the whole layer core by default
				if p.Core == (spec.Core{}) {
					entry = kernels.DecodeOf(p.Activation, p.State, 1)
				}
				for _, w := range []string{c.TypesOf(p.Core != (spec.Core{})), "against cpuref.Reference32", "cpuref.Oracle64", "dispatches: 1 per layer and token", "kernel:  " + entry + ","} {
					if !strings.Contains(out, w) {
						t.Errorf("the report lacks %q:\n%s", w, out)
					}
				}
				// The device's state is rounded to its type once per token:
				// a 16-bit state is off the float64 truth by a rounding
				// after the first token already, an f32 one is not.
				if d := res.Drift.State; len(d) != 4 || res.Drift.Tokens[0] != 1 || len(res.Drift.Output) != cfg.tokens {
					t.Errorf("drift after tokens %v (%d errors), outputs of %d tokens; want 1, 2, 4, 5 and 5", res.Drift.Tokens, len(d), len(res.Drift.Output))
				} else if p.State != spec.F32 && !(d[0] > layerstack.BoundOf(p.State, 0)/16) || p.State == spec.F32 && !(d[0] < Bound) {
					t.Errorf("%v state: error %.3g after one token, bound %.3g", p.State, d[0], layerstack.BoundOf(p.State, Bound))
				}
				checkMoved(t, cfg, res.FinalState)
			})
		}
	}
}

// At D_k = 64 Kernels.Decode picks the packed kernel: the report names
// it, its pipeline is the one made before the first token, and the
// checks pass.
func TestEmulatedBackendPacked(t *testing.T) {
	be := &deviceBackend{d: layerstacktest.Device(t), log: io.Discard}
	defer be.Close()
	cfg := layerstacktest.Flags(t, parseFlags, tiny, "-backend", "emu", "-dk", "64", "-layers", "2", "-tokens", "3", "-core=false")
	res, out := layerstacktest.Run(t, run, cfg, backend(be))
	if !res.Pass() {
		t.Fatalf("parity failed\n%s", out)
	}
	p := cfg.Params(1)
	if w := "kernel:  " + kernels.DecodePackedOf(p.Activation, p.State, 2) + ","; !strings.Contains(out, w) {
		t.Errorf("the report lacks %q:\n%s", w, out)
	}
}

// By default the emulated backend runs the whole layer core, one
// gdn.Kernels.DecodeCore dispatch per layer and token, at D_k 32 and 64, and its
// checks pass; the report names the core kernel and counts the conv state
// in the bytes per token.
func TestEmulatedBackendCore(t *testing.T) {
	for _, dk := range []string{"32", "64"} {
		be := &deviceBackend{d: layerstacktest.Device(t), log: io.Discard}
		cfg := layerstacktest.Flags(t, parseFlags, tiny, "-backend", "emu", "-dk", dk, "-layers", "2", "-tokens", "4")
		res, out := layerstacktest.Run(t, run, cfg, backend(be))
		be.Close()
		p := cfg.Params(1)
		if p.Core != spec.QwenCore() {
			t.Fatalf("-core by default: Params.Core %+v, want spec.QwenCore()", p.Core)
		}
		if !res.Pass() || res.Dispatches != 2*4 {
			t.Errorf("D_k %s: parity %v, %d dispatches for 2 layers x 4 tokens\n%s", dk, res.Pass(), res.Dispatches, out)
		}
		for _, w := range []string{"kernel:  " + kernels.CorePackedOf(p.Activation, p.State, p.DK/32) + ",", "state per token with the bf16 conv state", "core:    the whole layer core"} {
			if !strings.Contains(out, w) {
				t.Errorf("the report lacks %q:\n%s", w, out)
			}
		}
	}
}

// With -core=false the cpu backend runs the step on q, k and v given, and
// its checks pass.
func TestCPUBackendWithoutCore(t *testing.T) {
	var out bytes.Buffer
	if code := cli(append([]string{"-backend", "cpu", "-core=false"}, tiny...), &out, io.Discard); code != 0 || strings.Contains(out.String(), "core:") || !strings.Contains(out.String(), "parity: PASS") {
		t.Errorf("exit status %d:\n%s", code, &out)
	}
}

// asDevice is the cpu backend presented as a device backend, so the
// parity check also compares it with cpuref.Reference32 one token per
// call; badState and badOutput corrupt one element of the final state or
// the last output it reports, badHead one element of a head's state
// after every token, each by far more than the bounds of any type.
type asDevice struct {
	cpuBackend
	badState, badOutput, badHead bool
}

func (a *asDevice) Oracle() bool { return false }

func (a *asDevice) States() ([][]float32, error) {
	s, err := a.cpuBackend.States()
	if a.badState {
		s[len(s)-1][17] += 0.05
	}
	return s, err
}

func (a *asDevice) Outputs() ([][]float32, error) {
	o, err := a.cpuBackend.Outputs()
	if a.badOutput {
		o[0][5] += 0.1
	}
	return o, err
}

func (a *asDevice) Heads(h int, state bool) (states, outputs [][]float32, err error) {
	states, outputs, err = a.cpuBackend.Heads(h, state)
	if a.badHead && state {
		states[1][3] += 0.05
	}
	return states, outputs, err
}

// Token-by-token Reference32 and the parity check's own token-by-token
// Reference32 do the same float32 operations in the same order: the check
// must find them bit-identical, whatever the types, and must fail on one
// corrupted element of a state or an output.
func TestParityCheck(t *testing.T) {
	for _, types := range [][]string{nil, typeFlags("f32", "f32", false), typeFlags("bf16", "bf16", true), typeFlags("f16", "f16", true)} {
		cfg := layerstacktest.Flags(t, parseFlags, tiny, types...)
		res, _ := layerstacktest.Run(t, run, cfg, backend(&asDevice{}))
		if len(res.Checks) != 4 || res.Checks[0].Err != 0 || res.Checks[1].Err != 0 || !res.Pass() {
			t.Errorf("%q: step-by-step Reference32 against itself: %+v; want 4 checks, the first two 0, pass", types, res.Checks)
		}
		checkMoved(t, cfg, res.FinalState)
		for _, bad := range []struct {
			name string
			be   asDevice
		}{{"final state", asDevice{badState: true}}, {"last output", asDevice{badOutput: true}}, {"a head's state", asDevice{badHead: true}}} {
			res, out := layerstacktest.Run(t, run, cfg, backend(&bad.be))
			if res.Pass() || !(res.Worst() > 1) {
				t.Errorf("%q: a corrupted %s passed: worst %.3g of its bound", types, bad.name, res.Worst())
			}
			if !strings.Contains(out, "parity: FAIL") {
				t.Errorf("%q: the report does not say FAIL:\n%s", types, out)
			}
		}
	}
}

// Bad flags exit with status 2 and name the flag; a shape the kernels
// cannot run exits with status 1 and says why.
func TestBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-backend", "gpu"}, 2, `-backend "gpu"`},
		{[]string{"-tokens", "0"}, 2, "-tokens 0"},
		{[]string{"-headmap", "diagonal"}, 2, "-headmap"},
		{[]string{"-dtype", "fp8"}, 2, `-dtype "fp8": want f32, f16 or bf16`},
		{[]string{"-state", "f64"}, 2, `-state "f64": want f32, f16 or bf16`},
		{[]string{"-fused=maybe"}, 2, "-fused"},
		{[]string{"-backend", "emu", "-dk", "48"}, 1, "-dk 48"},
		{[]string{"-backend", "cpu", "-kheads", "3", "-vheads", "4", "-tokens", "1"}, 1, "Shape.NVHeads: 4 is not a multiple of Shape.NKHeads = 3"},
	} {
		var errs bytes.Buffer
		if code := cli(c.args, io.Discard, &errs); code != c.code || !strings.Contains(errs.String(), c.want) {
			t.Errorf("%q: exit status %d, stderr %q; want %d and %q", c.args, code, errs.String(), c.code, c.want)
		}
	}
}
