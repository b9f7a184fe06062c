package msl

import (
	"math"
	"strings"
	"testing"
	"unsafe"

	"github.com/puremetal/puremetal/half"
)

// mat is a column-major matrix of c columns and r rows: e[i*r+j] is
// column i, row j, as Metal lays out matrix<T, C, R>.
type mat struct {
	c, r int
	e    []float32
}

func (m mat) at(i, j int) float32 { return m.e[i*m.r+j] }

// elem is the arithmetic of a matrix element type: every operation
// rounds its float32 result to the type (the explicit float32
// conversions keep Go from fusing a multiply and an add).
type elem struct {
	name  string
	round func(float32) float32
}

var (
	elemFloat = elem{"float", func(x float32) float32 { return x }}
	elemHalf  = elem{"half", func(x float32) float32 { return half.ToFloat16(x).Float32() }}
)

func (t elem) mul(a, b float32) float32 { return t.round(float32(a * b)) }
func (t elem) add(a, b float32) float32 { return t.round(float32(a + b)) }
func (t elem) sub(a, b float32) float32 { return t.round(float32(a - b)) }

func (t elem) elementwise(a, b mat, f func(x, y float32) float32) mat {
	r := mat{a.c, a.r, make([]float32, len(a.e))}
	for k := range a.e {
		r.e[k] = f(a.e[k], b.e[k])
	}
	return r
}

func (t elem) scale(a mat, s float32) mat {
	r := mat{a.c, a.r, make([]float32, len(a.e))}
	for k := range a.e {
		r.e[k] = t.mul(a.e[k], s)
	}
	return r
}

// mulVec is m * v: the columns weighted by v's components, summed in
// column order.
func (t elem) mulVec(m mat, v []float32) []float32 {
	r := make([]float32, m.r)
	for j := range r {
		r[j] = t.mul(m.at(0, j), v[0])
		for k := 1; k < m.c; k++ {
			r[j] = t.add(r[j], t.mul(m.at(k, j), v[k]))
		}
	}
	return r
}

// vecMul is v * m: v's dot product with each column, in row order.
func (t elem) vecMul(v []float32, m mat) []float32 {
	r := make([]float32, m.c)
	for i := range r {
		r[i] = t.mul(v[0], m.at(i, 0))
		for k := 1; k < m.r; k++ {
			r[i] = t.add(r[i], t.mul(v[k], m.at(i, k)))
		}
	}
	return r
}

func (t elem) mulMat(a, b mat) mat {
	r := mat{b.c, a.r, nil}
	for j := 0; j < b.c; j++ {
		r.e = append(r.e, t.mulVec(a, b.e[j*b.r:(j+1)*b.r])...)
	}
	return r
}

func transposed(m mat) mat {
	r := mat{m.r, m.c, make([]float32, len(m.e))}
	for i := 0; i < m.c; i++ {
		for j := 0; j < m.r; j++ {
			r.e[j*r.r+i] = m.at(i, j)
		}
	}
	return r
}

// det expands along the first of the columns cols over the given rows,
// as the emulated device's determinant does.
func (t elem) det(m mat, col int, rows []int) float32 {
	if len(rows) == 2 {
		return t.sub(t.mul(m.at(col, rows[0]), m.at(col+1, rows[1])), t.mul(m.at(col+1, rows[0]), m.at(col, rows[1])))
	}
	var s float32
	for j := range rows {
		var sub []int
		for k, r := range rows {
			if k != j {
				sub = append(sub, r)
			}
		}
		p := t.mul(m.at(col, rows[j]), t.det(m, col+1, sub))
		switch {
		case j == 0:
			s = p
		case j%2 == 1:
			s = t.sub(s, p)
		default:
			s = t.add(s, p)
		}
	}
	return s
}

