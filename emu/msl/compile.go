package msl

import (
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
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/puremetal/puremetal/internal/clang"
)

//go:embed rt/runtime.c rt/include
var rtFiles embed.FS

// formatVersion changes whenever the translation or the build flags change
// in a way the hashed inputs do not show.
const formatVersion = "puremetal-msl-2"

// Library is a compiled, loaded kernel library.
type Library struct {
	path      string
	handle    uintptr
	functions map[string]*Function
	names     []string
	cached    bool
	source    string
	srcPath   string
	opts      CompileOptions
	files     map[string]bool // the program's files (the source and its headers)
	parts     []string        // the files of every part, for a part of a library built in parts
	// lazy: the functions are built by Function, one library each
	lazy    map[string]*entryPoint
	lazyMu  sync.Mutex
	lazyErr map[string]error
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
	// Constants are the function constants the function uses.
	Constants []FunctionConstant
	// Specialized is true for a function of Library.Specialize.
	Specialized bool
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
	modSegs  [maxModuleSegs][2]uint64 // readable segments, loaded
	fileName string
}

// FunctionNames lists the library's functions, sorted.
func (l *Library) FunctionNames() []string { return append([]string(nil), l.names...) }

// Function returns the named function (building it first in a library
// compiled with CompileOptions.Lazy).
func (l *Library) Function(name string) (*Function, error) {
	if l.lazy != nil {
		return l.lazyFunction(name)
	}
	if f, ok := l.functions[name]; ok {
		return f, nil
	}
	return nil, l.noFunction(name)
}

func (l *Library) noFunction(name string) error {
	names := l.names
	if len(names) > 20 {
		names = append(append([]string(nil), names[:20]...), fmt.Sprintf("... (%d in all)", len(l.names)))
	}
	return fmt.Errorf("msl: no function %q in library (functions: %s)", name, strings.Join(names, ", "))
}

// lazyFunction builds the named function of a lazy library once.
func (l *Library) lazyFunction(name string) (*Function, error) {
	l.lazyMu.Lock()
	defer l.lazyMu.Unlock()
	if f, ok := l.functions[name]; ok {
		return f, nil
	}
	if err, ok := l.lazyErr[name]; ok {
		return nil, err
	}
	if _, ok := l.lazy[name]; !ok {
		return nil, l.noFunction(name)
	}
	opts := l.opts
	opts.Lazy = false
	one, err := compile(l.source, l.srcPath, opts, nil, []string{name})
	if err == nil {
		var f *Function
		if f, err = one.Function(name); err == nil {
			l.functions[name] = f
			return f, nil
		}
	}
	l.lazyErr[name] = err
	return nil, err
}

// Cached reports whether Compile found the library in the cache instead of
// running the compiler.
func (l *Library) Cached() bool { return l.cached }

// Path is the file of the compiled library (of its first part, for a
// library built in parts; Function.LibraryPath names each function's).
func (l *Library) Path() string { return l.path }

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
	h.Write(opNamesC())
	return hex.EncodeToString(h.Sum(nil))[:24]
})

// opNamesC is pm_op_names.h, written beside the runtime: the C table of the
// SIMD-group operations' names that its fault messages use, made from
// simdOpNames so that the names have one list.
func opNamesC() []byte {
	var b strings.Builder
	b.WriteString("/* Written by package msl from simdOpNames. */\nstatic const char *const pm_op_names[] = {\"?\"")
	for _, n := range simdOpNames[1:] {
		fmt.Fprintf(&b, ", %q", n)
	}
	b.WriteString("};\n")
	return []byte(b.String())
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
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dir, strings.TrimPrefix(path, "rt")), 0o755) // include/simd
		}
		b, err := rtFiles.ReadFile(path)
		if err != nil {
			return err
		}
		return clang.WriteFileAtomic(filepath.Join(dir, strings.TrimPrefix(path, "rt/")), b)
	})
	if err == nil {
		err = clang.WriteFileAtomic(filepath.Join(dir, "pm_op_names.h"), opNamesC())
	}
	if err == nil {
		err = clang.WriteFileAtomic(filepath.Join(dir, "complete"), nil)
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
	rtDispatch uintptr
	rtModRange uintptr
	rtArenas   uintptr
)

// rtFlags are the runtime's build flags, after the target's.
var rtFlags = []string{"-x", "c", "-std=gnu11", "-O2", "-g", "-fPIC", "-shared", "-nostdlib++",
	"-fvisibility=hidden", "-ftls-model=initial-exec", "-fno-color-diagnostics", "-Werror=implicit-function-declaration"}

// rtLibName is the file of the runtime built by cc in the runtime
// directory: one per compiler and target, since processes of several
// architectures may share the cache.
func rtLibName(cc clang.Compiler) string {
	sum := sha256.Sum256([]byte(cc.Key() + strings.Join(rtFlags, " ")))
	return "libpuremetal_msl_rt-" + hex.EncodeToString(sum[:])[:16] + ".so"
}

