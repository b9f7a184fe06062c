package msl

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"
)

// Function constants as llama.cpp and MLX use them: declared at file scope
// with an index computed by a macro, tested with
// is_function_constant_defined, used in constant expressions (array sizes,
// template arguments, if constexpr) and derived constants, and optional
// parameters.
const constantsSrc = mslPrelude + `
#define FC_BASE 600
constant short FC_nsg   [[function_constant(FC_BASE + 0)]];
constant bool  FC_bias  [[function_constant(FC_BASE + 1)]];
constant float FC_scale [[function_constant(2)]];
constant half  FC_shift [[function_constant(3)]];
constant int   FC_opt   [[function_constant(4)]];
constant bool  has_opt = is_function_constant_defined(FC_opt);
constant int   FC_other [[function_constant(5)]];

template <short N> int twice() { return 2 * N; }

inline float biased(float x, device const float* b, uint i) {
    if (FC_bias) {
        return x + b[i];
    }
    return x;
}

kernel void fc(device const float* x [[buffer(0)]],
               device float* y [[buffer(1)]],
               device const float* b [[buffer(2), function_constant(FC_bias)]],
               device int* info [[buffer(3)]],
               uint i [[thread_position_in_grid]]) {
    float acc[FC_nsg];
    for (short k = 0; k < FC_nsg; k++) acc[k] = x[i] * (k + 1);
    float s = 0;
    for (short k = 0; k < FC_nsg; k++) s += acc[k];
    y[i] = biased(s * FC_scale, b, i) + float(FC_shift);
    if (i == 0) {
        info[0] = twice<FC_nsg>();
        info[1] = has_opt ? FC_opt : -1;
    }
}

kernel void other(device int* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    out[i] = FC_other;
}
`

func u16b(v uint16) []byte { return binary.LittleEndian.AppendUint16(nil, v) }
func u32b(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }

func TestFunctionConstantsSpecialize(t *testing.T) {
	lib := compileT(t, constantsSrc, CompileOptions{})
	f := functionT(t, lib, "fc")
	got := ""
	for _, c := range f.Constants {
		got += c.Name + ":" + c.Type + ":" + map[bool]string{true: "required", false: "optional"}[c.Required] + " "
	}
	if want := "FC_scale:float:required FC_shift:half:required FC_opt:int:optional FC_nsg:short:required FC_bias:bool:required "; got != want {
		t.Fatalf("constants of fc: %q, want %q", got, want)
	}
	if o := functionT(t, lib, "other"); len(o.Constants) != 1 || o.Constants[0].Name != "FC_other" {
		t.Fatalf("constants of other: %+v, want FC_other only", o.Constants)
	}

	const n = 70
	run := func(values []ConstantValue) ([]float32, []int32, []float32, []float32) {
		t.Helper()
		sf, err := lib.Specialize("fc", values)
		if err != nil {
			t.Fatal(err)
		}
		if !sf.Specialized {
			t.Fatalf("Specialize returned a function not marked specialized")
		}
		x, y, b, info := newF32(t, n), newF32(t, n), newF32(t, n), newMem(t, 8)
		fillRandom(x.f32(), 21)
		fillRandom(b.f32(), 22)
		poison(y.f32())
		info.i32()[0], info.i32()[1] = 12345, 12345
		runT(t, sf, ThreadsGrid([3]int{n, 1, 1}, [3]int{32, 1, 1}), x, y, b, info)
		return y.f32(), info.i32(), x.f32(), b.f32()
	}
	check := func(nsg int, bias bool, scale float32, shift float32, opt int32, values []ConstantValue) {
		t.Helper()
		y, info, x, b := run(values)
		for i := range y {
			var s float32
			for k := 0; k < nsg; k++ {
				s += x[i] * float32(k+1)
			}
			want := s * scale
			if bias {
				want += b[i]
			}
			want += shift
			if math.Float32bits(y[i]) != math.Float32bits(want) {
				t.Fatalf("nsg %d bias %v: y[%d] = %v, want %v", nsg, bias, i, y[i], want)
			}
		}
		if info[0] != int32(2*nsg) || info[1] != opt {
			t.Fatalf("info = %v, want [%d %d]", info[:2], 2*nsg, opt)
		}
	}
	// by index (600, 601 from the macro), and by name
	check(4, true, 0.5, 1.5, -1, []ConstantValue{
		{Index: 600, Type: "short", Bytes: u16b(4)},
		{Index: 601, Type: "bool", Bytes: []byte{1}},
		{Index: -1, Name: "FC_scale", Type: "float", Bytes: u32b(math.Float32bits(0.5))},
		{Index: 3, Type: "half", Bytes: u16b(0x3e00)}, // 1.5
	})
	check(3, false, 2, -2, 77, []ConstantValue{
		{Index: 600, Type: "short", Bytes: u16b(3)},
		{Index: 601, Type: "bool", Bytes: []byte{0}},
		{Index: 2, Type: "float", Bytes: u32b(math.Float32bits(2))},
		{Index: 3, Type: "half", Bytes: u16b(0xc000)}, // -2
		{Index: 4, Type: "int", Bytes: u32b(77)},
		{Index: 99, Type: "int", Bytes: u32b(1)}, // not a constant of fc: ignored
	})
}