// matrixOpsSrc computes, for float and half, every matrix operator and
// function on matrices read from in (converted to the element type) and
// writes the results' elements to out in column order.
const matrixOpsSrc = mslPrelude + `
template <typename T, int N> vec<T, N> loadv(device const float *in, thread int &p) {
    vec<T, N> v;
    for (int i = 0; i < N; i++) v[i] = T(in[p++]);
    return v;
}
template <typename T, int C, int R> matrix<T, C, R> load(device const float *in, thread int &p) {
    matrix<T, C, R> m;
    for (int i = 0; i < C; i++) m[i] = loadv<T, R>(in, p);
    return m;
}
template <typename T, int N> void putv(device float *out, thread int &q, vec<T, N> v) {
    for (int i = 0; i < N; i++) out[q++] = float(v[i]);
}
template <typename T, int C, int R> void put(device float *out, thread int &q, matrix<T, C, R> m) {
    for (int i = 0; i < C; i++)
        for (int j = 0; j < R; j++) out[q++] = float(m[i][j]);
}
template <typename T, int C, int R> void shape_ops(device const float *in, thread int &p, device float *out, thread int &q) {
    matrix<T, C, R> a = load<T, C, R>(in, p), b = load<T, C, R>(in, p);
    T s = T(in[p++]);
    vec<T, C> v = loadv<T, C>(in, p);
    vec<T, R> w = loadv<T, R>(in, p);
    put(out, q, a + b);
    put(out, q, a - b);
    put(out, q, a * s);
    put(out, q, s * a);
    putv<T, R>(out, q, a * v);
    putv<T, C>(out, q, w * a);
    put(out, q, transpose(a));
    matrix<T, C, R> c = a;
    c += b;
    put(out, q, c);
    c -= a;
    put(out, q, c);
    c *= s;
    put(out, q, c);
}
template <typename T, int K, int C, int R> void product(device const float *in, thread int &p, device float *out, thread int &q) {
    matrix<T, K, R> a = load<T, K, R>(in, p);
    matrix<T, C, K> b = load<T, C, K>(in, p);
    put(out, q, a * b);
}
template <typename T, int N> void square(device const float *in, thread int &p, device float *out, thread int &q) {
    matrix<T, N, N> a = load<T, N, N>(in, p), b = load<T, N, N>(in, p);
    out[q++] = float(determinant(a));
    a *= b;
    put(out, q, a);
}
template <typename T> void all_ops(device const float *in, thread int &p, device float *out, thread int &q) {
    shape_ops<T, 2, 2>(in, p, out, q);
    shape_ops<T, 2, 3>(in, p, out, q);
    shape_ops<T, 3, 4>(in, p, out, q);
    shape_ops<T, 4, 3>(in, p, out, q);
    shape_ops<T, 4, 2>(in, p, out, q);
    shape_ops<T, 4, 4>(in, p, out, q);
    product<T, 3, 4, 2>(in, p, out, q);
    product<T, 2, 3, 3>(in, p, out, q);
    product<T, 2, 2, 4>(in, p, out, q);
    product<T, 4, 4, 4>(in, p, out, q);
    square<T, 2>(in, p, out, q);
    square<T, 3>(in, p, out, q);
    square<T, 4>(in, p, out, q);
}
kernel void ops(device const float *in [[buffer(0)]], device float *out [[buffer(1)]], device int *n [[buffer(2)]]) {
    int p = 0, q = 0;
    all_ops<float>(in, p, out, q);
    all_ops<half>(in, p, out, q);
    n[0] = p;
    n[1] = q;
}
`

// matrixOpsWant is what matrixOpsSrc computes, in the same order and
// rounding.
func matrixOpsWant(in []float32) (want []float32, read int) {
	p := 0
	load := func(t elem, n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = t.round(in[p])
			p++
		}
		return v
	}
	loadMat := func(t elem, c, r int) mat { return mat{c, r, load(t, c*r)} }
	put := func(x ...float32) { want = append(want, x...) }
	for _, t := range []elem{elemFloat, elemHalf} {
		for _, sh := range [][2]int{{2, 2}, {2, 3}, {3, 4}, {4, 3}, {4, 2}, {4, 4}} {
			c, r := sh[0], sh[1]
			a, b := loadMat(t, c, r), loadMat(t, c, r)
			s := load(t, 1)[0]
			v, w := load(t, c), load(t, r)
			sum := t.elementwise(a, b, t.add)
			put(sum.e...)
			put(t.elementwise(a, b, t.sub).e...)
			put(t.scale(a, s).e...)
			put(t.scale(a, s).e...)
			put(t.mulVec(a, v)...)
			put(t.vecMul(w, a)...)
			put(transposed(a).e...)
			put(sum.e...)
			back := t.elementwise(sum, a, t.sub)
			put(back.e...)
			put(t.scale(back, s).e...)
		}
		for _, sh := range [][3]int{{3, 4, 2}, {2, 3, 3}, {2, 2, 4}, {4, 4, 4}} {
			k, c, r := sh[0], sh[1], sh[2]
			a := loadMat(t, k, r)
			b := loadMat(t, c, k)
			put(t.mulMat(a, b).e...)
		}
		for n := 2; n <= 4; n++ {
			a, b := loadMat(t, n, n), loadMat(t, n, n)
			put(t.det(a, 0, []int{0, 1, 2, 3}[:n]))
			put(t.mulMat(a, b).e...)
		}
	}
	return want, p
}

