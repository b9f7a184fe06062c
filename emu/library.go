package emu

import (
	"errors"
	"fmt"
	"strings"
	"unsafe"

	"github.com/puremetal/puremetal/emu/msl"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/objc"
)

// compileOptions is the state of the emulated MTLCompileOptions. Its
// defaults are Apple's: the newest language version and fast math.
type compileOptions struct {
	languageVersion uintptr
	mathMode        uintptr
	macros          objc.ID // NSDictionary, retained
}

func (o *compileOptions) free() {
	if o.macros != 0 {
		o.macros.Release()
	}
}

func optionsSetPreprocessorMacros(self objc.ID, _ objc.SEL, d objc.ID) {
	if o := stateOf[compileOptions](self); o != nil {
		if d != 0 {
			d.Retain()
		}
		if o.macros != 0 {
			o.macros.Release()
		}
		o.macros = d
	}
}

func optionsPreprocessorMacros(self objc.ID, _ objc.SEL) objc.ID {
	if o := stateOf[compileOptions](self); o != nil {
		return o.macros
	}
	return 0
}

// macrosOf reads an NSDictionary of preprocessor macros: NSString names to
// NSString or NSNumber values.
func macrosOf(d objc.ID) map[string]string {
	if d == 0 {
		return nil
	}
	m := map[string]string{}
	keys := d.Send(fsel.keyEnumerator)
	for k := keys.Send(fsel.nextObject); k != 0; k = keys.Send(fsel.nextObject) {
		v := d.Send(fsel.objectForKey, uintptr(k))
		if v.RespondsToSelector(fsel.stringValue) {
			v = v.Send(fsel.stringValue)
		}
		m[objc.GoString(k)] = objc.GoString(v)
	}
	return m
}

func optionsInit(self objc.ID, cmd objc.SEL) objc.ID {
	self = objc.SendSuper(self, nsObject, cmd)
	if self == 0 {
		return 0
	}
	return attach(self, &compileOptions{languageVersion: uintptr(mtl.LanguageVersion3_2), mathMode: uintptr(mtl.MathModeFast)})
}

func optionsSetLanguageVersion(self objc.ID, _ objc.SEL, v uintptr) {
	if o := stateOf[compileOptions](self); o != nil {
		o.languageVersion = v
	}
}

func optionsLanguageVersion(self objc.ID, _ objc.SEL) uintptr {
	if o := stateOf[compileOptions](self); o != nil {
		return o.languageVersion
	}
	return 0
}

func optionsSetMathMode(self objc.ID, _ objc.SEL, v uintptr) {
	if o := stateOf[compileOptions](self); o != nil {
		o.mathMode = v
	}
}

func optionsMathMode(self objc.ID, _ objc.SEL) uintptr {
	if o := stateOf[compileOptions](self); o != nil {
		return o.mathMode
	}
	return 0
}

func optionsSetFastMath(self objc.ID, _ objc.SEL, v uintptr) {
	if o := stateOf[compileOptions](self); o != nil {
		o.mathMode = uintptr(mtl.MathModeSafe)
		if byte(v) != 0 {
			o.mathMode = uintptr(mtl.MathModeFast)
		}
	}
}

func optionsFastMath(self objc.ID, _ objc.SEL) uintptr {
	if o := stateOf[compileOptions](self); o != nil {
		return boolWord(o.mathMode == uintptr(mtl.MathModeFast))
	}
	return 0
}

// library is an MTLLibrary's state.
type library struct {
	lib *msl.Library
}

// libraryErrorCompileFailure is MTLLibraryErrorCompileFailure, the code of a
// compilation failure in MTLLibraryErrorDomain.
const libraryErrorCompileFailure = 3

