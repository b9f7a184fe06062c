package msl

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

//go:embed rt/runtime.c rt/include
var rtFiles embed.FS

// formatVersion changes whenever the translation or the build flags change
// in a way the hashed inputs do not show.
const formatVersion = "puremetal-msl-1"

// Library is a compiled, loaded kernel library.
type Library struct {
	path      string
	handle    uintptr
	functions map[string]*Function
	names     []string
	cached    bool
}

// Function is a kernel entry point of a Library.
type Function struct {
	// Name is the Metal function name (the host_name of an instantiation).
	Name   string
	Params []Param
	// MaxTotalThreadsPerThreadgroup is 1024, or the kernel's
	// [[max_total_threads_per_threadgroup(n)]].
	MaxTotalThreadsPerThreadgroup int
	// ThreadExecutionWidth is the SIMD-group width, 32.
	ThreadExecutionWidth int
	// PrivateBytes is the stack one thread of the kernel needs, in bytes:
	// the frames of the kernel and of the functions it calls, as compiled
	// for the CPU (private arrays, spilled registers). It is at most
	// MaxPrivateBytes.
	PrivateBytes int

	lib      *Library
	entry    uintptr
	modLo    uint64
	modHi    uint64
	modBase  uint64
	fileName string
}

// FunctionNames lists the library's functions, sorted.
func (l *Library) FunctionNames() []string { return append([]string(nil), l.names...) }

// Function returns the named function.
func (l *Library) Function(name string) (*Function, error) {
	if f, ok := l.functions[name]; ok {
		return f, nil
	}
	return nil, fmt.Errorf("msl: no function %q in library (functions: %s)", name, strings.Join(l.names, ", "))
}

// Cached reports whether Compile found the library in the cache instead of
// running the compiler.
func (l *Library) Cached() bool { return l.cached }

// Path is the file of the compiled library.
func (l *Library) Path() string { return l.path }

// toolchain facts, found once.
var (
	clangOnce    sync.Once
	clangPath    string
	clangVersion string
	clangErr     error
)

func findClang() (string, string, error) {
	clangOnce.Do(func() {
		p, err := exec.LookPath("clang++")
		if err != nil {
			clangErr = errors.New("msl: clang++ not found in PATH; the emulated Metal device compiles kernels with clang (Debian/Ubuntu: apt-get install clang)")
			return
		}
		out, err := exec.Command(p, "--version").Output()
		if err != nil {
			clangErr = fmt.Errorf("msl: %s --version: %v", p, err)
			return
		}
		clangPath, clangVersion = p, string(out)
	})
	return clangPath, clangVersion, clangErr
}

func cacheRoot(dir string) (string, error) {
	if dir != "" {
		return dir, nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	return filepath.Join(base, "puremetal", "msl"), nil
}

// rtHash identifies the embedded runtime, prelude and shim.
var rtHash = sync.OnceValue(func() string {
	h := sha256.New()
	h.Write([]byte(formatVersion))
	_ = fs.WalkDir(rtFiles, "rt", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, _ := rtFiles.ReadFile(path)
		fmt.Fprintf(h, "%s %d\n", path, len(b))
		h.Write(b)
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))[:24]
})

// writeFileAtomic writes data to path through a temporary file and rename,
// so concurrent processes never see a partial file.
func writeFileAtomic(path string, data []byte) error {
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

// rtDir writes the embedded runtime sources under root and returns their
// directory.
func rtDir(root string) (string, error) {
	dir := filepath.Join(root, "rt-"+rtHash())
	if _, err := os.Stat(filepath.Join(dir, "complete")); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(filepath.Join(dir, "include"), 0o755); err != nil {
		return "", fmt.Errorf("msl: cache directory: %w", err)
	}
	err := fs.WalkDir(rtFiles, "rt", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := rtFiles.ReadFile(path)
		if err != nil {
			return err
		}
		return writeFileAtomic(filepath.Join(dir, strings.TrimPrefix(path, "rt/")), b)
	})
	if err == nil {
		err = writeFileAtomic(filepath.Join(dir, "complete"), nil)
	}
	if err != nil {
		return "", fmt.Errorf("msl: cache directory: %w", err)
	}
	return dir, nil
}

