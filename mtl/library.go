package mtl

import (
	"fmt"
	"strings"

	"github.com/puremetal/puremetal/objc"
)

// CompileOptions are MTLCompileOptions: how a library is compiled from
// source.
type CompileOptions struct {
	// LanguageVersion is the Metal Shading Language version; 0 leaves the
	// system's default.
	LanguageVersion LanguageVersion
	// FastMath allows the compiler to relax IEEE-754 semantics: MathModeFast
	// through setMathMode: where the system answers it (macOS 15 and
	// later), else setFastMathEnabled:. Metal's own default is fast math
	// on; puremetal's default, false, is MathModeSafe, so kernels compare
	// closely with CPU references.
	FastMath bool
	// PreprocessorMacros are defined for the source
	// (setPreprocessorMacros:): name to replacement text, as -Dname=value.
	PreprocessorMacros map[string]string
}

// CompileError is a failed compilation of Metal source: the compiler's log.
type CompileError struct {
	Log string
}

func (e *CompileError) Error() string { return "mtl: compiling the library failed:\n" + e.Log }

// Library is an MTLLibrary: compiled Metal functions.
type Library struct {
	object
	dev *Device
}

// usable returns the error of method on a nil or released library.
func (l *Library) usable(method string) error {
	if l == nil {
		return invalidf("%s: nil library", method)
	}
	if l.ID() == 0 {
		return released(method, "library")
	}
	return nil
}

// NewLibraryWithSource compiles Metal Shading Language source into a
// library (newLibraryWithSource:options:error:). A compilation failure is a
// *CompileError holding the compiler's log.
func (d *Device) NewLibraryWithSource(src string, opts CompileOptions) (l *Library, err error) {
	if err := d.usable("Device.NewLibraryWithSource"); err != nil {
		return nil, err
	}
	inPool(func() { l, err = d.newLibrary(src, opts) })
	return l, err
}

// newLibrary is NewLibraryWithSource, inside the caller's pool.
func (d *Device) newLibrary(src string, opts CompileOptions) (*Library, error) {
	source, err := objc.NewNSString(src)
	if err != nil {
		return nil, fmt.Errorf("mtl: library source: %w", err)
	}
	defer source.Release()
	options := objc.GetClass("MTLCompileOptions").New()
	if options == 0 {
		return nil, fmt.Errorf("mtl: the runtime has no MTLCompileOptions class")
	}
	defer options.Release()
	if opts.LanguageVersion != 0 {
		options.Send(sel.setLanguageVersion, uintptr(opts.LanguageVersion))
	}
	if options.RespondsToSelector(sel.setMathMode) {
		mode := MathModeSafe
		if opts.FastMath {
			mode = MathModeFast
		}
		options.Send(sel.setMathMode, uintptr(mode))
	} else {
		options.Send(sel.setFastMathEnabled, boolArg(opts.FastMath))
	}
	if len(opts.PreprocessorMacros) > 0 {
		macros, err := newMacroDictionary(opts.PreprocessorMacros)
		if err != nil {
			return nil, err
		}
		options.Send(sel.setPreprocessorMacros, uintptr(macros))
	}
	nserr := new(objc.ID)
	lib := d.ID().Send(sel.newLibraryWithSourceOptionsError, uintptr(source), uintptr(options), objc.Pointer(nserr))
	if lib == 0 {
		return nil, &CompileError{Log: errorText(*nserr, "newLibraryWithSource:options:error: returned nil")}
	}
	l := &Library{dev: d}
	l.set(lib)
	return l, nil
}

// LibraryFromObject wraps an object that answers MTLLibrary's selectors,
// made by the device d, such as a library the emulated device built from
// files (emu.NewLibraryWithFile), and retains it.
func LibraryFromObject(d *Device, id objc.ID) (*Library, error) {
	if id == 0 {
		return nil, fmt.Errorf("mtl: LibraryFromObject was given nil")
	}
	loadSels()
	for _, s := range []objc.SEL{sel.newFunctionWithName, sel.functionNames} {
		if !id.RespondsToSelector(s) {
			return nil, fmt.Errorf("mtl: object of class %s does not answer MTLLibrary's selectors", id.Class().Name())
		}
	}
	l := &Library{dev: d}
	l.set(id.Retain())
	return l, nil
}

func boolArg(b bool) uintptr {
	if b {
		return 1
	}
	return 0
}

// errorText returns the description of an NSError, or fallback for nil.
func errorText(nserr objc.ID, fallback string) string {
	if err := objc.ErrorFromNSError(nserr); err != nil {
		return err.(*objc.Error).Description
	}
	return fallback
}

// FunctionNames returns the names of the library's functions.
func (l *Library) FunctionNames() []string {
	var names []string
	inPool(func() {
		arr := l.ID().Send(sel.functionNames)
		n := int(arr.SendWord(sel.count))
		for i := range n {
			names = append(names, objc.GoString(arr.Send(sel.objectAtIndex, uintptr(i))))
		}
	})
	return names
}

// NewFunction returns the library's function named name
// (newFunctionWithName:). A missing name is an error wrapping
// [ErrNoFunction] that lists the names the library has.
func (l *Library) NewFunction(name string) (*Function, error) {
	if err := l.usable("Library.NewFunction"); err != nil {
		return nil, err
	}
	s, err := objc.NewNSString(name)
	if err != nil {
		return nil, fmt.Errorf("mtl: function name: %w", err)
	}
	var id objc.ID
	inPool(func() { id = l.ID().Send(sel.newFunctionWithName, uintptr(s)) })
	s.Release()
	if id == 0 {
		return nil, fmt.Errorf("%w %q; the library has: %s", ErrNoFunction, name, strings.Join(l.FunctionNames(), ", "))
	}
	f := &Function{name: name, dev: l.dev}
	f.set(id)
	return f, nil
}

// Function is an MTLFunction: one entry point of a library.
type Function struct {
	object
	dev  *Device
	name string
}

// Name returns the function's name.
func (f *Function) Name() string { return f.name }
