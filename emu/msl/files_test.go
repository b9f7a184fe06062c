package msl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeTree writes files (path relative to dir: contents) under a new
// temporary directory and returns it.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, s := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// A library built from a folder of sources, as xcrun metal -I does: a
// quoted include beside the including file, angle and quoted includes
// through IncludeDirs, a header included twice under #pragma once and one
// under an include guard.
func TestCompileFileIncludes(t *testing.T) {
	needClang(t)
	dir := writeTree(t, map[string]string{
		"proj/lib/defs.h": "#pragma once\nconstant constexpr uint SCALE = 3;\n",
		"proj/lib/ops.h": `#ifndef OPS_H
#define OPS_H
#include "defs.h"
inline uint scaled(uint x) { return x * SCALE; }
#endif
`,
		"proj/kernels/k.metal": `#include <metal_stdlib>
#include "lib/defs.h"
#include <lib/ops.h>
#include "lib/ops.h"
#include "local.h"
using namespace metal;
kernel void k(device uint* out [[buffer(0)]], uint i [[thread_position_in_grid]]) { out[i] = scaled(i) + OFFSET; }
`,
		"proj/kernels/local.h": "#pragma once\n#define OFFSET 5u\n",
	})
	root := filepath.Join(dir, "proj")
	lib, err := CompileFile(filepath.Join(root, "kernels", "k.metal"), CompileOptions{IncludeDirs: []string{root}, CacheDir: testCacheDir})
	if err != nil {
		logCompileError(t, err)
		t.FailNow()
	}
	wantU32(t, "k", runU32(t, lib, "k", 40), func(i int) uint32 { return uint32(3*i + 5) })
}

// Diagnostics name the header and line of the error, by the path given in
// IncludeDirs, and a fault in a header's function names its line.
func TestCompileFileDiagnostics(t *testing.T) {
	needClang(t)
	dir := writeTree(t, map[string]string{
		"inc/bad.h":  "#pragma once\n\ninline uint f(uint x) { return x + undeclared_name; }\n",
		"inc/oob.h":  "#pragma once\n\n\ninline void put(device uint* p, uint i) { p[i + 1000] = 1; }\n",
		"bad.metal":  "#include <metal_stdlib>\n#include \"bad.h\"\nkernel void k(device uint* o [[buffer(0)]]) { o[0] = f(1); }\n",
		"oob.metal":  "#include <metal_stdlib>\n#include \"oob.h\"\nkernel void k(device uint* o [[buffer(0)]], uint i [[thread_position_in_grid]]) { put(o, i); }\n",
		"miss.metal": "#include <metal_stdlib>\n\n#include \"missing.h\"\n",
	})
	old, _ := os.Getwd()
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(old)
	opts := CompileOptions{IncludeDirs: []string{"inc"}, CacheDir: testCacheDir}

	_, err := CompileFile("bad.metal", opts)
	ce := errorAs[*CompileError](t, err, "compiling bad.metal succeeded")
	if ce.File != "inc/bad.h" || ce.Line != 3 || !strings.Contains(ce.Log, "inc/bad.h:3:") || !strings.Contains(ce.Log, "undeclared_name") {
		t.Errorf("error at %s:%d, want inc/bad.h:3; log:\n%s", ce.File, ce.Line, ce.Log)
	}
	if strings.Contains(ce.Log, "__pm") || strings.Contains(ce.Log, "<translated>") {
		t.Errorf("the log shows the translation:\n%s", ce.Log)
	}

	_, err = CompileFile("miss.metal", opts)
	ce = errorAs[*CompileError](t, err, "compiling miss.metal succeeded")
	if ce.File != "miss.metal" || ce.Line != 3 || !strings.Contains(ce.Log, "'missing.h' file not found") {
		t.Errorf("error at %s:%d, want miss.metal:3, file not found; log:\n%s", ce.File, ce.Line, ce.Log)
	}

	lib, err := CompileFile("oob.metal", opts)
	if err != nil {
		logCompileError(t, err)
		t.FailNow()
	}
	out := newMem(t, 4*32)
	d := &Dispatch{Grid: ThreadsGrid([3]int{32, 1, 1}, [3]int{32, 1, 1})}
	d.Buffers[0] = out.binding()
	_, err = functionT(t, lib, "k").Run(d)
	ke := kernelErrorT(t, err)
	if ke.File != "inc/oob.h" || ke.Line != 4 {
		t.Errorf("fault at %s:%d, want inc/oob.h:4 (%v)", ke.File, ke.Line, ke)
	}

	if _, err := CompileFile("bad.metal", CompileOptions{IncludeDirs: []string{"nowhere"}, CacheDir: testCacheDir}); err == nil || !strings.Contains(err.Error(), "nowhere is not a directory") {
		t.Errorf("IncludeDirs naming no directory: got %v", err)
	}
}

// Compile, like Metal's newLibraryWithSource:options:error:, includes no
// file of the program without IncludeDirs, even one in the working
// directory.
func TestCompileRefusesIncludesWithoutDirs(t *testing.T) {
	needClang(t)
	dir := writeTree(t, map[string]string{"h.h": "#define X 1\n"})
	old, _ := os.Getwd()
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(old)
	_, err := Compile("#include <metal_stdlib>\n#include \"h.h\"\n", CompileOptions{CacheDir: testCacheDir})
	if err == nil || !strings.Contains(err.Error(), "#include of h.h is not supported by the emulated device") {
		t.Errorf("got %v, want the include refused", err)
	}
}

// Apple's MetalPerformancePrimitives (Metal 4 tensor operations, MLX's
// *_nax kernels) are refused by name, with include directories too.
func TestCompileFileRefusesPerformancePrimitives(t *testing.T) {
	needClang(t)
	dir := writeTree(t, map[string]string{
		"nax.h":   "#pragma once\n#include <metal_tensor>\n#include <MetalPerformancePrimitives/MetalPerformancePrimitives.h>\n",
		"k.metal": "#include <metal_stdlib>\n#include \"nax.h\"\n",
	})
	_, err := CompileFile(filepath.Join(dir, "k.metal"), CompileOptions{IncludeDirs: []string{dir}, CacheDir: testCacheDir})
	ce := errorAs[*CompileError](t, err, "compiling an include of metal_tensor succeeded")
	if !strings.Contains(ce.Log, "#include of metal_tensor is not supported by the emulated device") || !strings.HasSuffix(ce.File, "nax.h") || ce.Line != 2 {
		t.Errorf("error at %s:%d:\n%s", ce.File, ce.Line, ce.Log)
	}
}
