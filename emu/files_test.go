package emu_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/mtl"
)

// A library built from a folder of sources with include directories, as
// xcrun metal -I builds a .metallib, runs through package mtl; an error in
// a header names it; newLibraryWithSource still includes no program file.
func TestNewLibraryWithFile(t *testing.T) {
	g := newGPU(t, emu.Options{})
	dir := t.TempDir()
	for name, text := range map[string]string{
		"inc/scale.h": "#pragma once\nconstant constexpr float SCALE = 3;\n",
		"inc/bad.h":   "#pragma once\n\ninline float f(float x) { return x + nothing; }\n",
		"k.metal":     "#include <metal_stdlib>\n#include \"scale.h\"\n#include <scale.h>\nkernel void k(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) { x[i] *= SCALE; }\n",
		"bad.metal":   "#include <metal_stdlib>\n#include \"bad.h\"\nkernel void k(device float* x [[buffer(0)]]) { x[0] = f(1); }\n",
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	inc := filepath.Join(dir, "inc")
	lib, err := emu.NewLibraryWithFile(g.D, filepath.Join(dir, "k.metal"), emu.FileOptions{IncludeDirs: []string{inc}})
	if err != nil {
		t.Fatal(err)
	}
	defer lib.Release()
	p := testdevice.LibraryPipeline(t, g.D, lib, "k", nil)
	defer p.Release()
	x, xs := buffer[float32](g, 64)
	for i := range xs {
		xs[i] = float32(i)
	}
	completed(t, g.run(func(enc *mtl.ComputeCommandEncoder) {
		enc.SetComputePipelineState(p)
		enc.SetBuffer(x, 0, 0)
		enc.DispatchThreads(size1(64), size1(32))
	}))
	for i, v := range xs {
		if v != 3*float32(i) {
			t.Fatalf("x[%d] = %v, want %v", i, v, 3*float32(i))
		}
	}

	_, err = emu.NewLibraryWithFile(g.D, filepath.Join(dir, "bad.metal"), emu.FileOptions{IncludeDirs: []string{inc}})
	if ce, ok := err.(*mtl.CompileError); !ok || !strings.Contains(ce.Log, filepath.Join(inc, "bad.h")+":3:") {
		t.Errorf("bad.metal: %v, want a compile error at bad.h:3", err)
	}
	if log := g.compileError("#include <metal_stdlib>\n#include \"scale.h\"\n"); !strings.Contains(log, "is not supported by the emulated device") {
		t.Errorf("newLibraryWithSource with an include: %q", log)
	}
}
