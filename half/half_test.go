package half

import (
	"math"
	"math/big"
	"math/rand/v2"
	"sort"
	"testing"
)

// format describes one 16-bit format for the exhaustive tests, with
// conversions taken from the package and a value construction that is not.
type format struct {
	name     string
	fracBits int // fraction bits
	bias     int
	narrow   func(float32) uint16
	widen    func(uint16) float32
}

var formats = []format{
	{"float16", 10, 15,
		func(f float32) uint16 { return uint16(ToFloat16(f)) },
		func(h uint16) float32 { return Float16(h).Float32() }},
	{"bfloat16", 7, 127,
		func(f float32) uint16 { return uint16(ToBFloat16(f)) },
		func(h uint16) float32 { return BFloat16(h).Float32() }},
}

func (f format) expMax() int { return 1<<(15-f.fracBits) - 1 } // all-ones exponent field

// value builds the value of bit pattern h from its fields with math.Ldexp:
// (-1)^s * 2^(e - bias) * (1 + frac/2^fracBits), or 2^(1 - bias) *
// frac/2^fracBits for e = 0. isNaN is set for NaNs (value is then NaN).
func (f format) value(h uint16) (v float64, isNaN bool) {
	sign := h >> 15
	e := int(h>>f.fracBits) & f.expMax()
	frac := int(h) & (1<<f.fracBits - 1)
	switch {
	case e == f.expMax() && frac != 0:
		return math.NaN(), true
	case e == f.expMax():
		v = math.Inf(1)
	case e == 0:
		v = math.Ldexp(float64(frac), 1-f.bias-f.fracBits)
	default:
		v = math.Ldexp(float64(1<<f.fracBits+frac), e-f.bias-f.fracBits)
	}
	if sign == 1 {
		v = -v
	}
	return v, false
}

// TestWidenEveryPattern checks all 65536 patterns of each format against
// the construction from sign, exponent and fraction.
func TestWidenEveryPattern(t *testing.T) {
	for _, f := range formats {
		for i := 0; i < 1<<16; i++ {
			h := uint16(i)
			want, nan := f.value(h)
			got := f.widen(h)
			if nan {
				if !math.IsNaN(float64(got)) || math.Float32bits(got)&0x400000 == 0 {
					t.Fatalf("%s %#04x: widened to %#08x, want a quiet NaN", f.name, h, math.Float32bits(got))
				}
				if math.Signbit(float64(got)) != (h>>15 == 1) {
					t.Fatalf("%s %#04x: NaN lost its sign", f.name, h)
				}
				continue
			}
			if float64(got) != want || math.Signbit(float64(got)) != math.Signbit(want) {
				t.Fatalf("%s %#04x: widened to %g, want %g", f.name, h, got, want)
			}
		}
	}
}

// TestNarrowRoundTrip checks that narrowing every widened pattern gives it
// back, and that a NaN narrows to a quiet NaN of its sign.
func TestNarrowRoundTrip(t *testing.T) {
	for _, f := range formats {
		quiet := uint16(1) << (f.fracBits - 1)
		for i := 0; i < 1<<16; i++ {
			h := uint16(i)
			got := f.narrow(f.widen(h))
			if _, nan := f.value(h); nan {
				if _, gotNaN := f.value(got); !gotNaN || got&quiet == 0 || got>>15 != h>>15 {
					t.Fatalf("%s %#04x: NaN narrowed to %#04x, want a quiet NaN of its sign", f.name, h, got)
				}
				if got != h|quiet {
					t.Fatalf("%s %#04x: NaN narrowed to %#04x, want its payload kept: %#04x", f.name, h, got, h|quiet)
				}
				continue
			}
			if got != h {
				t.Fatalf("%s %#04x: round trip gave %#04x", f.name, h, got)
			}
		}
	}
}

