package layerstack

import (
	"github.com/puremetal/puremetal/gdn"
	"github.com/puremetal/puremetal/half"
	"github.com/puremetal/puremetal/internal/floats"
	"github.com/puremetal/puremetal/mtl"
)

// Store writes src into the memory of v (a view of a buffer in shared
// storage) as elements of v.Type: float32 as they are, f16 and bf16
// rounded to nearest even, as a model's layer writes its activations. It
// writes at most v.Len elements.
func Store(v gdn.View, src []float32) {
	src = src[:min(len(src), v.Len)]
	switch v.Type {
	case gdn.F16:
		half.NarrowFloat16(mtl.Slice[half.Float16](v.Buffer)[v.Offset/2:], src)
	case gdn.BF16:
		half.NarrowBFloat16(mtl.Slice[half.BFloat16](v.Buffer)[v.Offset/2:], src)
	default:
		copy(mtl.Slice[float32](v.Buffer)[v.Offset/4:], src)
	}
}

// Load widens the elements of v into dst, exactly, and returns dst; it
// reads at most len(dst) elements.
func Load(v gdn.View, dst []float32) []float32 {
	dst = dst[:min(len(dst), v.Len)]
	switch v.Type {
	case gdn.F16:
		half.WidenFloat16(dst, mtl.Slice[half.Float16](v.Buffer)[v.Offset/2:])
	case gdn.BF16:
		half.WidenBFloat16(dst, mtl.Slice[half.BFloat16](v.Buffer)[v.Offset/2:])
	default:
		copy(dst, mtl.Slice[float32](v.Buffer)[v.Offset/4:])
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
