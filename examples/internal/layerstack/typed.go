package layerstack

import (
	"github.com/puremetal/puremetal/gdn"
	"github.com/puremetal/puremetal/internal/floats"
	"github.com/puremetal/puremetal/mtl"
)

// Store writes src into the memory of v (a view of a buffer in shared
// storage) as elements of v.Type, rounded as the kernels round
// (tensor.View.Store). It writes at most v.Len elements; a view the CPU
// cannot write is a bug of the program, and panics.
func Store(v gdn.View, src []float32) {
	if err := v.Store(src[:min(len(src), v.Len)]); err != nil {
		panic(err)
	}
}

// Load widens the elements of v into dst, exactly, and returns dst; it
// reads at most len(dst) elements (tensor.View.Load).
func Load(v gdn.View, dst []float32) []float32 {
	dst = dst[:min(len(dst), v.Len)]
	if err := v.Load(dst); err != nil {
		panic(err)
	}
	return dst
}

// Poison fills the elements of v with a NaN no arithmetic produces, so
// that an element a kernel leaves unwritten shows: floats.NaN in f32, and
// all ones (a NaN with a full payload) in f16 and bf16.
func Poison(v gdn.View) {
	switch v.Type {
	case gdn.F16, gdn.BF16:
		e := mtl.Slice[uint16](v.Buffer)[v.Offset/2:][:v.Len]
		for i := range e {
			e[i] = 0xffff
		}
	default:
		floats.Poison(mtl.Slice[float32](v.Buffer)[v.Offset/4:][:v.Len])
	}
}
