package tensor

import (
	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/mtl"
)

// Arg is one view argument of a dispatch, as its dispatcher checks it.
type Arg struct {
	Name     string   // the argument as the caller knows it: "X", "W.Scales"
	View     View     // the view given
	Type     ElemType // the element type it must have
	TypeFrom string   // where that type comes from ("Params.Activation"), for the message; "" for a fixed type
	Len      int      // the elements the shape implies: the view must have exactly these
	Formula  string   // how Len follows from the shape ("rows*cols"), for the message
	Written  bool     // the dispatch writes it: it may share no byte with another argument
	Optional bool     // the zero View is allowed (the argument is not used)
}

// MaxElems is the first element count a kernel's 32-bit indices cannot
// address: a view must hold fewer elements.
const MaxElems = 1 << 32

// Check checks the arguments of one dispatch on dev: each view set (or
// optional and zero), its buffer live and dev's, the element type, an
// offset that is a non-negative multiple of the element size, exactly the
// elements the shape implies (fewer than [MaxElems]) and the range inside
// the buffer; then that no written view shares a byte with another view.
// It returns the first failure, an error wrapping [ErrInvalidArgument] that
// names the argument and the numbers (and mtl.ErrReleased for a released
// buffer), or nil. It allocates nothing when every argument passes.
func Check(dev *mtl.Device, args ...Arg) error {
	for i := range args {
		if err := args[i].check(dev); err != nil {
			return err
		}
	}
	for i := range args {
		w := &args[i]
		if !w.Written || w.View.Buffer == nil {
			continue
		}
		for j := range args {
			o := &args[j]
			if j == i || (o.Written && j < i) || o.View.Buffer != w.View.Buffer {
				continue // each pair with a written view once
			}
			wlo, whi := w.View.Offset, w.View.Offset+w.View.Bytes()
			olo, ohi := o.View.Offset, o.View.Offset+o.View.Bytes()
			if wlo < ohi && olo < whi {
				return invalid(w.Name, "bytes [%d, %d) overlap %s's bytes [%d, %d) in the same buffer", wlo, whi, o.Name, olo, ohi)
			}
		}
	}
	return nil
}

func (a *Arg) check(dev *mtl.Device) error {
	v := a.View
	if v.Buffer == nil {
		if a.Optional && v.IsZero() {
			return nil
		}
		return invalid(a.Name, "no buffer")
	}
	if v.Buffer.Released() {
		return spec.Refused(ErrInvalidArgument, &spec.ArgumentError{Arg: a.Name, Detail: "the buffer was released"}, mtl.ErrReleased)
	}
	if dev != nil && v.Buffer.Device() != dev {
		return invalid(a.Name, "the buffer belongs to another device")
	}
	if v.Type != a.Type {
		if a.TypeFrom == "" {
			return invalid(a.Name, "element type %v, must be %v", v.Type, a.Type)
		}
		return invalid(a.Name, "element type %v, %s is %v", v.Type, a.TypeFrom, a.Type)
	}
	size := v.Type.Size()
	if v.Offset < 0 || v.Offset%size != 0 {
		return invalid(a.Name, "offset %d bytes, must be a non-negative multiple of %d", v.Offset, size)
	}
	if a.Len >= MaxElems {
		return invalid(a.Name, "the shape implies %s = %d elements, at or beyond 2^32, which the kernels' 32-bit indices cannot address", a.Formula, a.Len)
	}
	if v.Len != a.Len {
		return invalid(a.Name, "%d elements, the shape implies %s = %d", v.Len, a.Formula, a.Len)
	}
	if end := uint64(v.Offset) + uint64(v.Len)*uint64(size); end > uint64(v.Buffer.Length()) {
		return invalid(a.Name, "offset %d + %d elements * %d bytes = %d bytes, beyond the buffer's %d bytes", v.Offset, v.Len, size, end, v.Buffer.Length())
	}
	return nil
}

// FloatType returns nil when t is F32, F16 or BF16, the types of weights
// and activations, and otherwise an error naming arg.
func FloatType(arg string, t ElemType) error {
	switch t {
	case F32, F16, BF16:
		return nil
	}
	return invalid(arg, "element type %v, must be f32, f16 or bf16", t)
}
