package msl

import "testing"

// A reference buffer parameter's Size is sizeof its type, as the kernel
// reads it (structs with their MSL padding, a template's argument); a
// pointer's is 0, as is every other kind's.
func TestParamSize(t *testing.T) {
	const src = mslPrelude + `struct S { float a; uint b; float4 c; };
template <typename T>
kernel void k(device float* out [[buffer(0)]],
              constant float& f [[buffer(1)]],
              constant S& s [[buffer(2)]],
              device const half2& h [[buffer(3)]],
              constant T& v [[buffer(4)]],
              constant uint* p [[buffer(5)]],
              uint i [[thread_position_in_grid]]) {
    out[i] = f + s.a + float(h.x) + float(v) + float(p[0]);
}
template [[host_name("k_half")]] kernel void k<half>(device float*, constant float&, constant S&, device const half2&, constant half&, constant uint*, uint);
template [[host_name("k_ulong")]] kernel void k<ulong>(device float*, constant float&, constant S&, device const half2&, constant ulong&, constant uint*, uint);
`
	lib := compileT(t, src, CompileOptions{})
	for name, v := range map[string]int{"k_half": 2, "k_ulong": 8} {
		f := functionT(t, lib, name)
		want := []int{0, 4, 32, 4, v, 0, 0}
		if len(f.Params) != len(want) {
			t.Fatalf("%s: %d parameters, want %d", name, len(f.Params), len(want))
		}
		for j, p := range f.Params {
			if p.Size != want[j] {
				t.Errorf("%s: parameter %s has Size %d, want %d", name, p.Name, p.Size, want[j])
			}
		}
	}
}
