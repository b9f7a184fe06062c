package msl

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"github.com/puremetal/puremetal/internal/clang"
)

// LibraryPath is the file of the compiled library that holds the function
// (for a specialized function, the library compiled with its values).
func (f *Function) LibraryPath() string { return f.lib.path }

// LibraryPaths are the files of the compiled library the function belongs
// to: LibraryPath alone, or every part of a library built in parts (all of
// which compiling its source again needs, to load it without building).
func (f *Function) LibraryPaths() []string {
	if f.lib.parts != nil {
		return append([]string(nil), f.lib.parts...)
	}
	return []string{f.lib.path}
}

// libraryName is the file name Compile gives a compiled library in the
// cache: the hash of everything it was built from.
var libraryName = regexp.MustCompile(`^[0-9a-f]{32}\.so$`)

// InstallLibrary puts a compiled library, as a binary archive holds it
// (the file name Compile gave it and its bytes), into the cache directory
// cacheDir (empty for the default), so that compiling the same source
// with the same options, runtime, compiler and target loads it instead of
// building it. The name is the hash of all of those, so a library built
// from anything else is never found. A library already there is kept.
func InstallLibrary(name string, so []byte, cacheDir string) error {
	if !libraryName.MatchString(name) {
		return fmt.Errorf("msl: %q is not the name of a compiled library", name)
	}
	dir := filepath.Join(clang.CacheRoot(cacheDir), "lib", name[:2])
	path := filepath.Join(dir, name)
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("msl: cache directory: %w", err)
	}
	if err := clang.WriteFileAtomic(path, so); err != nil {
		return fmt.Errorf("msl: cache directory: %w", err)
	}
	return nil
}
