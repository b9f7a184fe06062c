package emu_test

import (
	"strings"
	"testing"

	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/objc"
)

// Preprocessor macros and function constants through package mtl, as a
// program sets them on Apple's Metal: MTLCompileOptions.preprocessorMacros,
// MTLFunctionConstantValues and newFunctionWithName:constantValues:error:.
const specializeSrc = `#include <metal_stdlib>
using namespace metal;
constant uint  FC_mult  [[function_constant(0)]];
constant bool  FC_add   [[function_constant(1)]];
constant short FC_extra [[function_constant(2)]];
constant bool  has_extra = is_function_constant_defined(FC_extra);

kernel void specialized(device uint* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    uint v = i * FC_mult;
    if (FC_add) v += OFFSET;
    if (has_extra) v += uint(FC_extra) << 16;
    out[i] = v;
}
`

func TestFunctionConstantsThroughMTL(t *testing.T) {
	g := newGPU(t, orders[2])
	lib, err := g.D.NewLibraryWithSource(specializeSrc, mtl.CompileOptions{PreprocessorMacros: map[string]string{"OFFSET": "1000u"}})
	if err != nil {
		t.Fatal(err)
	}
	defer lib.Release()
	const n = 45
	out, got := buffer[uint32](g, n)
	run := func(values *mtl.FunctionConstantValues, want func(i uint32) uint32) {
		t.Helper()
		p := testdevice.LibraryPipeline(t, g.D, lib, "specialized", values)
		defer p.Release()
		poisonU32(got)
		completed(t, g.run(func(enc *mtl.ComputeCommandEncoder) {
			enc.SetComputePipelineState(p)
			enc.SetBuffer(out, 0, 0)
			enc.DispatchThreads(size1(n), size1(16))
		}))
		for i, v := range got {
			if w := want(uint32(i)); v != w {
				t.Fatalf("out[%d] = %d, want %d", i, v, w)
			}
		}
	}
	var byIndex mtl.FunctionConstantValues
	if err := byIndex.SetAtIndex(0, uint32(3)); err != nil {
		t.Fatal(err)
	}
	if err := byIndex.SetAtIndex(1, true); err != nil {
		t.Fatal(err)
	}
	run(&byIndex, func(i uint32) uint32 { return 3*i + 1000 })

	var byName mtl.FunctionConstantValues
	for _, s := range []struct {
		name  string
		value any
	}{{"FC_mult", uint32(7)}, {"FC_add", false}, {"FC_extra", int16(5)}} {
		if err := byName.SetWithName(s.name, s.value); err != nil {
			t.Fatal(err)
		}
	}
	run(&byName, func(i uint32) uint32 { return 7*i + 5<<16 })

	// a required constant without a value
	var partial mtl.FunctionConstantValues
	partial.SetAtIndex(0, uint32(1))
	if fn, err := lib.NewFunctionWithConstants("specialized", &partial); err == nil || !strings.Contains(err.Error(), "needs a value for function constant FC_add (index 1, bool)") {
		if fn != nil {
			fn.Release()
		}
		t.Errorf("specializing without FC_add: %v, want an error naming FC_add", err)
	}
	// a value of the wrong type
	var wrong mtl.FunctionConstantValues
	wrong.SetAtIndex(0, float32(1))
	wrong.SetAtIndex(1, true)
	if fn, err := lib.NewFunctionWithConstants("specialized", &wrong); err == nil || !strings.Contains(err.Error(), "the constant is a uint; the value given is a float") {
		if fn != nil {
			fn.Release()
		}
		t.Errorf("specializing with a float for a uint: %v, want a type error", err)
	}
	if err := wrong.SetAtIndex(0, 1.5); err == nil || !strings.Contains(err.Error(), "float64") {
		t.Errorf("SetAtIndex(float64) = %v, want an error naming float64", err)
	}
	// the function without constant values makes no pipeline
	fn, err := lib.NewFunction("specialized")
	if err != nil {
		t.Fatal(err)
	}
	defer fn.Release()
	if p, err := g.D.NewComputePipelineState(fn); err == nil || !strings.Contains(err.Error(), "FC_mult (index 0), FC_add (index 1)") {
		if p != nil {
			p.Release()
		}
		t.Errorf("pipeline of the unspecialized function: %v, want an error naming its constants", err)
	}
	if fn, err := lib.NewFunctionWithConstants("missing", &byIndex); err == nil || !strings.Contains(err.Error(), `no function "missing"`) {
		if fn != nil {
			fn.Release()
		}
		t.Errorf("specializing a missing function: %v", err)
	}
}

// MTLCompileOptions.preprocessorMacros may hold NSNumber values as well as
// NSString ones (Apple's API takes either): the emulated device reads a
// number as its stringValue.
func TestPreprocessorMacroNumbers(t *testing.T) {
	g := newGPU(t, orders[0])
	sels := func(name string) objc.SEL { return objc.RegisterName(name) }
	var names []string
	objc.WithAutoreleasePool(func() {
		seven := objc.GetClass("NSNumber").Send(sels("numberWithInt:"), 7)
		key, err := objc.NewNSString("N")
		if err != nil {
			t.Fatal(err)
		}
		defer key.Release()
		dict := objc.GetClass("NSDictionary").Send(sels("dictionaryWithObject:forKey:"), uintptr(seven), uintptr(key))
		opts := objc.GetClass("MTLCompileOptions").New()
		defer opts.Release()
		opts.Send(sels("setPreprocessorMacros:"), uintptr(dict))
		src, err := objc.NewNSString("#define NAME(n) KERNEL(n)\n#define KERNEL(n) kernel void k_##n(device int* x [[buffer(0)]]) { x[0] = n; }\nNAME(N)\n")
		if err != nil {
			t.Fatal(err)
		}
		defer src.Release()
		nserr := new(objc.ID)
		lib := g.D.ID().Send(sels("newLibraryWithSource:options:error:"), uintptr(src), uintptr(opts), objc.Pointer(nserr))
		if lib == 0 {
			t.Fatalf("newLibraryWithSource:options:error: failed: %v", objc.ErrorFromNSError(*nserr))
		}
		defer lib.Release()
		arr := lib.Send(sels("functionNames"))
		for i := range int(arr.SendWord(sels("count"))) {
			names = append(names, objc.GoString(arr.Send(sels("objectAtIndex:"), uintptr(i))))
		}
	})
	if len(names) != 1 || names[0] != "k_7" {
		t.Fatalf("functions %v, want [k_7] (N defined as the NSNumber 7)", names)
	}
}
