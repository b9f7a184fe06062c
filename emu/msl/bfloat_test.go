package msl

import (
	"math"
	"math/rand"
	"testing"

	"github.com/puremetal/puremetal/half"
)

// bfloatRound and bfloatValue are package half's conversions, on bits.
func bfloatRound(f float32) uint16 { return uint16(half.ToBFloat16(f)) }

func bfloatValue(b uint16) float32 { return half.BFloat16(b).Float32() }

const bfloatSrc = mslPrelude + `
kernel void bf(device const float* x [[buffer(0)]],
               device const float* y [[buffer(1)]],
               device bfloat* rounded [[buffer(2)]],
               device bfloat* sum [[buffer(3)]],
               device float* widened [[buffer(4)]],
               device bfloat4* v [[buffer(5)]],
               device ushort* bits [[buffer(6)]],
               uint i [[thread_position_in_grid]]) {
    bfloat a = x[i];                  // float -> bfloat
    bfloat b = bfloat(y[i]);
    rounded[i] = a;
    sum[i] = a * b + b;               // each operation rounds to bfloat
    widened[i] = float(a) + 0.25f * y[i];   // exact widening, float math
    bfloat4 q = bfloat4(float4(x[i], y[i], -x[i], 2.0f));
    q = q * bfloat4(a) + b;
    v[i] = bfloat4(float4(q));       // exact both ways
    bits[i] = as_type<ushort>(-a) ^ as_type<ushort>(abs(a)) ^ as_type<ushort>(numeric_limits<bfloat>::max());
}
`

func TestBfloatRoundsToNearestEven(t *testing.T) {
	lib := compileT(t, bfloatSrc, CompileOptions{})
	f := functionT(t, lib, "bf")
	n := 256
	x, y := newF32(t, n), newF32(t, n)
	fillRandom(x.f32(), 11)
	fillRandom(y.f32(), 12)
	// ties, overflow, specials, subnormals
	special := []uint32{0x3f808000, 0x3f818000, 0x3f80ffff, 0x7f7fffff, 0xff7fffff, 0x7f800000, 0xff800000,
		0x7fc00001, 0xffa00000, 0x00000001, 0x80008000, 0x00018000, 0x00000000, 0x80000000}
	for i, s := range special {
		x.f32()[i] = math.Float32frombits(s)
	}
	r := rand.New(rand.NewSource(13))
	for i := len(special); i < 64; i++ {
		// random bit patterns, many of them ties
		x.f32()[i] = math.Float32frombits(r.Uint32()&^0x7fff | uint32(r.Intn(2))<<15)
	}
	rounded, sum, widened, v, bits := newMem(t, 2*n), newMem(t, 2*n), newF32(t, n), newMem(t, 8*n), newMem(t, 2*n)
	for _, m := range []*mem{rounded, sum, v, bits} {
		for i := range m.u16() {
			m.u16()[i] = 0xdead
		}
	}
	poison(widened.f32())
	d := &Dispatch{Grid: ThreadsGrid([3]int{n, 1, 1}, [3]int{64, 1, 1})}
	for i, m := range []*mem{x, y, rounded, sum, widened, v, bits} {
		d.Buffers[i] = m.binding()
	}
	if _, err := f.Run(d); err != nil {
		t.Fatal(err)
	}
	same := func(got, want uint16) bool {
		if math.IsNaN(float64(bfloatValue(want))) {
			return math.IsNaN(float64(bfloatValue(got)))
		}
		return got == want
	}
	mul := func(a, b uint16) uint16 { return bfloatRound(bfloatValue(a) * bfloatValue(b)) }
	add := func(a, b uint16) uint16 { return bfloatRound(bfloatValue(a) + bfloatValue(b)) }
	for i := 0; i < n; i++ {
		xi, yi := x.f32()[i], y.f32()[i]
		a, b := bfloatRound(xi), bfloatRound(yi)
		if got := rounded.u16()[i]; got != a {
			t.Fatalf("bfloat(%#08x) = %#04x, want %#04x", math.Float32bits(xi), got, a)
		}
		if got, want := sum.u16()[i], add(mul(a, b), b); !same(got, want) {
			t.Fatalf("a*b+b at %d = %#04x, want %#04x", i, got, want)
		}
		if got, want := widened.f32()[i], bfloatValue(a)+0.25*yi; math.Float32bits(got) != math.Float32bits(want) && !(math.IsNaN(float64(got)) && math.IsNaN(float64(want))) {
			t.Fatalf("float(a) + 0.25*y at %d = %v, want %v", i, got, want)
		}
		q := [4]uint16{a, b, bfloatRound(-xi), bfloatRound(2)}
		for c := 0; c < 4; c++ {
			want := add(mul(q[c], a), b)
			if got := v.u16()[4*i+c]; !same(got, want) {
				t.Fatalf("bfloat4 component %d at %d = %#04x, want %#04x", c, i, got, want)
			}
		}
		wantBits := (a ^ 0x8000) ^ (a & 0x7fff) ^ 0x7f7f
		if got := bits.u16()[i]; got != wantBits {
			t.Fatalf("sign bits at %d = %#04x, want %#04x", i, got, wantBits)
		}
	}
}