// Every matrix operator (+, -, scalar *, matrix * vector, vector *
// matrix, matrix * matrix, +=, -=, *=) and function (transpose,
// determinant) of Metal, for float and half and several shapes,
// compared with the same arithmetic in Go (each operation rounded to the
// element type, sums in the documented order), bit for bit.
func TestMatrixOperations(t *testing.T) {
	const nIn = 2048
	lib := compileT(t, matrixOpsSrc, CompileOptions{})
	in, out, n := newF32(t, nIn), newF32(t, 4096), newMem(t, 8)
	fillRandom(in.f32(), 41)
	poison(out.f32())
	want, read := matrixOpsWant(in.f32())
	runT(t, functionT(t, lib, "ops"), ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{1, 1, 1}), in, out, n)
	if got := n.i32(); int(got[0]) != read || int(got[1]) != len(want) {
		t.Fatalf("the kernel read %d values and wrote %d; want %d and %d", got[0], got[1], read, len(want))
	}
	got := out.f32()
	bad := 0
	for i, w := range want {
		if math.Float32bits(got[i]) != math.Float32bits(w) {
			if bad++; bad <= 10 {
				t.Errorf("result %d: %v, want %v", i, got[i], w)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d results differ", bad, len(want))
	}
}

// matrixCtorsSrc builds matrices with each of Metal's constructors and
// sets columns and elements through m[i] and m[i][j].
const matrixCtorsSrc = mslPrelude + `
template <typename M> void put(device float *out, thread int &q, M m, int c, int r) {
    for (int i = 0; i < c; i++)
        for (int j = 0; j < r; j++) out[q++] = float(m[i][j]);
}
kernel void ctors(device const float *x [[buffer(0)]], device float *out [[buffer(1)]], device int *n [[buffer(2)]]) {
    int q = 0;
    float2x2 a = float2x2(x[0], x[1], x[2], x[3]);
    put(out, q, a, 2, 2);
    float3x4 b = float3x4(float4(x[0], x[1], x[2], x[3]), float4(x[4], x[5], x[6], x[7]), float4(x[8], x[9], x[10], x[11]));
    put(out, q, b, 3, 4);
    half4x3 c = half4x3(half3(x[0], x[1], x[2]), half3(x[3], x[4], x[5]), half3(x[6], x[7], x[8]), half3(x[9], x[10], x[11]));
    put(out, q, c, 4, 3);
    matrix<float, 2, 4> d(x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7]);
    put(out, q, d, 2, 4);
    put(out, q, float4x4(x[0]), 4, 4);
    put(out, q, half3x2(2), 3, 2);
    put(out, q, half2x3(float2x3(x[0], x[1], x[2], x[3], x[4], x[5])), 2, 3);
    put(out, q, float3x3(half3x3(x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], x[8])), 3, 3);
    float2x2 e = a;
    e[1] = float2(x[12], x[13]);
    e[0][1] = x[14];
    put(out, q, e, 2, 2);
    put(out, q, a, 2, 2);
    matrix<half, 2, 2> f = matrix<half, 2, 2>(half2(1.5h, 2), half2(3, 4));
    put(out, q, f, 2, 2);
    n[0] = q;
}
`

// Metal's matrix constructors: C*R scalars in column order, C column
// vectors, a scalar on the diagonal (zeros elsewhere, square or not),
// conversion between float and half matrices of a shape, copies, and
// assignment to a column and to an element.
func TestMatrixConstructors(t *testing.T) {
	lib := compileT(t, matrixCtorsSrc, CompileOptions{})
	in, out, n := newF32(t, 16), newF32(t, 256), newMem(t, 4)
	fillRandom(in.f32(), 43)
	poison(out.f32())
	runT(t, functionT(t, lib, "ctors"), ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{1, 1, 1}), in, out, n)
	x := in.f32()
	h := elemHalf.round
	var want []float32
	put := func(v ...float32) { want = append(want, v...) }
	put(x[:4]...)
	put(x[:12]...)
	for _, v := range x[:12] {
		put(h(v))
	}
	put(x[:8]...)
	diag := func(c, r int, s float32) {
		for i := 0; i < c; i++ {
			for j := 0; j < r; j++ {
				if i == j {
					put(s)
				} else {
					put(0)
				}
			}
		}
	}
	diag(4, 4, x[0])
	diag(3, 2, 2)
	for _, v := range x[:6] {
		put(h(v))
	}
	for _, v := range x[:9] {
		put(h(v))
	}
	put(x[0], x[14], x[12], x[13])
	put(x[:4]...)
	put(1.5, 2, 3, 4)
	if int(n.i32()[0]) != len(want) {
		t.Fatalf("the kernel wrote %d values, want %d", n.i32()[0], len(want))
	}
	for i, w := range want {
		if g := out.f32()[i]; math.Float32bits(g) != math.Float32bits(w) {
			t.Errorf("value %d: %v, want %v", i, g, w)
		}
	}
}