func loadRuntime(root string) error {
	rtMu.Lock()
	defer rtMu.Unlock()
	if rtLoaded {
		return nil
	}
	cc, err := clang.Find()
	if err != nil {
		return err
	}
	dir, err := rtDir(root)
	if err != nil {
		return err
	}
	so := filepath.Join(dir, rtLibName(cc))
	args := append(append([]string{}, rtFlags...), "-I", filepath.Join(dir, "include"), filepath.Join(dir, "runtime.c"), "-lpthread")
	if _, log, err := cc.BuildShared("", so, args...); err != nil {
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
	rtLoaded = true
	return nil
}

func languageMacro(v uint32) string {
	if v == 0 {
		return "310"
	}
	return fmt.Sprintf("%d", (v>>16)*100+(v&0xffff)*10)
}

func compileFlags(opts CompileOptions, includeDir string) []string {
	flags := []string{
		// the line tables alone (kernel faults name their line): the
		// level goes last, since -gdwarf-4 alone means -g, which would
		// bring every variable's locations and double the compile time
		"-x", "c++", "-std=c++17", "-O2", "-gdwarf-4", "-gline-tables-only", "-fPIC",
		"-fvisibility=hidden", "-fno-exceptions", "-fno-rtti", "-fno-threadsafe-statics",
		"-fno-math-errno", "-nostdlib++", "-ffp-contract=off", "-fno-color-diagnostics",
		// MSL's char is signed, as C's is on x86-64 but not on arm64 Linux
		"-fsigned-char",
		// inline helper functions, as Apple's compiler does, so that the
		// arrays they take stay in registers instead of going through the
		// access hooks on the stack
		"-mllvm", "-inline-threshold=500",
		// call the runtime (the access hooks at every load and store)
		// through the GOT, without a jump through the PLT
		"-fno-plt",
		// no sibling calls: the runtime tells an access by the return
		// address of its call (a miss of the hooks' fast path, a checked
		// copy), which a jump would leave in the caller's caller
		"-fno-optimize-sibling-calls",
		// keep copy loops as loads and stores (instrumented), not memcpy calls
		"-fno-builtin-memcpy", "-fno-builtin-memmove", "-fno-builtin-memset",
		"-Xclang", "-fnative-half-type", "-Xclang", "-fallow-half-arguments-and-returns",
		"-fsanitize-coverage=func,trace-loads,trace-stores",
		// copies of aggregates (memcpy, memmove and memset intrinsics,
		// which trace-loads and trace-stores leave alone) call the
		// runtime's __asan_memcpy, __asan_memmove and __asan_memset, which
		// check and count both ranges; its callbacks at loads and stores
		// (prelude.h) check the sizes trace-loads and trace-stores leave
		// alone (whole 32-byte vectors); AddressSanitizer instruments
		// nothing else (no stack or globals). It is given to the compiler
		// proper, so that the driver links none of its run-time
		// libraries: the runtime has the functions it calls.
		"-Xclang", "-fsanitize=address",
		"-mllvm", "-asan-instrument-atomics=0", "-mllvm", "-asan-stack=0", "-mllvm", "-asan-globals=0",
		"-mllvm", "-asan-use-after-return=never", "-mllvm", "-asan-instrumentation-with-call-threshold=0",
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

// linkFlags build a kernel library's shared object from the bitcode the
// compile flags give: the optimisation pipeline runs again, now that the
// access hooks' calls are in the code, and inlines their fast path
// (prelude.h) at every access; code generation keeps the compile flags'
// floating-point contraction and records the frame sizes.
func linkFlags(opts CompileOptions) []string {
	flags := []string{"-x", "ir", "-O2", "-fPIC", "-shared", "-nostdlib++", "-ffp-contract=off",
		"-mllvm", "-inline-threshold=500", "-fstack-size-section", "-fno-color-diagnostics"}
	if opts.FastMath {
		flags = append(flags, "-ffast-math")
	}
	return flags
}

// buildLibrary compiles the C++ source src into the shared object so (in
// dir), unless it exists: with the compile flags into bitcode, then with
// linkFlags. A rejected source returns the compiler's log and its
// *exec.ExitError; built tells whether it compiled.
func buildLibrary(cc clang.Compiler, dir, so, src string, flags []string, opts CompileOptions) (built bool, log string, err error) {
	if _, err := os.Stat(so); err == nil {
		return false, "", nil
	}
	slots := buildSlots()
	slots <- struct{}{}
	defer func() { <-slots }()
	tmp, err := os.CreateTemp(dir, filepath.Base(so)+".*.bc")
	if err != nil {
		return false, "", fmt.Errorf("msl: cache directory: %w", err)
	}
	tmp.Close()
	bc := tmp.Name()
	defer os.Remove(bc)
	if _, log, err := cc.Run(dir, append(append([]string{}, flags...), "-c", "-emit-llvm", src, "-o", bc)...); err != nil {
		return false, log, err
	}
	built, log, err = cc.BuildShared(dir, so, append(linkFlags(opts), bc, "-lm")...)
	if err != nil {
		return false, "", fmt.Errorf("linking the compiled kernels: %v\n%s", err, log)
	}
	return built, "", nil
}

// Compile translates a Metal Shading Language source to C++, compiles it
// with clang++ into a shared object and loads it. Results are cached in the
// cache directory by a hash of the source, the runtime, the options, the
// compiler version and the target, so compiling the same source again only
// loads it.
// Compilation errors are *CompileError values; on a system the engine does
// not run on, the error wraps [ErrUnsupportedPlatform]. Function constants have no
// value (is_function_constant_defined is false); Library.Specialize gives
// them values.
func Compile(source string, opts CompileOptions) (*Library, error) {
	return compile(source, "", opts, nil, nil)
}

// CompileFile compiles the Metal source file at path, as Apple's offline
// compiler does (xcrun metal -c path -I dir...): its #include "..."
// directives find files beside the including file first, then in
// opts.IncludeDirs, which #include <...> searches too (Metal's own headers
// come first). Diagnostics and kernel faults name the file and line of
// each part, headers included, by the paths the compiler found them at.
// FileName, when empty, is path. Everything else is as in Compile; the
// library is cached by the preprocessed program, so editing a header
// compiles again.
func CompileFile(path string, opts CompileOptions) (*Library, error) {
	if err := Supported(); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("msl: %w", err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("msl: %w", err)
	}
	if opts.FileName == "" {
		opts.FileName = path
	}
	return compile(string(b), abs, opts, nil, nil)
}

// Specialize returns the named function with its function constants set
// to values, as newFunctionWithName:constantValues:error: does: values are
// matched to the function's constants by index, then by name, and every
// constant the function requires must have one (values for constants the
// function does not use are ignored). The source is compiled again with the
// values, without the other kernels (and cached).
func (l *Library) Specialize(name string, values []ConstantValue) (*Function, error) {
	fs, err := l.SpecializeFunctions([]string{name}, values)
	if err != nil {
		return nil, err
	}
	return fs[0], nil
}

// SpecializeFunctions is Specialize of several functions with the same
// values (as a host gives a kernel family's constants to each of its
// functions), compiled together: one build instead of one per function.
// The functions are returned in the order of names.
func (l *Library) SpecializeFunctions(names []string, values []ConstantValue) ([]*Function, error) {
	if len(names) == 0 {
		return nil, nil
	}
	vs := constantValues(values)
	for _, name := range names {
		var constants []FunctionConstant
		if e, ok := l.lazy[name]; ok {
			constants = e.constants // no need to build the unspecialized function
		} else {
			f, err := l.Function(name)
			if err != nil {
				return nil, err
			}
			constants = f.Constants
		}
		for _, c := range constants {
			v := vs.lookup(c.Index, c.Name)
			if v == nil {
				if c.Required {
					return nil, fmt.Errorf("msl: function %s needs a value for function constant %s (index %d, %s)", name, c.Name, c.Index, c.Type)
				}
				continue
			}
			if _, err := constantLiteral(c.Type, *v); err != nil {
				return nil, fmt.Errorf("msl: function %s: function constant %s (index %d): %v", name, c.Name, c.Index, err)
			}
		}
	}
	opts := l.opts
	opts.Lazy = false
	lib, err := compile(l.source, l.srcPath, opts, values, names)
	if err != nil {
		return nil, err
	}
	fs := make([]*Function, len(names))
	for i, name := range names {
		sf, err := lib.Function(name)
		if err != nil {
			return nil, err
		}
		sf.Specialized = true
		fs[i] = sf
	}
	return fs, nil
}

// compile is Compile with function constant values, of the entry points
// only alone when only is not empty; srcPath, when not empty, is the file
// source was read from (CompileFile).
func compile(source, srcPath string, opts CompileOptions, values []ConstantValue, only []string) (*Library, error) {
	if err := Supported(); err != nil {
		return nil, err
	}
	file := opts.FileName
	if file == "" {
		file = DefaultFileName
	}
	if strings.ContainsAny(file, "\n\"\\") {
		return nil, fmt.Errorf("msl: CompileOptions.FileName %q contains a newline, quote or backslash", file)
	}
	cc, err := clang.Find()
	if err != nil {
		return nil, err
	}
	root := clang.CacheRoot(opts.CacheDir)
	if err := loadRuntime(root); err != nil {
		return nil, err
	}
	dir, err := rtDir(root)
	if err != nil {
		return nil, err
	}
	includeDir := filepath.Join(dir, "include")
	pp, err := preprocess(cc, root, dir, source, srcPath, file, opts)
	if err != nil {
		return nil, err
	}
	tr, err := translateOnly(pp, file, values, only, opts.LanguageVersion)
	if err != nil {
		return nil, err
	}
	if opts.Lazy && len(only) == 0 && values == nil {
		lib := &Library{functions: map[string]*Function{}, source: source, srcPath: srcPath, opts: opts, files: tr.files,
			lazy: map[string]*entryPoint{}, lazyErr: map[string]error{}}
		for i := range tr.entries {
			e := &tr.entries[i]
			lib.lazy[e.name] = e
			lib.names = append(lib.names, e.name)
		}
		sort.Strings(lib.names)
		return lib, nil
	}
	if len(tr.entries) > partEntries {
		return buildParts(cc, root, includeDir, pp, tr, source, srcPath, file, opts, values)
	}
	return build(cc, root, includeDir, tr, source, srcPath, file, opts)
}

// partEntries is the most entry points one compiler run builds. A library
// of more (thousands of instantiations, as MLX's binary.metal has) is built
// in parts of consecutive entry points, each translated with those alone,
// by as many compiler runs at once as GOMAXPROCS allows: the time is that
// of the library's code divided among the cores, the cost each part adds
// that of reading the source again. The parts depend only on the source,
// so they are cached alike on every machine.
const partEntries = 64

// buildSlots bounds the compiler runs building libraries at once, across
// the process, to GOMAXPROCS.
var buildSlots = sync.OnceValue(func() chan struct{} { return make(chan struct{}, runtime.GOMAXPROCS(0)) })

// buildParts builds the translation tr of pp in parts of at most
// partEntries entry points and gathers their functions into one library.
// The whole translation is checked first by the compiler's front end
// alone (checkWhole), so that a compile error anywhere is reported before
// any part is built. A part that fails fails the library with its error
// (the first part's in source order, among those built: no part starts
// after one failed).
func buildParts(cc clang.Compiler, root, includeDir, pp string, tr *translation, source, srcPath, file string, opts CompileOptions, values []ConstantValue) (*Library, error) {
	var parts [][]string
	for i := 0; i < len(tr.entries); i += partEntries {
		var names []string
		for _, e := range tr.entries[i:min(i+partEntries, len(tr.entries))] {
			names = append(names, e.name)
		}
		parts = append(parts, names)
	}
	translatePart := func(i int) (*translation, error) {
		return translateOnly(pp, file, values, parts[i], opts.LanguageVersion)
	}
	if err := checkWhole(cc, root, includeDir, tr, len(parts), translatePart, source, file, opts); err != nil {
		return nil, err
	}
	libs := make([]*Library, len(parts))
	errs := make([]error, len(parts))
	inParallel(len(parts), func(i int) bool {
		part, err := translatePart(i)
		if err == nil {
			libs[i], err = build(cc, root, includeDir, part, source, srcPath, file, opts)
		}
		errs[i] = err
		return err == nil
	})
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	lib := &Library{path: libs[0].path, functions: map[string]*Function{}, cached: true, source: source, srcPath: srcPath, opts: opts, files: tr.files}
	paths := make([]string, len(libs))
	for i, part := range libs {
		paths[i] = part.path
	}
	for _, part := range libs {
		part.parts = paths
		lib.cached = lib.cached && part.cached
		for name, f := range part.functions {
			lib.functions[name] = f
			lib.names = append(lib.names, name)
		}
	}
	sort.Strings(lib.names)
	return lib, nil
}

// inParallel calls do(0), ..., do(n-1) from as many goroutines as
// GOMAXPROCS allows, in order; once a call returns false, no other starts.
func inParallel(n int, do func(i int) bool) {
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	var failed sync.Once
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < min(runtime.GOMAXPROCS(0), n); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				select {
				case <-stop:
					return
				default:
				}
				if !do(i) {
					failed.Do(func() { close(stop) })
				}
			}
		}()
	}
	wg.Wait()
}

