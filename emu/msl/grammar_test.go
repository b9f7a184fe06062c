package msl

import (
	"math"
	"testing"
	"unsafe"
)

// A kernel written as llama.cpp's ggml-metal.metal writes them: an
// arguments struct and buffers without index attributes (numbered 0, 1, 2
// in order), char pointers cast to the element type, and built-ins.
const unattributedSrc = `#include <metal_stdlib>
using namespace metal;

typedef struct {
    int32_t ne00;
    uint64_t nb01;
    float   scale;
} kargs_scale;

kernel void kernel_scale(
        constant kargs_scale & args,
        device const char * src0,
        device       char * dst,
        uint3 tgpig [[threadgroup_position_in_grid]],
        ushort tiitg [[thread_index_in_threadgroup]],
        ushort3 ntg [[threads_per_threadgroup]]) {
    device const float * x = (device const float *) (src0 + tgpig.x * args.nb01);
    device       float * y = (device       float *) (dst  + tgpig.x * args.nb01);
    for (int i = tiitg; i < args.ne00; i += ntg.x) {
        y[i] = x[i] * args.scale;
    }
}
`

func TestUnattributedBuffersRun(t *testing.T) {
	lib := compileT(t, unattributedSrc, CompileOptions{})
	f := functionT(t, lib, "kernel_scale")
	for i, p := range f.Params[:3] {
		if p.Kind != Buffer || p.Index != i {
			t.Fatalf("parameter %s is %s %d, want buffer %d", p.Name, p.Kind, p.Index, i)
		}
	}
	const rows, cols = 5, 37
	type kargs struct {
		ne00  int32
		_     int32
		nb01  uint64
		scale float32
		_     float32
	}
	args := newMem(t, int(unsafe.Sizeof(kargs{})))
	*(*kargs)(unsafe.Pointer(&args.b[0])) = kargs{ne00: cols, nb01: 4 * cols, scale: 0.75}
	src, dst := newF32(t, rows*cols), newF32(t, rows*cols)
	fillRandom(src.f32(), 3)
	poison(dst.f32())
	d := &Dispatch{Grid: ThreadgroupsGrid([3]int{rows, 1, 1}, [3]int{16, 1, 1}), Order: Shuffled, Seed: 5}
	d.Buffers[0], d.Buffers[1], d.Buffers[2] = args.binding(), src.binding(), dst.binding()
	if _, err := f.Run(d); err != nil {
		t.Fatal(err)
	}
	for i, y := range dst.f32() {
		if want := src.f32()[i] * 0.75; math.Float32bits(y) != math.Float32bits(want) {
			t.Fatalf("dst[%d] = %v, want %v", i, y, want)
		}
	}
}

// MLX's generated kernels: [[kernel]] void f(...), and [[host_name]] on a
// plain kernel.
func TestKernelAttributeSpellingsRun(t *testing.T) {
	src := `#include <metal_stdlib>
using namespace metal;
[[kernel]] void custom_kernel_add(const device float* a [[buffer(0)]],
                                  device float* out [[buffer(1)]],
                                  uint index [[thread_position_in_grid]]) {
    out[index] = a[index] + 1.0;
}
[[host_name("exported")]] kernel void internal_name(device uint* out [[buffer(0)]],
                                                    uint i [[thread_position_in_grid]]) {
    out[i] = i + 9;
}
`
	lib := compileT(t, src, CompileOptions{})
	a, out := newF32(t, 50), newF32(t, 50)
	fillRandom(a.f32(), 9)
	poison(out.f32())
	d := &Dispatch{Grid: ThreadsGrid([3]int{50, 1, 1}, [3]int{32, 1, 1})}
	d.Buffers[0], d.Buffers[1] = a.binding(), out.binding()
	if _, err := functionT(t, lib, "custom_kernel_add").Run(d); err != nil {
		t.Fatal(err)
	}
	for i, y := range out.f32() {
		if want := a.f32()[i] + 1; y != want {
			t.Fatalf("out[%d] = %v, want %v", i, y, want)
		}
	}
	if _, err := lib.Function("internal_name"); err == nil {
		t.Fatalf("the kernel is found under its C++ name; it should only be found as its host_name")
	}
	wantU32(t, "exported", runU32(t, lib, "exported", 40), func(i int) uint32 { return uint32(i + 9) })
}
