package main

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/examples/internal/layerstack/layerstacktest"
	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/mtl"
)

// TestLayerRuns runs the example on the emulated device at small shapes in
// both checkpoint layouts and three type combinations: it must write the
// random file, load it, run one core dispatch per step and pass its own
// checks against cpuref.Reference32; the measured bytes per decode token
// are the floor without grouped heads.
func TestLayerRuns(t *testing.T) {
	for _, args := range [][]string{
		{"-dk", "64", "-dv", "64", "-kheads", "2", "-vheads", "4", "-hidden", "48", "-prefill", "5", "-decode", "2"},
		{"-dk", "32", "-dv", "32", "-kheads", "2", "-vheads", "2", "-hidden", "32", "-prefill", "2", "-decode", "3",
			"-format", "qwen3-next", "-prefix", "model.layers.0.linear_attn.", "-dtype", "f16", "-state", "bf16"},
		{"-dk", "32", "-dv", "32", "-kheads", "1", "-vheads", "3", "-hidden", "16", "-prefill", "1", "-decode", "1", "-dtype", "f32"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			c := layerstacktest.Flags(t, parseFlags, []string{"-backend", "emu"}, args...)
			d := layerstacktest.Device(t)
			defer d.Close()
			var out bytes.Buffer
			res, err := run(c, d, &out, io.Discard)
			if err != nil {
				t.Fatalf("%v\n%s", err, &out)
			}
			if !res.pass || !strings.HasSuffix(out.String(), "PASS\n") || res.wroteFile == "" || res.dispatchesPerToken != 1 {
				t.Errorf("the run did not pass:\n%s", &out)
			}
			if !strings.Contains(out.String(), "compiling gated_delta_net_core_packed_") {
				t.Errorf("it did not say what it compiles before the first step:\n%s", &out)
			}
			if !res.measured {
				t.Errorf("no bytes measured on the emulated device:\n%s", &out)
			} else if c.heads.NVHeads == c.heads.NKHeads && res.stateBytes != res.floorBytes {
				t.Errorf("measured %d bytes per decode token, floor %d", res.stateBytes, res.floorBytes)
			}
		})
	}
}

// TestLayerFlags checks that bad flags are refused.
func TestLayerFlags(t *testing.T) {
	for _, args := range [][]string{{"-dtype", "f8"}, {"-prefill", "0"}, {"-format", "gguf"}} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

// The program end to end, as the other examples run: -backend auto opens
// Metal where there is Metal, else the emulated device, saying the step
// down and why (layerstack.OpenDevice); it passes with exit status 0.
func TestLayerCLI(t *testing.T) {
	testdevice.Emulated(t, emu.Options{}) // skips (or fails in strict mode) without the prerequisites
	var out, errs bytes.Buffer
	args := []string{"-dk", "32", "-dv", "32", "-kheads", "1", "-vheads", "2", "-hidden", "16", "-prefill", "3", "-decode", "2"}
	if code := cli(args, &out, &errs); code != 0 || !strings.HasSuffix(out.String(), "PASS\n") {
		t.Fatalf("exit status %d\nstdout:\n%s\nstderr:\n%s", code, &out, &errs)
	}
	metal := strings.Contains(out.String(), "\nmetal: ")
	emulated := strings.Contains(out.String(), "no Metal on "+runtime.GOOS+"/"+runtime.GOARCH+": trying the emulated device") && strings.Contains(out.String(), "\nemu: ")
	if metal == emulated {
		t.Errorf("auto: not one of Metal, or the emulated device with the step down said:\n%s", &out)
	}
}

// Exit statuses, as -h says: 0 for -h (the usage on stderr), 2 for a bad
// flag (named), 1 when the device named does not open.
func TestLayerExitStatus(t *testing.T) {
	var errs bytes.Buffer
	if code := cli([]string{"-h"}, io.Discard, &errs); code != 0 || !strings.Contains(errs.String(), "usage: layer [flags]") || !strings.Contains(errs.String(), "2 when the flags are bad") {
		t.Errorf("-h: exit status %d, stderr:\n%s", code, &errs)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-backend", "gpu"}, `-backend "gpu": want auto, metal or emu`},
		{[]string{"-backend", "cpu"}, `-backend "cpu"`},
		{[]string{"-dtype", "f8"}, `-dtype "f8"`},
		{[]string{"-prefill", "0"}, "-prefill 0"},
		{[]string{"-dk", "32", "extra"}, `unexpected arguments ["extra"]`},
		{[]string{"-seed", "-1"}, `-seed`},
	} {
		errs.Reset()
		if code := cli(c.args, io.Discard, &errs); code != 2 || !strings.Contains(errs.String(), c.want) {
			t.Errorf("%q: exit status %d, stderr %q; want 2 and %q", c.args, code, errs.String(), c.want)
		}
	}
	if _, err := mtl.CreateSystemDefaultDevice(); errors.Is(err, mtl.ErrNoDevice) {
		errs.Reset()
		if code := cli([]string{"-backend", "metal"}, io.Discard, &errs); code != 1 || !strings.Contains(errs.String(), "layer: -backend metal: ") {
			t.Errorf("-backend metal without Metal: exit status %d, stderr %q; want 1", code, errs.String())
		}
	}
}