// cachedBuild is where the translation tr compiles to in the cache: its
// compile flags, its shared object (which exists when it was built) and
// its C++ source.
type cachedBuild struct {
	flags        []string
	dir, so, src string
}

func cachePaths(cc clang.Compiler, root, includeDir string, tr *translation, opts CompileOptions) cachedBuild {
	flags := compileFlags(opts, includeDir)
	if tr.tgClassesGeneric {
		flags = append(flags, "-D__PM_TG_CLASSES_GENERIC=1")
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s\n%s\n%s\n", formatVersion, rtHash(), cc.Key(), strings.Join(flags, " "), strings.Join(linkFlags(opts), " "))
	h.Write([]byte(tr.cpp))
	key := hex.EncodeToString(h.Sum(nil))[:32]
	dir := filepath.Join(root, "lib", key[:2])
	return cachedBuild{flags: flags, dir: dir, so: filepath.Join(dir, key+".so"), src: filepath.Join(dir, key+".cpp")}
}

// writeSource writes the C++ source of tr to the cache, unless its shared
// object is there.
func (c cachedBuild) writeSource(tr *translation) error {
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return fmt.Errorf("msl: cache directory: %w", err)
	}
	if _, err := os.Stat(c.so); err != nil {
		if err := clang.WriteFileAtomic(c.src, []byte(tr.cpp)); err != nil {
			return fmt.Errorf("msl: cache directory: %w", err)
		}
	}
	return nil
}

