package msl

import (
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/half"
)

// SIMD-group matrices as llama.cpp uses them (simdgroup_load and
// simdgroup_store with a row stride, an origin and transposition, from
// device and threadgroup memory) and as MLX's steel GEMM does (each lane's
// thread_elements at the lane's coordinates).
const simdgroupMatrixSrc = `#include <metal_stdlib>
#include <metal_simdgroup_matrix>
using namespace metal;

// D = A * B^T + 0.5 with A read at origin (8, 8) of a 16-wide matrix and B
// transposed, float.
kernel void mma_float(device const float* a [[buffer(0)]],
                      device const float* b [[buffer(1)]],
                      device float* d [[buffer(2)]],
                      ushort lane [[thread_index_in_simdgroup]]) {
    simdgroup_float8x8 A, B;
    simdgroup_load(A, a, 16, ulong2(8, 8));
    simdgroup_load(B, b, 8, 0, true);
    simdgroup_float8x8 C = make_filled_simdgroup_matrix<float, 8, 8>(0.5f);
    simdgroup_float8x8 D;
    simdgroup_multiply_accumulate(D, A, B, C);
    simdgroup_store(D, d, 8);
}

// half through threadgroup memory: D = A * B, stored transposed.
kernel void mma_half(device const float* a [[buffer(0)]],
                     device const float* b [[buffer(1)]],
                     device half* d [[buffer(2)]],
                     ushort lane [[thread_index_in_simdgroup]]) {
    threadgroup half ta[64], tb[64];
    for (ushort i = lane; i < 64; i += 32) { ta[i] = half(a[i]); tb[i] = half(b[i]); }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    simdgroup_half8x8 A, B, D;
    simdgroup_load(A, ta);
    simdgroup_load(B, tb);
    simdgroup_multiply(D, A, B);
    simdgroup_store(D, d, 8, 0, true);
}

// bfloat, MLX style: each lane fills its own elements.
kernel void mma_bfloat(device const bfloat* a [[buffer(0)]],
                       device const bfloat* b [[buffer(1)]],
                       device float* d [[buffer(2)]],
                       ushort lane [[thread_index_in_simdgroup]]) {
    const short qid = lane / 4;
    const short fm = (qid & 4) + ((lane / 2) % 4);
    const short fn = (qid & 2) * 2 + (lane % 2) * 2;
    simdgroup_bfloat8x8 A, B;
    for (short k = 0; k < 2; k++) {
        A.thread_elements()[k] = a[fm * 8 + fn + k];
        B.thread_elements()[k] = b[fm * 8 + fn + k];
    }
    simdgroup_float8x8 D = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
    simdgroup_bfloat8x8 Db;
    simdgroup_multiply(Db, A, B);
    for (short k = 0; k < 2; k++) {
        D.thread_elements()[k] = float(Db.thread_elements()[k]) + 1.0f;
    }
    for (short k = 0; k < 2; k++) {
        d[fm * 8 + fn + k] = D.thread_elements()[k];
    }
}
`

// matmul8 is the product the emulator computes: in float, k in order, one
// rounding per operation, starting from c (or 0).
func matmul8(a, b func(r, c int) float32, c float32) [64]float32 {
	var d [64]float32
	for r := 0; r < 8; r++ {
		for col := 0; col < 8; col++ {
			s := c
			for k := 0; k < 8; k++ {
				s = s + float32(a(r, k)*b(k, col))
			}
			d[r*8+col] = s
		}
	}
	return d
}

func TestSimdgroupMatrix(t *testing.T) {
	lib := compileT(t, simdgroupMatrixSrc, CompileOptions{})
	run := func(name string, a, b, d *mem) {
		t.Helper()
		dd := &Dispatch{Grid: ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{32, 1, 1}), Order: Shuffled, Seed: 3}
		dd.Buffers[0], dd.Buffers[1], dd.Buffers[2] = a.binding(), b.binding(), d.binding()
		if _, err := functionT(t, lib, name).Run(dd); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	t.Run("float", func(t *testing.T) {
		a, b, d := newF32(t, 16*16), newF32(t, 64), newF32(t, 64)
		fillRandom(a.f32(), 31)
		fillRandom(b.f32(), 32)
		poison(d.f32())
		run("mma_float", a, b, d)
		want := matmul8(func(r, c int) float32 { return a.f32()[(8+r)*16+8+c] },
			func(r, c int) float32 { return b.f32()[c*8+r] }, 0.5)
		for i, w := range want {
			if g := d.f32()[i]; math.Float32bits(g) != math.Float32bits(w) {
				t.Fatalf("D[%d][%d] = %v, want %v", i/8, i%8, g, w)
			}
		}
	})
	// small multiples of 1/4: every product and sum is exact in half
	r := rand.New(rand.NewSource(33))
	exact := func(m *mem, scale float32, n int) {
		for i := range m.f32() {
			m.f32()[i] = float32(r.Intn(2*n+1)-n) * scale
		}
	}
	t.Run("half", func(t *testing.T) {
		a, b, d := newF32(t, 64), newF32(t, 64), newMem(t, 2*64)
		exact(a, 0.25, 8)
		exact(b, 0.25, 8)
		for i := range d.u16() {
			d.u16()[i] = 0x7e00
		}
		run("mma_half", a, b, d)
		want := matmul8(func(r, c int) float32 { return a.f32()[r*8+c] }, func(r, c int) float32 { return b.f32()[r*8+c] }, 0)
		for i := 0; i < 64; i++ {
			got := half.Float16(d.u16()[(i%8)*8+i/8]).Float32() // stored transposed
			if got != want[i] {
				t.Fatalf("D[%d][%d] = %v, want %v", i/8, i%8, got, want[i])
			}
		}
	})
	t.Run("bfloat", func(t *testing.T) {
		af, bf := newF32(t, 64), newF32(t, 64)
		exact(af, 0.5, 4)
		exact(bf, 0.5, 4)
		a, b, d := newMem(t, 2*64), newMem(t, 2*64), newF32(t, 64)
		for i := 0; i < 64; i++ {
			a.u16()[i], b.u16()[i] = bfloatRound(af.f32()[i]), bfloatRound(bf.f32()[i])
		}
		poison(d.f32())
		run("mma_bfloat", a, b, d)
		want := matmul8(func(r, c int) float32 { return af.f32()[r*8+c] }, func(r, c int) float32 { return bf.f32()[r*8+c] }, 0)
		for i, w := range want {
			if g := d.f32()[i]; g != w+1 {
				t.Fatalf("D[%d][%d] = %v, want %v", i/8, i%8, g, w+1)
			}
		}
	})
}

func TestSimdgroupMatrixUnsupportedShape(t *testing.T) {
	needClang(t)
	src := mslPrelude + `kernel void k(device float* x [[buffer(0)]]) {
    simdgroup_matrix<float, 4, 4> m;
    simdgroup_load(m, x);
}
`
	_, err := Compile(src, CompileOptions{CacheDir: testCacheDir})
	if err == nil || !strings.Contains(logOf(err), "simdgroup_matrix other than 8x8 is not supported by the emulated device") {
		t.Fatalf("compile of a 4x4 simdgroup_matrix: %v\n%s; want the unsupported-shape message", err, logOf(err))
	}
}