// TestNarrowMidpoints checks every midpoint between adjacent non-negative
// values, computed exactly with big.Float, and the float32 values next to
// it on each side, with both signs. The midpoint between the largest
// finite value and 2^(emax+1) rounds to infinity (its even neighbour).
func TestNarrowMidpoints(t *testing.T) {
	for _, f := range formats {
		inf := uint16(f.expMax()) << f.fracBits
		for lo := uint16(0); lo < inf; lo++ {
			hi := lo + 1
			a, _ := f.value(lo)
			b, _ := f.value(hi)
			if hi == inf {
				b = math.Ldexp(1, f.expMax()-f.bias) // where the next binade would start
			}
			mid := new(big.Float).SetPrec(200).Add(big.NewFloat(a), big.NewFloat(b))
			mid.Quo(mid, big.NewFloat(2))
			m, acc := mid.Float32()
			if acc != big.Exact {
				t.Fatalf("%s: midpoint of %#04x and %#04x not a float32", f.name, lo, hi)
			}
			even := lo
			if lo&1 == 1 {
				even = hi
			}
			below := math.Nextafter32(m, 0)
			above := math.Nextafter32(m, float32(math.Inf(1)))
			for _, c := range []struct {
				x    float32
				want uint16
			}{{m, even}, {below, lo}, {above, hi}} {
				if got := f.narrow(c.x); got != c.want {
					t.Fatalf("%s: %g (between %#04x and %#04x) narrowed to %#04x, want %#04x", f.name, c.x, lo, hi, got, c.want)
				}
				if got := f.narrow(-c.x); got != c.want|0x8000 {
					t.Fatalf("%s: %g narrowed to %#04x, want %#04x", f.name, -c.x, got, c.want|0x8000)
				}
			}
		}
	}
}

// TestNarrowNearest checks narrowing of random float32 bit patterns of
// every exponent against a search for the nearest value in a table of the
// format's values (ties to the even pattern; past the largest finite
// value's half step, infinity).
func TestNarrowNearest(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, f := range formats {
		inf := uint16(f.expMax()) << f.fracBits
		table := make([]float64, inf+1) // table[h] is the value of pattern h
		for h := range table[:inf] {
			table[h], _ = f.value(uint16(h))
		}
		table[inf] = math.Ldexp(1, f.expMax()-f.bias)
		for range 1 << 18 {
			x := math.Float32frombits(rng.Uint32())
			if math.IsNaN(float64(x)) {
				continue
			}
			ax := math.Abs(float64(x))
			hi := sort.SearchFloat64s(table, ax) // first value >= ax
			var want uint16
			switch {
			case hi > int(inf):
				want = inf
			case table[hi] == ax || hi == 0:
				want = uint16(hi)
			default:
				lo := hi - 1
				dl, dh := ax-table[lo], table[hi]-ax // exact: neighbours of a float32 within float64
				switch {
				case dl < dh:
					want = uint16(lo)
				case dh < dl:
					want = uint16(hi)
				case lo&1 == 0:
					want = uint16(lo)
				default:
					want = uint16(hi)
				}
			}
			if math.Signbit(float64(x)) {
				want |= 0x8000
			}
			if got := f.narrow(x); got != want {
				t.Fatalf("%s: %g (%#08x) narrowed to %#04x, want %#04x", f.name, x, math.Float32bits(x), got, want)
			}
		}
	}
}

func TestNarrowSpecialValues(t *testing.T) {
	nan := float32(math.NaN())
	cases := []struct {
		x         float32
		f16, bf16 uint16
	}{
		{0, 0, 0},
		{float32(math.Copysign(0, -1)), 0x8000, 0x8000},
		{1, 0x3c00, 0x3f80},
		{-2, 0xc000, 0xc000},
		{65504, 0x7bff, 0x4780},
		{65519.996, 0x7bff, 0x4780},
		{65520, 0x7c00, 0x4780},
		{1e10, 0x7c00, 0x5015},
		{math.MaxFloat32, 0x7c00, 0x7f80},
		{0x1p-24, 0x0001, 0x3380},
		{0x1p-25, 0x0000, 0x3300},
		{0x1.000002p-25, 0x0001, 0x3300},
		{0x1p-14, 0x0400, 0x3880},
		{math.SmallestNonzeroFloat32, 0, 0},
		{float32(math.Inf(-1)), 0xfc00, 0xff80},
	}
	for _, c := range cases {
		if got := uint16(ToFloat16(c.x)); got != c.f16 {
			t.Errorf("ToFloat16(%g) = %#04x, want %#04x", c.x, got, c.f16)
		}
		if got := uint16(ToBFloat16(c.x)); got != c.bf16 {
			t.Errorf("ToBFloat16(%g) = %#04x, want %#04x", c.x, got, c.bf16)
		}
	}
	if !ToFloat16(nan).IsNaN() || !ToBFloat16(nan).IsNaN() {
		t.Errorf("NaN narrowed to %#04x, %#04x: not NaN", ToFloat16(nan), ToBFloat16(nan))
	}
	// A signalling float32 NaN whose payload lies only in the low bits
	// still narrows to a NaN, not to an infinity.
	snan := math.Float32frombits(0x7f800001)
	if !ToFloat16(snan).IsNaN() || !ToBFloat16(snan).IsNaN() {
		t.Errorf("NaN %#08x narrowed to %#04x, %#04x: not NaN", math.Float32bits(snan), ToFloat16(snan), ToBFloat16(snan))
	}
}

