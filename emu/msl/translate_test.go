package msl

import (
	"strings"
	"testing"
)

// The translator needs no compiler: these tests run everywhere.

func TestTranslateKeepsLines(t *testing.T) {
	src := mslPrelude + `// kernel void in_a_comment(device float* x [[buffer(0)]]) {}
/* kernel void in_a_block(device float* x [[buffer(0)]]) {} */
constant float k = 0.5;
[[max_total_threads_per_threadgroup(256)]]
kernel void a(device const float* x [[buffer(0)]],
              constant float& s [[buffer(3)]],
              device float* y [[buffer(1)]],
              threadgroup float* scratch [[threadgroup(2)]],
              uint3 pos [[thread_position_in_grid]]) {
    threadgroup float tile[4][8], other[2];
    threadgroup float* p = tile[0];
    const char* msg = "kernel void in_a_string(";
    y[pos.x] = x[pos.x] * 1.0 + 2.f + 1e-3 + 0x10 + 3u + 1.5h + .5;
}
`
	tr, err := translate(src, "t.metal", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.entries) != 1 || tr.entries[0].name != "a" || tr.entries[0].maxTotal != 256 {
		t.Fatalf("entries %+v", tr.entries)
	}
	want := []Param{
		{Name: "x", Kind: Buffer, Index: 0, ReadOnly: true},
		{Name: "s", Kind: Buffer, Index: 3, ReadOnly: true},
		{Name: "y", Kind: Buffer, Index: 1},
		{Name: "scratch", Kind: ThreadgroupMemory, Index: 2},
		{Name: "pos", Kind: BuiltIn, BuiltIn: "thread_position_in_grid"},
	}
	for i, p := range tr.entries[0].params {
		if p.Param != want[i] {
			t.Fatalf("param %d = %+v, want %+v", i, p.Param, want[i])
		}
	}
	lines := strings.Split(tr.cpp, "\n")
	if lines[0] != `#line 1 "t.metal"` {
		t.Fatalf("first line %q", lines[0])
	}
	body := lines[1:]
	orig := strings.Split(src, "\n")
	for i, l := range orig {
		if i >= len(body) {
			t.Fatalf("translation has %d lines, source %d", len(body), len(orig))
		}
		// every line that held a statement still holds it
		for _, marker := range []string{"using namespace", "msg =", "y[pos.x]"} {
			if strings.Contains(l, marker) && !strings.Contains(body[i], marker) {
				t.Fatalf("line %d moved: %q became %q", i+1, l, body[i])
			}
		}
	}
	if !strings.Contains(body[14], "x[pos.x] * 1.0f + 2.f + 1e-3f + 0x10 + 3u + 1.5_h + .5f") {
		t.Fatalf("literals not rewritten: %q", body[14])
	}
	if !strings.Contains(body[11], "__pm_tg_static(1,") || !strings.Contains(body[11], "__pm_tg_static(2,") || !strings.Contains(body[11], "&tile") {
		t.Fatalf("threadgroup declaration not rewritten: %q", body[11])
	}
	if !strings.Contains(body[12], "threadgroup float* p = tile[0];") {
		t.Fatalf("threadgroup pointer rewritten: %q", body[12])
	}
	if strings.Contains(body[6], "[[") || !strings.Contains(body[13], "kernel void in_a_string(") {
		t.Fatalf("attributes left or string changed: %q / %q", body[6], body[13])
	}
}

