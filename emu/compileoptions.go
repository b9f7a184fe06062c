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

func optionsSetFastMathEnabled(self objc.ID, _ objc.SEL, v uintptr) {
	if o := stateOf[compileOptions](self); o != nil {
		o.mathMode = uintptr(mtl.MathModeSafe)
		if byte(v) != 0 {
			o.mathMode = uintptr(mtl.MathModeFast)
		}
	}
}

func optionsFastMathEnabled(self objc.ID, _ objc.SEL) uintptr {
	if o := stateOf[compileOptions](self); o != nil {
		return boolWord(o.mathMode == uintptr(mtl.MathModeFast))
	}
	return 0
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
