// Package testenv holds the helpers puremetal's tests share: locating the
// repository and its test data, and the environment variables
// that change how the tests run: the strict mode that turns a skipped test
// into a failed one, and the objc tests' runtime without Foundation.
package testenv

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// StrictEnv is the environment variable that, set to 1, makes every test
// that would skip for a missing prerequisite fail instead.
const StrictEnv = "PUREMETAL_STRICT"

// Strict reports whether PUREMETAL_STRICT=1 is set.
func Strict() bool { return os.Getenv(StrictEnv) == "1" }

// NoFoundationEnv is the environment variable that, set to "none", makes
// the objc tests load the Objective-C runtime without Foundation (GNUstep
// Base on Linux). The arm64 run under qemu sets it: GNUstep Base's arm64
// packages do not install beside the amd64 ones, so that run checks the
// calling convention with the runtime alone and leaves NSString, NSError
// and the pools to the amd64 run.
const NoFoundationEnv = "PUREMETAL_OBJC_FOUNDATION"

// FoundationDisabled reports whether PUREMETAL_OBJC_FOUNDATION=none is set.
func FoundationDisabled() bool { return os.Getenv(NoFoundationEnv) == "none" }

// SkipOrFail skips the test with the given reason, or fails it when strict
// mode is on. The reason should say what is missing and how to get it.
func SkipOrFail(t testing.TB, why string) {
	t.Helper()
	if Strict() {
		t.Fatalf("%s (%s=1: a missing prerequisite is a failure)", why, StrictEnv)
	}
	t.Skip(why)
}

// RepoRoot returns the folder holding the module's go.mod, found by walking
// up from the working directory.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatalf("testenv: working directory: %v", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatalf("testenv: no go.mod above the working directory")
		}
		dir = parent
	}
}

// DataDir returns the repository's testdata folder, which holds the
// golden vectors (testdata/golden) and the Apple API facts
// (testdata/apple-api). It fails the test when the folder is missing: it is
// part of every clone.
func DataDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(RepoRoot(t), "testdata")
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		t.Fatalf("testenv: the repository's testdata folder is missing at %s", dir)
	}
	return dir
}

// GoldenEnv is the environment variable naming a folder laid out like
// testdata/golden (one subfolder per set) that replaces the repository's
// golden vectors for a run.
const GoldenEnv = "PUREMETAL_GOLDEN"

// GoldenDir returns the folder of the golden sets: $PUREMETAL_GOLDEN when
// it is set, else the repository's testdata/golden.
func GoldenDir(t testing.TB) string {
	t.Helper()
	if dir := os.Getenv(GoldenEnv); dir != "" {
		return dir
	}
	return filepath.Join(DataDir(t), "golden")
}

// ErrPlatform marks a prerequisite that this system cannot have, such as
// the emulated device on macOS, or Metal on Linux: not something to
// install, so strict mode does not turn its skips into failures.
var ErrPlatform = errors.New("not on this platform")

// RunMain runs a package's tests from its TestMain. Example functions
// cannot skip, so when prerequisite returns an error and strict mode is
// off, or the error wraps ErrPlatform, the examples are left out
// (-test.skip '^Example') with the reason printed; otherwise, in strict
// mode, they run, and fail.
func RunMain(m *testing.M, prerequisite func() error) int {
	flag.Parse()
	if err := prerequisite(); err != nil && (!Strict() || errors.Is(err, ErrPlatform)) {
		fmt.Printf("skipping the examples: %v\n", err)
		if f := flag.Lookup("test.skip"); f != nil {
			skip := "^Example"
			if v := f.Value.String(); v != "" {
				skip = v + "|" + skip
			}
			f.Value.Set(skip)
		}
	}
	return m.Run()
}