func TestTranslateErrors(t *testing.T) {
	cases := []struct {
		src, want string
		line      int
	}{
		{"kernel void k(float x) {}\n", "has no attribute and is not a device, constant or threadgroup pointer", 1},
		{"kernel void k(device float* x [[buffer(31)]]) {}\n", "between 0 and 30", 1},
		{"\nkernel void k(device float* x [[buffer(0)]],\n device float* y [[buffer(0)]]) {}\n", "same buffer index 0", 2},
		{"kernel int k(device float* x [[buffer(0)]]) { return 0; }\n", "must return void", 1},
		{"kernel void k(device float* x [[buffer(0)]]) {}\nkernel void k(device int* x [[buffer(0)]]) {}\n", "defined twice", 2},
		{"template [[host_name(\"h\")]] kernel void nothing<float>(device float*);\n", "not a kernel template", 1},
		{"kernel void k(float x [[buffer(0)]]) {}\n", "pointer or a reference", 1},
		{"kernel void k(device float* x [[stage_in]]) {}\n", "kernel parameter attribute [[stage_in]] on x is not supported by the emulated device", 1},
		{"kernel void k(device float* x [[texture(0)]]) {}\n", "[[texture(n)]] parameters (textures) on x is not supported by the emulated device", 1},
		{"kernel void k(texture2d<float> t [[texture(0)]]) {}\n", "textures (texture2d) is not supported by the emulated device", 1},
		{"\nkernel void k(sampler s [[sampler(0)]]) {}\n", "samplers (sampler) is not supported by the emulated device", 2},
		{"kernel void k(device float* x [[buffer(0)]]) { imageblock<float> b; }\n", "imageblocks (imageblock) is not supported", 1},
		{"kernel void k(device float* x [[buffer(0)]], visible_function_table<void()> f [[buffer(1)]]) {}\n", "visible function tables (visible_function_table) is not supported", 1},
		{"kernel void k(device float* x [[buffer(0)]], instance_acceleration_structure a [[buffer(1)]]) {}\n", "ray tracing (instance_acceleration_structure) is not supported", 1},
		{"vertex float4 v(uint id [[vertex_id]]) { return 0; }\n", "vertex functions are not supported by the emulated device", 1},
		{"struct S { int x; };\nfragment half4 f() { return 0; }\n", "fragment functions are not supported by the emulated device", 2},
		{"kernel void k(threadgroup bfloat4* x [[threadgroup(0)]]) {}\n", "bfloat in threadgroup memory is not supported", 1},
	}
	for _, c := range cases {
		_, err := translate(c.src, "e.metal", nil, "")
		ce, ok := err.(*CompileError)
		if !ok || !strings.Contains(ce.Log, c.want) || ce.Line != c.line {
			t.Fatalf("translate(%q) = %v, want a compile error at line %d containing %q", c.src, err, c.line, c.want)
		}
	}
}

