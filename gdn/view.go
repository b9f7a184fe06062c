package gdn

import (
	"fmt"

	"github.com/puremetal/puremetal/mtl"
)

// ElemType is the element type of a buffer view.
type ElemType uint8

const (
	// F32 is IEEE-754 binary32, the zero value and, for now, the only type
	// the kernels take.
	F32 ElemType = iota
	// F16 is IEEE-754 binary16 (not taken by any kernel yet).
	F16
	// BF16 is bfloat16 (not taken by any kernel yet).
	BF16
)

// String returns "f32", "f16", "bf16", or "ElemType(n)".
func (t ElemType) String() string {
	switch t {
	case F32:
		return "f32"
	case F16:
		return "f16"
	case BF16:
		return "bf16"
	}
	return fmt.Sprintf("ElemType(%d)", uint8(t))
}

// Size returns the size of one element in bytes, 0 for an unknown type.
func (t ElemType) Size() int {
	switch t {
	case F32:
		return 4
	case F16, BF16:
		return 2
	}
	return 0
}

// View is a typed range of a Metal buffer: Len elements of Type starting
// Offset bytes into Buffer.
type View struct {
	Buffer *mtl.Buffer
	Offset int // in bytes; a multiple of the element size
	Type   ElemType
	Len    int // in elements
}

// F32View returns a view of n float32 elements starting offset bytes into b.
func F32View(b *mtl.Buffer, offset, n int) View {
	return View{Buffer: b, Offset: offset, Type: F32, Len: n}
}

// Buffers are the views a dispatch reads and writes. StateIn and StateOut
// may be the same view (in-place update). Capture is written by
// [Kernels.DecodeWithCapture] only and must be left empty otherwise.
type Buffers struct {
	Q, K, V  View // read
	G, Beta  View // read: the gate (alpha = exp(-G)) and the update strength
	StateIn  View // read
	Output   View // written
	StateOut View // written
	Capture  View // written: S after every token
}
