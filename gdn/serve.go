package gdn

import (
	"encoding/binary"
	"sync"

	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/mtl"
)

// I32 is the element type of Buffers.Slots and Buffers.CuSeqlens.
const I32 = spec.I32

// I32View returns a view of n int32 elements starting offset bytes into b,
// for Buffers.Slots and Buffers.CuSeqlens.
func I32View(b *mtl.Buffer, offset, n int) View {
	return View{Buffer: b, Offset: offset, Type: I32, Len: n}
}

// servingViews returns the views bound at slotsIndex and cuSeqlensIndex:
// the slot index and cu_seqlens, or G's buffer standing in for each the
// shape does not use (every argument of the function has a binding).
func servingViews(s Shape, b Buffers) (slots, cu View) {
	slots, cu = b.Slots, b.CuSeqlens
	if s.NSlots == 0 {
		slots = b.G
	}
	if !s.Varlen {
		cu = b.G
	}
	return slots, cu
}

// storageModeMask selects the storage mode bits of resource options
// (MTLResourceStorageModeMask).
const storageModeMask = 0xf0

// cpuContents returns a buffer's bytes when the CPU reads what the GPU
// will (shared storage), and nil otherwise: private storage has no CPU
// copy, and a managed buffer's CPU copy may be older than the GPU's. Tests
// replace it.
var cpuContents = func(b *mtl.Buffer) []byte {
	if b.Options()&storageModeMask != mtl.ResourceStorageModeShared {
		return nil
	}
	return b.Contents()
}

// validateServing checks the slot index and cu_seqlens views of a dispatch
// whose other views passed validateBuffers: each set exactly when the shape
// asks for it, the kernel able to take it, an int32 view of exactly n_seqs
// (Slots) or n_seqs+1 (CuSeqlens) elements in a live buffer, sharing no
// byte with a written view; and, when the buffer is CPU-readable (shared
// storage), its values: every slot below n_slots and no slot named twice;
// cu_seqlens 0 first, non-decreasing and n_tokens last.
func validateServing(k Kernel, p Params, b Buffers) error {
	s := p.Shape
	if s.Varlen && (k == KernelDecode || k == KernelDecodeLegacy || k == KernelDecodePacked) {
		return invalid("Shape.Varlen", "the %s kernel takes n_tokens tokens per sequence; packed sequences go to the seq, capture or prefill kernel", k)
	}
	checks := [...]struct {
		name, field, formula string
		v                    View
		want                 int
	}{
		{"Slots", "Shape.NSlots > 0", "n_seqs", b.Slots, s.SlotsLen()},
		{"CuSeqlens", "Shape.Varlen", "n_seqs+1", b.CuSeqlens, s.CuSeqlensLen()},
	}
	for _, c := range checks {
		if c.want == 0 {
			if c.v != (View{}) {
				return invalid(c.name, "set, but not %s", c.field)
			}
			continue
		}
		if c.v.Buffer == nil {
			return invalid(c.name, "no buffer, but %s", c.field)
		}
		if c.v.Type != I32 {
			return invalid(c.name, "element type %v, must be i32", c.v.Type)
		}
		vc := exact(c.name, c.v, I32, "", c.want, c.formula, false)
		if err := validateView(&vc); err != nil {
			return err
		}
		// The written views, checked against each other already, and this
		// one.
		views := [...]viewCheck{
			{name: "Output", v: b.Output, written: true},
			{name: "StateOut", v: b.StateOut, written: true},
			{name: "Capture", v: b.Capture, written: true},
			vc,
		}
		if err := validateOverlaps(views[:]); err != nil {
			return err
		}
	}
	if s.NSlots > 0 {
		if err := validateSlots(s.NSlots, b.Slots); err != nil {
			return err
		}
	}
	if s.Varlen {
		return validateCuSeqlens(s.NTokens, b.CuSeqlens)
	}
	return nil
}

// int32s returns the values of an int32 view whose buffer the CPU reads,
// as little-endian bytes, or nil.
func int32s(v View) []byte {
	b := cpuContents(v.Buffer)
	if b == nil {
		return nil
	}
	return b[v.Offset : v.Offset+4*v.Len]
}

func int32At(b []byte, i int) int32 { return int32(binary.LittleEndian.Uint32(b[4*i:])) }

// validateSlots checks the slot of every sequence, when the CPU can read
// them: below nSlots (negative is padding), and no slot named twice.
func validateSlots(nSlots int, v View) error {
	b := int32s(v)
	if b == nil {
		return nil
	}
	var set *bitset // nil: few sequences, compared pairwise
	if v.Len > fewSeqs {
		set = slotSets.Get().(*bitset)
		defer slotSets.Put(set)
		set.reset(nSlots)
	}
	for s := range v.Len {
		slot := int32At(b, s)
		if int(slot) >= nSlots {
			return invalid("Slots", "sequence %d names slot %d, beyond the pool's n_slots = %d", s, slot, nSlots)
		}
		if slot < 0 {
			continue // padding
		}
		if set != nil && !set.has(int(slot)) {
			set.add(int(slot))
			continue
		}
		for r := range s {
			if int32At(b, r) == slot {
				return invalid("Slots", "sequences %d and %d both name slot %d: they would race on one state", r, s, slot)
			}
		}
	}
	return nil
}

// fewSeqs is the batch size up to which validateSlots compares every pair
// of slots rather than marking them in a bitset of the pool.
const fewSeqs = 32

// validateCuSeqlens checks cu_seqlens, when the CPU can read it: 0 first,
// non-decreasing, nTokens last.
func validateCuSeqlens(nTokens int, v View) error {
	b := int32s(v)
	if b == nil {
		return nil
	}
	if c := int32At(b, 0); c != 0 {
		return invalid("CuSeqlens", "cu_seqlens[0] = %d, must be 0", c)
	}
	for s := 1; s < v.Len; s++ {
		if c, prev := int32At(b, s), int32At(b, s-1); c < prev {
			return invalid("CuSeqlens", "cu_seqlens[%d] = %d is below cu_seqlens[%d] = %d (sequence %d would have %d tokens)", s, c, s-1, prev, s-1, c-prev)
		}
	}
	if last := int32At(b, v.Len-1); int(last) != nTokens {
		return invalid("CuSeqlens", "cu_seqlens[%d] = %d, must be Shape.NTokens = %d, the tokens of all sequences", v.Len-1, last, nTokens)
	}
	return nil
}

// bitset is a set of slots, reused across dispatches (slotSets) so that
// checking a pool's slots allocates nothing once the set has grown to the
// pool: n_slots bits, 1/8 of a byte per slot beside a state of at least 4
// KiB.
type bitset struct{ words []uint64 }

var slotSets = sync.Pool{New: func() any { return new(bitset) }}

// reset empties the set and makes room for slots 0 to n-1.
func (s *bitset) reset(n int) {
	w := (n + 63) / 64
	if cap(s.words) < w {
		s.words = make([]uint64, w)
		return
	}
	s.words = s.words[:w]
	clear(s.words)
}

func (s *bitset) has(i int) bool { return s.words[i/64]&(1<<(i%64)) != 0 }
func (s *bitset) add(i int)      { s.words[i/64] |= 1 << (i % 64) }