func TestSlices(t *testing.T) {
	src := []float32{1, -0.5, 3.14159, 1e-6, 70000, float32(math.Inf(-1))}
	f16 := make([]Float16, len(src))
	u16 := make([]uint16, len(src)+2) // longer than src: only len(src) written
	b16 := make([]BFloat16, len(src)-1)
	if n := NarrowFloat16(f16, src); n != len(src) {
		t.Fatalf("NarrowFloat16 converted %d, want %d", n, len(src))
	}
	if n := NarrowFloat16(u16, src); n != len(src) || u16[len(src)] != 0 {
		t.Fatalf("NarrowFloat16 into []uint16 converted %d, want %d, tail untouched", n, len(src))
	}
	if n := NarrowBFloat16(b16, src); n != len(src)-1 {
		t.Fatalf("NarrowBFloat16 converted %d, want %d (len(dst))", n, len(src)-1)
	}
	bytes16 := make([]byte, 2*len(src))
	bytesB := make([]byte, 2*len(src))
	EncodeFloat16(bytes16, src)
	EncodeBFloat16(bytesB, src)
	back16 := make([]float32, len(src))
	backU := make([]float32, len(src))
	backB := make([]float32, len(src))
	backBytes16 := make([]float32, len(src))
	backBytesB := make([]float32, len(src))
	WidenFloat16(back16, f16)
	WidenFloat16(backU, u16)
	WidenBFloat16(backB, b16)
	if n := DecodeFloat16(backBytes16, bytes16); n != len(src) {
		t.Fatalf("DecodeFloat16 converted %d, want %d", n, len(src))
	}
	if n := DecodeBFloat16(backBytesB, bytesB[:2*len(src)-1]); n != len(src)-1 {
		t.Fatalf("DecodeBFloat16 of an odd byte count converted %d, want %d", n, len(src)-1)
	}
	for i, x := range src {
		w16 := ToFloat16(x)
		if f16[i] != w16 || u16[i] != uint16(w16) || back16[i] != w16.Float32() || backU[i] != w16.Float32() || backBytes16[i] != w16.Float32() {
			t.Errorf("element %d (%g): float16 slices disagree with ToFloat16 = %#04x", i, x, w16)
		}
		if bytes16[2*i] != byte(w16) || bytes16[2*i+1] != byte(w16>>8) {
			t.Errorf("element %d: bytes %#02x %#02x, want little-endian %#04x", i, bytes16[2*i], bytes16[2*i+1], w16)
		}
		if i < len(b16) {
			wb := ToBFloat16(x)
			if b16[i] != wb || backB[i] != wb.Float32() || backBytesB[i] != wb.Float32() {
				t.Errorf("element %d (%g): bfloat16 slices disagree with ToBFloat16 = %#04x", i, x, wb)
			}
		}
	}
	allocs := testing.AllocsPerRun(10, func() {
		NarrowFloat16(f16, src)
		WidenFloat16(back16, f16)
		NarrowBFloat16(u16, src)
		WidenBFloat16(backB, u16)
		EncodeFloat16(bytes16, src)
		DecodeFloat16(back16, bytes16)
		EncodeBFloat16(bytesB, src)
		DecodeBFloat16(backB, bytesB)
	})
	if allocs != 0 {
		t.Errorf("slice conversions allocate %v times per run", allocs)
	}
}

// BenchmarkSlices times the slice conversions over 4096 elements, the
// activations of one 32-head token at D_v = 128.
func BenchmarkSlices(b *testing.B) {
	src := make([]float32, 4096)
	for i := range src {
		src[i] = float32(i)*0.37 - 700
	}
	h := make([]uint16, len(src))
	raw := make([]byte, 2*len(src))
	dst := make([]float32, len(src))
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"NarrowFloat16", func() { NarrowFloat16(h, src) }},
		{"WidenFloat16", func() { WidenFloat16(dst, h) }},
		{"EncodeBFloat16", func() { EncodeBFloat16(raw, src) }},
		{"DecodeBFloat16", func() { DecodeBFloat16(dst, raw) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(4 * len(src)))
			for b.Loop() {
				c.f()
			}
		})
	}
}
