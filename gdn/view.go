package gdn

import (
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/tensor"
)

// View is a typed range of a Metal buffer: Len elements of Type starting
// Offset bytes into Buffer. It is [tensor.View], whose Store and Load
// methods copy []float32 in and out with the kernels' rounding.
type View = tensor.View

// F32View returns a view of n float32 elements starting offset bytes into b.
func F32View(b *mtl.Buffer, offset, n int) View {
	return View{Buffer: b, Offset: offset, Type: F32, Len: n}
}

// NewView returns a view of n elements of type t starting offset bytes
// into b.
func NewView(b *mtl.Buffer, offset int, t ElemType, n int) View {
	return View{Buffer: b, Offset: offset, Type: t, Len: n}
}

// Buffers are the views a dispatch reads and writes. Views may share a
// buffer, but a written view (Output, StateOut, Capture) shares no byte
// with any other view, except that StateIn and StateOut may be the same
// view (in-place update). Capture is written by [Kernels.DecodeWithCapture]
// only and must be left empty otherwise.
//
// Q, K, V, G, Beta and Output have the element type Params.Activation;
// StateIn, StateOut and Capture have Params.State. With Params.Fused.Gate,
// G holds the raw gate projection a and ALog and DtBias the layer's A_log
// and dt_bias ([n_v_heads] f32 each); without it they stay empty. With
// Params.Fused.Beta, Beta holds the raw projection b.
type Buffers struct {
	Q, K, V  View // read
	G, Beta  View // read: the gate (alpha = exp(-G)) and the update strength, or a and b
	StateIn  View // read
	Output   View // written
	StateOut View // written
	Capture  View // written: S after every token
	ALog     View // read with Params.Fused.Gate: A_log, [n_v_heads] f32
	DtBias   View // read with Params.Fused.Gate: dt_bias, [n_v_heads] f32

	// Slots (int32 [n_seqs], see [I32View]) names the state of each
	// sequence in a pool of Shape.NSlots states; set exactly when
	// Shape.NSlots > 0. A negative slot is padding: the sequence is
	// skipped and nothing of it is written.
	Slots View
	// CuSeqlens (int32 [n_seqs+1]) gives sequence s the packed tokens
	// CuSeqlens[s] to CuSeqlens[s+1]-1; set exactly when Shape.Varlen.
	CuSeqlens View
}
