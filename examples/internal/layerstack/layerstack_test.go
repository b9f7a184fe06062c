package layerstack

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/gdn"
	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/internal/floats"
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

// randomInputs returns cpuref.RandomInputs(p, seed), failing t on an error.
func randomInputs(t *testing.T, p spec.Params, seed uint64) cpuref.Inputs {
	t.Helper()
	in, err := cpuref.RandomInputs(p, seed)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// written returns the activations of three layers of windows p, each
// written with inputs of its own drawn from seed, and the inputs.
func written(t *testing.T, dev *mtl.Device, p spec.Params, seed uint64) (*Activations, []cpuref.Inputs) {
	t.Helper()
	a, err := NewActivations(dev, p, 3)
	if err != nil {
		t.Fatal(err)
	}
	ins := make([]cpuref.Inputs, 3)
	for l := range ins {
		if ins[l], err = cpuref.RandomInputs(p, Seed(seed, l, 0)); err != nil {
			a.Release()
			t.Fatal(err)
		}
		a.Write(l, ins[l])
	}
	return a, ins
}

// Layer l's inputs land in its window, and its views cover exactly that
// window.
func TestActivations(t *testing.T) {
	dev := testdevice.Emulated(t, emu.Options{})
	p := spec.Params{Shape: spec.Shape{DK: 32, DV: 8, NKHeads: 2, NVHeads: 4, NTokens: 3, NSeqs: 1}}
	a, ins := written(t, dev, p, 9)
	defer a.Release()
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
			if i := floats.FirstDiff(got, c.want); i >= 0 {
				t.Fatalf("layer %d: %s[%d] = %g, want %g", l, c.name, i, got[i], c.want[i])
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

func parse(t *testing.T, backends []string, args ...string) *Flags {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := Define(fs, backends, 3)
	if err := f.Parse(fs, args); err != nil {
		t.Fatalf("%q: %v", args, err)
	}
	return f
}

// -core, where an example defines it, is on by default and gives the
// parameters the whole core of a Qwen3.5 layer; off, or not defined, none.
func TestDefineCore(t *testing.T) {
	for _, c := range []struct {
		define bool
		args   []string
		want   spec.Core
	}{{true, nil, spec.QwenCore()}, {true, []string{"-core=false"}, spec.Core{}}, {false, nil, spec.Core{}}} {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f := Define(fs, []string{"emu"}, 1)
		if c.define {
			f.DefineCore(fs, "the whole layer core")
		}
		if err := f.Parse(fs, c.args); err != nil {
			t.Fatalf("%q: %v", c.args, err)
		}
		if p := f.Params(3); p.Core != c.want || f.Core != (c.want == spec.QwenCore()) || p.NTokens != 3 {
			t.Errorf("-core defined %v, %q: Params(3).Core %+v, Core %v; want %+v", c.define, c.args, p.Core, f.Core, c.want)
		}
	}
}

func TestFlags(t *testing.T) {
	f := parse(t, []string{"auto", "emu"})
	if f.Backend != "auto" || f.DK != 128 || f.DV != 128 || f.NK != 16 || f.NV != 32 || f.Layers != 3 || f.Seed != 1 || f.HeadMap != spec.Block {
		t.Errorf("defaults: %+v", *f)
	}
	if f.Given(shapeFlags...) {
		t.Errorf("no flag given, but Given reports a shape flag")
	}
	f = parse(t, []string{"auto", "emu"}, "-dv", "64", "-headmap", "tiled", "-backend", "emu")
	if !f.Given("dv") || f.Given("dk") || !f.Given(shapeFlags...) || f.HeadMap != spec.Tiled || f.Backend != "emu" {
		t.Errorf("-dv 64 -headmap tiled -backend emu: %+v", *f)
	}
	p := f.Params(5)
	want := spec.Params{Shape: spec.Shape{DK: 128, DV: 64, NKHeads: 16, NVHeads: 32, NTokens: 5, NSeqs: 1}, HeadMap: spec.Tiled, QScale: float32(1 / math.Sqrt(128)),
		Activation: spec.BF16, State: spec.F32, Fused: spec.FusedAll}
	if p != want {
		t.Errorf("Params(5) = %+v, want %+v (Qwen3.5's types and fused step by default)", p, want)
	}
	f = parse(t, []string{"emu"}, "-dtype", "f16", "-state", "bf16", "-fused=false")
	want = spec.Params{Shape: spec.Shape{DK: 128, DV: 128, NKHeads: 16, NVHeads: 32, NTokens: 1, NSeqs: 1}, HeadMap: spec.Block, QScale: float32(1 / math.Sqrt(128)),
		Activation: spec.F16, State: spec.BF16}
	if p := f.Params(1); p != want {
		t.Errorf("-dtype f16 -state bf16 -fused=false: Params(1) = %+v, want %+v", p, want)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-backend", "cpu"}, `-backend "cpu": want auto, metal or emu`},
		{[]string{"-headmap", "x"}, "-headmap"},
		{[]string{"-layers", "0"}, "-layers 0"},
		{[]string{"extra"}, `unexpected arguments ["extra"]`},
		{[]string{"-dtype", "fp8"}, `-dtype "fp8": want f32, f16 or bf16`},
		{[]string{"-state", "f64"}, `-state "f64": want f32, f16 or bf16`},
	} {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f := Define(fs, []string{"auto", "metal", "emu"}, 1)
		if err := f.Parse(fs, c.args); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error containing %q", c.args, err, c.want)
		}
	}
	f = parse(t, []string{"emu"}, "-dk", "48")
	if err := f.CheckDecodeDK(); err == nil || !strings.Contains(err.Error(), "-dk 48") {
		t.Errorf("-dk 48: %v", err)
	}
}

// Each type has its bound, and the types line names what the gate buffers
// hold and who computes g and beta.
func TestBoundsAndTypes(t *testing.T) {
	if BoundOf(spec.BF16, 1) != 0x1p-8 || BoundOf(spec.F16, 1) != 0x1p-10 || BoundOf(spec.F32, 3) != 3 {
		t.Errorf("BoundOf: %g (bf16), %g (f16), %g (f32 given 3)", BoundOf(spec.BF16, 1), BoundOf(spec.F16, 1), BoundOf(spec.F32, 3))
	}
	for _, c := range []struct {
		p    spec.Params
		want string
	}{
		{spec.Params{Activation: spec.BF16, Fused: spec.FusedAll}, "bf16 activations (q, k, v, a, b, output), f32 state; fused step: "},
		{spec.Params{Activation: spec.F16, State: spec.BF16}, "f16 activations (q, k, v, g, beta, output), bf16 state; unfused: "},
		{spec.Params{Activation: spec.BF16, Fused: spec.FusedAll, Core: spec.QwenCore()}, "bf16 activations (mixed_qkv, z, a, b, output), f32 state; fused step: mixed_qkv, a and b in"},
		{spec.Params{Activation: spec.F32, Core: spec.Core{Conv: 4}}, "f32 activations (mixed_qkv, g, beta, output), f32 state; unfused: g and beta computed beforehand"},
		{spec.Params{Activation: spec.F32, Fused: spec.FusedAll, Core: spec.Core{Norm: true, NormEps: 1e-6}}, "f32 activations (q, k, v, z, a, b, output), f32 state; fused step: raw q, k, a and b in"},
	} {
		if got := Types(c.p); !strings.HasPrefix(got, c.want) {
			t.Errorf("Types(%v, %v, %+v) = %q, want it to begin %q", c.p.Activation, c.p.State, c.p.Fused, got, c.want)
		}
	}
}

// -help prints the usage on the flag set's output: the program, what it
// does, and every flag.
func TestNewFlagSet(t *testing.T) {
	var w strings.Builder
	fs := NewFlagSet("prog", "Does one thing.", &w)
	f := Define(fs, []string{"emu"}, 1)
	if err := f.Parse(fs, []string{"-help"}); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-help: %v, want flag.ErrHelp", err)
	}
	if !strings.HasPrefix(w.String(), "usage: prog [flags]\n\nDoes one thing.\n\nflags:\n") || !strings.Contains(w.String(), "-headmap") {
		t.Errorf("usage:\n%s", &w)
	}
	w.Reset()
	if err := f.Parse(fs, []string{"-nosuch"}); err == nil || !strings.Contains(w.String(), "-nosuch") {
		t.Errorf("-nosuch: %v, said %q", err, w.String())
	}
}

// On the emulated device the defaults the command line left unset shrink,
// and the run says so; a fallback other than a device returns no Device.
func TestOpen(t *testing.T) {
	testdevice.Emulated(t, emu.Options{}) // skips (or fails in strict mode) without the prerequisites
	tokens := 32
	more := Smaller{Flags: []string{"layers", "tokens"}, Apply: func() { tokens = 16 }, Says: "16 tokens", Full: "-tokens 32"}
	for _, c := range []struct {
		args       []string
		nk, tokens int
		says       string
	}{
		{nil, 2, 16, "smaller defaults: 2 key heads, 4 value heads, 16 tokens (Qwen3.5's: -kheads 16 -vheads 32 -tokens 32)"},
		{[]string{"-dv", "32"}, 16, 16, "smaller defaults: 16 tokens (Qwen3.5's: -tokens 32)"},
		{[]string{"-dk", "32", "-layers", "1"}, 16, 32, ""},
	} {
		tokens = 32
		f := parse(t, []string{"emu"}, c.args...)
		var w strings.Builder
		d, err := f.Open(&w, Fallback{}, more)
		if err != nil {
			t.Fatalf("%q: %v", c.args, err)
		}
		if d.GPU || d.Kernels == nil || d.Queue == nil || !strings.HasPrefix(d.Desc, "emu: ") {
			t.Errorf("%q: device %+v", c.args, d)
		}
		d.Close()
		if f.NK != c.nk || tokens != c.tokens || (c.nk == 2) != (f.NV == 4) {
			t.Errorf("%q: %d key heads, %d value heads, %d tokens; want %d key heads, %d tokens", c.args, f.NK, f.NV, tokens, c.nk, c.tokens)
		}
		if !strings.Contains(w.String(), c.says) || (c.says == "") != (w.Len() == 0) {
			t.Errorf("%q: said %q, want %q", c.args, w.String(), c.says)
		}
	}
	f := parse(t, []string{"auto", "cpu"})
	var w strings.Builder
	// auto is metal where there is Metal, else emu where the emulated
	// device runs, else the example's own cpu backend, each step down said.
	d, err := f.Open(&w, Fallback{Backend: "cpu", Says: "the CPU instead"})
	emuDev, emuErr := emu.NewDevice()
	if emuErr == nil {
		emuDev.Release()
	}
	switch {
	case err != nil:
		t.Errorf("auto: %v", err)
	case d != nil:
		d.Close()
		if (f.Backend != "metal" && f.Backend != "emu") || d.GPU != (f.Backend == "metal") {
			t.Errorf("auto opened a device, backend %q, GPU %v", f.Backend, d.GPU)
		}
		if f.Backend == "emu" && (emuErr != nil || !strings.Contains(w.String(), "no Metal on") || !strings.Contains(w.String(), "trying the emulated device")) {
			t.Errorf("auto without Metal opened the emulated device (its own error: %v) and said %q", emuErr, w.String())
		}
	default:
		if f.Backend != "cpu" || emuErr == nil || !strings.Contains(w.String(), "no emulated device either") || !strings.Contains(w.String(), "the CPU instead") {
			t.Errorf("auto without a device: backend %q (emulated device: %v), said %q", f.Backend, emuErr, w.String())
		}
	}
}

// With 16-bit activations and the fused gate, layer l's window holds its
// inputs in the activation type, A_log and dt_bias hold the layer's
// constants in f32, and the views say so.
func TestTypedActivations(t *testing.T) {
	dev := testdevice.Emulated(t, emu.Options{})
	for _, ty := range []spec.ElemType{spec.F16, spec.BF16} {
		p := spec.Params{Shape: spec.Shape{DK: 32, DV: 8, NKHeads: 2, NVHeads: 4, NTokens: 1, NSeqs: 1}, Activation: ty, Fused: spec.FusedAll}
		a, ins := written(t, dev, p, 5)
		for l, in := range ins {
			b := a.Buffers(l)
			for _, c := range []struct {
				name string
				view gdn.View
				ty   spec.ElemType
				want []float32
			}{{"q", b.Q, ty, in.Q}, {"k", b.K, ty, in.K}, {"v", b.V, ty, in.V}, {"a", b.G, ty, in.G}, {"b", b.Beta, ty, in.Beta}, {"A_log", b.ALog, spec.F32, in.ALog}, {"dt_bias", b.DtBias, spec.F32, in.DtBias}} {
				if c.view.Type != c.ty || c.view.Len != len(c.want) || c.view.Offset != l*len(c.want)*c.ty.Size() {
					t.Fatalf("%v, layer %d: %s view %v of %d at %d; want %v of %d at %d", ty, l, c.name, c.view.Type, c.view.Len, c.view.Offset, c.ty, len(c.want), l*len(c.want)*c.ty.Size())
				}
				got := Load(c.view, make([]float32, c.view.Len))
				if i := floats.FirstDiff(got, c.want); i >= 0 {
					t.Fatalf("%v, layer %d: %s[%d] = %g, want %g", ty, l, c.name, i, got[i], c.want[i])
				}
			}
			out := make([]float32, p.VLen())
			for i := range out {
				out[i] = float32(l) + float32(i)/3
			}
			Store(b.Output, out)
			cpuref.Round(ty, out)
			if got := a.ReadOutput(l, make([]float32, p.VLen())); floats.FirstDiff(got, out) >= 0 {
				t.Errorf("%v, layer %d: ReadOutput = %v, want %v", ty, l, got, out)
			}
		}
		a.Release()
	}
}

// closer counts its Close calls.
type closer struct{ closed int }

func (c *closer) Close() { c.closed++ }

// verdict is a run's result.
type verdict bool

func (v verdict) Pass() bool { return bool(v) }

// Command maps each outcome to its exit status, opens with the parsed flags,
// runs only on what open returned, and closes that exactly once.
func TestCommandStatus(t *testing.T) {
	bad := errors.New("broken")
	for _, c := range []struct {
		what             string
		flagErr, openErr error
		pass             bool
		runErr           error
		code             int
		stderr           string
		ran, closed      bool
	}{
		{what: "-help", flagErr: flag.ErrHelp, code: 0},
		{what: "bad flag", flagErr: bad, code: 2, stderr: "prog: broken\n"},
		{what: "open fails", openErr: bad, code: 1, stderr: "prog: broken\n"},
		{what: "run fails", runErr: bad, pass: true, code: 1, stderr: "prog: broken\n", ran: true, closed: true},
		{what: "checks fail", code: 1, ran: true, closed: true},
		{what: "pass", pass: true, code: 0, ran: true, closed: true},
	} {
		var errs strings.Builder
		be, ran, opened := &closer{}, false, false
		code := Command("prog",
			func(args []string, stderr io.Writer) (string, error) {
				if len(args) != 1 || args[0] != "-x" || stderr != &errs {
					t.Errorf("%s: parse got %q, %v", c.what, args, stderr)
				}
				return "cfg", c.flagErr
			},
			func(cfg *string, stdout io.Writer) (*closer, error) {
				opened = true
				if *cfg != "cfg" {
					t.Errorf("%s: open got %q, want the parsed flags", c.what, *cfg)
				}
				*cfg = "opened"
				if c.openErr != nil {
					return nil, c.openErr
				}
				return be, nil
			},
			func(cfg string, b *closer, stdout, stderr io.Writer) (verdict, error) {
				ran = true
				if cfg != "opened" || b != be || b.closed != 0 {
					t.Errorf("%s: run got %q and %p (closed %d times), want the flags open set and %p open", c.what, cfg, b, b.closed, be)
				}
				return verdict(c.pass), c.runErr
			})([]string{"-x"}, io.Discard, &errs)
		if code != c.code || errs.String() != c.stderr || ran != c.ran || (be.closed == 1) != c.closed || be.closed > 1 || opened != (c.flagErr == nil) {
			t.Errorf("%s: status %d, stderr %q, opened %v, run ran %v, closed %d times; want %d, %q, %v, %v, closed %v", c.what, code, errs.String(), opened, ran, be.closed, c.code, c.stderr, c.flagErr == nil, c.ran, c.closed)
		}
	}
}

// A pool holds each slot's state in its own place, in the state type, and
// with the layer core's convolution each slot's conv state beside it, in
// the activation type; Reset zeroes one slot (state and conv state) of
// every layer and nothing else.
func TestStates(t *testing.T) {
	testdevice.CheckReleased(t)
	dev := testdevice.Emulated(t, emu.Options{})
	for _, core := range []spec.Core{{}, spec.QwenCore()} {
		for _, ty := range []spec.ElemType{spec.F32, spec.BF16} {
			one := spec.Params{Shape: spec.Shape{DK: 32, DV: 8, NKHeads: 1, NVHeads: 2, NTokens: 1, NSeqs: 1}, State: ty, Activation: spec.BF16, Core: core}
			s, err := NewStates(dev, one, 2, 3)
			if err != nil {
				t.Fatal(err)
			}
			n, nc := one.StateLen(), one.ConvStateLen()
			if v := s.Pool(1); v.Type != ty || v.Offset != 0 || v.Len != 3*n {
				t.Errorf("%v: pool view %v of %d at %d, want %d at 0", ty, v.Type, v.Len, v.Offset, 3*n)
			}
			conv := core.Conv > 0
			if v := s.ConvPool(1); conv != (v != gdn.View{}) || conv && (v.Type != spec.BF16 || v.Offset != 0 || v.Len != 3*nc || v.Buffer == s.ConvPool(0).Buffer) {
				t.Errorf("%v, core %+v: conv pool view %+v, want %d bf16 elements at 0 with the convolution, none without", ty, core, v, 3*nc)
			}
			want, wantConv := map[[2]int][]float32{}, map[[2]int][]float32{}
			for l := range 2 {
				for slot := range 3 {
					in := randomInputs(t, one, Seed(4, l, slot))
					cpuref.Round(ty, in.StateIn)
					s.Set(l, slot, in.StateIn)
					want[[2]int{l, slot}] = in.StateIn
					if conv {
						cpuref.Round(spec.BF16, in.ConvState)
						Store(s.ConvSlot(l, slot), in.ConvState)
						wantConv[[2]int{l, slot}] = in.ConvState
					}
				}
			}
			s.Reset(1)
			for k, w := range want {
				if k[1] == 1 {
					w = make([]float32, n)
				}
				if got := s.Read(k[0], k[1]); floats.FirstDiff(got, w) >= 0 {
					t.Errorf("%v: layer %d, slot %d: Read differs from what was set (slot 1 reset)", ty, k[0], k[1])
				}
			}
			for k, w := range wantConv {
				if k[1] == 1 {
					w = make([]float32, nc)
				}
				if got := s.ReadConv(k[0], k[1]); floats.FirstDiff(got, w) >= 0 {
					t.Errorf("%v: layer %d, slot %d: ReadConv differs from what was set (slot 1 reset)", ty, k[0], k[1])
				}
			}
			s.Release()
		}
	}
}

// Reshape grows the buffers a larger window needs and keeps those that
// are large enough; a window of a pool and of packed sequences carries its
// slots and cu_seqlens; Write poisons the output window.
func TestActivationsReshape(t *testing.T) {
	testdevice.CheckReleased(t)
	dev := testdevice.Emulated(t, emu.Options{})
	one := spec.Params{Shape: spec.Shape{DK: 32, DV: 8, NKHeads: 1, NVHeads: 2, NTokens: 1, NSeqs: 1}}
	a, err := NewActivations(dev, one, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release()
	if b := a.Buffers(1); b.Slots.Buffer != nil || b.CuSeqlens.Buffer != nil || b.ALog.Buffer != nil {
		t.Errorf("one token of one sequence: views of slots, cu_seqlens or A_log set")
	}
	q := a.Buffers(0).Q.Buffer
	batch := one
	batch.NTokens, batch.NSeqs, batch.NSlots, batch.Varlen = 5, 2, 4, true
	if err := a.Reshape(batch); err != nil {
		t.Fatal(err)
	}
	for l := range 2 {
		in := randomInputs(t, batch, Seed(6, l, 0))
		a.Write(l, in)
		b := a.Buffers(l)
		for _, c := range []struct {
			name string
			view gdn.View
			want []int32
		}{{"slots", b.Slots, in.Slots}, {"cu_seqlens", b.CuSeqlens, in.CuSeqlens}} {
			if c.view.Offset != 4*l*len(c.want) || c.view.Len != len(c.want) {
				t.Fatalf("layer %d: %s view of %d at %d, want %d at %d", l, c.name, c.view.Len, c.view.Offset, len(c.want), 4*l*len(c.want))
			}
			for i, got := range mtl.Slice[int32](c.view.Buffer)[c.view.Offset/4:][:c.view.Len] {
				if got != c.want[i] {
					t.Errorf("layer %d: %s[%d] = %d, want %d", l, c.name, i, got, c.want[i])
				}
			}
		}
		if got := Load(b.V, make([]float32, b.V.Len)); b.V.Len != batch.VLen() || floats.FirstDiff(got, in.V) >= 0 {
			t.Errorf("layer %d: v view of %d elements, want %d, or not what was written", l, b.V.Len, batch.VLen())
		}
		if out := a.Output(l); len(out) != batch.VLen() || floats.Unwritten(out) != len(out) {
			t.Errorf("layer %d: %d of %d output elements poisoned, want all", l, floats.Unwritten(out), len(out))
		}
	}
	if a.Buffers(0).Q.Buffer == q {
		t.Errorf("Reshape to a larger window kept the q buffer of %d bytes", q.Length())
	}
	q = a.Buffers(0).Q.Buffer
	if err := a.Reshape(one); err != nil || a.Buffers(0).Q.Buffer != q {
		t.Errorf("Reshape to a smaller window: %v, or a new q buffer", err)
	}
}

// A 16-bit output is poisoned with NaN too.
func TestPoison(t *testing.T) {
	testdevice.CheckReleased(t)
	dev := testdevice.Emulated(t, emu.Options{})
	buf, err := dev.NewBuffer(64, mtl.ResourceStorageModeShared)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Release()
	for _, ty := range []spec.ElemType{spec.F32, spec.F16, spec.BF16} {
		clear(mtl.Slice[byte](buf))
		v := gdn.NewView(buf, 2*ty.Size(), ty, 5)
		Poison(v)
		got := Load(gdn.NewView(buf, 0, ty, 8), make([]float32, 8))
		for i, x := range got {
			if nan := i >= 2 && i < 7; math.IsNaN(float64(x)) != nan {
				t.Errorf("%v: element %d = %v after poisoning elements 2 to 6", ty, i, x)
			}
		}
	}
}

// RunLayers runs one dispatch per layer on the views it is given, and an
// error names the layer whose dispatch was refused.
func TestRunLayers(t *testing.T) {
	testdevice.CheckReleased(t)
	d, err := NewDevice(testdevice.Emulated(t, emu.Options{}), "emu (test)", false)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	p := spec.Params{Shape: spec.Shape{DK: 32, DV: 8, NKHeads: 1, NVHeads: 2, NTokens: 1, NSeqs: 1}, QScale: 1}
	a, err := NewActivations(d.Dev, p, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release()
	s, err := NewStates(d.Dev, p, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	ins := make([]cpuref.Inputs, 2)
	for l := range ins {
		if ins[l], err = cpuref.RandomInputs(p, Seed(8, l, 0)); err != nil {
			t.Fatal(err)
		}
		a.Write(l, ins[l])
		s.Set(l, 0, ins[l].StateIn)
	}
	bufs := func(l int) gdn.Buffers {
		b := a.Buffers(l)
		b.StateIn, b.StateOut = s.Pool(l), s.Pool(l)
		return b
	}
	wall, gpu, err := d.RunLayers((*gdn.Kernels).Decode, p, 2, bufs)
	if err != nil || wall <= 0 || gpu != 0 {
		t.Fatalf("RunLayers: wall %v, GPU time %v, %v; want a wall clock, no GPU time on the emulated device", wall, gpu, err)
	}
	for l, in := range ins {
		want, err := cpuref.Reference32(p, in, false)
		if err != nil {
			t.Fatal(err)
		}
		if e := cpuref.MaxRelErr(s.Read(l, 0), want.StateOut); !(e <= Bound) {
			t.Errorf("layer %d: state %.3g from Reference32", l, e)
		}
		if e := cpuref.MaxRelErr(a.Output(l), want.Output); !(e <= Bound) {
			t.Errorf("layer %d: output %.3g from Reference32", l, e)
		}
	}
	_, _, err = d.RunLayers((*gdn.Kernels).Decode, p, 2, func(l int) gdn.Buffers {
		b := bufs(l)
		if l == 1 {
			b.Output = gdn.View{}
		}
		return b
	})
	if err == nil || !strings.HasPrefix(err.Error(), "layer 1: ") {
		t.Errorf("layer 1 without an output: %v, want an error naming layer 1", err)
	}
}

// The tokens of a run, taken one by one and appended back, are the run;
// each carries the layer's A_log and dt_bias.
func TestTokens(t *testing.T) {
	run := spec.Params{Shape: spec.Shape{DK: 32, DV: 8, NKHeads: 1, NVHeads: 2, NTokens: 3, NSeqs: 1}, Fused: spec.FusedAll}
	in := randomInputs(t, run, 2)
	one := run
	one.NTokens = 1
	var all cpuref.Inputs
	for tok := range 3 {
		x := Tokens(one, in, tok, 1)
		if len(x.ALog) != 2 || !floats.Equal(x.ALog, in.ALog) || !floats.Equal(x.DtBias, in.DtBias) {
			t.Fatalf("token %d: A_log %v, dt_bias %v; want the run's %v, %v", tok, x.ALog, x.DtBias, in.ALog, in.DtBias)
		}
		if len(x.Q) != one.QKLen() || len(x.V) != one.VLen() || len(x.Beta) != one.GateLen() || x.V[0] != in.V[tok*one.VLen()] {
			t.Fatalf("token %d: %d q, %d v, %d beta elements, v[0] %g; want %d, %d, %d, %g", tok, len(x.Q), len(x.V), len(x.Beta), x.V[0], one.QKLen(), one.VLen(), one.GateLen(), in.V[tok*one.VLen()])
		}
		AppendTokens(&all, x)
	}
	for _, c := range []struct {
		name      string
		got, want []float32
	}{{"q", all.Q, in.Q}, {"k", all.K, in.K}, {"v", all.V, in.V}, {"g", all.G, in.G}, {"beta", all.Beta, in.Beta}} {
		if len(c.got) != len(c.want) || floats.FirstDiff(c.got, c.want) >= 0 {
			t.Errorf("%s: the tokens appended back differ from the run", c.name)
		}
	}
}

// Constants draws each layer's start and shared values once, at t = -1:
// with the layer core the conv and norm weights and the conv state too,
// without it none of them; WithConstants hands a token's inputs the
// layer's shared values and no state.
func TestConstants(t *testing.T) {
	for _, core := range []spec.Core{{}, spec.QwenCore()} {
		p := spec.Params{Shape: spec.Shape{DK: 32, DV: 32, NKHeads: 2, NVHeads: 4, NTokens: 1, NSeqs: 1}, Activation: spec.BF16, Fused: spec.FusedAll, Core: core}
		consts, err := Constants(p, 7, 2)
		if err != nil {
			t.Fatal(err)
		}
		for l, c := range consts {
			want := randomInputs(t, p, Seed(7, l, -1))
			for _, f := range []struct {
				name      string
				got, want []float32
			}{{"StateIn", c.StateIn, want.StateIn}, {"ConvState", c.ConvState, want.ConvState}, {"A_log", c.ALog, want.ALog}, {"dt_bias", c.DtBias, want.DtBias},
				{"ConvWeight", c.ConvWeight, want.ConvWeight}, {"NormWeight", c.NormWeight, want.NormWeight}} {
				if len(f.got) != len(f.want) || floats.FirstDiff(f.got, f.want) >= 0 {
					t.Errorf("core %+v, layer %d: %s of %d values, not the draw at t = -1 (%d)", core, l, f.name, len(f.got), len(f.want))
				}
			}
			if (core.Conv > 0) != (len(c.ConvWeight) > 0 && len(c.ConvState) > 0 && len(c.NormWeight) > 0) {
				t.Errorf("core %+v: conv weight %d, conv state %d, norm weight %d values", core, len(c.ConvWeight), len(c.ConvState), len(c.NormWeight))
			}
			tok := randomInputs(t, p, Seed(7, l, 3))
			in := WithConstants(tok, c)
			act, tokAct := in.Q, tok.Q
			if core.Conv > 0 {
				act, tokAct = in.MixedQKV, tok.MixedQKV
			}
			if in.StateIn != nil || in.ConvState != nil || &in.ALog[0] != &c.ALog[0] || &act[0] != &tokAct[0] || (core.Conv > 0 && &in.ConvWeight[0] != &c.ConvWeight[0]) {
				t.Errorf("core %+v: WithConstants kept a state, or not the layer's constants and the token's inputs", core)
			}
		}
	}
}