// The kernel-declaration grammar Apple accepts: the kernel keyword or
// [[kernel]], [[host_name]] on a plain kernel, attributes before the
// declaration or after the name, and parameters without an index attribute,
// numbered in order with the first index no attributed parameter uses.
func TestTranslateKernelDeclarations(t *testing.T) {
	src := mslPrelude + `struct Args { int n; };
kernel void all_implicit(constant Args & args,
                         device const char * src0,
                         device const char * src1,
                         device       char * dst,
                         threadgroup  float * shmem,
                         uint3 tgpig [[threadgroup_position_in_grid]]) {}
[[kernel]] void mixed(device float* a,
                      device float* b [[buffer(0)]],
                      constant float& c,
                      device float* d [[buffer(2)]],
                      device float* e,
                      threadgroup float* f [[threadgroup(0)]],
                      threadgroup float* g) {}
[[host_name("renamed")]] kernel void original(device float* x [[buffer(0)]]) {}
[[kernel, max_total_threads_per_threadgroup(64)]] void combined(device float* x [[buffer(3), function_constant(has_x)]]) {}
kernel void after_name [[max_total_threads_per_threadgroup(128)]] (device float* x [[buffer(0)]]) {}
`
	tr, err := translate(src, "k.metal", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	type binding struct {
		kind  ParamKind
		index int
	}
	want := map[string][]binding{
		"all_implicit": {{Buffer, 0}, {Buffer, 1}, {Buffer, 2}, {Buffer, 3}, {ThreadgroupMemory, 0}, {BuiltIn, 0}},
		"mixed":        {{Buffer, 1}, {Buffer, 0}, {Buffer, 3}, {Buffer, 2}, {Buffer, 4}, {ThreadgroupMemory, 0}, {ThreadgroupMemory, 1}},
		"renamed":      {{Buffer, 0}},
		"combined":     {{Buffer, 3}},
		"after_name":   {{Buffer, 0}},
	}
	maxTotal := map[string]int{"combined": 64, "after_name": 128}
	if len(tr.entries) != len(want) {
		t.Fatalf("entries %+v, want %d", tr.entries, len(want))
	}
	for _, e := range tr.entries {
		w, ok := want[e.name]
		if !ok {
			t.Fatalf("unexpected entry %q", e.name)
		}
		if len(e.params) != len(w) {
			t.Fatalf("%s: %d params, want %d", e.name, len(e.params), len(w))
		}
		for i, p := range e.params {
			if p.Kind != w[i].kind || p.Index != w[i].index {
				t.Errorf("%s: parameter %s is %s %d, want %s %d", e.name, p.Name, p.Kind, p.Index, w[i].kind, w[i].index)
			}
		}
		if m := maxTotal[e.name]; m != 0 && e.maxTotal != m {
			t.Errorf("%s: max total threads %d, want %d", e.name, e.maxTotal, m)
		}
	}
	if p := tr.entries[0].params[1]; !p.ReadOnly {
		t.Errorf("device const char* src0 is not read-only")
	}
}

// The names of Metal's unsupported types are rejected where a type would
// be declared, but not where they name members or the program's own
// namespace's types.
func TestTranslateUnsupportedNamesAsMembers(t *testing.T) {
	src := `struct S { int sampler; int texture2d; };
namespace mine { struct sampler { int x; }; }
kernel void k(device S* s [[buffer(0)]], device mine::sampler* m [[buffer(1)]]) {
    s->sampler = 1; s[0].texture2d = 2; m->x = 3;
}
`
	_, err := translate(src, "m.metal", nil, "")
	ce, ok := err.(*CompileError)
	if !ok {
		t.Fatalf("translate: %v, want errors at the declarations", err)
	}
	for _, l := range strings.Split(strings.TrimSpace(ce.Log), "\n") {
		if !strings.HasPrefix(l, "m.metal:1:") && !strings.HasPrefix(l, "m.metal:2:") {
			t.Errorf("error outside the declarations: %s", l)
		}
	}
}

// MLX's older instantiation form spells the whole signature instead of
// decltype, with the attributes again.
func TestTranslateInstantiationWithSignature(t *testing.T) {
	src := `template <typename T>
[[kernel]] void copy_v(device const T* src [[buffer(0)]], device T* dst [[buffer(1)]], uint i [[thread_position_in_grid]]) {
    dst[i] = src[i];
}
template [[host_name("copy_float")]] [[kernel]] void copy_v<float>(device const float* src [[buffer(0)]], device float* dst [[buffer(1)]], uint i [[thread_position_in_grid]]);
template [[host_name("copy_half")]] [[kernel]] void copy_v<half>(device const half* src [[buffer(0)]], device half* dst [[buffer(1)]], uint i [[thread_position_in_grid]]);
`
	tr, err := translate(src, "i.metal", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range tr.entries {
		names = append(names, e.name+"="+e.callee)
	}
	if got := strings.Join(names, " "); got != "copy_float=copy_v<float> copy_half=copy_v<half>" {
		t.Fatalf("entries %s", got)
	}
}

// Specializing one function translates it alone: the other kernels keep
// their declarations (and every line) but lose their bodies, and the other
// instantiations are left out.
func TestTranslateOneEntryPoint(t *testing.T) {
	src := `kernel void a(device float* x [[buffer(0)]]) {
    x[0] = 1.0f + A_ONLY;
}
template <int N>
kernel void t(device float* x [[buffer(0)]]) { x[0] = N; }
template [[host_name("t1")]] kernel decltype(t<1>) t<1>;
template [[host_name("t2")]] kernel decltype(t<2>) t<2>;
kernel void b(device float* x [[buffer(0)]]) {
    threadgroup float tile[4];
    x[0] = 2.0f;
}
`
	for _, c := range []struct {
		only   string
		has    []string
		hasNot []string
	}{
		{"b", []string{"x[0] = 2.0f;", "__pm_tg_static"}, []string{"A_ONLY", "t<1>", "t<2>"}},
		{"t2", []string{"decltype(t<2>) t<2>"}, []string{"A_ONLY", "2.0f", "t<1>"}},
	} {
		tr, err := translate(src, "o.metal", nil, c.only)
		if err != nil {
			t.Fatal(err)
		}
		if len(tr.entries) != 1 || tr.entries[0].name != c.only {
			t.Fatalf("only %s: entries %+v", c.only, tr.entries)
		}
		body := tr.cpp[:strings.Index(tr.cpp, "\n#line")]
		for _, s := range c.has {
			if !strings.Contains(body, s) {
				t.Errorf("only %s: the translation lacks %q", c.only, s)
			}
		}
		for _, s := range c.hasNot {
			if strings.Contains(body, s) {
				t.Errorf("only %s: the translation still has %q", c.only, s)
			}
		}
		// the first line is #line 1, then the source, line for line
		if got, want := strings.Count(body, "\n"), strings.Count(src, "\n")+1; got != want {
			t.Errorf("only %s: %d lines, want %d (lines stay in place)", c.only, got, want)
		}
	}
}
