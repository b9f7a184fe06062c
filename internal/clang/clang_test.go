package clang

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ebitengine/purego"
	"github.com/puremetal/puremetal/internal/testenv"
)

func TestMissingCompilerIsErrNoCompiler(t *testing.T) {
	_, err := find("puremetal-no-such-compiler++")
	if !errors.Is(err, ErrNoCompiler) {
		t.Fatalf("find of a missing compiler: %v, want an error wrapping ErrNoCompiler", err)
	}
	if !strings.Contains(err.Error(), "apt-get install clang") {
		t.Errorf("error %q does not say how to install clang", err)
	}
}

func needCompiler(t *testing.T) Compiler {
	t.Helper()
	c, err := Find()
	if err != nil {
		testenv.SkipOrFail(t, err.Error())
	}
	return c
}

func TestLoadCBuildsOnceAndLoads(t *testing.T) {
	needCompiler(t)
	dir := t.TempDir()
	src := "int puremetal_clang_test_answer(void) { return 42; }\n"
	h, err := LoadC(src, dir)
	if err != nil {
		t.Fatal(err)
	}
	sym, err := purego.Dlsym(h, "puremetal_clang_test_answer")
	if err != nil {
		t.Fatal(err)
	}
	if r, _, _ := purego.SyscallN(sym); r != 42 {
		t.Fatalf("helper returned %d, want 42", r)
	}
	sos, _ := filepath.Glob(filepath.Join(dir, "c", "*.so"))
	if len(sos) != 1 {
		t.Fatalf("cache holds %d shared objects, want 1: %v", len(sos), sos)
	}
	st, _ := os.Stat(sos[0])
	if _, err := LoadC(src, dir); err != nil {
		t.Fatal(err)
	}
	if st2, _ := os.Stat(sos[0]); !st2.ModTime().Equal(st.ModTime()) {
		t.Errorf("loading the same source again rebuilt it")
	}
}

func TestBuildSharedReportsCompilerLog(t *testing.T) {
	c := needCompiler(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "bad.c")
	if err := os.WriteFile(src, []byte("int f(void) { return undeclared_name; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	so := filepath.Join(dir, "bad.so")
	built, log, err := c.BuildShared(dir, so, "-x", "c", "-shared", "-fPIC", "-fno-color-diagnostics", src)
	var exit *exec.ExitError
	if built || !errors.As(err, &exit) || !strings.Contains(log, "undeclared_name") {
		t.Fatalf("BuildShared of a bad source: built %v, err %v, log %q; want an exit error and a log naming the identifier", built, err, log)
	}
	if _, err := os.Stat(so); err == nil {
		t.Errorf("a failed build left %s", so)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*.tmp")); len(left) != 0 {
		t.Errorf("a failed build left temporary files %v", left)
	}
}
