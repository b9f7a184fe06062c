// Package tensor holds the typed view of a Metal buffer that puremetal's
// dispatchers take (package gdn's and package ops'), copies between Go
// values and views, and the checks a dispatcher makes of its views before
// it encodes anything.
//
// A [View] is Len elements of one [ElemType] starting Offset bytes into a
// buffer. Views of one buffer may share it; a dispatcher refuses a view it
// writes that shares a byte with another of its arguments (see [Check]).
package tensor

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/half"
	"github.com/puremetal/puremetal/mtl"
)

// ElemType is the element type of a view.
type ElemType = spec.ElemType

// The element types.
const (
	F32  = spec.F32  // IEEE-754 binary32
	F16  = spec.F16  // IEEE-754 binary16
	BF16 = spec.BF16 // bfloat16, the upper half of a binary32
	I32  = spec.I32  // 32-bit signed integer: slots, cu_seqlens, positions
	U32  = spec.U32  // 32-bit unsigned integer: quantized weights' words, token ids
)

// ErrInvalidArgument is wrapped by every error that reports a bad view or
// a bad argument of a dispatch in package ops, and by the errors of this
// package. Such errors name the argument and the numbers; nothing has been
// encoded when a dispatcher returns one. They are also a
// [*spec.ArgumentError], whose Arg and Detail errors.As gives. A released
// buffer also matches mtl.ErrReleased.
var ErrInvalidArgument = errors.New("invalid argument")

// View is a typed range of a Metal buffer: Len elements of Type starting
// Offset bytes into Buffer.
type View struct {
	Buffer *mtl.Buffer
	Offset int // in bytes; a multiple of the element size
	Type   ElemType
	Len    int // in elements
}

// NewView returns a view of n elements of type t starting offset bytes
// into b.
func NewView(b *mtl.Buffer, offset int, t ElemType, n int) View {
	return View{Buffer: b, Offset: offset, Type: t, Len: n}
}

// Bytes returns the number of bytes the view covers.
func (v View) Bytes() int { return v.Len * v.Type.Size() }

// IsZero reports whether v is the zero View: no buffer, an argument left
// unset.
func (v View) IsZero() bool { return v == View{} }

// Store writes src into the first len(src) elements of v, converting to
// v.Type as the kernels' stores do: float32 as it is, f16 and bf16 rounded
// to nearest even (NaN stays NaN). v's buffer must be in shared or managed
// storage (the CPU's memory); after writing a managed buffer, call
// DidModifyRange. Store fails, writing nothing, for a type other than
// f32, f16 and bf16, more values than v holds, or a buffer that is
// released, private or too short.
func (v View) Store(src []float32) error {
	mem, err := v.floats("Store", len(src))
	switch {
	case err != nil:
		return err
	case v.Type == F16:
		half.NarrowFloat16(as[half.Float16](mem), src)
	case v.Type == BF16:
		half.NarrowBFloat16(as[half.BFloat16](mem), src)
	default:
		copy(as[float32](mem), src)
	}
	return nil
}

// Load reads the first len(dst) elements of v into dst, widening f16 and
// bf16 exactly. It fails, reading nothing, as [View.Store] does.
func (v View) Load(dst []float32) error {
	mem, err := v.floats("Load", len(dst))
	switch {
	case err != nil:
		return err
	case v.Type == F16:
		half.WidenFloat16(dst, as[half.Float16](mem))
	case v.Type == BF16:
		half.WidenBFloat16(dst, as[half.BFloat16](mem))
	default:
		copy(dst, as[float32](mem))
	}
	return nil
}

// Float32s returns v's elements widened to float32: [View.Load] into a new
// slice of v.Len elements.
func (v View) Float32s() ([]float32, error) {
	dst := make([]float32, max(v.Len, 0))
	return dst, v.Load(dst)
}

// floats is host for a view of a float type.
func (v View) floats(op string, n int) ([]byte, error) {
	if err := FloatType(op, v.Type); err != nil {
		return nil, err
	}
	return v.host(op, n)
}

// as returns mem as a slice of T (mem's length a multiple of T's size).
func as[T any](mem []byte) []T {
	var zero T
	if len(mem) == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&mem[0])), len(mem)/int(unsafe.Sizeof(zero)))
}

// StoreInts writes src into the first len(src) elements of a view of type
// I32 or U32, bit for bit. It fails as [View.Store] does.
func StoreInts[T int32 | uint32](v View, src []T) error {
	mem, err := v.ints("StoreInts", len(src))
	if err == nil {
		copy(as[T](mem), src)
	}
	return err
}

// LoadInts reads the first len(dst) elements of a view of type I32 or U32
// into dst, bit for bit.
func LoadInts[T int32 | uint32](v View, dst []T) error {
	mem, err := v.ints("LoadInts", len(dst))
	if err == nil {
		copy(dst, as[T](mem))
	}
	return err
}

// ints is host for a view of an integer type.
func (v View) ints(op string, n int) ([]byte, error) {
	if v.Type != I32 && v.Type != U32 {
		return nil, invalid(op, "element type %v is not an integer type (i32, u32)", v.Type)
	}
	return v.host(op, n)
}

// Poison fills every element of v with a NaN no arithmetic produces
// (all ones: f32 0xffffffff, f16 and bf16 0xffff), so that an element a
// kernel leaves unwritten shows; integer views get all ones too.
func (v View) Poison() error {
	mem, err := v.host("Poison", v.Len)
	if err != nil {
		return err
	}
	for i := range mem {
		mem[i] = 0xff
	}
	return nil
}

// host returns the CPU memory of v's first n elements, or an error when
// there is none.
func (v View) host(op string, n int) ([]byte, error) {
	size := v.Type.Size()
	switch {
	case v.Buffer == nil:
		return nil, invalid(op, "the view has no buffer")
	case v.Buffer.Released():
		return nil, spec.Refused(ErrInvalidArgument, &spec.ArgumentError{Arg: op, Detail: "the view's buffer was released"}, mtl.ErrReleased)
	case size == 0:
		return nil, invalid(op, "unknown element type %v", v.Type)
	case n < 0 || n > v.Len:
		return nil, invalid(op, "%d elements, the view holds %d", n, v.Len)
	case v.Offset < 0 || v.Offset%size != 0:
		return nil, invalid(op, "offset %d bytes, must be a non-negative multiple of %d", v.Offset, size)
	}
	mem := v.Buffer.Contents()
	if mem == nil {
		return nil, invalid(op, "the buffer has no CPU-visible contents (private storage)")
	}
	if end := v.Offset + v.Len*size; end > len(mem) {
		return nil, invalid(op, "offset %d + %d elements * %d bytes = %d bytes, beyond the buffer's %d bytes", v.Offset, v.Len, size, end, len(mem))
	}
	return mem[v.Offset : v.Offset+n*size], nil
}

// Invalid returns an error wrapping [ErrInvalidArgument] and a
// [*spec.ArgumentError] for argument arg, its detail formatted as
// fmt.Sprintf does. Dispatchers use it for refusals beyond [Check]'s.
func Invalid(arg, format string, a ...any) error { return invalid(arg, format, a...) }

func invalid(arg, format string, a ...any) error {
	return spec.Refused(ErrInvalidArgument, &spec.ArgumentError{Arg: arg, Detail: fmt.Sprintf(format, a...)}, nil)
}
