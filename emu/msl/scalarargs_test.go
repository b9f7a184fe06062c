package msl

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// A scalar where a vector overload of the math, common and relational
// functions takes the vector is that vector of it, as Apple's compiler
// converts it (fma(float4, float, float4), select(float4, float, bool4),
// clamp(x, 0.0f, 1.0f)): every such call compiles and gives, component by
// component, what the call with the scalar written as a vector gives.
func TestScalarArgumentsOfVectorOverloads(t *testing.T) {
	two := []string{"pow", "powr", "fmin", "fmax", "fmod", "atan2", "copysign", "fdim", "step", "divide",
		"min", "max", "nextafter", "isordered", "isunordered"}
	three := []string{"fma", "mix", "clamp", "smoothstep", "max3", "min3", "median3", "fmax3", "fmin3", "fmedian3"}
	type call struct{ mixed, vector string }
	var calls []call
	// operands: vectors v, w, u and scalars s, r, q of one type; S(x) is
	// the vector of scalar x
	add := func(f string, args []string) {
		m, v := make([]string, len(args)), make([]string, len(args))
		for i, a := range args {
			m[i], v[i] = a, a
			if a == "s" || a == "r" || a == "q" {
				v[i] = "S(" + a + ")"
			}
		}
		calls = append(calls, call{f + "(" + strings.Join(m, ", ") + ")", f + "(" + strings.Join(v, ", ") + ")"})
	}
	for _, f := range two {
		add(f, []string{"v", "s"})
		add(f, []string{"s", "v"})
	}
	for _, f := range three {
		vs, ss := []string{"v", "w", "u"}, []string{"s", "r", "q"}
		for m := 1; m < 7; m++ { // which operands are scalars, not all
			args := make([]string, 3)
			for k := range 3 {
				args[k] = vs[k]
				if m>>k&1 == 1 {
					args[k] = ss[k]
				}
			}
			add(f, args)
		}
	}
	add("select", []string{"v", "s", "v < w"})
	add("select", []string{"s", "v", "v < w"})
	var src strings.Builder
	src.WriteString(mslPrelude)
	for _, ty := range []string{"float", "half"} {
		fmt.Fprintf(&src, `kernel void k_%[1]s(device float4* out [[buffer(0)]], device const float4* in [[buffer(1)]]) {
    typedef %[1]s4 V;
    V v = V(in[0]), w = V(in[1]), u = V(in[2]);
    %[1]s s = %[1]s(in[3].x), r = %[1]s(in[3].y), q = %[1]s(in[3].z);
#define S(x) V(x)
`, ty)
		for i, c := range calls {
			fmt.Fprintf(&src, "    out[%d] = float4(%s);\n    out[%d] = float4(%s);\n", 2*i, c.mixed, 2*i+1, c.vector)
		}
		src.WriteString("#undef S\n}\n")
	}
	lib := compileT(t, src.String(), CompileOptions{})
	in, out := newF32(t, 16), newF32(t, 8*len(calls))
	for i, x := range []float32{0.25, 1.5, 0.75, 2, 0.5, 3, 1, 0.125, 1.25, 0.375, 2.5, 0.625, 0.875, 0.3125, 0.0625, 0} {
		in.f32()[i] = x
	}
	for _, ty := range []string{"float", "half"} {
		f := functionT(t, lib, "k_"+ty)
		poison(out.f32())
		d := &Dispatch{Grid: ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{1, 1, 1})}
		d.Buffers[0], d.Buffers[1] = out.binding(), in.binding()
		if _, err := f.Run(d); err != nil {
			t.Fatalf("%s: %v", ty, err)
		}
		o := out.f32()
		for i, c := range calls {
			for k := range 4 {
				g, w := o[8*i+k], o[8*i+4+k]
				if math.Float32bits(g) != math.Float32bits(w) || g != g {
					t.Errorf("%s: %s component %d is %v, %s gives %v", ty, c.mixed, k, g, c.vector, w)
				}
			}
		}
	}
}
