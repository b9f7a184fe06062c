package msl

import (
	"math"
	"testing"
	"unsafe"
)

// A kernel written as llama.cpp's ggml-metal.metal writes them: an
// arguments struct and buffers without index attributes (numbered 0, 1, 2
// in order), char pointers cast to the element type, and built-ins.
const unattributedSrc = mslPrelude + `
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
	src := mslPrelude + `[[kernel]] void custom_kernel_add(const device float* a [[buffer(0)]],
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
	runT(t, functionT(t, lib, "custom_kernel_add"), ThreadsGrid([3]int{50, 1, 1}, [3]int{32, 1, 1}), a, out)
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

// A matrix multiplication in the style of llama.cpp's kernel_mul_mm: an
// arguments struct and unattributed buffers, function constants whose
// index a macro computes (the SIMD-groups per threadgroup, an optional
// bias buffer), threadgroup memory bound by index, and simdgroup_matrix
// tiles staged through threadgroup memory.
const mulMMSrc = mslPrelude + `
#define FC_MUL_MM 100
constant short FC_mul_mm_nsg  [[function_constant(FC_MUL_MM + 0)]];
constant bool  FC_mul_mm_bias [[function_constant(FC_MUL_MM + 1)]];

typedef struct {
    int32_t ne00; // K
    int32_t ne01; // rows of src0
    int32_t ne11; // rows of src1
} kargs_mul_mm;

// dst[r][c] = sum_k src1[r][k] * src0[c][k] (+ bias[c])
kernel void kernel_mul_mm_f32(
        constant kargs_mul_mm & args,
        device const char * src0,
        device const char * src1,
        device       char * dst,
        device const float * bias [[buffer(4), function_constant(FC_mul_mm_bias)]],
        threadgroup  char * shmem [[threadgroup(0)]],
        uint3  tgpig [[threadgroup_position_in_grid]],
        ushort tiitg [[thread_index_in_threadgroup]],
        ushort sgitg [[simdgroup_index_in_threadgroup]]) {
    const int r0 = tgpig.y * 8;                       // rows of src1
    const int c0 = (tgpig.x * FC_mul_mm_nsg + sgitg) * 8; // rows of src0
    device const float * a = (device const float *) src0;
    device const float * b = (device const float *) src1;
    simdgroup_float8x8 mc = make_filled_simdgroup_matrix<float, 8, 8>(0.f);
    for (int k = 0; k < args.ne00; k += 8) {
        simdgroup_float8x8 ma, mb;
        simdgroup_load(mb, b, args.ne00, ulong2(k, r0));
        simdgroup_load(ma, a, args.ne00, ulong2(k, c0), true);
        simdgroup_multiply_accumulate(mc, mb, ma, mc);
    }
    threadgroup float * sc = (threadgroup float *) shmem;
    simdgroup_store(mc, sc + 64 * sgitg, 8);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    device float * d = (device float *) dst;
    for (int i = tiitg; i < 64 * FC_mul_mm_nsg; i += 32 * FC_mul_mm_nsg) {
        const int sg = i / 64, r = (i % 64) / 8, c = i % 8;
        const int col = (tgpig.x * FC_mul_mm_nsg + sg) * 8 + c;
        float v = sc[i];
        if (FC_mul_mm_bias) {
            v += bias[col];
        }
        d[(r0 + r) * args.ne01 + col] = v;
    }
}
`

func TestLlamaStyleMulMM(t *testing.T) {
	lib := compileT(t, mulMMSrc, CompileOptions{})
	const K, M, N, nsg = 24, 32, 16, 2 // src0 M x K, src1 N x K, dst N x M
	for _, bias := range []bool{false, true} {
		f, err := lib.Specialize("kernel_mul_mm_f32", []ConstantValue{
			{Index: 100, Type: "short", Bytes: u16b(nsg)},
			{Index: 101, Type: "bool", Bytes: []byte{map[bool]byte{false: 0, true: 1}[bias]}},
		})
		if err != nil {
			t.Fatal(err)
		}
		args := newMem(t, 12)
		args.i32()[0], args.i32()[1], args.i32()[2] = K, M, N
		a, b, dst, bs := newF32(t, M*K), newF32(t, N*K), newF32(t, N*M), newF32(t, M)
		fillRandom(a.f32(), 51)
		fillRandom(b.f32(), 52)
		fillRandom(bs.f32(), 53)
		poison(dst.f32())
		d := &Dispatch{Grid: ThreadgroupsGrid([3]int{M / (8 * nsg), N / 8, 1}, [3]int{32 * nsg, 1, 1}), Order: Shuffled, Seed: 9}
		d.Buffers[0], d.Buffers[1], d.Buffers[2], d.Buffers[3], d.Buffers[4] = args.binding(), a.binding(), b.binding(), dst.binding(), bs.binding()
		d.ThreadgroupMemoryLength[0] = 4 * 64 * nsg
		if _, err := f.Run(d); err != nil {
			t.Fatal(err)
		}
		for r := 0; r < N; r++ {
			for c := 0; c < M; c++ {
				var s float32
				for k := 0; k < K; k++ {
					s = s + float32(b.f32()[r*K+k]*a.f32()[c*K+k])
				}
				if bias {
					s += bs.f32()[c]
				}
				if g := dst.f32()[r*M+c]; math.Float32bits(g) != math.Float32bits(s) {
					t.Fatalf("bias %v: dst[%d][%d] = %v, want %v", bias, r, c, g, s)
				}
			}
		}
	}
}