// compileError is the error of a compiler run that failed: a
// *CompileError with the compiler's log, in the program's own terms, when
// the compiler rejected the source.
func compileError(cc clang.Compiler, err error, log, src, includeDir, file, source string, tr *translation) error {
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) {
		return fmt.Errorf("msl: running %s: %w", cc.Path, err)
	}
	return newCompileError(originalSnippets(cleanLog(log, src, includeDir), file, source, tr.files), file)
}

// checkWhole checks the whole translation tr of a library built in n
// parts with the compiler's front end alone (-fsyntax-only: parsing and
// instantiating, no code generation), a fraction of the time building
// the parts takes, unless it passed before (a marker in the cache). A
// program it rejects is rejected with its errors, in source order, when
// the parts are compiled as the whole is (their threadgroup classes in the
// same address space, which part(i), the translation of part i, tells);
// otherwise the parts' builds decide.
func checkWhole(cc clang.Compiler, root, includeDir string, tr *translation, n int, part func(i int) (*translation, error), source, file string, opts CompileOptions) error {
	c := cachePaths(cc, root, includeDir, tr, opts)
	checked := strings.TrimSuffix(c.so, ".so") + ".checked"
	if _, err := os.Stat(checked); err == nil {
		touch(checked)
		return nil
	}
	if err := c.writeSource(tr); err != nil {
		return err
	}
	slots := buildSlots()
	slots <- struct{}{}
	_, log, err := cc.Run(c.dir, append(append([]string{}, c.flags...), "-fsyntax-only", c.src)...)
	<-slots
	os.Remove(c.src)
	if err == nil {
		return clang.WriteFileAtomic(checked, nil)
	}
	// a part leaves out the other kernels' bodies: the threadgroup class
	// pointers that decide tgClassesGeneric may be in them
	for i := 0; i < n && !tr.tgClassesGeneric; i++ {
		if p, perr := part(i); perr != nil || p.tgClassesGeneric != tr.tgClassesGeneric {
			return nil
		}
	}
	return compileError(cc, err, log, c.src, includeDir, file, source, tr)
}

