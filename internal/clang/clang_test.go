package clang

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
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

func TestTargetIsTheProcessArchitecture(t *testing.T) {
	for _, c := range []struct{ goos, goarch, want string }{
		{"linux", "amd64", "x86_64-linux-gnu"},
		{"linux", "arm64", "aarch64-linux-gnu"},
		{"darwin", "arm64", ""},
	} {
		if got := targetOf(c.goos, c.goarch); got != c.want {
			t.Errorf("targetOf(%s, %s) = %q, want %q", c.goos, c.goarch, got, c.want)
		}
	}
	if got, want := arch("aarch64-unknown-linux-gnu"), arch("arm64-linux-gnu"); got != want {
		t.Errorf("arch of aarch64 and arm64 triples: %q and %q, want the same", got, want)
	}
	for _, c := range []struct {
		host, want, target string
		cross              bool
	}{
		{"x86_64-pc-linux-gnu", "x86_64-linux-gnu", "x86_64-pc-linux-gnu", false},
		{"x86_64-redhat-linux", "x86_64-linux-gnu", "x86_64-redhat-linux", false},
		{"aarch64-unknown-linux-gnu", "aarch64-linux-gnu", "aarch64-unknown-linux-gnu", false},
		{"x86_64-pc-linux-gnu", "aarch64-linux-gnu", "aarch64-linux-gnu", true},
		{"x86_64-pc-linux-gnu", "", "", false},
	} {
		if target, cross := targetFor(c.host, c.want); target != c.target || cross != c.cross {
			t.Errorf("targetFor(%q, %q) = %q, %v; want %q, %v", c.host, c.want, target, cross, c.target, c.cross)
		}
	}
}

func TestKeyNamesTheTarget(t *testing.T) {
	a := Compiler{Path: "/usr/bin/clang++", Version: "clang version 14\n", Target: "x86_64-linux-gnu"}
	b := a
	b.Target, b.Cross = "aarch64-linux-gnu", true
	if a.Key() == b.Key() {
		t.Fatalf("compilers for %s and %s have the same cache key %q", a.Target, b.Target, a.Key())
	}
}

// elfMachine is the ELF machine of the shared objects built for the
// process, by GOARCH.
var elfMachine = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// A shared object must be built for the process's architecture, not
// clang++'s: under qemu-user an arm64 process runs the host's clang++.
func TestLoadCBuildsForTheProcess(t *testing.T) {
	needCompiler(t)
	want, ok := elfMachine[runtime.GOARCH]
	if !ok || runtime.GOOS != "linux" {
		t.Skipf("no ELF machine known for %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	dir := t.TempDir()
	if _, err := LoadC("int puremetal_clang_test_arch(void) { return 1; }\n", dir); err != nil {
		t.Fatal(err)
	}
	sos, _ := filepath.Glob(filepath.Join(dir, "c", "*.so"))
	if len(sos) != 1 {
		t.Fatalf("cache holds %d shared objects, want 1: %v", len(sos), sos)
	}
	f, err := elf.Open(sos[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Machine != want {
		t.Fatalf("%s is for %v, want %v (GOARCH %s)", sos[0], f.Machine, want, runtime.GOARCH)
	}
}

// From an x86-64 host, the cross build an arm64 process under qemu makes:
// the C library and lld for aarch64 (the packages .ci/run installs).
func TestCrossBuildForArm64(t *testing.T) {
	c := needCompiler(t)
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skip("checks the cross build from linux/amd64")
	}
	c.Target, c.Cross = targetOf("linux", "arm64"), true
	dir := t.TempDir()
	src := filepath.Join(dir, "x.c")
	code := "#include <pthread.h>\n#include <stdio.h>\nint puremetal_x(char *b) { return snprintf(b, 8, \"%p\", (void *)pthread_self()); }\n"
	if err := os.WriteFile(src, []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	so := filepath.Join(dir, "x.so")
	if _, log, err := c.BuildShared(dir, so, "-x", "c", "-O2", "-fPIC", "-shared", "-nostdlib++", "-fno-color-diagnostics", src, "-lpthread"); err != nil {
		testenv.SkipOrFail(t, fmt.Sprintf("cannot build for %s (Debian: apt-get install lld libc6-dev-arm64-cross libgcc-12-dev-arm64-cross): %v\n%s", c.Target, err, log))
	}
	f, err := elf.Open(so)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Machine != elf.EM_AARCH64 {
		t.Fatalf("cross build made a %v shared object, want %v", f.Machine, elf.EM_AARCH64)
	}
}