// specMatrixLayout is the size and alignment of each matrix type in the
// Metal Shading Language specification's table of matrix data types: a
// matrix is C columns, each a vector of R elements with that vector's
// size and alignment.
var specMatrixLayout = []struct {
	name        string
	size, align uint32
}{
	{"half2x2", 8, 4}, {"half2x3", 16, 8}, {"half2x4", 16, 8},
	{"half3x2", 12, 4}, {"half3x3", 24, 8}, {"half3x4", 24, 8},
	{"half4x2", 16, 4}, {"half4x3", 32, 8}, {"half4x4", 32, 8},
	{"float2x2", 16, 8}, {"float2x3", 32, 16}, {"float2x4", 32, 16},
	{"float3x2", 24, 8}, {"float3x3", 48, 16}, {"float3x4", 48, 16},
	{"float4x2", 32, 8}, {"float4x3", 64, 16}, {"float4x4", 64, 16},
}

const matrixLayoutSrc = mslPrelude + `
struct S {
    float a;
    float3x3 m;
    half2x3 h;
    float2x2 f;
};
kernel void layout(device const float3x3 *m [[buffer(0)]], device const S *s [[buffer(1)]], constant float4x4 &c [[buffer(2)]],
                   device float *out [[buffer(3)]], device float3x3 *w [[buffer(4)]], device uint *sz [[buffer(5)]]) {
    int k = 0;
#define L(...) sz[k++] = sizeof(__VA_ARGS__); sz[k++] = alignof(__VA_ARGS__);
    L(half2x2) L(half2x3) L(half2x4) L(half3x2) L(half3x3) L(half3x4) L(half4x2) L(half4x3) L(half4x4)
    L(float2x2) L(float2x3) L(float2x4) L(float3x2) L(float3x3) L(float3x4) L(float4x2) L(float4x3) L(float4x4)
    L(matrix<half, 4, 4>) L(matrix<float, 3, 2>) L(S)
    sz[k++] = __builtin_offsetof(S, m);
    sz[k++] = __builtin_offsetof(S, h);
    sz[k++] = __builtin_offsetof(S, f);
    int q = 0;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) out[q++] = m[1][i][j];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) out[q++] = s->m[i][j];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) out[q++] = s->h[i][j];
    out[q++] = s->f[1][0];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) out[q++] = c[i][j];
    w[1] = m[0] + m[1];
    w[0][2] = float3(1, 2, 3);
}
`

