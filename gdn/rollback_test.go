package gdn

import (
	"reflect"
	"testing"

	"github.com/puremetal/puremetal/mtl"
)

// blitRecorder records the copies of a rollback.
type blitRecorder struct{ copies [][5]any }

func (r *blitRecorder) CopyFromBuffer(src *mtl.Buffer, srcOffset int, dst *mtl.Buffer, dstOffset, size int) {
	r.copies = append(r.copies, [5]any{src, srcOffset, dst, dstOffset, size})
}
func (r *blitRecorder) Err() error { return nil }

func TestRollbackCopies(t *testing.T) {
	fb := useFakeBuffers(t)
	fc := useFakeContents(t)
	const state = 64 * 32 * 4 * 4 // bytes of one state of decodeShape
	for _, c := range []struct {
		name     string
		shape    Shape
		slots    []int32 // nil: no pool
		cu       []int32 // nil: not packed
		inPlace  bool
		accepted []int32
		want     func(b Buffers) [][5]any
	}{
		{"per-sequence states", Shape{DK: 64, DV: 32, NKHeads: 2, NVHeads: 4, NTokens: 5, NSeqs: 3}, nil, nil, false, []int32{2, 0, 5},
			func(b Buffers) [][5]any {
				return [][5]any{
					{b.Capture.Buffer, 1 * state, b.StateOut.Buffer, 0, state},     // sequence 0: token 1 of 5
					{b.StateIn.Buffer, 1 * state, b.StateOut.Buffer, state, state}, // sequence 1: the state before the window
				} // sequence 2 accepted all 5: nothing
			}},
		{"pool in place, packed", Shape{DK: 64, DV: 32, NKHeads: 2, NVHeads: 4, NTokens: 9, NSeqs: 4, NSlots: 7, Varlen: true},
			[]int32{6, -1, 0, 3}, []int32{0, 4, 6, 6, 9}, true, []int32{1, 0, 0, 2},
			func(b Buffers) [][5]any {
				return [][5]any{
					{b.Capture.Buffer, 0, b.StateOut.Buffer, 6 * state, state},         // sequence 0: its first token, into slot 6
					{b.Capture.Buffer, 7 * state, b.StateOut.Buffer, 3 * state, state}, // sequence 3: token 6+1, into slot 3
				} // sequence 1 is padding, sequence 2 is empty
			}},
		{"two pools, packed", Shape{DK: 64, DV: 32, NKHeads: 2, NVHeads: 4, NTokens: 5, NSeqs: 3, NSlots: 4, Varlen: true},
			[]int32{2, 0, 1}, []int32{0, 0, 3, 5}, false, []int32{0, 0, 1},
			func(b Buffers) [][5]any {
				return [][5]any{
					{b.StateIn.Buffer, 2 * state, b.StateOut.Buffer, 2 * state, state}, // sequence 0, empty: its state from state_in
					{b.StateIn.Buffer, 0, b.StateOut.Buffer, 0, state},                 // sequence 1: none of 3 accepted
					{b.Capture.Buffer, 3 * state, b.StateOut.Buffer, 1 * state, state}, // sequence 2: token 3+0, into slot 1
				}
			}},
	} {
		p, b := fb.args(KernelDecodeCapture, c.shape)
		if c.slots != nil {
			b.Slots = int32View(fb, fc, true, c.slots...)
		}
		if c.cu != nil {
			b.CuSeqlens = int32View(fb, fc, true, c.cu...)
		}
		if c.inPlace {
			b.StateOut = b.StateIn
		}
		rec := &blitRecorder{}
		if err := rollback(rec, p, b, c.accepted); err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if want := c.want(b); !reflect.DeepEqual(rec.copies, want) {
			t.Errorf("%s: copies\n%v\nwant\n%v", c.name, rec.copies, want)
		}
	}
}

func TestRollbackRejects(t *testing.T) {
	fb := useFakeBuffers(t)
	s := Shape{DK: 64, DV: 32, NKHeads: 2, NVHeads: 4, NTokens: 5, NSeqs: 3}
	for _, c := range []struct {
		name     string
		inPlace  bool
		accepted []int32
		want     []string
	}{
		{"too many accepted", false, []int32{2, 6, 5}, []string{"accepted", "sequence 1 accepted 6 tokens of the 5 it drafted"}},
		{"negative", false, []int32{-1, 1, 1}, []string{"sequence 0 accepted -1 tokens"}},
		{"one count short", false, []int32{1, 1}, []string{"accepted", "2 counts", "n_seqs = 3"}},
		{"none accepted in place", true, []int32{1, 1, 0}, []string{"sequence 2 accepted no token", "in place"}},
	} {
		p, b := fb.args(KernelDecodeCapture, s)
		if c.inPlace {
			b.StateOut = b.StateIn
		}
		rec := &blitRecorder{}
		checkInvalid(t, c.name, rollback(rec, p, b, c.accepted), c.want)
		if len(rec.copies) != 0 {
			t.Errorf("%s: %d copies encoded before the error", c.name, len(rec.copies))
		}
	}
}
