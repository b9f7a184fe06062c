package emu

import (
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/objc"
)

func boolWord(b bool) uintptr {
	if b {
		return 1
	}
	return 0
}

// compileOptions is the state of the emulated MTLCompileOptions. Its
// defaults are Apple's: the newest language version and fast math.
type compileOptions struct {
	languageVersion uintptr
	mathMode        uintptr
	macros          objc.ID // NSDictionary, retained
}

func (o *compileOptions) free() { o.macros.Release() }

var optionsInit = initState(func() *compileOptions {
	return &compileOptions{languageVersion: uintptr(mtl.LanguageVersion3_2), mathMode: uintptr(mtl.MathModeFast)}
})

var optionsLanguageVersion, optionsSetLanguageVersion = property(func(o *compileOptions) *uintptr { return &o.languageVersion })

var optionsMathMode, optionsSetMathMode = property(func(o *compileOptions) *uintptr { return &o.mathMode })

// optionsSetFastMathEnabled is the older spelling of the math mode:
// fastMathEnabled YES is MTLMathModeFast, NO is MTLMathModeSafe.
func optionsSetFastMathEnabled(self objc.ID, cmd objc.SEL, v uintptr) {
	mode := mtl.MathModeSafe
	if byte(v) != 0 {
		mode = mtl.MathModeFast
	}
	optionsSetMathMode(self, cmd, uintptr(mode))
}

func optionsFastMathEnabled(self objc.ID, cmd objc.SEL) uintptr {
	return boolWord(optionsMathMode(self, cmd) == uintptr(mtl.MathModeFast))
}

var optionsPreprocessorMacros, optionsSetPreprocessorMacros = objectProperty(func(o *compileOptions) *objc.ID { return &o.macros })

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
