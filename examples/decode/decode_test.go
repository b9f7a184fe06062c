package main

import (
	"bytes"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/examples/internal/layerstack"
	"github.com/puremetal/puremetal/internal/testdevice"
)

// tiny is a shape the tests run in well under a second: D_k = D_v = 32,
// two key heads, four value heads, three layers, five tokens.
var tiny = []string{"-dk", "32", "-dv", "32", "-kheads", "2", "-vheads", "4", "-layers", "3", "-tokens", "5", "-seed", "7"}

func tinyConfig(t *testing.T, extra ...string) config {
	t.Helper()
	cfg, err := parseFlags(append(append([]string{}, tiny...), extra...), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// The program on the cpu backend: exit status 0, the oracle's parity lines
// for two heads of every layer, PASS.
func TestCPUBackend(t *testing.T) {
	for _, m := range []string{"block", "tiled"} {
		t.Run(m, func(t *testing.T) {
			var out, errs bytes.Buffer
			args := append([]string{"-backend", "cpu", "-headmap", m}, tiny...)
			if code := cli(args, &out, &errs); code != 0 {
				t.Fatalf("exit status %d\nstdout:\n%s\nstderr:\n%s", code, &out, &errs)
			}
			s := out.String()
			for _, want := range []string{"cpuref.Oracle64", "layer 2, value head 3", m + " head map", "latency per token", "bound 1e-05: PASS"} {
				if !strings.Contains(s, want) {
					t.Errorf("stdout lacks %q:\n%s", want, s)
				}
			}
			if !strings.Contains(errs.String(), "token 5/5") {
				t.Errorf("no progress line for the last token on stderr:\n%s", &errs)
			}
		})
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

// The real decode kernel on the emulated device, both head maps: the
// parity check passes and the states moved.
func TestEmulatedBackend(t *testing.T) {
	for _, m := range []string{"block", "tiled"} {
		t.Run(m, func(t *testing.T) {
			dev := testdevice.Emulated(t, emu.Options{})
			d, err := layerstack.NewDevice(dev, "emu (test)", false)
			if err != nil {
				t.Fatal(err)
			}
			be := &deviceBackend{d: d}
			defer be.Close()
			cfg := tinyConfig(t, "-backend", "emu", "-headmap", m)
			var out bytes.Buffer
			res, err := run(cfg, be, &out, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if !res.Pass || !(res.MaxRelErr <= Bound) {
				t.Fatalf("parity failed: max rel err %g\n%s", res.MaxRelErr, &out)
			}
			if len(res.Latency) != cfg.tokens {
				t.Errorf("%d latencies for %d tokens", len(res.Latency), cfg.tokens)
			}
			if !strings.Contains(out.String(), "against cpuref.Reference32") {
				t.Errorf("the report does not say what it compared with:\n%s", &out)
			}
			checkMoved(t, cfg, res.FinalState)
		})
	}
}

// asDevice is the cpu backend presented as a device backend, so the
// parity check compares it with cpuref.Reference32 over the whole window;
// bad corrupts one element of the final state it reports.
type asDevice struct {
	cpuBackend
	bad bool
}

func (a *asDevice) Oracle() bool { return false }

func (a *asDevice) States() ([][]float32, error) {
	s, err := a.cpuBackend.States()
	if a.bad {
		s[len(s)-1][17] += 1e-3
	}
	return s, err
}

// Token-by-token Reference32 and one Reference32 call over the whole
// window do the same float32 operations in the same order: the parity
// check must find them bit-identical, and must fail on one corrupted
// element.
func TestParityCheck(t *testing.T) {
	cfg := tinyConfig(t)
	res, err := run(cfg, &asDevice{}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if res.MaxRelErr != 0 || !res.Pass {
		t.Errorf("step-by-step against whole-window Reference32: max rel err %g, pass %v; want 0, true", res.MaxRelErr, res.Pass)
	}
	checkMoved(t, cfg, res.FinalState)

	var out bytes.Buffer
	res, err = run(cfg, &asDevice{bad: true}, &out, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if res.Pass || !(res.MaxRelErr > Bound) {
		t.Errorf("a corrupted state passed: max rel err %g, pass %v", res.MaxRelErr, res.Pass)
	}
	if !strings.Contains(out.String(), "FAIL") {
		t.Errorf("the report does not say FAIL:\n%s", &out)
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
		{[]string{"-backend", "emu", "-dk", "48"}, 1, "-dk 48"},
		{[]string{"-backend", "cpu", "-kheads", "3", "-vheads", "4", "-tokens", "1"}, 1, "Shape.NVHeads: 4 is not a multiple of Shape.NKHeads = 3"},
	} {
		var errs bytes.Buffer
		if code := cli(c.args, io.Discard, &errs); code != c.code || !strings.Contains(errs.String(), c.want) {
			t.Errorf("%q: exit status %d, stderr %q; want %d and %q", c.args, code, errs.String(), c.code, c.want)
		}
	}
}
