// Package clang is the C and C++ toolchain of the emulated Metal device:
// it finds clang++, builds shared objects into a cache directory shared by
// processes, and compiles and loads small C helpers.
package clang

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/ebitengine/purego"
)

// ErrNoCompiler is returned (wrapped) by every function of the package
// when clang++ is not installed.
var ErrNoCompiler = errors.New("clang++ not found in PATH; the emulated Metal device compiles kernels with clang (Debian/Ubuntu: apt-get install clang)")

// Compiler is an installed clang++, set up to build for the running
// process.
type Compiler struct {
	// Path is the clang++ executable.
	Path string
	// Version is the output of clang++ --version.
	Version string
	// Target is the target triple every run is given (--target): that
	// of this process's architecture, which need not be clang++'s own (an
	// arm64 process under qemu-user runs the host's x86-64 clang++).
	// When clang++ builds for this architecture by default, it is
	// clang++'s own triple (clang++ -dumpmachine), so that it keeps the
	// C library it was configured with. Empty on platforms the package
	// has no triple for: clang++'s default.
	Target string
	// Cross is true when clang++'s default target is another
	// architecture: its default linker is the host's, so shared objects
	// are linked with lld (-fuse-ld=lld), and the C library for Target
	// must be installed as a cross library (Debian:
	// libc6-dev-arm64-cross libgcc-12-dev-arm64-cross).
	Cross bool
}

// Target is the clang target triple of this process's platform, or "" if
// the package has none for it.
func Target() string { return targetOf(runtime.GOOS, runtime.GOARCH) }

// targetFor returns the triple a compiler whose default target is host
// is given to build for want (a Target), and whether that is a cross
// build.
func targetFor(host, want string) (target string, cross bool) {
	switch {
	case want == "":
		return "", false
	case arch(host) == arch(want):
		return host, false
	}
	return want, true
}

func targetOf(goos, goarch string) string {
	switch goos + "/" + goarch {
	case "linux/amd64":
		return "x86_64-linux-gnu"
	case "linux/arm64":
		return "aarch64-linux-gnu"
	}
	return ""
}

// arch is the architecture part of a target triple.
func arch(triple string) string {
	a, _, _ := strings.Cut(triple, "-")
	if a == "arm64" {
		return "aarch64"
	}
	return a
}

// Key identifies what the compiler builds: its version and the target.
// It is part of every cache key, so a new compiler, or a process of
// another architecture sharing the cache directory, builds anew.
func (c Compiler) Key() string {
	return c.Version + "\ntarget " + c.Target + "\n"
}

// args are the arguments every run gets before its own, link tells
// whether the run links.
func (c Compiler) args(link bool) []string {
	var a []string
	if c.Target != "" {
		a = append(a, "--target="+c.Target)
	}
	if link && c.Cross {
		a = append(a, "-fuse-ld=lld")
	}
	return a
}

var (
	findOnce sync.Once
	found    Compiler
	findErr  error
)

// Find returns the clang++ in PATH, looked up once per process. Without
// one, the error wraps ErrNoCompiler.
func Find() (Compiler, error) {
	findOnce.Do(func() { found, findErr = find("clang++") })
	return found, findErr
}

func find(name string) (Compiler, error) {
	p, err := exec.LookPath(name)
	if err != nil {
		return Compiler{}, fmt.Errorf("clang: %w", ErrNoCompiler)
	}
	out, err := exec.Command(p, "--version").Output()
	if err != nil {
		return Compiler{}, fmt.Errorf("clang: %s --version: %v", p, err)
	}
	c := Compiler{Path: p, Version: string(out)}
	if want := Target(); want != "" {
		host, err := exec.Command(p, "-dumpmachine").Output()
		if err != nil {
			return Compiler{}, fmt.Errorf("clang: %s -dumpmachine: %v", p, err)
		}
		c.Target, c.Cross = targetFor(strings.TrimSpace(string(host)), want)
	}
	return c, nil
}

// CacheRoot is the cache directory: dir, or when dir is empty
// os.UserCacheDir()/puremetal/msl (the temporary directory if there is no
// user cache directory).
func CacheRoot(dir string) string {
	if dir != "" {
		return dir
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	return filepath.Join(base, "puremetal", "msl")
}

// WriteFileAtomic writes data to path through a temporary file and rename,
// so concurrent processes never see a partial file.
func WriteFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// Run runs the compiler with args, after the target's, in directory dir
// (empty: the current one) and returns its standard output. A failure returns the compiler's
// standard error as log, and an *exec.ExitError if the compiler ran and
// rejected the input.
func (c Compiler) Run(dir string, args ...string) (out []byte, log string, err error) {
	cmd := exec.Command(c.Path, append(c.args(false), args...)...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, stderr.String(), err
	}
	return stdout.Bytes(), stderr.String(), nil
}

// BuildShared runs the compiler with args, after the target's (run in
// dir), to build the shared object so, unless the file already exists. It builds into a file of this
// process's own and renames it into place, so processes sharing the cache
// never load a partial file. built tells whether it compiled; log is the
// compiler's output when it failed, and err an *exec.ExitError if the
// compiler ran and rejected the input.
func (c Compiler) BuildShared(dir, so string, args ...string) (built bool, log string, err error) {
	if _, err := os.Stat(so); err == nil {
		return false, "", nil
	}
	tmp := so + fmt.Sprintf(".%d.tmp", os.Getpid())
	cmd := exec.Command(c.Path, append(append(c.args(true), args...), "-o", tmp)...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		os.Remove(tmp)
		return false, out.String(), err
	}
	if err := os.Rename(tmp, so); err != nil {
		return false, "", fmt.Errorf("clang: cache directory: %w", err)
	}
	return true, "", nil
}

// cFormat changes whenever LoadC's build flags change.
const cFormat = "puremetal-c-1"

// LoadC compiles C source into a shared object, kept in the cache
// directory (CacheRoot(cacheDir)) once per source and compiler (Key),
// loads it and returns its dlopen handle. It is for small C helpers that
// sit beside compiled kernels, such as Objective-C method implementations a
// Go callback cannot provide.
func LoadC(source, cacheDir string) (uintptr, error) {
	c, err := Find()
	if err != nil {
		return 0, err
	}
	sum := sha256.Sum256([]byte(cFormat + "\n" + c.Key() + "\n" + source))
	key := hex.EncodeToString(sum[:])[:32]
	dir := filepath.Join(CacheRoot(cacheDir), "c")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, fmt.Errorf("clang: cache directory: %w", err)
	}
	so := filepath.Join(dir, key+".so")
	src := filepath.Join(dir, key+".c")
	if _, err := os.Stat(so); err != nil {
		if err := WriteFileAtomic(src, []byte(source)); err != nil {
			return 0, fmt.Errorf("clang: cache directory: %w", err)
		}
	}
	if _, log, err := c.BuildShared(dir, so, "-x", "c", "-O2", "-fPIC", "-shared", "-nostdlib++", "-fno-color-diagnostics", src); err != nil {
		return 0, fmt.Errorf("clang: compiling C source %s: %v\n%s", src, err, log)
	}
	h, err := purego.Dlopen(so, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return 0, fmt.Errorf("clang: loading %s: %w", so, err)
	}
	return h, nil
}