// Matrices in device and constant buffers and in structs are laid out as
// Metal lays them out: sizeof and alignof of every matrix type match the
// specification's table, a struct's matrix members sit at their
// alignment, and a buffer of float3x3 written from Go (columns of 16
// bytes, the fourth float padding) reads back element by element, as
// does one the kernel writes.
func TestMatrixLayout(t *testing.T) {
	lib := compileT(t, matrixLayoutSrc, CompileOptions{})
	ms, s, c, out, w, sz := newMem(t, 2*48), newMem(t, 112), newF32(t, 16), newF32(t, 64), newMem(t, 2*48), newMem(t, 64*4)
	fillRandom(ms.f32(), 47)
	fillRandom(s.f32(), 48)
	fillRandom(c.f32(), 49)
	poison(out.f32())
	poison(w.f32())
	// a float3x3 element (matrix k, column i, row j) is float k*12+i*4+j
	// of a buffer of them; S.m starts at byte 16, S.h (8-byte aligned
	// half3 columns) at 64, S.f at 80.
	d := &Dispatch{Grid: ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{1, 1, 1})}
	for i, m := range []*mem{ms, s, c, out, w, sz} {
		d.Buffers[i] = m.binding()
	}
	if _, err := functionT(t, lib, "layout").Run(d); err != nil {
		t.Fatal(err)
	}
	got := sz.u32()
	for i, l := range specMatrixLayout {
		if got[2*i] != l.size || got[2*i+1] != l.align {
			t.Errorf("%s: sizeof %d, alignof %d; the specification says %d and %d", l.name, got[2*i], got[2*i+1], l.size, l.align)
		}
	}
	rest := got[2*len(specMatrixLayout):]
	for i, w := range []uint32{32, 8, 24, 8, 96, 16, 16, 64, 80} {
		if rest[i] != w {
			t.Errorf("layout value %d after the table (matrix<half, 4, 4>, matrix<float, 3, 2>, struct S): %d, want %d", i, rest[i], w)
		}
	}
	f := out.f32()
	var want []float32
	for i := 0; i < 3; i++ {
		for j := 0; j < 3; j++ {
			want = append(want, ms.f32()[12+4*i+j])
		}
	}
	for i := 0; i < 3; i++ {
		for j := 0; j < 3; j++ {
			want = append(want, s.f32()[4+4*i+j])
		}
	}
	hs := unsafe.Slice((*half.Float16)(unsafe.Pointer(&s.b[64])), 8)
	for i := 0; i < 2; i++ {
		for j := 0; j < 3; j++ {
			want = append(want, hs[4*i+j].Float32())
		}
	}
	want = append(want, s.f32()[20+2])
	want = append(want, c.f32()...)
	for i, v := range want {
		if math.Float32bits(f[i]) != math.Float32bits(v) {
			t.Errorf("element %d read: %v, want %v", i, f[i], v)
		}
	}
	wf := w.f32()
	for i := 0; i < 3; i++ {
		for j := 0; j < 3; j++ {
			if g, v := wf[12+4*i+j], ms.f32()[4*i+j]+ms.f32()[12+4*i+j]; g != v {
				t.Errorf("w[1][%d][%d] = %v, want %v", i, j, g, v)
			}
		}
		if g := wf[8+i]; g != float32(i+1) {
			t.Errorf("w[0][2][%d] = %v, want %d", i, g, i+1)
		}
	}
}