// the runtime shared object, loaded once per process
var (
	rtMu       sync.Mutex
	rtLoaded   bool
	rtHandle   uintptr
	rtDispatch uintptr
	rtModRange uintptr
	rtArenas   uintptr
)

const rtLibName = "libpuremetal_msl_rt.so"

func loadRuntime(root string) error {
	rtMu.Lock()
	defer rtMu.Unlock()
	if rtLoaded {
		return nil
	}
	clang, _, err := findClang()
	if err != nil {
		return err
	}
	dir, err := rtDir(root)
	if err != nil {
		return err
	}
	so := filepath.Join(dir, rtLibName)
	if _, log, err := buildShared(clang, "", so, "-x", "c", "-std=gnu11", "-O2", "-g", "-fPIC", "-shared", "-nostdlib++",
		"-fvisibility=hidden", "-ftls-model=initial-exec", "-fno-color-diagnostics", "-Werror",
		"-I", filepath.Join(dir, "include"), filepath.Join(dir, "runtime.c"), "-lpthread"); err != nil {
		return fmt.Errorf("msl: building the runtime failed: %v\n%s", err, log)
	}
	h, err := purego.Dlopen(so, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return fmt.Errorf("msl: loading the runtime %s: %w", so, err)
	}
	sym := func(name string) (uintptr, error) {
		p, err := purego.Dlsym(h, name)
		if err != nil {
			return 0, fmt.Errorf("msl: runtime symbol %s: %w", name, err)
		}
		return p, nil
	}
	if rtDispatch, err = sym("pm_dispatch"); err != nil {
		return err
	}
	if rtModRange, err = sym("pm_module_range"); err != nil {
		return err
	}
	if rtArenas, err = sym("pm_arena_stats"); err != nil {
		return err
	}
	sizeFn, err := sym("pm_desc_size")
	if err != nil {
		return err
	}
	if n, _, _ := purego.SyscallN(sizeFn); n != unsafe.Sizeof(pmDesc{}) {
		return fmt.Errorf("msl: runtime descriptor is %d bytes, Go mirror %d", n, unsafe.Sizeof(pmDesc{}))
	}
	rtHandle = h
	rtLoaded = true
	return nil
}

// buildShared runs clang with args to build the shared object so, unless
// the cache already holds it. It builds into a file of this process's own
// and renames it into place, so processes sharing the cache never load a
// partial file. built tells whether it compiled; log is the compiler's
// output when it failed.
func buildShared(clang, dir, so string, args ...string) (built bool, log string, err error) {
	if _, err := os.Stat(so); err == nil {
		return false, "", nil
	}
	tmp := so + fmt.Sprintf(".%d.tmp", os.Getpid())
	cmd := exec.Command(clang, append(args, "-o", tmp)...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		os.Remove(tmp)
		return false, out.String(), err
	}
	if err := os.Rename(tmp, so); err != nil {
		return false, "", fmt.Errorf("msl: cache directory: %w", err)
	}
	return true, "", nil
}

