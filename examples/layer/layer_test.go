package main

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/examples/internal/layerstack/layerstacktest"
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
			res, err := run(c, d, &out)
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
