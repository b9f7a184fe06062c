package msl

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// largeLibrarySource is a library of kinds x types x ops x 7 host_name
// instantiations of element-wise kernel templates (MLX's binary.metal has
// thousands alike), with, when broken is set, an undeclared name in a
// kernel after all of them.
func largeLibrarySource(kinds int, broken bool) (string, int) {
	types := []string{"float", "half", "int", "uint", "short", "ushort"}
	ops := map[string]string{"add": "a + b", "sub": "a - b", "mul": "a * b", "mx": "max(a, b)", "mn": "min(a, b)",
		"first": "a", "second": "b", "avg": "(a + b) / T(2)"}
	var names []string
	for n := range ops {
		names = append(names, n)
	}
	var b strings.Builder
	b.WriteString(mslPrelude)
	for _, n := range names {
		fmt.Fprintf(&b, "struct op_%s { template <typename T> T operator()(T a, T b) const { return %s; } };\n", n, ops[n])
	}
	count := 0
	for k := range kinds {
		fmt.Fprintf(&b, `template <typename T, typename Op, int N>
kernel void kind%[1]d(device const T* a [[buffer(0)]], device const T* b [[buffer(1)]], device T* c [[buffer(2)]],
                   uint i [[thread_position_in_grid]]) {
    c[i] = Op()(a[(i + %[1]d) %% (N + 1)], b[i]);
}
`, k)
		for _, ty := range types {
			for _, n := range names {
				for v := range 7 {
					fmt.Fprintf(&b, "template [[host_name(\"kind%d_%s_%s_%d\")]] kernel void kind%d<%s, op_%s, %d>(device const %s*, device const %s*, device %s*, uint);\n",
						k, n, ty, v, k, ty, n, v, ty, ty, ty)
					count++
				}
			}
		}
	}
	if broken {
		b.WriteString("kernel void last(device float* c [[buffer(0)]]) {\n    c[0] = undeclared_name;\n}\n")
	}
	return b.String(), count
}

// A compile error after thousands of entry points is reported without
// building them: the whole library is checked before its parts are built.
// Building the parts of this one takes about 290 s on two cores, the check
// about 9 s on a loaded machine; the bound leaves ten times that.
func TestLargeLibraryErrorFirst(t *testing.T) {
	needClang(t)
	src, n := largeLibrarySource(8, true)
	if n < 2600 {
		t.Fatalf("%d entry points, want about 2,700", n)
	}
	start := time.Now()
	_, err := Compile(src, CompileOptions{CacheDir: t.TempDir()})
	took := time.Since(start)
	ce := errorAs[*CompileError](t, err, "a library with an undeclared name compiled")
	if lines := strings.Count(src, "\n"); ce.Line != lines-1 || !strings.Contains(ce.Log, "undeclared_name") {
		t.Errorf("error at line %d, want %d naming undeclared_name: %v", ce.Line, lines-1, err)
	}
	if took > 90*time.Second {
		t.Errorf("the error took %v to report, want well under building the %d entry points", took, n)
	}
}
