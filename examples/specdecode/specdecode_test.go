package main

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/examples/internal/layerstack"
	"github.com/puremetal/puremetal/examples/internal/layerstack/layerstacktest"
	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/kernels"
)

// tiny is a shape the tests run in about a second on the emulated device:
// D_k = D_v = 32, two key heads, four value heads, two layers, drafts of
// three tokens, three sequences in a pool of five. Seed 3 draws accepted
// lengths 0, a partial prefix and the whole draft, so every restore path
// runs.
var tiny = []string{"-backend", "emu", "-dk", "32", "-dv", "32", "-kheads", "2", "-vheads", "4", "-layers", "2", "-k", "3", "-steps", "8", "-seed", "3"}

func tinyRun(t *testing.T, keepLastDraft bool, args ...string) (config, result, string) {
	t.Helper()
	return tinyRunWith(t, func(cfg *config) { cfg.keepLastDraft = keepLastDraft }, args...)
}

// tinyRunWith is tinyRun with the configuration edited by edit.
func tinyRunWith(t *testing.T, edit func(*config), args ...string) (config, result, string) {
	t.Helper()
	cfg := layerstacktest.Flags(t, parseFlags, tiny, args...)
	edit(&cfg)
	d := layerstacktest.Device(t)
	defer d.Close()
	res, out := layerstacktest.Run(t, run, cfg, d)
	return cfg, res, out
}

// Speculative windows with restores from the capture buffer end where a
// plain decode of the accepted tokens ends, bit for bit, and within the
// bounds of cpuref.Reference32 for the types: with the whole layer core
// (the default; gdn.RollbackCore restores the conv state too) and with
// the step alone.
func TestSpeculativeMatchesPlainDecode(t *testing.T) {
	for _, core := range []string{"-core=true", "-core=false"} {
		for _, c := range layerstacktest.TypeCases {
			t.Run(core[1:]+"/"+c.Name, func(t *testing.T) { testMatchesPlainDecode(t, c, core) })
		}
	}
}

func testMatchesPlainDecode(t *testing.T, c layerstacktest.TypeCase, core string) {
	cfg, res, out := tinyRun(t, false, append([]string{core}, c.Args...)...)
	if cfg.Core != (core == "-core=true") {
		t.Fatalf("%s: core %v", core, cfg.Core)
	}
	if cfg.Core && (!res.ConvBits || res.ConvCopied == 0 || len(res.FinalConv) != cfg.batch || !strings.Contains(out, "final conv state of every layer bit-identical") || !(res.ConvErr <= res.OutputBound)) {
		t.Errorf("layer core: conv states bit-identical %v, %d bytes copied, %g from Reference32:\n%s", res.ConvBits, res.ConvCopied, res.ConvErr, out)
	}
	all := slices.Concat(res.Accepted...)
	for _, a := range []int{0, 1, 3} {
		if !slices.Contains(all, a) {
			t.Errorf("accepted lengths %v never %d: the run does not cover every restore path", res.Accepted, a)
		}
	}
	if !res.StateBits || !res.OutputBits {
		t.Errorf("not bit-identical to the plain decode: states %v, outputs %v\n%s", res.StateBits, res.OutputBits, out)
	}
	p := cfg.Params(1)
	sb, ob := layerstack.BoundOf(p.State, layerstack.Bound), layerstack.BoundOf(p.Activation, layerstack.Bound)
	if res.StateBound != sb || res.OutputBound != ob || !(res.StateErr <= sb) || !(res.OutputErr <= ob) {
		t.Errorf("against Reference32: %g (states, bound %g), %g (outputs, bound %g); want bounds %g and %g", res.StateErr, res.StateBound, res.OutputErr, res.OutputBound, sb, ob)
	}
	if types := c.TypesOf(cfg.Core); !res.Pass() || !strings.HasSuffix(out, "PASS\n") || !strings.Contains(out, types) {
		t.Errorf("the run did not pass, or its report lacks %q:\n%s", types, out)
	}
}

