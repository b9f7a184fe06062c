package msl

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// The corpus tests compile MLX's and ggml's Metal kernels as their builds
// do, from checkouts named by environment variables. The sources are not
// part of this repository, so the tests skip, saying so, when a variable is
// unset (in strict mode too: the corpora are optional).
const (
	mlxDirEnv  = "PUREMETAL_MLX_DIR"  // a checkout of github.com/ml-explore/mlx
	ggmlDirEnv = "PUREMETAL_GGML_DIR" // a checkout of github.com/ggml-org/ggml
)

func corpusDir(t testing.TB, env, probe string) string {
	t.Helper()
	dir := os.Getenv(env)
	if dir == "" {
		t.Skipf("%s is not set (a checkout to compile the kernels of)", env)
	}
	if _, err := os.Stat(filepath.Join(dir, probe)); err != nil {
		t.Fatalf("%s=%s: %v", env, dir, err)
	}
	needClang(t)
	return dir
}

// mlxKernelFiles lists MLX's kernel sources, as paths relative to the
// repository, sorted.
func mlxKernelFiles(t testing.TB, root string) []string {
	t.Helper()
	var files []string
	base := filepath.Join(root, "mlx", "backend", "metal", "kernels")
	err := filepath.WalkDir(base, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".metal") {
			rel, _ := filepath.Rel(root, p)
			files = append(files, rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	return files
}

// mlxOptions are the options of MLX's CMake build (xcrun metal -x metal
// -fno-fast-math -c file -I<repository>), for Metal 3.2 (macOS 15).
func mlxOptions(root string) CompileOptions {
	return CompileOptions{LanguageVersion: 3<<16 | 2, IncludeDirs: []string{root}, CacheDir: corpusCache()}
}

// corpusCache is the cache of the corpus tests: the user's cache, so that a
// second run only loads the large libraries.
func corpusCache() string { return "" }

// ggmlSource is ggml's Metal library as its build embeds it
// (GGML_METAL_EMBED_LIBRARY): ggml-metal.metal with the line naming
// __embed_ggml-common.h__ replaced by ggml-common.h and the line
// #include "ggml-metal-impl.h" by that file, as its CMake's sed commands do.
func ggmlSource(t testing.TB, root string) string {
	t.Helper()
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(root, "src", p))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	src := read("ggml-metal/ggml-metal.metal")
	common, impl := read("ggml-common.h"), read("ggml-metal/ggml-metal-impl.h")
	var b strings.Builder
	for _, line := range strings.SplitAfter(src, "\n") {
		switch {
		case strings.Contains(line, "__embed_ggml-common.h__"):
			b.WriteString(common)
		case strings.Contains(line, `#include "ggml-metal-impl.h"`):
			b.WriteString(impl)
		default:
			b.WriteString(line)
		}
	}
	return b.String()
}

// ggmlOptions are the options ggml's host gives newLibraryWithSource: its
// macros on a GPU with bfloat and without tensor operations, and Metal's
// defaults (fast math, the newest language version).
func ggmlOptions() CompileOptions {
	return CompileOptions{FastMath: true, LanguageVersion: 3<<16 | 2, FileName: "ggml-metal-embed.metal", CacheDir: corpusCache(),
		PreprocessorMacros: map[string]string{"GGML_METAL_HAS_BF16": "1", "GGML_METAL_EMBED_LIBRARY": "1"}}
}

func logCompileError(t testing.TB, err error) {
	t.Helper()
	var ce *CompileError
	if errors.As(err, &ce) {
		// the errors and their notes, without the warnings
		var b strings.Builder
		keep := true
		for _, line := range strings.SplitAfter(ce.Log, "\n") {
			switch {
			case strings.Contains(line, ": warning: "):
				keep = false
			case strings.Contains(line, ": error: ") || strings.Contains(line, ": note: ") && keep:
				keep = true
			}
			if keep {
				b.WriteString(line)
			}
		}
		log := b.String()
		if len(log) > 4000 {
			log = log[:4000] + "\n..."
		}
		t.Errorf("%v\n%s", err, log)
		return
	}
	t.Error(err)
}

// TestCorpusMLXCompile compiles every MLX kernel file with the includes of
// MLX's build, and makes the pipelines of the functions that need function
// constants with the constants MLX's host gives them (mlxHostConstants);
// the *_nax files, which need Apple's MetalPerformancePrimitives, must be
// refused as unsupported.
func TestCorpusMLXCompile(t *testing.T) {
	root := corpusDir(t, mlxDirEnv, "mlx/backend/metal/kernels/utils.h")
	for _, rel := range mlxKernelFiles(t, root) {
		t.Run(strings.TrimSuffix(filepath.Base(rel), ".metal"), func(t *testing.T) {
			start := time.Now()
			lib, err := CompileFile(filepath.Join(root, rel), mlxOptions(root))
			if strings.HasSuffix(rel, "_nax.metal") {
				if err == nil || !strings.Contains(err.Error(), "is not supported by the emulated device") {
					t.Errorf("%s: got %v, want a refusal naming what is not supported", rel, err)
				}
				return
			}
			if err != nil {
				logCompileError(t, err)
				return
			}
			compiled := time.Since(start)
			base := strings.TrimSuffix(filepath.Base(rel), ".metal")
			start = time.Now()
			withHost, sets := hostPipelines(t, lib, base, mlxHostConstants[base])
			t.Logf("%s: %d entry points, %d pipelines without function constants, %d with the host's constants (%s), compiled in %.1fs, specialized in %.1fs",
				rel, len(lib.FunctionNames()), pipelines(t, lib), withHost, sets, compiled.Seconds(), time.Since(start).Seconds())
		})
	}
}

// TestCorpusGGMLCompile compiles ggml's embedded Metal library, and makes
// the pipelines of the functions that need function constants with the
// constants ggml's host gives each family (ggmlHostConstants).
func TestCorpusGGMLCompile(t *testing.T) {
	root := corpusDir(t, ggmlDirEnv, "src/ggml-metal/ggml-metal.metal")
	start := time.Now()
	lib, err := Compile(ggmlSource(t, root), ggmlOptions())
	if err != nil {
		logCompileError(t, err)
		return
	}
	compiled := time.Since(start)
	start = time.Now()
	withHost, other, families := ggmlHostPipelines(t, lib)
	t.Logf("ggml-metal.metal: %d entry points, %d pipelines without function constants, %d with the host's constants (%s), compiled in %.1fs, specialized in %.1fs",
		len(lib.FunctionNames()), pipelines(t, lib), withHost, families, compiled.Seconds(), time.Since(start).Seconds())
	if len(other) > 0 {
		t.Logf("ggml-metal.metal: %d functions need function constants and are of no family listed: %s", len(other), strings.Join(other, " "))
	}
}

// pipelines counts the functions of lib that make a pipeline without
// function constants (the others need the values their hosts give).
func pipelines(t *testing.T, lib *Library) int {
	n := 0
	for _, name := range lib.FunctionNames() {
		f, err := lib.Function(name)
		if err != nil {
			t.Error(err)
			continue
		}
		required := false
		for _, c := range f.Constants {
			required = required || c.Required
		}
		if !required {
			n++
		}
	}
	return n
}
