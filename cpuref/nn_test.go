package cpuref

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// close64 reports whether got is within tol of want, relative to max(1, |want|).
func close64(got, want, tol float64) bool {
	return math.Abs(got-want) <= tol*math.Max(1, math.Abs(want))
}

// The hand-computed cases below are exact in float64 up to a few ulps;
// 1e-14 leaves room for those ulps and nothing else.
const handTol = 1e-14

func checkSlice(t *testing.T, name string, got, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", name, len(got), len(want))
	}
	for i := range want {
		if !close64(got[i], want[i], handTol) {
			t.Errorf("%s[%d] = %v, want %v", name, i, got[i], want[i])
		}
	}
}

func TestLinear64(t *testing.T) {
	// x [2][3], W [2][3]: y = x W^T.
	x := []float64{1, 2, 3, -1, 0, 4}
	w := []float64{1, 0, -1, 0.5, 2, 1}
	checkSlice(t, "y", Linear64(x, w, 2, 3), []float64{1 - 3, 0.5 + 4 + 3, -1 - 4, -0.5 + 4})
}

func TestRMSNorm64(t *testing.T) {
	// Row [3, 4]: mean of squares 12.5; eps 0.5 makes it 13.
	x := []float64{3, 4, 0, 2}
	w := []float64{1, 0.5}
	r1, r2 := 1/math.Sqrt(13), 1/math.Sqrt(2.5)
	checkSlice(t, "plain", RMSNorm64(x, w, 0.5, 0), []float64{3 * r1, 4 * r1 * 0.5, 0, 2 * r2 * 0.5})
	checkSlice(t, "zero-centred", RMSNorm64(x, w, 0.5, 1), []float64{3 * r1 * 2, 4 * r1 * 1.5, 0, 2 * r2 * 1.5})
}

func TestActivations64(t *testing.T) {
	for _, c := range []struct{ x, sig float64 }{{0, 0.5}, {math.Log(3), 0.75}, {-math.Log(3), 0.25}, {800, 1}, {-800, 0}} {
		if got := Sigmoid64(c.x); !close64(got, c.sig, handTol) {
			t.Errorf("Sigmoid64(%v) = %v, want %v", c.x, got, c.sig)
		}
		if got, want := SiLU64(c.x), c.x*c.sig; !close64(got, want, handTol) {
			t.Errorf("SiLU64(%v) = %v, want %v", c.x, got, want)
		}
	}
	checkSlice(t, "SwiGLU64", SwiGLU64([]float64{0, math.Log(3)}, []float64{5, 2}), []float64{0, 2 * math.Log(3) * 0.75})
}

func TestSoftmax64(t *testing.T) {
	checkSlice(t, "softmax", Softmax64([]float64{math.Log(1), math.Log(3)}), []float64{0.25, 0.75})
	// Large logits would overflow exp without the max subtracted. d is
	// the stored difference (1000 + log 3 is rounded to 1000's ulp).
	big := 1000 + math.Log(3)
	d := big - 1000
	checkSlice(t, "large", Softmax64([]float64{1000, big}), []float64{1 / (1 + math.Exp(d)), 1 / (1 + math.Exp(-d))})
}

func TestInvFreq(t *testing.T) {
	// Frequency 0 is 1 exactly; each is a float32 value within a float32
	// ulp-scale of the exact theta^(-2i/d) (the rounding HF's float32
	// computation brings, 2^-23 relative per rounding, three roundings).
	for _, c := range []struct {
		d     int
		theta float64
	}{{16, 10000}, {64, 1e6}, {32, 5e6}} {
		f := InvFreq(c.d, c.theta)
		if len(f) != c.d/2 || f[0] != 1 {
			t.Fatalf("InvFreq(%d, %v) = %v", c.d, c.theta, f)
		}
		for i, v := range f {
			if float64(float32(v)) != v {
				t.Errorf("InvFreq(%d, %v)[%d] = %v is not a float32 value", c.d, c.theta, i, v)
			}
			if exact := math.Pow(c.theta, -float64(2*i)/float64(c.d)); math.Abs(v-exact) > 3*0x1p-23*exact {
				t.Errorf("InvFreq(%d, %v)[%d] = %v, exact %v", c.d, c.theta, i, v, exact)
			}
		}
	}
}

func TestRoPE64(t *testing.T) {
	// One token, two heads of 6 dimensions, 4 rotary: pairs (0,2), (1,3).
	f := []float64{0.5, 0.25}
	x := []float64{1, 2, 3, 4, 5, 6, -1, 0, 2, 1, 7, 8}
	want := slices.Clone(x)
	pos := 3
	for h := 0; h < 2; h++ {
		for i := 0; i < 2; i++ {
			a := float64(pos) * f[i]
			u, v := x[h*6+i], x[h*6+i+2]
			want[h*6+i], want[h*6+i+2] = u*math.Cos(a)-v*math.Sin(a), v*math.Cos(a)+u*math.Sin(a)
		}
	}
	RoPE64(x, 2, 6, 4, []int{pos}, f)
	checkSlice(t, "rope", x, want)
	// Position 0 leaves x unchanged; a rotation keeps each pair's norm.
	y := []float64{1, 2, 3, 4}
	RoPE64(y, 1, 4, 4, []int{0}, f)
	checkSlice(t, "pos 0", y, []float64{1, 2, 3, 4})
}