// build compiles the translation tr into a shared object in the cache
// (unless it is there) and loads it.
func build(cc clang.Compiler, root, includeDir string, tr *translation, source, srcPath, file string, opts CompileOptions) (*Library, error) {
	c := cachePaths(cc, root, includeDir, tr, opts)
	if err := c.writeSource(tr); err != nil {
		return nil, err
	}
	so := c.so
	built, log, err := buildLibrary(cc, c.dir, so, c.src, c.flags, opts)
	if err != nil {
		return nil, compileError(cc, err, log, c.src, includeDir, file, source, tr)
	}
	cached := !built
	if cached {
		touch(so)
	} else {
		maybePrune(root)
	}
	needs, err := stackNeeds(so, len(tr.entries))
	if err != nil {
		return nil, fmt.Errorf("msl: reading the frame sizes of %s: %w", so, err)
	}
	segs, err := readableSegments(so)
	if err != nil {
		return nil, fmt.Errorf("msl: reading the segments of %s: %w", so, err)
	}
	for i, e := range tr.entries {
		if needs[i] > MaxPrivateBytes {
			return nil, &CompileError{File: file, Line: e.line,
				Log: fmt.Sprintf("%s:%d:%d: error: kernel %s needs %d bytes of stack per thread (private arrays, spilled registers, called functions): more than %d bytes of private memory per thread is not supported by the emulated device",
					e.file, e.line, e.col, e.name, needs[i], MaxPrivateBytes)}
		}
	}
	handle, err := purego.Dlopen(so, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, fmt.Errorf("msl: loading %s: %w", so, err)
	}
	lib := &Library{path: so, handle: handle, functions: map[string]*Function{}, cached: cached, source: source, srcPath: srcPath, opts: opts, files: tr.files}
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
			Constants:                     e.constants,
		}
		if e.maxHelper != "" {
			sym, err := purego.Dlsym(handle, maxTotalSymbol(i))
			if err != nil {
				return nil, fmt.Errorf("msl: %s: max_total_threads_per_threadgroup of %s: %w", so, e.name, err)
			}
			r, _, _ := purego.SyscallN(sym)
			if v := int64(r); v < 1 || v > MaxThreadsPerThreadgroup {
				return nil, &CompileError{File: e.file, Line: e.line,
					Log: fmt.Sprintf("%s:%d: error: max_total_threads_per_threadgroup(%s) of %s is %d, not between 1 and %d", e.file, e.line, e.maxExpr, e.name, v, MaxThreadsPerThreadgroup)}
			}
			f.MaxTotalThreadsPerThreadgroup = int(r)
		}
		refSize, err := purego.Dlsym(handle, refSizeSymbol(i))
		if err != nil {
			return nil, fmt.Errorf("msl: %s: parameter sizes of %s: %w", so, e.name, err)
		}
		for j, p := range e.params {
			if p.Kind == Buffer && p.isRef {
				r, _, _ := purego.SyscallN(refSize, uintptr(j))
				p.Size = int(r)
			}
			f.Params = append(f.Params, p.Param)
		}
		var lo, hi, base uint64
		if r, _, _ := purego.SyscallN(rtModRange, entry, uintptr(unsafe.Pointer(&lo)), uintptr(unsafe.Pointer(&hi)), uintptr(unsafe.Pointer(&base))); int64(r) != 0 {
			return nil, fmt.Errorf("msl: %s: cannot find the loaded library's address range", so)
		}
		f.modLo, f.modHi, f.modBase = lo, hi, base
		for k, s := range segs {
			f.modSegs[k] = [2]uint64{base + s[0], base + s[1]}
		}
		lib.functions[e.name] = f
		lib.names = append(lib.names, e.name)
	}
	sort.Strings(lib.names)
	return lib, nil
}