// llamaDequantSrc uses float4x4 as llama.cpp's dequantisers do: a block
// of 4-bit quants and a half scale becomes a float4x4 of 16 values
// (reg[i/4][i%4]), converted by a cast through the template parameter to
// the caller's type4x4 and stored whole; a kernel reads float4x4 rows of
// its input through a pointer and takes dot products of their columns.
const llamaDequantSrc = mslPrelude + `
typedef struct {
    half d;
    uint8_t qs[8];
} block_q4;

template <typename type4x4>
void dequantize_q4(device const block_q4 *xb, short il, thread type4x4 &reg) {
    float4x4 reg_f;
    const float d = xb->d;
    for (int i = 0; i < 16; i++) {
        const uint8_t q = xb->qs[i / 2];
        reg_f[i / 4][i % 4] = d * (float((i % 2 ? q >> 4 : q & 15) ^ il) - 8.0f);
    }
    reg = (type4x4) reg_f;
}

template <typename type4x4, void (*deq)(device const block_q4 *, short, thread type4x4 &)>
kernel void kernel_get_rows(device const block_q4 *src [[buffer(0)]], device type4x4 *dst [[buffer(1)]],
                            uint i [[thread_position_in_grid]]) {
    type4x4 temp;
    deq(src + i, (short)(i % 3), temp);
    dst[i] = temp;
}
template [[host_name("get_rows_f32")]] kernel void kernel_get_rows<float4x4, dequantize_q4>(device const block_q4 *, device float4x4 *, uint);
template [[host_name("get_rows_f16")]] kernel void kernel_get_rows<half4x4, dequantize_q4>(device const block_q4 *, device half4x4 *, uint);

kernel void kernel_dot4x4(device const block_q4 *src [[buffer(0)]], device const float *y [[buffer(1)]], device float *dst [[buffer(2)]],
                          uint i [[thread_position_in_grid]]) {
    float4x4 lx;
    dequantize_q4(src + i, 0, lx);
    device const float4x4 *y4x4 = (device const float4x4 *) y + i;
    dst[i] = dot(lx[0], y4x4[0][0]) + dot(lx[1], y4x4[0][1]) + dot(lx[2], y4x4[0][2]) + dot(lx[3], y4x4[0][3]);
}
`

// A kernel written as llama.cpp's dequantisers are (a float4x4 built
// element by element, converted to half4x4 or kept float4x4 through the
// template parameter, stored whole to device memory; float4x4 rows read
// through a cast pointer) gives the values computed in Go.
func TestMatrixLlamaDequantize(t *testing.T) {
	const n = 37
	lib := compileT(t, llamaDequantSrc, CompileOptions{})
	blocks := newMem(t, n*10)
	r := newF32(t, 9*n)
	fillRandom(r.f32(), 53)
	for b := 0; b < n; b++ {
		*(*half.Float16)(unsafe.Pointer(&blocks.b[10*b])) = half.ToFloat16(r.f32()[b])
		for k := 0; k < 8; k++ {
			blocks.b[10*b+2+k] = byte(math.Float32bits(r.f32()[n+8*b+k]) >> 7)
		}
	}
	value := func(b, i, il int) float32 {
		d := half.Float16(*(*uint16)(unsafe.Pointer(&blocks.b[10*b]))).Float32()
		q := int(blocks.b[10*b+2+i/2])
		if i%2 == 1 {
			q >>= 4
		} else {
			q &= 15
		}
		return float32(d * (float32(q^il) - 8))
	}
	grid := ThreadsGrid([3]int{n, 1, 1}, [3]int{8, 1, 1})
	for _, kind := range []string{"f32", "f16"} {
		size := 4
		if kind == "f16" {
			size = 2
		}
		dst := newMem(t, n*16*size)
		for i := range dst.b {
			dst.b[i] = 0xff
		}
		runT(t, functionT(t, lib, "get_rows_"+kind), grid, blocks, dst)
		for b := 0; b < n; b++ {
			for i := 0; i < 16; i++ {
				w := value(b, i, b%3)
				var g float32
				if kind == "f32" {
					g = dst.f32()[16*b+i]
				} else {
					g, w = half.Float16(dst.u16()[16*b+i]).Float32(), elemHalf.round(w)
				}
				if g != w {
					t.Errorf("get_rows_%s: block %d, element %d (column %d, row %d): %v, want %v", kind, b, i, i/4, i%4, g, w)
				}
			}
		}
	}
	y, dst := newF32(t, 16*n), newF32(t, n)
	fillRandom(y.f32(), 54)
	poison(dst.f32())
	runT(t, functionT(t, lib, "kernel_dot4x4"), grid, blocks, y, dst)
	for b := 0; b < n; b++ {
		var want float32
		for c := 0; c < 4; c++ {
			var s float32
			for j := 0; j < 4; j++ {
				p := float32(value(b, 4*c+j, 0) * y.f32()[16*b+4*c+j])
				if j == 0 {
					s = p
				} else {
					s = float32(s + p)
				}
			}
			want = float32(want + s)
		}
		if g := dst.f32()[b]; g != want {
			t.Errorf("kernel_dot4x4, block %d: %v, want %v", b, g, want)
		}
	}
}