func TestFunctionConstantsErrors(t *testing.T) {
	lib := compileT(t, constantsSrc, CompileOptions{})
	full := []ConstantValue{
		{Index: 600, Type: "short", Bytes: u16b(4)},
		{Index: 601, Type: "bool", Bytes: []byte{1}},
		{Index: 2, Type: "float", Bytes: u32b(0)},
		{Index: 3, Type: "half", Bytes: u16b(0)},
	}
	for _, c := range []struct {
		values []ConstantValue
		want   string
	}{
		{full[1:], "function fc needs a value for function constant FC_nsg (index 600, short)"},
		{append([]ConstantValue{{Index: 600, Type: "int", Bytes: u32b(4)}}, full[1:]...), "FC_nsg (index 600): the constant is a short; the value given is a int"},
		{append([]ConstantValue{{Index: 600, Type: "short", Bytes: []byte{4}}}, full[1:]...), "a short value is 2 bytes, not 1"},
	} {
		_, err := lib.Specialize("fc", c.values)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Specialize = %v, want an error containing %q", err, c.want)
		}
	}
	// another function's constant without a value is no error
	if _, err := lib.Specialize("other", []ConstantValue{{Index: 5, Type: "int", Bytes: u32b(3)}}); err != nil {
		t.Errorf("Specialize(other): %v", err)
	}
	for _, c := range []struct{ src, want string }{
		{"constant float4 v [[function_constant(0)]];\nkernel void k(device float4* o [[buffer(0)]]) { o[0] = v; }\n", "float4 is not supported by the emulated device"},
		{"constant int a [[function_constant(1)]];\nconstant int b [[function_constant(1)]];\n", "function constants a and b have the same index 1"},
		{"constant int a [[function_constant(x + 1)]];\n", "must be an integer constant"},
	} {
		l, err := Compile(c.src, CompileOptions{CacheDir: testCacheDir})
		if err == nil {
			_, err = l.Specialize("k", []ConstantValue{{Index: 0, Type: "float4", Bytes: make([]byte, 16)}})
		}
		if err == nil || !strings.Contains(err.Error()+logOf(err), c.want) {
			t.Errorf("%q: %v, want an error containing %q", c.src, err, c.want)
		}
	}
}

func TestEvalIndex(t *testing.T) {
	for _, c := range []struct {
		expr string
		want int
		ok   bool
	}{{"3", 3, true}, {"(600+1)", 601, true}, {"600 + 2*3 - (1 << 2)", 602, true}, {"0x10u", 16, true},
		{"-1", -1, true}, {"1/0", 0, false}, {"a", 0, false}, {"(1", 0, false}, {"1 1", 0, false}, {"99999999999", 0, false}} {
		got, ok := evalIndex(c.expr)
		if ok != c.ok || ok && got != c.want {
			t.Errorf("evalIndex(%q) = %d, %v; want %d, %v", c.expr, got, ok, c.want, c.ok)
		}
	}
}