// preprocessorMacros are the macros Apple's compiler predefines, and the
// user's MTLCompileOptions.preprocessorMacros, as clang arguments.
func preprocessorMacros(opts CompileOptions) ([]string, error) {
	version := languageMacro(opts.LanguageVersion)
	args := []string{"-D__METAL_VERSION__=" + version, "-D__METAL__=1", "-D__METAL_MACOS__=1",
		// the values of metal::thread_scope
		"-D__METAL_MEMORY_SCOPE_DEVICE__=0", "-D__METAL_MEMORY_SCOPE_THREADGROUP__=1",
		"-D__METAL_MEMORY_SCOPE_SIMDGROUP__=4", "-D__METAL_MEMORY_SCOPE_THREAD__=5", "-D__METAL_MEMORY_SCOPE_SYSTEM__=6"}
	if version >= "310" {
		args = append(args, "-D__HAVE_BFLOAT__=1") // bfloat is MSL 3.1's
	}
	names := make([]string, 0, len(opts.PreprocessorMacros))
	for n := range opts.PreprocessorMacros {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		v := opts.PreprocessorMacros[n]
		if !macroName.MatchString(n) {
			return nil, fmt.Errorf("msl: preprocessor macro name %q is not an identifier", n)
		}
		if strings.ContainsAny(v, "\n\r") {
			return nil, fmt.Errorf("msl: the value of preprocessor macro %s contains a line break", n)
		}
		args = append(args, "-D"+n+"="+v)
	}
	return args, nil
}

var macroName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ppHeaders is the include directory of the preprocessing step: for each
// header of the shim, a file that keeps the #include for the compilation
// proper (so the shim's macros do not expand into the source before the
// translator reads it). Its folder is named by a hash of the files it
// holds, so a change to how they are made never reuses a stale copy.
func ppHeaders(dir string) (string, error) {
	files, err := ppHeaderFiles()
	if err != nil {
		return "", fmt.Errorf("msl: cache directory: %w", err)
	}
	return writeHeaders(dir, files)
}

// writeHeaders writes files (by their paths in the folder) into a folder
// of dir named by their hash, unless it is there already, and returns it.
func writeHeaders(dir string, files map[string][]byte) (string, error) {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		fmt.Fprintf(h, "%s %d\n", n, len(files[n]))
		h.Write(files[n])
	}
	pp := filepath.Join(dir, "pp-include-"+hex.EncodeToString(h.Sum(nil))[:16])
	if _, err := os.Stat(filepath.Join(pp, "complete")); err == nil {
		return pp, nil
	}
	for _, n := range names {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(pp, n)), 0o755); err != nil {
			return "", fmt.Errorf("msl: cache directory: %w", err)
		}
		if err := clang.WriteFileAtomic(filepath.Join(pp, n), files[n]); err != nil {
			return "", fmt.Errorf("msl: cache directory: %w", err)
		}
	}
	if err := clang.WriteFileAtomic(filepath.Join(pp, "complete"), nil); err != nil {
		return "", fmt.Errorf("msl: cache directory: %w", err)
	}
	return pp, nil
}