// LoadC compiles C source into a shared object, kept in the cache folder
// (CompileOptions.CacheDir; empty means the default) once per source and
// compiler version, loads it and returns its dlopen handle. It is for small
// C helpers that sit beside compiled kernels, such as Objective-C method
// implementations a Go callback cannot provide.
func LoadC(source, cacheDir string) (uintptr, error) {
	clang, version, err := findClang()
	if err != nil {
		return 0, err
	}
	root, err := cacheRoot(cacheDir)
	if err != nil {
		return 0, err
	}
	sum := sha256.Sum256([]byte(formatVersion + "\n" + version + "\n" + source))
	key := hex.EncodeToString(sum[:])[:32]
	dir := filepath.Join(root, "c")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, fmt.Errorf("msl: cache directory: %w", err)
	}
	so := filepath.Join(dir, key+".so")
	src := filepath.Join(dir, key+".c")
	if _, err := os.Stat(so); err != nil {
		if err := writeFileAtomic(src, []byte(source)); err != nil {
			return 0, fmt.Errorf("msl: cache directory: %w", err)
		}
	}
	if _, log, err := buildShared(clang, dir, so, "-x", "c", "-O2", "-fPIC", "-shared", "-nostdlib++", "-fno-color-diagnostics", src); err != nil {
		return 0, fmt.Errorf("msl: compiling C source %s: %v\n%s", src, err, log)
	}
	h, err := purego.Dlopen(so, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return 0, fmt.Errorf("msl: loading %s: %w", so, err)
	}
	return h, nil
}

func languageMacro(v uint32) string {
	if v == 0 {
		return "310"
	}
	return fmt.Sprintf("%d", (v>>16)*100+(v&0xffff)*10)
}

func compileFlags(opts CompileOptions, includeDir string) []string {
	flags := []string{
		"-x", "c++", "-std=c++17", "-O2", "-gline-tables-only", "-gdwarf-4", "-fPIC", "-shared",
		"-fvisibility=hidden", "-fno-exceptions", "-fno-rtti", "-fno-threadsafe-statics",
		"-fno-math-errno", "-nostdlib++", "-mllvm", "-inline-threshold=2000",
		"-ffp-contract=off", "-fno-color-diagnostics",
		// keep copy loops as loads and stores (instrumented), not memcpy calls
		"-fno-builtin-memcpy", "-fno-builtin-memmove", "-fno-builtin-memset",
		"-Xclang", "-fnative-half-type", "-Xclang", "-fallow-half-arguments-and-returns",
		"-fsanitize-coverage=func,trace-loads,trace-stores",
		// integer division faults and array indices out of bounds call the
		// runtime's handlers; signed overflow otherwise wraps, as on the GPU
		"-fwrapv", "-fsanitize=integer-divide-by-zero,signed-integer-overflow,array-bounds",
		"-fno-sanitize-recover=all",
		// frame sizes, read back to check them against the fiber stacks
		"-fstack-size-section",
		"-nostdinc++", "-isystem", includeDir, "-include", "prelude.h",
		"-Wno-unknown-attributes", "-Wno-duplicate-decl-specifier", "-Wno-unused-value",
		"-Werror=vla-extension", "-Werror=vla",
		"-D__METAL_VERSION__=" + languageMacro(opts.LanguageVersion), "-D__METAL__=1",
	}
	if opts.FastMath {
		flags = append(flags, "-ffast-math")
	}
	return flags
}

