package emu

import (
	"errors"

	"github.com/puremetal/puremetal/emu/msl"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/objc"
)

// compileOptions is the state of the emulated MTLCompileOptions. Its
// defaults are Apple's: the newest language version and fast math.
type compileOptions struct {
	languageVersion uintptr
	mathMode        uintptr
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
	}
	lib, err := msl.Compile(objc.GoString(source), opts)
	if err != nil {
		var ce *msl.CompileError
		text := err.Error()
		if errors.As(err, &ce) {
			text = ce.Log
		}
		storeOut(errOut, newNSError("MTLLibraryErrorDomain", libraryErrorCompileFailure, text))
		return 0
	}
	return newObject(classes.library, &library{lib: lib})
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
