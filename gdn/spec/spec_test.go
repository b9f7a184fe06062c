package spec_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/gdn/spec"
)

func TestCounts(t *testing.T) {
	s := spec.Shape{DK: 128, DV: 64, NKHeads: 2, NVHeads: 6, NTokens: 3, NSeqs: 5}
	for _, c := range []struct {
		name      string
		got, want int
	}{
		{"QKLen", s.QKLen(), 128 * 2 * 3 * 5},
		{"VLen", s.VLen(), 64 * 6 * 3 * 5},
		{"GateLen", s.GateLen(), 6 * 3 * 5},
		{"StateLen", s.StateLen(), 128 * 64 * 6 * 5},
		{"CaptureLen", s.CaptureLen(), 128 * 64 * 6 * 3 * 5},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
	huge := spec.Shape{DK: 1 << 20, DV: 1 << 20, NKHeads: 1, NVHeads: 1 << 20, NTokens: 1 << 20, NSeqs: 1}
	if got := huge.CaptureLen(); got != math.MaxInt {
		t.Errorf("CaptureLen of %v = %d, want it saturated at math.MaxInt", huge, got)
	}
	if got := (spec.Shape{DK: -1, DV: 2, NKHeads: 1, NVHeads: 1, NTokens: 1, NSeqs: 1}).StateLen(); got != 0 {
		t.Errorf("StateLen with a negative dimension = %d, want 0", got)
	}
}

func TestValidate(t *testing.T) {
	ok := spec.Params{Shape: spec.Shape{DK: 4, DV: 2, NKHeads: 1, NVHeads: 2, NTokens: 3, NSeqs: 1}}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid params: %v", err)
	}
	for _, c := range []struct {
		name  string
		edit  func(*spec.Params)
		arg   string
		wants string
	}{
		{"zero D_v", func(p *spec.Params) { p.DV = 0 }, "Shape.DV", "0, must be > 0"},
		{"not a multiple", func(p *spec.Params) { p.NKHeads = 3; p.NVHeads = 4 }, "Shape.NVHeads", "4 is not a multiple of Shape.NKHeads = 3"},
		{"head map", func(p *spec.Params) { p.HeadMap = 7 }, "HeadMap", "7"},
		{"scale", func(p *spec.Params) { p.QScale = float32(math.Inf(-1)) }, "QScale", "-Inf"},
		{"activation", func(p *spec.Params) { p.Activation = 3 }, "Activation", "ElemType(3)"},
		{"state", func(p *spec.Params) { p.State = 200 }, "State", "ElemType(200)"},
	} {
		p := ok
		c.edit(&p)
		err := p.Validate()
		var e *spec.ArgumentError
		if !errors.As(err, &e) || e.Arg != c.arg || !strings.Contains(e.Detail, c.wants) {
			t.Errorf("%s: error %v, want an ArgumentError for %s mentioning %q", c.name, err, c.arg, c.wants)
		}
	}
}

func TestHeadMap(t *testing.T) {
	for _, m := range []spec.HeadMap{spec.Block, spec.Tiled} {
		got, err := spec.ParseHeadMap(m.String())
		if err != nil || got != m {
			t.Errorf("ParseHeadMap(%q) = %v, %v", m.String(), got, err)
		}
	}
	if _, err := spec.ParseHeadMap("blocked"); err == nil {
		t.Error(`ParseHeadMap("blocked") returned no error`)
	}
	// 2 key heads, 6 value heads: r = 3.
	for h, want := range []int{0, 0, 0, 1, 1, 1} {
		if got := spec.Block.KeyHead(h, 2, 6); got != want {
			t.Errorf("Block.KeyHead(%d) = %d, want %d", h, got, want)
		}
	}
	for h, want := range []int{0, 1, 0, 1, 0, 1} {
		if got := spec.Tiled.KeyHead(h, 2, 6); got != want {
			t.Errorf("Tiled.KeyHead(%d) = %d, want %d", h, got, want)
		}
	}
}

func TestElemType(t *testing.T) {
	for _, c := range []struct {
		t    spec.ElemType
		name string
		size int
	}{{spec.F32, "f32", 4}, {spec.F16, "f16", 2}, {spec.BF16, "bf16", 2}, {9, "ElemType(9)", 0}} {
		if c.t.String() != c.name || c.t.Size() != c.size {
			t.Errorf("%d: %q size %d, want %q size %d", uint8(c.t), c.t.String(), c.t.Size(), c.name, c.size)
		}
	}
}

