package msl

import (
	"strings"
	"testing"
)

// The translator needs no compiler: these tests run everywhere.

func TestTranslateKeepsLines(t *testing.T) {
	src := `#include <metal_stdlib>
using namespace metal;
// kernel void in_a_comment(device float* x [[buffer(0)]]) {}
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
	tr, err := translate(src, "t.metal")
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
		{"kernel void k(device float* x) {}\n", "has no attribute", 1},
		{"kernel void k(device float* x [[buffer(31)]]) {}\n", "between 0 and 30", 1},
		{"\nkernel void k(device float* x [[buffer(0)]],\n device float* y [[buffer(0)]]) {}\n", "same buffer index 0", 2},
		{"kernel int k(device float* x [[buffer(0)]]) { return 0; }\n", "must return void", 1},
		{"kernel void k(device float* x [[buffer(0)]]) {}\nkernel void k(device int* x [[buffer(0)]]) {}\n", "defined twice", 2},
		{"template [[host_name(\"h\")]] kernel void nothing<float>(device float*);\n", "not a kernel template", 1},
		{"kernel void k(float x [[buffer(0)]]) {}\n", "pointer or a reference", 1},
		{"kernel void k(device float* x [[stage_in]]) {}\n", "unsupported kernel parameter attribute [[stage_in]]", 1},
	}
	for _, c := range cases {
		_, err := translate(c.src, "e.metal")
		ce, ok := err.(*CompileError)
		if !ok || !strings.Contains(ce.Log, c.want) || ce.Line != c.line {
			t.Fatalf("translate(%q) = %v, want a compile error at line %d containing %q", c.src, err, c.line, c.want)
		}
	}
}
