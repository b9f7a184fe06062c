package main

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/examples/internal/layerstack/layerstacktest"
)

// tiny is a shape the tests run quickly: D_k = D_v = 32, two key heads,
// four value heads, two layers, a pool of 4 slots for 10 requests, so
// slots are reused.
var tiny = []string{"-dk", "32", "-dv", "32", "-kheads", "2", "-vheads", "4", "-layers", "2", "-slots", "4", "-requests", "10", "-prompt", "6", "-gen", "4", "-seed", "5"}

// checkReport checks a passing run's result and report.
func checkReport(t *testing.T, cfg config, res result, out string) {
	t.Helper()
	if !res.Pass() || !strings.HasSuffix(out, "PASS\n") {
		t.Errorf("the run did not pass:\n%s", out)
	}
	if res.Finished != cfg.requests || res.SlotsReused == 0 {
		t.Errorf("%d of %d requests finished, %d slots reused: the run does not exercise slot reuse\n%s", res.Finished, cfg.requests, res.SlotsReused, out)
	}
	for _, want := range []string{"tokens/s", "dispatches per step", "occupancy", "bit-identical", "max rel err"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

func TestCPUBackend(t *testing.T) {
	for _, m := range []string{"block", "tiled"} {
		cfg := layerstacktest.Flags(t, parseFlags, tiny, "-backend", "cpu", "-headmap", m)
		res, out := layerstacktest.Run(t, run, cfg, backend(&cpuBackend{}))
		checkReport(t, cfg, res, out)
	}
	var out, errs bytes.Buffer
	if code := cli(append([]string{"-backend", "cpu"}, tiny...), &out, &errs); code != 0 || !strings.Contains(errs.String(), "step") {
		t.Errorf("exit status %d\nstdout:\n%s\nstderr:\n%s", code, &out, &errs)
	}
}

// A server that hands out a freed slot without zeroing it must fail the
// checks: the request would continue its predecessor's state.
func TestStaleSlotFails(t *testing.T) {
	cfg := layerstacktest.Flags(t, parseFlags, tiny, "-backend", "cpu")
	cfg.keepStale = true
	res, out := layerstacktest.Run(t, run, cfg, backend(&cpuBackend{}))
	if res.Bits || res.Pass() || !strings.HasSuffix(out, "FAIL\n") {
		t.Errorf("a stale slot passed the checks:\n%s", out)
	}
}

func TestFlags(t *testing.T) {
	for _, bad := range [][]string{{"-slots", "0"}, {"-requests", "-1"}, {"-prompt", "0"}, {"-gen", "0"}, {"-arrive", "0"}, {"-backend", "gpu"}} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
	if code := cli([]string{"-slots", "0"}, io.Discard, io.Discard); code != 2 {
		t.Errorf("bad flag: exit status %d, want 2", code)
	}
}

// The real kernels on the emulated device, both head maps: every request
// bit-identical to its run alone, within the bound of Reference32.
func TestEmulatedBackend(t *testing.T) {
	for _, m := range []string{"block", "tiled"} {
		t.Run(m, func(t *testing.T) {
			cfg := layerstacktest.Flags(t, parseFlags, tiny, "-backend", "emu", "-headmap", m)
			be := &deviceBackend{d: layerstacktest.Device(t)}
			defer be.Close()
			res, out := layerstacktest.Run(t, run, cfg, backend(be))
			checkReport(t, cfg, res, out)
		})
	}
}
