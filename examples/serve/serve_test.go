package main

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/examples/internal/layerstack"
	"github.com/puremetal/puremetal/examples/internal/layerstack/layerstacktest"
)

// tiny is a shape the tests run quickly: D_k = D_v = 32, two key heads,
// four value heads, two layers, a pool of 4 slots for 10 requests, so
// slots are reused.
var tiny = []string{"-dk", "32", "-dv", "32", "-kheads", "2", "-vheads", "4", "-layers", "2", "-slots", "4", "-requests", "10", "-prompt", "6", "-gen", "4", "-seed", "5"}

// checkReport checks a passing run's result and report, c the run's
// types.
func checkReport(t *testing.T, cfg config, res result, out string, c layerstacktest.TypeCase) {
	t.Helper()
	if !res.Pass() || !strings.HasSuffix(out, "PASS\n") {
		t.Errorf("the run did not pass:\n%s", out)
	}
	if res.Finished != cfg.requests || res.SlotsReused == 0 {
		t.Errorf("%d of %d requests finished, %d slots reused: the run does not exercise slot reuse\n%s", res.Finished, cfg.requests, res.SlotsReused, out)
	}
	p := cfg.Params(1)
	if res.RefBound != layerstack.BoundOf(p.State, layerstack.Bound) || res.OutBound != layerstack.BoundOf(p.Activation, layerstack.Bound) {
		t.Errorf("bounds %g (states), %g (outputs) for a %v state and %v outputs", res.RefBound, res.OutBound, p.State, p.Activation)
	}
	check2 := "max rel err" // the kernels against Reference32
	if cfg.Backend == "cpu" {
		check2 = "check 2: not run: the cpu backend is cpuref.Reference32 itself"
	}
	wants := []string{c.TypesOf(cfg.Core), "tokens/s", "dispatches per step", "occupancy", "bit-identical", check2}
	if cfg.Core {
		wants = append(wants, "core:    the whole layer core", "kernel:  1 dispatch per layer and batch", "traffic: ")
		if cfg.Backend != "cpu" {
			wants = append(wants, "the conv-state pool updated in place", "final conv states: max rel err")
		}
		if cfg.Backend == "emu" {
			// The emulator measures the states' bytes: exactly the floor,
			// each touched slot's state and conv state read once and
			// written once per layer.
			p := cfg.Params(1)
			touched := uint64(res.SeqSteps * cfg.Layers)
			state, conv := 2*uint64(p.State.Size()*p.StateLen())*touched, 2*uint64(p.Activation.Size()*p.ConvStateLen())*touched
			if !res.Measured || res.StateMoved != state || res.ConvMoved != conv {
				t.Errorf("measured %v: state moved %d bytes, conv state %d; the floor is %d and %d", res.Measured, res.StateMoved, res.ConvMoved, state, conv)
			}
			wants = append(wants, "in all: exactly the floor")
		}
		if res.SeqSteps == 0 || res.Chunked != 0 {
			t.Errorf("%d sequences touched (want some), %d prefills chunked (Kernels.DecodeCore runs every window)", res.SeqSteps, res.Chunked)
		}
	}
	for _, want := range wants {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

func TestCPUBackend(t *testing.T) {
	for _, core := range []string{"-core=true", "-core=false"} {
		for _, c := range layerstacktest.TypeCases {
			cfg := layerstacktest.Flags(t, parseFlags, tiny, append([]string{"-backend", "cpu", core}, c.Args...)...)
			res, out := layerstacktest.Run(t, run, cfg, backend(&cpuBackend{}))
			checkReport(t, cfg, res, out, c)
		}
	}
	var out, errs bytes.Buffer
	if code := cli(append([]string{"-backend", "cpu"}, tiny...), &out, &errs); code != 0 || !strings.Contains(errs.String(), "step") {
		t.Errorf("exit status %d\nstdout:\n%s\nstderr:\n%s", code, &out, &errs)
	}
}

// A server that hands out a freed slot without zeroing it must fail the
// checks, whatever the types: the request would continue its
// predecessor's state.
func TestStaleSlotFails(t *testing.T) {
	for _, c := range layerstacktest.TypeCases {
		cfg := layerstacktest.Flags(t, parseFlags, tiny, append([]string{"-backend", "cpu"}, c.Args...)...)
		cfg.keepStale = true
		res, out := layerstacktest.Run(t, run, cfg, backend(&cpuBackend{}))
		if res.Bits || res.Pass() || !strings.HasSuffix(out, "FAIL\n") {
			t.Errorf("%s: a stale slot passed the checks:\n%s", c.Name, out)
		}
	}
}

func TestFlags(t *testing.T) {
	for _, bad := range [][]string{{"-slots", "0"}, {"-requests", "-1"}, {"-prompt", "0"}, {"-gen", "0"}, {"-arrive", "0"}, {"-backend", "gpu"}, {"-dtype", "f8"}, {"-state", "i8"}} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
	if code := cli([]string{"-slots", "0"}, io.Discard, io.Discard); code != 2 {
		t.Errorf("bad flag: exit status %d, want 2", code)
	}
}

// The real kernels on the emulated device, with f32, Qwen3.5's and 16-bit
// types and both head maps, the whole layer core (the default) and the
// step alone: every request bit-identical to its run alone (outputs,
// states and conv states), within the bounds of Reference32 for the types.
func TestEmulatedBackend(t *testing.T) {
	for _, core := range []string{"-core=true", "-core=false"} {
		for _, c := range layerstacktest.TypeCases {
			t.Run(core[1:]+"/"+c.Name, func(t *testing.T) {
				cfg := layerstacktest.Flags(t, parseFlags, tiny, append([]string{"-backend", "emu", core}, c.Args...)...)
				be := &deviceBackend{d: layerstacktest.Device(t)}
				defer be.Close()
				res, out := layerstacktest.Run(t, run, cfg, backend(be))
				checkReport(t, cfg, res, out, c)
			})
		}
	}
}

// The core kernel updates the conv-state pool in place with grouped
// heads (tiny: 2 key heads, 4 value heads; one threadgroup per key head):
// every request is bit-identical to its run alone (which writes its conv
// state to a buffer of its own, one threadgroup per value head) and within
// the reference's bounds, and the states move exactly the floor, with no
// copy back, overlapped or not. A server that lets the kernel write the
// conv states apart from the pool it reads, with nothing copying them
// back, must fail the checks.
func TestEmulatedCoreInPlace(t *testing.T) {
	for _, overlap := range []string{"-overlap=true", "-overlap=false"} {
		for _, discard := range []bool{false, true} {
			c := layerstacktest.TypeCases[1] // Qwen3.5's types
			cfg := layerstacktest.Flags(t, parseFlags, tiny, append([]string{"-backend", "emu", "-layers", "1", overlap}, c.Args...)...)
			cfg.discardConv = discard
			be := &deviceBackend{d: layerstacktest.Device(t)}
			res, out := layerstacktest.Run(t, run, cfg, backend(be))
			be.Close()
			if p := cfg.Params(1); p.NVHeads <= p.NKHeads || p.Core.Conv == 0 {
				t.Fatalf("%v, core %+v: heads not grouped, or no convolution", p.Shape, p.Core)
			}
			switch {
			case !discard:
				checkReport(t, cfg, res, out, c)
			case res.Bits || res.Pass() || !strings.HasSuffix(out, "FAIL\n"):
				t.Errorf("%s: conv states written apart from the pool passed the checks:\n%s", overlap, out)
			}
		}
	}
}

// A batch of prompts long enough for Kernels.Prefill (the step alone:
// Kernels.DecodeCore runs every window itself) to pick the chunked
// kernel, whose sums run in another order, must still be bit-identical to
// its requests run alone: they are prefilled alone with the chunked
// kernel too.
func TestEmulatedChunkedPrefill(t *testing.T) {
	cfg := layerstacktest.Flags(t, parseFlags, tiny, "-backend", "emu", "-core=false", "-layers", "1", "-requests", "4", "-prompt", "40", "-gen", "1", "-seed", "1")
	be := &deviceBackend{d: layerstacktest.Device(t)}
	defer be.Close()
	res, out := layerstacktest.Run(t, run, cfg, backend(be))
	if res.Chunked == 0 || !res.Bits || !res.Pass() {
		t.Errorf("%d prefills chunked (want some), bit-identical %v, pass %v:\n%s", res.Chunked, res.Bits, res.Pass(), out)
	}
}

// Preparing step t+1 while the device runs step t serves the same
// requests in the same steps as preparing it afterwards, every request
// still bit-identical to its run alone, and reports the host time it hid.
func TestEmulatedOverlapMatchesSerial(t *testing.T) {
	var got [2]result
	for i, overlap := range []string{"-overlap=true", "-overlap=false"} {
		c := layerstacktest.TypeCases[0]
		cfg := layerstacktest.Flags(t, parseFlags, tiny, append([]string{"-backend", "emu", overlap}, c.Args...)...)
		be := &deviceBackend{d: layerstacktest.Device(t)}
		res, out := layerstacktest.Run(t, run, cfg, backend(be))
		be.Close()
		checkReport(t, cfg, res, out, c)
		if res.Overlapped != cfg.overlap || strings.Contains(out, "overlap:") != cfg.overlap {
			t.Errorf("%s: overlapped %v; report:\n%s", overlap, res.Overlapped, out)
		}
		got[i] = res
	}
	o, s := got[0], got[1]
	if o.Steps != s.Steps || o.Tokens != s.Tokens || o.Dispatches != s.Dispatches || o.RefErr != s.RefErr || o.OutErr != s.OutErr || !slices.Equal(o.Occupancy, s.Occupancy) {
		t.Errorf("overlapped %+v\nserial %+v", o, s)
	}
	if o.HostPrep <= 0 || o.HostHidden < 0 || o.HostHidden > o.HostPrep {
		t.Errorf("host preparation %v, hidden %v", o.HostPrep, o.HostHidden)
	}
	t.Logf("overlapped: %v of %v host preparation hidden; loop %v overlapped, %v serial", o.HostHidden, o.HostPrep, o.Wall, s.Wall)
}

// reportLine returns the report's line that starts with prefix, or "".
func reportLine(out, prefix string) string {
	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, prefix) {
			return strings.TrimSuffix(line, "\n")
		}
	}
	return ""
}

