package msl_test

import (
	"fmt"
	"unsafe"

	"github.com/puremetal/puremetal/emu/msl"
	"golang.org/x/sys/unix"
)

// Compile a kernel and run one dispatch over memory outside the Go heap.
func Example() {
	lib, err := msl.Compile(`#include <metal_stdlib>
using namespace metal;

kernel void square(device float* x [[buffer(0)]],
                   uint i [[thread_position_in_grid]]) {
    x[i] = x[i] * x[i];
}
`, msl.CompileOptions{FastMath: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	f, err := lib.Function("square")
	if err != nil {
		fmt.Println(err)
		return
	}
	mem, err := unix.Mmap(-1, 0, 4*100, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer unix.Munmap(mem)
	x := unsafe.Slice((*float32)(unsafe.Pointer(&mem[0])), 100)
	for i := range x {
		x[i] = float32(i)
	}
	d := &msl.Dispatch{Grid: msl.ThreadsGrid([3]int{100, 1, 1}, [3]int{32, 1, 1})}
	d.Buffers[0] = msl.Binding{Ptr: uintptr(unsafe.Pointer(&mem[0])), Len: len(mem)}
	counters, err := f.Run(d)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(x[7], counters.Loaded[0], counters.Stored[0])
	// Output: 49 400 400
}

// Specialize a kernel with function constants, as
// newFunctionWithName:constantValues:error: does, and read back the
// constants it uses.
func ExampleLibrary_Specialize() {
	lib, err := msl.Compile(`#include <metal_stdlib>
using namespace metal;
constant uint scale [[function_constant(0)]];
constant bool offset_given [[function_constant(1)]];

kernel void fill(device uint* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    x[i] = i * scale + (is_function_constant_defined(offset_given) && offset_given ? 100 : 0);
}
`, msl.CompileOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	f, err := lib.Specialize("fill", []msl.ConstantValue{{Index: 0, Type: "uint", Bytes: []byte{3, 0, 0, 0}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, c := range f.Constants {
		fmt.Println(c.Name, c.Index, c.Type, c.Required)
	}
	mem, err := unix.Mmap(-1, 0, 4*8, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer unix.Munmap(mem)
	d := &msl.Dispatch{Grid: msl.ThreadsGrid([3]int{8, 1, 1}, [3]int{8, 1, 1})}
	d.Buffers[0] = msl.Binding{Ptr: uintptr(unsafe.Pointer(&mem[0])), Len: len(mem)}
	if _, err := f.Run(d); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(unsafe.Slice((*uint32)(unsafe.Pointer(&mem[0])), 8))
	// Output:
	// scale 0 uint true
	// offset_given 1 bool false
	// [0 3 6 9 12 15 18 21]
}