// ppHeaderFiles makes the preprocessing step's headers, by their paths in
// the include directory (simd/simd.h): a line that keeps the #include for
// each header of the shim, or, for TargetConditionals.h, its macros, which
// the preprocessor must see. prelude.h and pm_abi.h are the translation's
// own, never included by a program.
func ppHeaderFiles() (map[string][]byte, error) {
	files := map[string][]byte{}
	err := fs.WalkDir(rtFiles, "rt/include", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		n := strings.TrimPrefix(path, "rt/include/")
		switch n {
		case "prelude.h", "pm_abi.h":
		case "TargetConditionals.h":
			b, err := rtFiles.ReadFile(path)
			if err != nil {
				return err
			}
			files[n] = b
		default:
			files[n] = []byte(ppInclude + " <" + n + ">\n")
		}
		return nil
	})
	return files, err
}

// ppInclude marks, in preprocessed source, an #include of Metal's headers
// that the translator turns back into one.
const ppInclude = "#pragma puremetal include"

var missingInclude = regexp.MustCompile(`fatal error: '([^']*)' file not found`)

// preprocess runs clang's preprocessor over source as Apple's compiler
// would (its predefined macros and the user's), before the translator reads
// it, so that macros, conditionals and macro-declared kernels are expanded.
// The output keeps line markers naming file, which the translator turns
// into #line directives. srcPath, when not empty, is the absolute path
// source was read from: the preprocessor reads that file, so that its
// quoted includes find the files beside it. Results are cached like
// libraries when they depend on source alone (no srcPath, no IncludeDirs).
func preprocess(cc clang.Compiler, root, rt, source, srcPath, file string, opts CompileOptions) (string, error) {
	macros, err := preprocessorMacros(opts)
	if err != nil {
		return "", err
	}
	inc, err := ppHeaders(rt)
	if err != nil {
		return "", err
	}
	args := append([]string{"-E", "-x", "c++", "-std=c++17", "-fsigned-char", "-nostdinc", "-nostdinc++", "-isystem", inc, "-fno-color-diagnostics"}, macros...)
	// paths maps the absolute directories given to clang back to the
	// spelling of the caller's, in line markers and diagnostics
	var paths []string
	for _, d := range opts.IncludeDirs {
		if d == "" || strings.ContainsAny(d, "\n\"") {
			return "", fmt.Errorf("msl: CompileOptions.IncludeDirs: %q is empty or contains a newline or quote", d)
		}
		abs, err := filepath.Abs(d)
		if err != nil {
			return "", fmt.Errorf("msl: CompileOptions.IncludeDirs: %w", err)
		}
		if st, err := os.Stat(abs); err != nil || !st.IsDir() {
			return "", fmt.Errorf("msl: CompileOptions.IncludeDirs: %s is not a directory", d)
		}
		args = append(args, "-I", abs)
		if abs != filepath.Clean(d) {
			paths = append(paths, abs+string(filepath.Separator), filepath.Clean(d)+string(filepath.Separator))
		}
	}
	if srcPath != "" {
		if dir, fdir := filepath.Dir(srcPath), filepath.Dir(file); fdir != dir && filepath.Base(file) == filepath.Base(srcPath) {
			if abs, err := filepath.Abs(fdir); err == nil && abs == dir {
				paths = append(paths, dir+string(filepath.Separator), fdir+string(filepath.Separator))
			}
		}
	}
	cache := srcPath == "" && len(opts.IncludeDirs) == 0
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s\n%s\n%s\n", formatVersion, rtHash(), cc.Key(), strings.Join(args, " "), file)
	h.Write([]byte(source))
	key := hex.EncodeToString(h.Sum(nil))[:32]
	dir := filepath.Join(root, "pp", key[:2])
	out := filepath.Join(dir, key+".ii")
	if cache {
		if b, err := os.ReadFile(out); err == nil {
			return string(b), nil
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("msl: cache directory: %w", err)
	}
	src := srcPath
	if src == "" {
		src = filepath.Join(dir, key+".metal")
		if err := clang.WriteFileAtomic(src, []byte(source)); err != nil {
			return "", fmt.Errorf("msl: cache directory: %w", err)
		}
	}
	text, log, err := cc.Run(dir, append(args, src)...)
	if err != nil {
		var exitErr *exec.ExitError
		if !errors.As(err, &exitErr) {
			return "", fmt.Errorf("msl: running %s: %w", cc.Path, err)
		}
		log = strings.ReplaceAll(log, src, file)
		log = strings.ReplaceAll(log, inc+"/", "")
		log = strings.NewReplacer(paths...).Replace(log)
		if m := missingInclude.FindStringSubmatch(log); m != nil {
			switch {
			case strings.HasPrefix(m[1], "MetalPerformancePrimitives/") || m[1] == "metal_tensor":
				log = missingInclude.ReplaceAllString(log, "error: #include of $1 is not supported by the emulated device (Apple's MetalPerformancePrimitives and Metal 4 tensors)")
			case len(opts.IncludeDirs) == 0 && srcPath == "":
				log = missingInclude.ReplaceAllString(log, "error: #include of $1 is not supported by the emulated device (only Metal's own headers: pass the whole program as one source, or compile a file with CompileFile and CompileOptions.IncludeDirs)")
			}
		}
		return "", newCompileError(log, file)
	}
	pp := strings.ReplaceAll(string(text), strconv.Quote(src), strconv.Quote(file))
	if len(paths) > 0 {
		var r []string
		for i := 0; i < len(paths); i += 2 {
			r = append(r, "\""+paths[i], "\""+paths[i+1])
		}
		pp = strings.NewReplacer(r...).Replace(pp)
	}
	pp = unrollHint.ReplaceAllString(pp, "")
	if cache {
		if err := clang.WriteFileAtomic(out, []byte(pp)); err != nil {
			return "", fmt.Errorf("msl: cache directory: %w", err)
		}
	}
	return pp, nil
}

// unrollHint matches a pragma asking for a loop to be unrolled (#pragma
// unroll, with or without a count, #pragma GCC unroll, #pragma clang loop
// unroll(full) and unroll_count, as MLX's STEEL_PRAGMA_UNROLL expands),
// which preprocess removes, leaving the line empty: unrolling changes no
// result, and on the CPU it only makes a kernel's code many times larger,
// with its access hooks at every copy of a load or store (one MLX
// attention kernel, fully unrolled, takes ten times as long to compile).
// The optimizer still unrolls the loops its own cost model finds worth it.
var unrollHint = regexp.MustCompile(`(?m)^[ \t]*#[ \t]*pragma[ \t]+(unroll\b|GCC[ \t]+unroll\b|clang[ \t]+loop\b[^\n]*\bunroll(_count)?[ \t]*\()[^\n]*$`)

var (
	tgTypedef  = regexp.MustCompile(`'__pm_tgt_\d+' \(aka '([^']*)'\)`)
	tgTypeName = regexp.MustCompile(`__pm_tgt_\d+`)
)

// cleanLog makes a compiler log speak MSL: cache paths become short names,
// clang's address space 3 becomes threadgroup, and the translator's
// threadgroup types show as declared.
func cleanLog(log, src, includeDir string) string {
	log = strings.ReplaceAll(log, src, "<translated>")
	log = ppInclusion.ReplaceAllString(log, "")
	log = strings.ReplaceAll(log, includeDir+"/", "")
	log = strings.ReplaceAll(log, "__attribute__((address_space(3)))", "threadgroup")
	log = strings.ReplaceAll(log, "address space '3'", "the threadgroup address space")
	// clang's spelling of MSL's vector types
	log = extVector.ReplaceAllString(log, "$1$2")
	log = pmExt.ReplaceAllString(log, "vec<$1, $2>")
	log = strings.ReplaceAll(log, "__fp16", "half")
	log = tgTypedef.ReplaceAllString(log, "'$1'")
	log = tgTypeName.ReplaceAllString(log, "threadgroup variable")
	log = vectorCast.ReplaceAllStringFunc(log, func(m string) string {
		g := vectorCast.FindStringSubmatch(m)
		from, to := strings.ReplaceAll(g[3], "__fp16", "half"), strings.ReplaceAll(g[4], "__fp16", "half")
		return fmt.Sprintf("error: a cast from %s%s to %s%s (a conversion in MSL) through a template parameter or a typedef T, (T)x or T(x), is not supported by the emulated device: write %s%s(x)",
			from, g[2], to, g[2], to, g[2])
	})
	return log
}

// ppInclusion is the inclusion of the emulator's <metal_stdlib> by the
// preprocessor's stand-in for it, which the program does not see.
var ppInclusion = regexp.MustCompile(`(?m)^In file included from [^\n]*/pp-include-[0-9a-f]+/[^\n]*\n`)

// extVector is clang's name of an MSL vector type, pmExt the prelude's
// vec<T, N>.
var (
	extVector = regexp.MustCompile(`\b(char|uchar|short|ushort|int|uint|long|ulong|float|half|__fp16|bool) __attribute__\(\(ext_vector_type\((\d)\)\)\)`)
	pmExt     = regexp.MustCompile(`__pm_ext<([a-z_0-9 ]+), (\d)>`)
)

// vectorCast is clang's error for a C-style or functional cast between
// vector types of different element types, which it takes for a
// reinterpretation; casts that name the vector type ((float4)x, float4(x))
// are conversions in the translation.
var vectorCast = regexp.MustCompile(`error: (C-style cast|) from vector '[^']*' \(vector of (\d+) '([^']*)' values\) to vector '[^']*' \(vector of \d+ '([^']*)' values\) of different size`)