func TestServingCounts(t *testing.T) {
	pool := spec.Shape{DK: 128, DV: 64, NKHeads: 2, NVHeads: 6, NTokens: 3, NSeqs: 5, NSlots: 9}
	packed := spec.Shape{DK: 128, DV: 64, NKHeads: 2, NVHeads: 6, NTokens: 11, NSeqs: 5, Varlen: true}
	for _, c := range []struct {
		name      string
		got, want int
	}{
		{"pool QKLen", pool.QKLen(), 128 * 2 * 3 * 5},
		{"pool StateLen", pool.StateLen(), 128 * 64 * 6 * 9},
		{"pool CaptureLen", pool.CaptureLen(), 128 * 64 * 6 * 3 * 5},
		{"pool SlotsLen", pool.SlotsLen(), 5},
		{"pool CuSeqlensLen", pool.CuSeqlensLen(), 0},
		{"packed QKLen", packed.QKLen(), 128 * 2 * 11},
		{"packed VLen", packed.VLen(), 64 * 6 * 11},
		{"packed GateLen", packed.GateLen(), 6 * 11},
		{"packed StateLen", packed.StateLen(), 128 * 64 * 6 * 5},
		{"packed CaptureLen", packed.CaptureLen(), 128 * 64 * 6 * 11},
		{"packed SlotsLen", packed.SlotsLen(), 0},
		{"packed CuSeqlensLen", packed.CuSeqlensLen(), 6},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
	if got, want := pool.String(), "{D_k=128 D_v=64 n_k_heads=2 n_v_heads=6 n_tokens=3 n_seqs=5 n_slots=9}"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	if got := packed.String(); !strings.HasSuffix(got, "n_seqs=5 varlen}") {
		t.Errorf("String = %q, want it to end in varlen", got)
	}
	ok := spec.Shape{DK: 4, DV: 4, NKHeads: 1, NVHeads: 1, NTokens: 1, NSeqs: 1, NSlots: spec.MaxSlots}
	if err := ok.Validate(); err != nil {
		t.Errorf("a pool of MaxSlots: %v", err)
	}
	for _, bad := range []spec.Shape{
		{DK: 4, DV: 4, NKHeads: 1, NVHeads: 1, NTokens: 1, NSeqs: 1, NSlots: -1},
		{DK: 4, DV: 4, NKHeads: 1, NVHeads: 1, NTokens: 1, NSeqs: 1, NSlots: spec.MaxSlots + 1},
		{DK: 4, DV: 4, NKHeads: 1, NVHeads: 1, NTokens: math.MaxInt32 + 1, NSeqs: 1, Varlen: true},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
	if spec.I32.String() != "i32" || spec.I32.Size() != 4 {
		t.Errorf("I32: %q, %d bytes", spec.I32.String(), spec.I32.Size())
	}
	if err := (spec.Params{Shape: ok, State: spec.I32}).Validate(); err == nil {
		t.Error("an i32 state: no error")
	}
}

// The exported tolerances are SPEC section 9's figures.
func TestTolerances(t *testing.T) {
	if spec.TolF32 != 1e-5 || spec.TolF32Output != 1e-6 || spec.TolBF16 != 1.0/256 || spec.TolF16 != 1.0/1024 {
		t.Errorf("tolerances %g %g %g %g", spec.TolF32, spec.TolF32Output, spec.TolBF16, spec.TolF16)
	}
	for _, c := range []struct {
		t             spec.ElemType
		output, state float64
	}{{spec.F32, 1e-6, 1e-5}, {spec.F16, 1.0 / 1024, 1.0 / 1024}, {spec.BF16, 1.0 / 256, 1.0 / 256}, {spec.I32, 0, 0}} {
		if o, s := spec.OutputTolerance(c.t), spec.StateTolerance(c.t); o != c.output || s != c.state {
			t.Errorf("%v: output %g, state %g; want %g, %g", c.t, o, s, c.output, c.state)
		}
	}
}

// Refused's error matches its kind, its *ArgumentError and its cause, and
// no other sentinel.
func TestRefused(t *testing.T) {
	kind, other, cause := errors.New("pkg: invalid argument"), errors.New("invalid argument"), errors.New("released")
	for _, c := range []struct {
		name  string
		cause error
	}{{"no cause", nil}, {"with a cause", cause}} {
		arg := &spec.ArgumentError{Arg: "Shape.DK", Detail: "48, want 32, 64 or 128"}
		err := spec.Refused(kind, arg, c.cause)
		if want := "pkg: invalid argument: Shape.DK: 48, want 32, 64 or 128"; err.Error() != want {
			t.Errorf("%s: %q, want %q", c.name, err, want)
		}
		var ae *spec.ArgumentError
		if !errors.As(err, &ae) || ae != arg {
			t.Errorf("%s: errors.As gives %v, want the *ArgumentError given", c.name, ae)
		}
		if !errors.Is(err, kind) || errors.Is(err, other) {
			t.Errorf("%s: %v matches its kind %v, another sentinel %v", c.name, err, errors.Is(err, kind), errors.Is(err, other))
		}
		if errors.Is(err, cause) != (c.cause != nil) {
			t.Errorf("%s: matches the cause: %v", c.name, errors.Is(err, cause))
		}
	}
}