func deviceNewLibrary(self objc.ID, _ objc.SEL, source, options objc.ID, errOut uintptr) objc.ID {
	opts := msl.CompileOptions{FastMath: true}
	if options != 0 {
		// Read the options through their selectors, so that Apple's
		// MTLCompileOptions would do as well as the emulated one.
		if options.RespondsToSelector(fsel.mathMode) {
			opts.FastMath = mtl.MathMode(objc.SendWord(options, fsel.mathMode)) == mtl.MathModeFast
		} else {
			opts.FastMath = objc.SendBool(options, fsel.fastMathEnabled)
		}
		opts.LanguageVersion = uint32(objc.SendWord(options, fsel.languageVersion))
		if options.RespondsToSelector(fsel.preprocessorMacros) {
			opts.PreprocessorMacros = macrosOf(objc.Send(options, fsel.preprocessorMacros))
		}
	}
	lib, err := msl.Compile(objc.GoString(source), opts)
	if err != nil {
		storeCompileError(errOut, err)
		return 0
	}
	return newObject(classes.library, &library{lib: lib})
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

func libraryNewFunction(self objc.ID, _ objc.SEL, name objc.ID) objc.ID {
	l := stateOf[library](self)
	if l == nil {
		return 0
	}
	f, err := l.lib.Function(objc.GoString(name))
	if err != nil {
		return 0
	}
	return newObject(classes.function, &function{fn: f})
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

// MTLLibraryErrorFunctionNotFound is the code of a missing function in
// MTLLibraryErrorDomain.
const libraryErrorFunctionNotFound = 5

// constantValues is the state of the emulated MTLFunctionConstantValues.
type constantValues struct {
	values []msl.ConstantValue
}

func constantValuesInit(self objc.ID, cmd objc.SEL) objc.ID {
	self = objc.ID(objc.SendSuper(self, nsObject, cmd))
	if self == 0 {
		return 0
	}
	return attach(self, &constantValues{})
}

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

func constantValuesSetAtIndex(self objc.ID, _ objc.SEL, p, t, index uintptr) {
	if c := stateOf[constantValues](self); c != nil {
		v := constantValue(p, t)
		v.Index = int(index)
		c.values = append(c.values, v)
	}
}

func constantValuesSetWithName(self objc.ID, _ objc.SEL, p, t uintptr, name objc.ID) {
	if c := stateOf[constantValues](self); c != nil {
		v := constantValue(p, t)
		v.Index, v.Name = -1, objc.GoString(name)
		c.values = append(c.values, v)
	}
}

func libraryNewSpecializedFunction(self objc.ID, _ objc.SEL, name, values objc.ID, errOut uintptr) objc.ID {
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
	return newObject(classes.function, &function{fn: f})
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

// function is an MTLFunction's state.
type function struct {
	fn *msl.Function
}

func functionName(self objc.ID, _ objc.SEL) objc.ID {
	if f := stateOf[function](self); f != nil {
		return autoreleasedString(f.fn.Name)
	}
	return 0
}

// pipeline is an MTLComputePipelineState's state.
type pipeline struct {
	fn *msl.Function
}

func deviceNewPipeline(self objc.ID, _ objc.SEL, fn objc.ID, errOut uintptr) objc.ID {
	f := stateOf[function](fn)
	if f == nil {
		storeOut(errOut, newNSError("CompilerError", 1, "newComputePipelineStateWithFunction: the function is not one of the emulated device's"))
		return 0
	}
	if need := unspecialized(f.fn); need != nil {
		storeOut(errOut, newNSError("CompilerError", 1, fmt.Sprintf("newComputePipelineStateWithFunction: function %s uses function constants without values: %s; create it with newFunctionWithName:constantValues:error:", f.fn.Name, strings.Join(need, ", "))))
		return 0
	}
	return newObject(classes.pipeline, &pipeline{fn: f.fn})
}

func pipelineMaxTotal(self objc.ID, _ objc.SEL) uintptr {
	if p := stateOf[pipeline](self); p != nil {
		return uintptr(p.fn.MaxTotalThreadsPerThreadgroup)
	}
	return 0
}

func pipelineWidth(self objc.ID, _ objc.SEL) uintptr {
	if p := stateOf[pipeline](self); p != nil {
		return uintptr(p.fn.ThreadExecutionWidth)
	}
	return 0
}
