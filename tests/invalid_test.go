package tests

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/gdn"
	"github.com/puremetal/puremetal/internal/floats"
	"github.com/puremetal/puremetal/mtl"
)

// TestEmulatedInvalidEncodesNothing checks, through the real encoder, that
// a dispatch that fails validation sends nothing to Metal and that the
// command buffer then runs no dispatch.
func TestEmulatedInvalidEncodesNothing(t *testing.T) { onEmulated(t, invalidEncodesNothing) }

// TestMetalInvalidEncodesNothing is the same on the system's GPU (a Mac; it
// skips elsewhere): go test ./tests/ -run Metal -v
func TestMetalInvalidEncodesNothing(t *testing.T) { onMetal(t, invalidEncodesNothing) }

// invalidArg is one bad argument and the words its error must contain.
type invalidArg struct {
	name string
	kern kernel
	edit func(p *gdn.Params, b *gdn.Buffers)
	want []string
}

func invalidEncodesNothing(t *testing.T, r *rig) {
	s := gdn.Shape{DK: 64, DV: 8, NKHeads: 2, NVHeads: 4, NTokens: 2, NSeqs: 3}
	qk, vlen, gb, st := s.QKLen(), s.VLen(), s.GateLen(), s.StateLen()
	view := func(n int) gdn.View {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(i%7) * 0.125 // inputs a kernel could run on
		}
		return r.upload(t, x)
	}
	valid := gdn.Buffers{
		Q: view(qk), K: view(qk), V: view(vlen), G: view(gb), Beta: view(gb),
		StateIn: view(st), Output: view(vlen), StateOut: view(st),
	}
	capture := view(s.CaptureLen())
	writable := []gdn.View{valid.Output, valid.StateOut, capture}
	for _, v := range writable {
		floats.Poison(mtl.Slice[float32](v.Buffer))
	}
	short := view(vlen - 1)
	released := view(st)
	released.Buffer.Release() // Length still answers
	shared := view(st + s.DK) // a state and one more row
	in := func(v gdn.View, offset, n int) gdn.View { return gdn.F32View(v.Buffer, offset, n) }
	params := gdn.Params{Shape: s, HeadMap: gdn.Tiled, QScale: 0.125}

	cases := []invalidArg{
		{"D_k not 32, 64 or 128", kLegacy, func(p *gdn.Params, _ *gdn.Buffers) { p.Shape.DK = 48 }, []string{"Shape.DK", "48"}},
		{"D_k above 128 for prefill", kPrefill, func(p *gdn.Params, _ *gdn.Buffers) { p.Shape.DK = 129 }, []string{"Shape.DK", "129"}},
		{"n_v_heads not a multiple of n_k_heads", kDecode, func(p *gdn.Params, _ *gdn.Buffers) { p.Shape.NVHeads = 5 }, []string{"Shape.NVHeads", "5"}},
		{"no tokens", kSeq, func(p *gdn.Params, _ *gdn.Buffers) { p.Shape.NTokens = 0 }, []string{"Shape.NTokens", "0"}},
		{"output one element short", kDecode, func(_ *gdn.Params, b *gdn.Buffers) { b.Output = short }, []string{"Output", fmt.Sprint(vlen - 1), fmt.Sprint(vlen)}},
		{"state_in typed bf16", kSeq, func(_ *gdn.Params, b *gdn.Buffers) { b.StateIn.Type = gdn.BF16 }, []string{"StateIn", "bf16"}},
		{"capture given to the decode kernel", kDecode, func(_ *gdn.Params, b *gdn.Buffers) { b.Capture = capture }, []string{"Capture"}},
		{"capture missing", kCapture, func(_ *gdn.Params, b *gdn.Buffers) { b.Capture = gdn.View{} }, []string{"Capture"}},
		{"capture longer than the draft for three sequences", kCapture, func(_ *gdn.Params, b *gdn.Buffers) {
			b.Capture = view(s.CaptureLen() + st)
		}, []string{"Capture", "elements"}},
		{"unknown head mapping", kLegacy, func(p *gdn.Params, _ *gdn.Buffers) { p.HeadMap = 2 }, []string{"HeadMap", "2"}},
		{"q scale not finite", kPrefill, func(p *gdn.Params, _ *gdn.Buffers) { p.QScale = float32(math.Inf(1)) }, []string{"QScale"}},
		{"state_in released", kSeq, func(_ *gdn.Params, b *gdn.Buffers) { b.StateIn = released }, []string{"StateIn", "released"}},
		{"state_out released", kPrefill, func(_ *gdn.Params, b *gdn.Buffers) { b.StateOut = released }, []string{"StateOut", "released"}},
		{"output inside state_in", kDecode, func(_ *gdn.Params, b *gdn.Buffers) {
			b.StateIn, b.Output = in(shared, 0, st), in(shared, 32, vlen)
		}, []string{"Output", fmt.Sprintf("bytes [32, %d)", 32+4*vlen), fmt.Sprintf("StateIn's bytes [0, %d)", 4*st)}},
		{"state_out one row after state_in", kLegacy, func(_ *gdn.Params, b *gdn.Buffers) {
			b.StateIn, b.StateOut = in(shared, 0, st), in(shared, 4*s.DK, st)
		}, []string{"StateOut", fmt.Sprintf("bytes [%d, %d)", 4*s.DK, 4*(s.DK+st)), fmt.Sprintf("StateIn's bytes [0, %d)", 4*st)}},
		{"state_out over k", kPrefill, func(_ *gdn.Params, b *gdn.Buffers) {
			b.K, b.StateOut = in(shared, 0, qk), in(shared, 0, st)
		}, []string{"StateOut", fmt.Sprintf("K's bytes [0, %d)", 4*qk)}},
		{"capture over state_out", kCapture, func(_ *gdn.Params, b *gdn.Buffers) {
			b.StateOut = gdn.F32View(b.Capture.Buffer, 4*(b.Capture.Len-st), st)
		}, []string{"StateOut", "Capture's bytes"}},
		// (A count the kernels index with 32 bits; the states have 64-bit offsets.)
		{"count at 2^32", kDecode, func(p *gdn.Params, _ *gdn.Buffers) { p.Shape.NTokens = 1 << 31 }, []string{"2^32"}},
	}

	cs, err := r.execute(func(enc *mtl.ComputeCommandEncoder) error {
		for _, c := range cases {
			p, b := params, valid
			if c.kern.capture {
				b.Capture = capture
			}
			c.edit(&p, &b)
			before := enc.Sends()
			err := c.kern.call(r.k, enc, p, b)
			if !errors.Is(err, gdn.ErrInvalidArgument) {
				t.Errorf("%s (%s): error %v does not wrap gdn.ErrInvalidArgument", c.name, c.kern.name, err)
				continue
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s (%s): %q does not mention %q", c.name, c.kern.name, err, w)
				}
			}
			if n := enc.Sends() - before; n != 0 {
				t.Errorf("%s (%s): the encoder sent %d messages after a failed validation", c.name, c.kern.name, n)
			}
			if enc.Err() != nil {
				t.Errorf("%s (%s): the encoder recorded an error: %v", c.name, c.kern.name, enc.Err())
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("the command buffer of the refused dispatches: %v", err)
	}
	if r.emulated && len(cs) != 0 {
		t.Errorf("the command buffer ran %d dispatches, want none", len(cs))
	}
	for i, v := range writable {
		x := mtl.Slice[float32](v.Buffer)
		if n := floats.Unwritten(x); n != len(x) {
			t.Errorf("buffer %d: %d of %d poisoned elements written", i, len(x)-n, len(x))
		}
	}

	// The same arguments without the edit do reach the device: the checks
	// above can fail.
	sent := 0
	cs, err = r.execute(func(enc *mtl.ComputeCommandEncoder) error {
		err := r.k.Decode(enc, params, valid)
		sent = enc.Sends()
		return err
	})
	if err != nil {
		t.Fatalf("valid dispatch: %v", err)
	}
	if sent == 0 {
		t.Errorf("a valid dispatch sent nothing")
	}
	if r.emulated && len(cs) != 1 {
		t.Errorf("valid dispatch: %d dispatches, want 1", len(cs))
	}
	if n := floats.Unwritten(mtl.Slice[float32](valid.Output.Buffer)); n != 0 {
		t.Errorf("valid dispatch: %d output elements unwritten", n)
	}
}