// At D_k = 64 the windows run the packed capture kernel and the plain
// decode the packed decode kernel, the ones Kernels.DecodeWithCapture and
// Kernels.Decode pick; the report names them, and the checks pass.
// With the layer core both run the core kernel.
func TestPackedKernels(t *testing.T) {
	cfg, res, out := tinyRun(t, false, "-dk", "64", "-steps", "3", "-core=false")
	p := cfg.Params(1)
	want := "kernels: " + kernels.DecodePackedCaptureOf(p.Activation, p.State, 2) + " and " + kernels.DecodePackedOf(p.Activation, p.State, 2) + " ready"
	if !res.Pass() || !strings.Contains(out, want) {
		t.Errorf("the run did not pass, or its report lacks %q:\n%s", want, out)
	}
	cfg, res, out = tinyRun(t, false, "-dk", "64", "-dv", "64", "-steps", "3")
	p = cfg.Params(1)
	want = "kernels: " + kernels.CorePackedOf(p.Activation, p.State, 2) + " (the windows and the plain decode) ready"
	if !res.Pass() || !strings.Contains(out, want) {
		t.Errorf("layer core: the run did not pass, or its report lacks %q:\n%s", want, out)
	}
}

// With the layer core, restoring the recurrent state alone (gdn.Rollback)
// leaves the conv state after the whole draft; the checks must catch it.
func TestStateOnlyRollbackFails(t *testing.T) {
	_, res, out := tinyRunWith(t, func(cfg *config) { cfg.stateOnlyRollback = true })
	if res.ConvBits || res.Pass() || !strings.HasSuffix(out, "FAIL\n") {
		t.Errorf("the conv state left after the whole draft passed the checks (conv states bit-identical: %v)\n%s", res.ConvBits, out)
	}
	if !(res.ConvErr > res.OutputBound) {
		t.Errorf("conv states %g from Reference32, within the bound %g", res.ConvErr, res.OutputBound)
	}
}

// Keeping the state after the whole draft, instead of restoring the state
// after the accepted prefix, is what the example exists to avoid; the
// checks must catch it, with a 16-bit state too.
func TestWrongRestoreFails(t *testing.T) {
	for i, c := range layerstacktest.TypeCases[1:] {
		_, res, out := tinyRun(t, true, append([]string{"-core=" + fmt.Sprint(i == 0)}, c.Args...)...)
		if res.StateBits || res.Pass() || !strings.HasSuffix(out, "FAIL\n") {
			t.Errorf("%s: keeping the last draft state passed the checks (states bit-identical: %v)\n%s", c.Name, res.StateBits, out)
		}
		if !(res.StateErr > res.StateBound) {
			t.Errorf("%s: keeping the last draft state: %g from Reference32, within the bound %g", c.Name, res.StateErr, res.StateBound)
		}
	}
}

// The program end to end: exit status 0 and the report.
func TestCLI(t *testing.T) {
	testdevice.Emulated(t, emu.Options{}) // skips (or fails in strict mode) without the prerequisites
	var out, errs bytes.Buffer
	if code := cli(tiny, &out, &errs); code != 0 {
		t.Fatalf("exit status %d\nstdout:\n%s\nstderr:\n%s", code, &out, &errs)
	}
	for _, want := range []string{"sequences in slots", "state bytes copied to restore", "conv state bytes copied to restore", "final state of every layer bit-identical", "output of every accepted token bit-identical", "final conv state of every layer bit-identical", "PASS"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, &out)
		}
	}
	if !strings.Contains(errs.String(), "window 8/8") {
		t.Errorf("no progress line for the last window on stderr:\n%s", &errs)
	}
}

// Bad flags exit with status 2 and name the flag.
func TestBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-backend", "cpu"}, `-backend "cpu"`},
		{[]string{"-k", "0"}, "-k 0"},
		{[]string{"-dk", "100"}, "-dk 100"},
		{[]string{"-headmap", "x"}, "-headmap"},
		{[]string{"-dtype", "fp8"}, `-dtype "fp8": want f32, f16 or bf16`},
	} {
		var errs bytes.Buffer
		if code := cli(c.args, io.Discard, &errs); code != 2 || !strings.Contains(errs.String(), c.want) {
			t.Errorf("%q: exit status %d, stderr %q; want 2 and %q", c.args, code, errs.String(), c.want)
		}
	}
}