// The report says which kernel ran the prefill batches, with the counts
// the run made: with the layer core every batch is Kernels.DecodeCore's, long
// ones included, and none is chunked; without it the long ones are the
// chunked kernel's. Prompts of up to 40 tokens make some batches of
// gdn.ChunkedMinTokens packed tokens or more.
func TestReportPrefills(t *testing.T) {
	long := []string{"-layers", "1", "-requests", "8", "-prompt", "40", "-gen", "2", "-seed", "1"}
	type backendCase struct {
		name string
		args []string
		be   func(t *testing.T) backend
	}
	cpu := func(*testing.T) backend { return &cpuBackend{} }
	emu := func(t *testing.T) backend { return &deviceBackend{d: layerstacktest.Device(t)} }
	for _, c := range []backendCase{
		{"cpu/core", []string{"-backend", "cpu"}, cpu},
		{"cpu/step", []string{"-backend", "cpu", "-core=false"}, cpu},
		{"emu/core", []string{"-backend", "emu"}, emu},
		{"emu/step", []string{"-backend", "emu", "-core=false"}, emu},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := layerstacktest.Flags(t, parseFlags, tiny, append(long, c.args...)...)
			be := c.be(t)
			defer be.Close()
			res, out := layerstacktest.Run(t, run, cfg, be)
			if !res.Pass() || res.Prefills == 0 || res.Long == 0 || res.Long > res.Prefills {
				t.Fatalf("pass %v, %d prefill batches, %d long: the run does not exercise long prefills\n%s", res.Pass(), res.Prefills, res.Long, out)
			}
			var want string
			switch {
			case cfg.Backend == "cpu" && cfg.Core:
				want = fmt.Sprintf("prefill: %d batches, all run by cpuref.Reference32; %d of them of 64 packed tokens or more, which a device runs with gdn.Kernels.DecodeCore as the others", res.Prefills, res.Long)
			case cfg.Backend == "cpu":
				want = fmt.Sprintf("prefill: %d batches, all run by cpuref.Reference32; %d of them of 64 packed tokens or more, which a device runs with the chunked kernel of gdn.Kernels.Prefill", res.Prefills, res.Long)
			case cfg.Core:
				if res.Chunked != 0 {
					t.Errorf("%d prefills chunked with the layer core", res.Chunked)
				}
				want = fmt.Sprintf("prefill: %d batches, every one run by gdn.Kernels.DecodeCore, which takes a window of any length: %d of them of 64 packed tokens or more, none chunked", res.Prefills, res.Long)
			default:
				if res.Chunked != res.Long {
					t.Errorf("%d prefills chunked, %d long", res.Chunked, res.Long)
				}
				want = fmt.Sprintf("prefill: %d batches run by gdn.Kernels.Prefill, %d of them with the chunked kernel (those of 64 packed tokens or more)", res.Prefills, res.Chunked)
			}
			if got := reportLine(out, "prefill: "); got != want {
				t.Errorf("report line\n%s\nwant\n%s", got, want)
			}
			// Check 1 runs each request alone as its batch ran.
			alone := "a prefill, chunked where its batch's was, then"
			if cfg.Core {
				alone = "a prefill with Kernels.DecodeCore, as its batch's, then"
			}
			if got := reportLine(out, "check 1: "); !strings.Contains(got, alone) {
				t.Errorf("check 1 line lacks %q:\n%s", alone, got)
			}
		})
	}
}
