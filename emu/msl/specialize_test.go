package msl

import (
	"strings"
	"testing"
)

// SpecializeFunctions builds several functions with one set of values, as
// a host gives a kernel family's constants to each of its kernels; a
// function left without a value it requires is an error naming it.
func TestSpecializeFunctions(t *testing.T) {
	src := mslPrelude + `
constant int A [[function_constant(0)]];
constant bool B [[function_constant(1)]];
constant int C [[function_constant(2)]];
kernel void ka(device int* out [[buffer(0)]], uint i [[thread_position_in_grid]]) { out[i] = A + int(i); }
kernel void kb(device int* out [[buffer(0)]], uint i [[thread_position_in_grid]]) { out[i] = B ? A * 2 : -1; }
kernel void kc(device int* out [[buffer(0)]], uint i [[thread_position_in_grid]]) { out[i] = C; }
kernel void plain(device int* out [[buffer(0)]], uint i [[thread_position_in_grid]]) { out[i] = 7; }
`
	for _, lazy := range []bool{false, true} {
		lib := compileT(t, src, CompileOptions{Lazy: lazy})
		values := []ConstantValue{{Index: 0, Type: "int", Bytes: u32b(40)}, {Index: 1, Type: "bool", Bytes: []byte{1}}}
		fs, err := lib.SpecializeFunctions([]string{"kb", "ka"}, values)
		if err != nil {
			t.Fatalf("lazy %v: %v", lazy, err)
		}
		if len(fs) != 2 || fs[0].Name != "kb" || fs[1].Name != "ka" || !fs[0].Specialized || !fs[1].Specialized {
			t.Fatalf("lazy %v: got %d functions %+v, want kb and ka specialized", lazy, len(fs), fs)
		}
		for _, c := range []struct {
			f    *Function
			want func(i int) int32
		}{{fs[0], func(int) int32 { return 80 }}, {fs[1], func(i int) int32 { return int32(40 + i) }}} {
			out := newMem(t, 4*32)
			d := &Dispatch{Grid: ThreadsGrid([3]int{32, 1, 1}, [3]int{32, 1, 1})}
			d.Buffers[0] = out.binding()
			if _, err := c.f.Run(d); err != nil {
				t.Fatal(err)
			}
			for i, g := range out.i32() {
				if g != c.want(i) {
					t.Fatalf("lazy %v: %s out[%d] = %d, want %d", lazy, c.f.Name, i, g, c.want(i))
				}
			}
		}
		_, err = lib.SpecializeFunctions([]string{"ka", "kc"}, values)
		if err == nil || !strings.Contains(err.Error(), "kc needs a value for function constant C (index 2, int)") {
			t.Errorf("lazy %v: kc without C: %v, want an error naming kc and C", lazy, err)
		}
		if _, err := lib.SpecializeFunctions([]string{"ka", "nothere"}, values); err == nil || !strings.Contains(err.Error(), "nothere") {
			t.Errorf("lazy %v: a missing function: %v, want an error naming it", lazy, err)
		}
	}
}