// A program's own names that are also Metal's matrix names' parts (a
// buffer named matrix, a variable matrix_n) still compile.
func TestMatrixNameNotReserved(t *testing.T) {
	src := mslPrelude + "kernel void k(device float* matrix [[buffer(0)]], constant int& n [[buffer(1)]]) {\n int matrix_n = n; if (matrix_n < n) matrix[0] = matrix[1] < 1 ? 1 : 0;\n}\n"
	compileT(t, src, CompileOptions{})
}

// matrixThreadgroupSrc keeps matrices in threadgroup memory the three ways
// llama.cpp's kernels do: a threadgroup float4x4 parameter, a
// threadgroup array declared in the kernel, and a cast of a threadgroup
// half pointer through a template parameter naming the matrix type.
const matrixThreadgroupSrc = mslPrelude + `
template <typename M>
void stash(threadgroup half *shmem, M m, ushort i, ushort n, device float *out) {
    threadgroup M *sm = (threadgroup M *) (shmem + 8);
    sm[i] = m;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    out[i] = float(sm[(i + 1) % n][1][2]);
}
kernel void tg(device const float *in [[buffer(0)]], device float *out [[buffer(1)]], threadgroup float4x4 *tm [[threadgroup(0)]],
               threadgroup half *shmem [[threadgroup(1)]], ushort i [[thread_position_in_threadgroup]], ushort n [[threads_per_threadgroup]]) {
    threadgroup half2x4 tile[4];
    tm[i] = float4x4(in[i]);
    tm[i][3] = float4(in[4 + i]);
    tile[i] = half2x4(half4(in[i]), half4(in[4 + i]));
    threadgroup_barrier(mem_flags::mem_threadgroup);
    ushort j = (i + 1) % n;
    out[i] = tm[j][0][0] + tm[j][3][1];
    out[n + i] = float(tile[j][1][2]);
    stash<half2x4>(shmem, tile[j], i, n, out + 2 * n);
}
kernel void tg_oob(threadgroup float2x2 *tm [[threadgroup(0)]], ushort i [[thread_position_in_threadgroup]]) {
    tm[i + 2][1] = float2(1);
}
`

// Matrices in threadgroup memory (a parameter, an array in the kernel, a
// pointer cast through a template parameter) are stored and loaded whole,
// by column and by element, shared between the threads; an access past
// the threadgroup allocation is still a fault.
func TestMatrixThreadgroup(t *testing.T) {
	lib := compileT(t, matrixThreadgroupSrc, CompileOptions{})
	in, out := newF32(t, 8), newF32(t, 12)
	fillRandom(in.f32(), 59)
	poison(out.f32())
	d := &Dispatch{Grid: ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{4, 1, 1})}
	d.Buffers[0], d.Buffers[1] = in.binding(), out.binding()
	d.ThreadgroupMemoryLength[0], d.ThreadgroupMemoryLength[1] = 4*64, 16+4*16
	if _, err := functionT(t, lib, "tg").Run(d); err != nil {
		t.Fatal(err)
	}
	x, h := in.f32(), elemHalf.round
	for i := 0; i < 4; i++ {
		j := (i + 1) % 4
		for k, w := range []float32{x[j] + x[4+j], h(x[4+j]), h(x[4+(j+1)%4])} {
			if g := out.f32()[4*k+i]; g != w {
				t.Errorf("thread %d, result %d: %v, want %v", i, k, g, w)
			}
		}
	}
	d = &Dispatch{Grid: ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{4, 1, 1})}
	d.ThreadgroupMemoryLength[0] = 4 * 16
	_, err := functionT(t, lib, "tg_oob").Run(d)
	if kernelErrorT(t, err); !strings.Contains(err.Error(), "out-of-bounds threadgroup memory access: store of 8 bytes at threadgroup offset 72") {
		t.Errorf("tm[i + 2][1] past the threadgroup memory: %v, want an out-of-bounds threadgroup memory fault at offset 72", err)
	}
}
