package emu

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/puremetal/puremetal/emu/msl"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/objc"
)

// library is an MTLLibrary's state.
type library struct {
	lib *msl.Library
	dev *device
}

func libraryNewFunctionWithName(self objc.ID, _ objc.SEL, name objc.ID) objc.ID {
	l := stateOf[library](self)
	if l == nil {
		return 0
	}
	f, err := l.lib.Function(objc.GoString(name))
	if err != nil {
		return 0
	}
	return newObject(classes.function, &function{fn: f, dev: l.dev})
}

func libraryFunctionNames(self objc.ID, _ objc.SEL) objc.ID {
	l := stateOf[library](self)
	if l == nil {
		return 0
	}
	arr := objc.GetClass("NSMutableArray").New()
	for _, n := range l.lib.FunctionNames() {
		s, err := objc.NewNSString(n)
		if err != nil {
			continue
		}
		objc.Send(arr, fsel.addObject, uintptr(s))
		s.Release()
	}
	return arr.Autorelease()
}

// storeCompileError stores in errOut the MTLLibraryErrorCompileFailure
// NSError of a failed compilation: the compiler's log, or the error.
func storeCompileError(errOut uintptr, err error) {
	var ce *msl.CompileError
	text := err.Error()
	if errors.As(err, &ce) {
		text = ce.Log
	}
	storeOut(errOut, newNSError("MTLLibraryErrorDomain", libraryErrorCompileFailure, text))
}

// MTLLibraryErrorFunctionNotFound is the code of a missing function in
// MTLLibraryErrorDomain.
const libraryErrorFunctionNotFound = 5

// constantValues is the state of the emulated MTLFunctionConstantValues.
type constantValues struct {
	values []msl.ConstantValue
}

var constantValuesInit = initState(func() *constantValues { return &constantValues{} })

// dataTypes maps the scalar MTLDataType values to MSL types and sizes.
var dataTypes = map[mtl.DataType]struct {
	name string
	size int
}{
	mtl.DataTypeBool: {"bool", 1}, mtl.DataTypeChar: {"char", 1}, mtl.DataTypeUChar: {"uchar", 1},
	mtl.DataTypeShort: {"short", 2}, mtl.DataTypeUShort: {"ushort", 2}, mtl.DataTypeInt: {"int", 4},
	mtl.DataTypeUInt: {"uint", 4}, mtl.DataTypeLong: {"long", 8}, mtl.DataTypeULong: {"ulong", 8},
	mtl.DataTypeHalf: {"half", 2}, mtl.DataTypeBFloat: {"bfloat", 2}, mtl.DataTypeFloat: {"float", 4},
}

// constantValue copies the value at p; a type other than the scalars is
// kept by its number, for Specialize to name.
func constantValue(p uintptr, t uintptr) msl.ConstantValue {
	dt, ok := dataTypes[mtl.DataType(t)]
	if !ok {
		return msl.ConstantValue{Type: fmt.Sprintf("MTLDataType(%d)", t)}
	}
	v := msl.ConstantValue{Type: dt.name, Bytes: make([]byte, dt.size)}
	if p != 0 {
		copy(v.Bytes, unsafe.Slice((*byte)(cptr(p)), dt.size))
	}
	return v
}

func constantValuesSetConstantValueTypeAtIndex(self objc.ID, _ objc.SEL, p, t, index uintptr) {
	if c := stateOf[constantValues](self); c != nil {
		v := constantValue(p, t)
		v.Index = int(index)
		c.values = append(c.values, v)
	}
}

func constantValuesSetConstantValueTypeWithName(self objc.ID, _ objc.SEL, p, t uintptr, name objc.ID) {
	if c := stateOf[constantValues](self); c != nil {
		v := constantValue(p, t)
		v.Index, v.Name = -1, objc.GoString(name)
		c.values = append(c.values, v)
	}
}

func libraryNewFunctionWithNameConstantValuesError(self objc.ID, _ objc.SEL, name, values objc.ID, errOut uintptr) objc.ID {
	l := stateOf[library](self)
	if l == nil {
		return 0
	}
	fn := objc.GoString(name)
	if _, err := l.lib.Function(fn); err != nil {
		storeOut(errOut, newNSError("MTLLibraryErrorDomain", libraryErrorFunctionNotFound, err.Error()))
		return 0
	}
	var vs []msl.ConstantValue
	if values != 0 {
		c := stateOf[constantValues](values)
		if c == nil {
			storeOut(errOut, newNSError("MTLLibraryErrorDomain", libraryErrorCompileFailure, "newFunctionWithName:constantValues:error: the constant values are not one of the emulated device's MTLFunctionConstantValues"))
			return 0
		}
		vs = c.values
	}
	f, err := l.lib.Specialize(fn, vs)
	if err != nil {
		storeCompileError(errOut, err)
		return 0
	}
	return newObject(classes.function, &function{fn: f, dev: l.dev})
}

// unspecialized names the required function constants of f when it was
// not created with constant values.
func unspecialized(f *msl.Function) []string {
	if f.Specialized {
		return nil
	}
	var names []string
	for _, c := range f.Constants {
		if c.Required {
			names = append(names, fmt.Sprintf("%s (index %d)", c.Name, c.Index))
		}
	}
	return names
}