// Compile translates a Metal Shading Language source to C++, compiles it
// with clang++ into a shared object and loads it. Results are cached in the
// cache directory by a hash of the source, the runtime, the options and the
// compiler version, so compiling the same source again only loads it.
// Compilation errors are *CompileError values.
func Compile(source string, opts CompileOptions) (*Library, error) {
	file := opts.FileName
	if file == "" {
		file = DefaultFileName
	}
	if strings.ContainsAny(file, "\n\"\\") {
		return nil, fmt.Errorf("msl: CompileOptions.FileName %q contains a newline, quote or backslash", file)
	}
	clang, version, err := findClang()
	if err != nil {
		return nil, err
	}
	tr, err := translate(source, file)
	if err != nil {
		return nil, err
	}
	root, err := cacheRoot(opts.CacheDir)
	if err != nil {
		return nil, err
	}
	if err := loadRuntime(root); err != nil {
		return nil, err
	}
	dir, err := rtDir(root)
	if err != nil {
		return nil, err
	}
	includeDir := filepath.Join(dir, "include")
	flags := compileFlags(opts, includeDir)

	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s\n%s\n", formatVersion, rtHash(), version, strings.Join(flags[:len(flags)], " "))
	h.Write([]byte(tr.cpp))
	key := hex.EncodeToString(h.Sum(nil))[:32]
	libDir := filepath.Join(root, "lib", key[:2])
	if err := os.MkdirAll(libDir, 0o755); err != nil {
		return nil, fmt.Errorf("msl: cache directory: %w", err)
	}
	so := filepath.Join(libDir, key+".so")
	src := filepath.Join(libDir, key+".cpp")
	if _, err := os.Stat(so); err != nil {
		if err := writeFileAtomic(src, []byte(tr.cpp)); err != nil {
			return nil, fmt.Errorf("msl: cache directory: %w", err)
		}
	}
	built, log, err := buildShared(clang, libDir, so, append(append([]string{}, flags...), src, "-lm")...)
	if err != nil {
		var exitErr *exec.ExitError
		if !errors.As(err, &exitErr) {
			return nil, fmt.Errorf("msl: running %s: %w", clang, err)
		}
		return nil, newCompileError(cleanLog(log, src, includeDir), file)
	}
	cached := !built
	needs, err := stackNeeds(so, len(tr.entries))
	if err != nil {
		return nil, fmt.Errorf("msl: reading the frame sizes of %s: %w", so, err)
	}
	for i, e := range tr.entries {
		if needs[i] > MaxPrivateBytes {
			return nil, &CompileError{File: file, Line: e.line,
				Log: fmt.Sprintf("%s:%d: error: kernel %s needs %d bytes of stack per thread (private arrays, spilled registers, called functions), more than the %d the emulator gives a thread", file, e.line, e.name, needs[i], MaxPrivateBytes)}
		}
	}
	handle, err := purego.Dlopen(so, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, fmt.Errorf("msl: loading %s: %w", so, err)
	}
	lib := &Library{path: so, handle: handle, functions: map[string]*Function{}, cached: cached}
	for i, e := range tr.entries {
		entry, err := purego.Dlsym(handle, entrySymbol(i))
		if err != nil {
			return nil, fmt.Errorf("msl: %s: entry point of %s: %w", so, e.name, err)
		}
		f := &Function{
			Name:                          e.name,
			MaxTotalThreadsPerThreadgroup: e.maxTotal,
			ThreadExecutionWidth:          ThreadExecutionWidth,
			PrivateBytes:                  needs[i],
			lib:                           lib,
			entry:                         entry,
			fileName:                      file,
		}
		for _, p := range e.params {
			f.Params = append(f.Params, p.Param)
		}
		var lo, hi, base uint64
		if r, _, _ := purego.SyscallN(rtModRange, entry, uintptr(unsafe.Pointer(&lo)), uintptr(unsafe.Pointer(&hi)), uintptr(unsafe.Pointer(&base))); int64(r) != 0 {
			return nil, fmt.Errorf("msl: %s: cannot find the loaded library's address range", so)
		}
		f.modLo, f.modHi, f.modBase = lo, hi, base
		lib.functions[e.name] = f
		lib.names = append(lib.names, e.name)
	}
	sort.Strings(lib.names)
	return lib, nil
}

var (
	tgTypedef  = regexp.MustCompile(`'__pm_tgt_\d+' \(aka '([^']*)'\)`)
	tgTypeName = regexp.MustCompile(`__pm_tgt_\d+`)
)

// cleanLog makes a compiler log speak MSL: cache paths become short names,
// clang's address space 3 becomes threadgroup, and the translator's
// threadgroup types show as declared.
func cleanLog(log, src, includeDir string) string {
	log = strings.ReplaceAll(log, src, "<translated>")
	log = strings.ReplaceAll(log, includeDir+"/", "")
	log = strings.ReplaceAll(log, "__attribute__((address_space(3)))", "threadgroup")
	log = strings.ReplaceAll(log, "address space '3'", "the threadgroup address space")
	log = tgTypedef.ReplaceAllString(log, "'$1'")
	log = tgTypeName.ReplaceAllString(log, "threadgroup variable")
	return log
}
