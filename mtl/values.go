package mtl

import (
	"fmt"
	"reflect"
	"slices"
	"sync"
	"unsafe"

	"github.com/puremetal/puremetal/objc"
)

// NewBufferFromSlice makes a buffer holding a copy of s's elements, as
// their bytes in memory (little-endian on Apple silicon and on the
// emulated device): a []float32 becomes an MSL float array, a
// []half.BFloat16 a bfloat array, a slice of a struct the array of the MSL
// struct with the same layout. T must hold no pointers (no pointer, slice,
// string, map, channel, function or interface, at any depth), and s must
// not be empty. Read the buffer back with [Slice].
func NewBufferFromSlice[T any](d *Device, s []T, opts ResourceOptions) (*Buffer, error) {
	if err := d.usable("NewBufferFromSlice"); err != nil {
		return nil, err
	}
	if err := plain(reflect.TypeFor[T](), "NewBufferFromSlice"); err != nil {
		return nil, err
	}
	if len(s) == 0 {
		return nil, invalidf("NewBufferFromSlice: the %s slice is empty", reflect.TypeFor[T]())
	}
	return d.NewBufferWithBytes(unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0]))), opts)
}

// SetValue passes v to the kernel as the constant argument at a buffer
// index, as its bytes in memory (setBytes:length:atIndex:, like
// [ComputeCommandEncoder.SetBytes]): a float32 for a `constant float &`
// argument, a struct for a `constant Params &` argument of the same
// layout (MSL int is int32, uint uint32, float3 16 bytes: pad the Go
// struct to match). T must hold no pointers (see [NewBufferFromSlice]) and
// be 1 byte to 4 KiB; a bad T or index is refused like any argument. It
// does not allocate.
//
// T is the Go type of v, whatever the kernel declares: the untyped
// constant in SetValue(enc, 2.0, i) is a float64 and in SetValue(enc, 3,
// i) an int, 8 bytes each, where a `constant float &` or `constant uint &`
// reads 4; convert it (float32(2.0), uint32(3)). A float64 or complex128,
// at any depth of T, is refused on every device, since MSL has no double.
// Metal reads the first bytes of a longer value without a word; the
// emulated device fails the command buffer of a dispatch whose reference
// parameter is bound to a value of another size, naming both sizes.
func SetValue[T any](e *ComputeCommandEncoder, v T, index int) {
	if e.refuses("SetValue") || !e.checkIndex("SetValue", index, 1) {
		return
	}
	if err := plain(reflect.TypeFor[T](), "SetValue"); err != nil {
		if e.err == nil {
			e.refused(err)
		}
		return
	}
	if d := doubleInType(reflect.TypeFor[T]()); d != "" {
		e.fail("SetValue: a %s at index %d holds %s, which no MSL type matches (Metal has no double; an untyped constant such as 2.0 is a float64): convert it to float32", reflect.TypeFor[T](), index, d)
		return
	}
	n := int(unsafe.Sizeof(v))
	if n == 0 || n > MaxBytesLength {
		e.fail("SetValue: a %s is %d bytes at index %d; want 1 to %d", reflect.TypeFor[T](), n, index, MaxBytesLength)
		return
	}
	s := e.scratchSpace()
	copy(s.bytes[:], unsafe.Slice((*byte)(unsafe.Pointer(&v)), n))
	e.send(sel.setBytesLengthAtIndex, objc.Pointer(&s.bytes), uintptr(n), uintptr(index))
}

// plainTypes caches which types plain has checked: reflect.Type to error
// (nil for a type without pointers).
var plainTypes sync.Map

// plain returns nil if values of t hold no pointers, so that their bytes
// are the whole value, and otherwise an error of what naming the type.
func plain(t reflect.Type, what string) error {
	if v, ok := plainTypes.Load(t); ok {
		if v == nil {
			return nil
		}
		return v.(error)
	}
	var err error
	if p := pointerIn(t); p != "" {
		err = invalidf("%s: %s holds %s: only the bytes of pointer-free values reach the GPU", what, t, p)
	}
	if err == nil {
		plainTypes.Store(t, nil)
	} else {
		plainTypes.Store(t, err)
	}
	return err
}

// doubleTypes caches doubleIn: reflect.Type to its description.
var doubleTypes sync.Map

// doubleInType is doubleIn, each type worked out once.
func doubleInType(t reflect.Type) string {
	if v, ok := doubleTypes.Load(t); ok {
		return v.(string)
	}
	d := doubleIn(t)
	doubleTypes.Store(t, d)
	return d
}

// doubleIn describes the first float64 or complex128 part of t, or
// returns "".
func doubleIn(t reflect.Type) string {
	return partOfKind(t, reflect.Float64, reflect.Complex128)
}

// pointerIn describes the first pointer-holding part of t, or returns "".
func pointerIn(t reflect.Type) string {
	return partOfKind(t, reflect.Pointer, reflect.UnsafePointer, reflect.Slice, reflect.String, reflect.Map,
		reflect.Chan, reflect.Func, reflect.Interface)
}

// partOfKind describes the first part of t, through arrays and struct
// fields, of one of kinds ("field X: a float64"), or returns "".
func partOfKind(t reflect.Type, kinds ...reflect.Kind) string {
	switch t.Kind() {
	case reflect.Array:
		return partOfKind(t.Elem(), kinds...)
	case reflect.Struct:
		for i := range t.NumField() {
			if p := partOfKind(t.Field(i).Type, kinds...); p != "" {
				return fmt.Sprintf("field %s: %s", t.Field(i).Name, p)
			}
		}
		return ""
	}
	if slices.Contains(kinds, t.Kind()) {
		return "a " + t.Kind().String()
	}
	return ""
}
