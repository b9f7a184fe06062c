package layerstack

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/gdn"
	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/mtl"
)

func TestPercentile(t *testing.T) {
	d := []time.Duration{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	if got := Percentile(d, 50); got != 5 {
		t.Errorf("median = %d, want 5", got)
	}
	if got := Percentile(d, 90); got != 9 {
		t.Errorf("p90 = %d, want 9", got)
	}
	if got := Percentile(d[:1], 90); got != 5 {
		t.Errorf("p90 of one = %d, want 5", got)
	}
	if got := Percentile(nil, 50); got != 0 {
		t.Errorf("median of none = %d, want 0", got)
	}
}

func TestDuration(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{{1500 * time.Nanosecond, "1.5 us"}, {2500 * time.Microsecond, "2.50 ms"}, {1500 * time.Millisecond, "1.50 s"}} {
		if got := Duration(c.d); got != c.want {
			t.Errorf("Duration(%v) = %q, want %q", c.d, got, c.want)
		}
	}
}

// Every layer and step gets a seed of its own.
func TestSeed(t *testing.T) {
	seen := map[uint64]string{}
	for l := range 4 {
		for step := -1; step < 4; step++ {
			s := Seed(1, l, step)
			if prev, ok := seen[s]; ok {
				t.Errorf("layer %d, step %d: seed %#x, as %s", l, step, s, prev)
			}
			seen[s] = fmt.Sprintf("layer %d, step %d", l, step)
		}
	}
	if Seed(1, 0, 0) == Seed(2, 0, 0) {
		t.Errorf("runs 1 and 2 draw the same inputs")
	}
}

// Layer l's inputs land in its window, and its views cover exactly that
// window.
func TestActivations(t *testing.T) {
	dev := testdevice.Emulated(t, emu.Options{})
	p := spec.Params{Shape: spec.Shape{DK: 32, DV: 8, NKHeads: 2, NVHeads: 4, NTokens: 3, NSeqs: 1}}
	const layers = 3
	a, err := NewActivations(dev, p, layers)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release()
	ins := make([]cpuref.Inputs, layers)
	for l := range ins {
		if ins[l], err = cpuref.RandomInputs(p, Seed(9, l, 0)); err != nil {
			t.Fatal(err)
		}
		a.Write(l, ins[l])
	}
	for l, in := range ins {
		b := a.Buffers(l)
		for _, c := range []struct {
			name string
			view gdn.View
			want []float32
		}{{"q", b.Q, in.Q}, {"k", b.K, in.K}, {"v", b.V, in.V}, {"g", b.G, in.G}, {"beta", b.Beta, in.Beta}} {
			got := mtl.Slice[float32](c.view.Buffer)[c.view.Offset/4:][:c.view.Len]
			if len(got) != len(c.want) {
				t.Fatalf("layer %d: %s view of %d elements, want %d", l, c.name, len(got), len(c.want))
			}
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(c.want[i]) {
					t.Fatalf("layer %d: %s[%d] = %g, want %g", l, c.name, i, got[i], c.want[i])
				}
			}
		}
		out := a.Output(l)
		if b.Output.Len != p.VLen() || len(out) != p.VLen() || b.Output.Offset != 4*l*p.VLen() {
			t.Fatalf("layer %d: output view at %d of %d elements, Output %d; want %d at %d", l, b.Output.Offset, b.Output.Len, len(out), p.VLen(), 4*l*p.VLen())
		}
		out[0] = float32(l) + 0.5
		if got := mtl.Slice[float32](b.Output.Buffer)[b.Output.Offset/4]; got != float32(l)+0.5 {
			t.Errorf("layer %d: Output is not the output view's memory", l)
		}
		if b.StateIn.Buffer != nil || b.StateOut.Buffer != nil || b.Capture.Buffer != nil {
			t.Errorf("layer %d: the state views are set", l)
		}
	}
}
