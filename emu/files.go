package emu

import (
	"fmt"

	"github.com/puremetal/puremetal/emu/msl"
	"github.com/puremetal/puremetal/mtl"
)

// FileOptions control NewLibraryWithFile.
type FileOptions struct {
	// CompileOptions are those of newLibraryWithSource:options:error:
	// (fast math, language version, preprocessor macros).
	mtl.CompileOptions
	// IncludeDirs are searched for the files of #include "..." and
	// #include <...>, after the directory of the including file, as the
	// -I options of Apple's offline compiler (xcrun metal -I dir).
	IncludeDirs []string
	// Lazy builds each function when the program first asks for it
	// (msl.CompileOptions.Lazy), which makes a library of thousands of
	// kernels cheap when a few are used.
	Lazy bool
}

// NewLibraryWithFile builds a library of the emulated device d from the
// Metal source file at path and the files it includes, as Apple's offline
// compiler builds a .metallib (xcrun metal -c path -I dir ...) that a
// program loads with newLibraryWithURL:error:. Diagnostics and kernel
// faults name each file and line. Metal's newLibraryWithSource, on the
// emulated device as on Apple's, includes no file but Metal's own headers.
// A compilation failure is an *mtl.CompileError. The library is owned by
// the caller.
func NewLibraryWithFile(d *mtl.Device, path string, opts FileOptions) (*mtl.Library, error) {
	if d == nil || stateOf[device](d.ID()) == nil {
		return nil, fmt.Errorf("emu: NewLibraryWithFile needs an emulated device")
	}
	lib, err := msl.CompileFile(path, msl.CompileOptions{
		FastMath:           opts.FastMath,
		LanguageVersion:    uint32(opts.LanguageVersion),
		PreprocessorMacros: opts.PreprocessorMacros,
		IncludeDirs:        opts.IncludeDirs,
		Lazy:               opts.Lazy,
	})
	if err != nil {
		if ce, ok := err.(*msl.CompileError); ok {
			return nil, &mtl.CompileError{Log: ce.Log}
		}
		return nil, fmt.Errorf("emu: %w", err)
	}
	id := newObject(classes.library, &library{lib: lib, dev: stateOf[device](d.ID())})
	l, err := mtl.LibraryFromObject(d, id)
	id.Release() // l holds the only reference now
	return l, err
}