func TestAttention64(t *testing.T) {
	// headDim 1, 2 query heads on 1 KV head: scores q*k_j*scale.
	k := []float64{0, math.Log(3)}
	v := []float64{10, 20}
	q := []float64{1, 2, 1, 0} // token 0 (pos 0): heads 1 and 2; token 1 (pos 1)
	got := Attention64(q, k, v, 2, 1, 1, []int{0, 1}, 1)
	// Token 0 sees key 0 only; token 1 head 0: weights 1:3, head 1: 1:1.
	checkSlice(t, "out", got, []float64{10, 10, 0.25*10 + 0.75*20, 15})
}

func TestAttention64GQA(t *testing.T) {
	// Query head h must read KV head h / (nHeads/nKVHeads): heads 0, 1 see
	// KV head 0, heads 2, 3 KV head 1, told apart by their values.
	rng := rand.New(rand.NewPCG(1, 2))
	const nH, nKV, d, m = 4, 2, 3, 5
	q := make([]float64, nH*d)
	k := make([]float64, m*nKV*d)
	v := make([]float64, m*nKV*d)
	for _, s := range [][]float64{q, k, v} {
		for i := range s {
			s[i] = rng.NormFloat64()
		}
	}
	got := Attention64(q, k, v, nH, nKV, d, []int{m - 1}, 0.5)
	for h := 0; h < nH; h++ {
		kv := h / 2
		kh := make([]float64, m*d)
		vh := make([]float64, m*d)
		for j := 0; j < m; j++ {
			copy(kh[j*d:(j+1)*d], k[(j*nKV+kv)*d:])
			copy(vh[j*d:(j+1)*d], v[(j*nKV+kv)*d:])
		}
		one := Attention64(q[h*d:(h+1)*d], kh, vh, 1, 1, d, []int{m - 1}, 0.5)
		checkSlice(t, "head", got[h*d:(h+1)*d], one)
	}
}

func TestRoute64(t *testing.T) {
	logits := []float64{0, math.Log(4), math.Log(2), math.Log(4), math.Log(1)}
	// p = [1, 4, 2, 4, 1] / 12; experts 1 and 3 tie: the lower first.
	e, w := Route64(logits, 3, false)
	if !slices.Equal(e, []int{1, 3, 2}) {
		t.Fatalf("experts %v, want [1 3 2]", e)
	}
	checkSlice(t, "weights", w, []float64{4.0 / 12, 4.0 / 12, 2.0 / 12})
	_, w = Route64(logits, 3, true)
	checkSlice(t, "normalised", w, []float64{0.4, 0.4, 0.2})
}

func TestDequantize64(t *testing.T) {
	// 4 bits: one row of 8 elements in one word, values 0..7 from the
	// lowest nibble up; two groups of 4 with their own scale and bias.
	words := []uint32{0x76543210}
	got := Dequantize64(words, []float64{2, 0.5}, []float64{-1, 3}, 1, 8, 4, 4)
	checkSlice(t, "4-bit", got, []float64{-1, 1, 3, 5, 3 + 2, 3 + 2.5, 3 + 3, 3 + 3.5})
	// 8 bits, two rows of 4 elements: a word each, group of 4.
	got = Dequantize64([]uint32{0x04030201, 0xff000080}, []float64{1, -1}, []float64{0, 0}, 2, 4, 8, 4)
	checkSlice(t, "8-bit", got, []float64{1, 2, 3, 4, -128, 0, 0, -255})
	// 2 bits: 16 elements of one word.
	got = Dequantize64([]uint32{0xe4e4e4e4}, []float64{1}, []float64{0}, 1, 16, 2, 16)
	checkSlice(t, "2-bit", got, []float64{0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3})
}

// TestReferencesPanicOnBadLengths checks the convention of the model's
// references: inconsistent lengths are a test's programming error and
// panic, naming the operation.
func TestReferencesPanicOnBadLengths(t *testing.T) {
	for name, f := range map[string]func(){
		"Linear64":     func() { Linear64(make([]float64, 5), make([]float64, 6), 2, 3) },
		"RMSNorm64":    func() { RMSNorm64(make([]float64, 5), make([]float64, 2), 1e-6, 0) },
		"SwiGLU64":     func() { SwiGLU64(make([]float64, 2), make([]float64, 3)) },
		"RoPE64":       func() { RoPE64(make([]float64, 8), 1, 8, 8, []int{0}, make([]float64, 3)) },
		"Attention64":  func() { Attention64(make([]float64, 4), make([]float64, 4), make([]float64, 4), 2, 1, 2, []int{2}, 1) },
		"Route64":      func() { Route64(make([]float64, 4), 5, true) },
		"Dequantize64": func() { Dequantize64(make([]uint32, 1), []float64{1}, []float64{0}, 1, 8, 3, 8) },
		"InvFreq":      func() { InvFreq(7, 1e4) },
	} {
		func() {
			defer func() {
				r := recover()
				if s, _ := r.(string); !strings.Contains(s, "cpuref."+name) {
					t.Errorf("%s: recovered %v, want a panic naming cpuref.%s", name, r, name)
				}
			}()
			f()
		}()
	}
}
