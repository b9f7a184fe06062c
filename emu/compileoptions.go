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

func (o *compileOptions) free() {
	if o.macros != 0 {
		o.macros.Release()
	}
}

func optionsInit(self objc.ID, cmd objc.SEL) objc.ID {
	self = objc.SendSuper(self, nsObject, cmd)
	if self == 0 {
		return 0
	}
	return attach(self, &compileOptions{languageVersion: uintptr(mtl.LanguageVersion3_2), mathMode: uintptr(mtl.MathModeFast)})
}

// options returns the state of the emulated MTLCompileOptions self, or
// zero options for any other object: what its getters answer.
func options(self objc.ID) compileOptions {
	if o := stateOf[compileOptions](self); o != nil {
		return *o
	}
	return compileOptions{}
}

// setOption applies set to the state of the emulated MTLCompileOptions
// self; for any other object it does nothing.
func setOption(self objc.ID, set func(o *compileOptions)) {
	if o := stateOf[compileOptions](self); o != nil {
		set(o)
	}
}

func optionsSetLanguageVersion(self objc.ID, _ objc.SEL, v uintptr) {
	setOption(self, func(o *compileOptions) { o.languageVersion = v })
}

func optionsLanguageVersion(self objc.ID, _ objc.SEL) uintptr { return options(self).languageVersion }

func optionsSetMathMode(self objc.ID, _ objc.SEL, v uintptr) {
	setOption(self, func(o *compileOptions) { o.mathMode = v })
}

func optionsMathMode(self objc.ID, _ objc.SEL) uintptr { return options(self).mathMode }

// optionsSetFastMathEnabled is the older spelling of the math mode:
// fastMathEnabled YES is MTLMathModeFast, NO is MTLMathModeSafe.
func optionsSetFastMathEnabled(self objc.ID, _ objc.SEL, v uintptr) {
	mode := mtl.MathModeSafe
	if byte(v) != 0 {
		mode = mtl.MathModeFast
	}
	setOption(self, func(o *compileOptions) { o.mathMode = uintptr(mode) })
}

func optionsFastMathEnabled(self objc.ID, _ objc.SEL) uintptr {
	return boolWord(options(self).mathMode == uintptr(mtl.MathModeFast))
}

func optionsSetPreprocessorMacros(self objc.ID, _ objc.SEL, d objc.ID) {
	setOption(self, func(o *compileOptions) {
		if d != 0 {
			d.Retain()
		}
		if o.macros != 0 {
			o.macros.Release()
		}
		o.macros = d
	})
}

func optionsPreprocessorMacros(self objc.ID, _ objc.SEL) objc.ID { return options(self).macros }

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