// A bfloat with a float vector (s * v, v * s, v + s, v -= s, v /= s) is a
// float vector: the bfloat becomes a float, as torchao's lowbit kernels
// compute scales[0] * float4(...) with scales a bfloat4.
func TestBfloatWithFloatVector(t *testing.T) {
	const src = mslPrelude + `
kernel void scaled(device const ushort4* s [[buffer(0)]], device const float4* v [[buffer(1)]],
                device float4* out [[buffer(2)]], uint i [[thread_position_in_grid]]) {
    bfloat4 b = as_type<bfloat4>(s[i]);
    float4 x = b[0] * v[i];
    x = x + v[i] * b[1];
    float2 y = v[i].xy - b[2];
    y -= b[3];
    x /= b[3];
    out[i] = x + float4(y, y);
}
`
	const n = 64
	s, v, out := newMem(t, 8*n), newF32(t, 4*n), newF32(t, 4*n)
	fillRandom(v.f32(), 21)
	bf := make([]float32, 4*n)
	fillRandom(bf, 22)
	for i, f := range bf {
		s.u16()[i] = bfloatRound(f)
	}
	poison(out.f32())
	runT(t, functionT(t, compileT(t, src, CompileOptions{LanguageVersion: 3<<16 | 1}), "scaled"), ThreadsGrid([3]int{n, 1, 1}, [3]int{32, 1, 1}), s, v, out)
	for i := 0; i < n; i++ {
		var b [4]float32
		for j := range b {
			b[j] = bfloatValue(s.u16()[4*i+j])
		}
		vi := v.f32()[4*i : 4*i+4]
		y := [2]float32{vi[0] - b[2] - b[3], vi[1] - b[2] - b[3]}
		for j := 0; j < 4; j++ {
			// the conversions keep Go from fusing a product with a sum,
			// which it may on arm64
			x := float32(b[0] * vi[j])
			x = x + float32(vi[j]*b[1])
			x /= b[3]
			if got, want := out.f32()[4*i+j], x+y[j%2]; got != want {
				t.Fatalf("out[%d][%d] = %v, want %v", i, j, got, want)
			}
		}
	}
}

// A bfloat initializing or assigned to an integer variable (uint8_t q =
// b; i = b; i += b) converts to it, truncating toward zero, as MSL
// converts it implicitly; c ? b : 0 stays a bfloat.
func TestBfloatToInteger(t *testing.T) {
	const src = mslPrelude + `
kernel void toint(device const ushort* s [[buffer(0)]], device int* out [[buffer(1)]],
                  uint i [[thread_position_in_grid]], uint count [[threads_per_grid]]) {
    bfloat b = as_type<bfloat>(s[i]);
    uint8_t q = b;
    int n = -b, m;
    m = b;
    short h = b * bfloat(2.0f);
    uint u = b; ushort w = b;
    long l = b;
    l += b;
    bfloat c = i % 2 ? b : 0;
    uint2 g = uint2(i, i + 7);
    uint e = g.y; // a vector's element, an lvalue no reference binds to
    out[6 * i] = q;
    out[6 * i + 1] = n + m;
    out[6 * i + 2] = h;
    out[6 * i + 3] = int(u + w);
    out[6 * i + 4] = int(l);
    out[6 * i + 5] = as_type<ushort>(c);
    out[6 * count + i] = int(e);
}
`
	const n = 64
	s, out := newMem(t, 2*n), newMem(t, 4*7*n)
	for i := range n {
		// values from 0 to 100 with fractions, all exact in bfloat
		s.u16()[i] = bfloatRound(float32(i*3) / 2)
	}
	for i := range out.i32() {
		out.i32()[i] = -12345
	}
	runT(t, functionT(t, compileT(t, src, CompileOptions{LanguageVersion: 3<<16 | 1}), "toint"), ThreadsGrid([3]int{n, 1, 1}, [3]int{32, 1, 1}), s, out)
	for i := range n {
		b := bfloatValue(s.u16()[i])
		tr := int32(b) // Go truncates toward zero, as MSL does
		c := int32(0)
		if i%2 == 1 {
			c = int32(s.u16()[i])
		}
		want := []int32{tr, -tr + tr, int32(bfloatValue(bfloatRound(b * 2))), 2 * tr, 2 * tr, c}
		for k, w := range want {
			if g := out.i32()[6*i+k]; g != w {
				t.Errorf("element %d (bfloat %v), value %d: %d, want %d", i, b, k, g, w)
			}
		}
		if g := out.i32()[6*n+i]; g != int32(i+7) {
			t.Errorf("element %d: an integer from a vector's element: %d, want %d", i, g, i+7)
		}
	}
}
