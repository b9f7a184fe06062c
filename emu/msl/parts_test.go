package msl

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// partsSource is a library of n instantiations of one kernel, scale<k>
// writing i*k, named scale<k>; the instantiation at bad (when not 0)
// fails its static_assert.
func partsSource(n, bad int) string {
	var b strings.Builder
	b.WriteString(mslPrelude + `
template <int N> [[kernel]] void scale(device uint* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  static_assert(N != ` + fmt.Sprint(bad) + `, "scale of the bad factor");
  out[i] = i * N;
}
`)
	for k := 1; k <= n; k++ {
		fmt.Fprintf(&b, "template [[host_name(\"scale%d\")]] [[kernel]] decltype(scale<%d>) scale<%d>;\n", k, k, k)
	}
	return b.String()
}

// A library of more entry points than one compiler run builds is built in
// parts, each cached on its own: every function is there and runs its own
// instantiation, and an error in any part's code fails the library at its
// line.
func TestLibraryInParts(t *testing.T) {
	n := 2*partEntries + 5
	lib := compileT(t, partsSource(n, 0), CompileOptions{})
	if got := len(lib.FunctionNames()); got != n {
		t.Fatalf("%d functions, want %d", got, n)
	}
	paths := map[string]bool{}
	for _, k := range []int{1, partEntries, partEntries + 1, n} {
		name := fmt.Sprintf("scale%d", k)
		wantU32(t, name, runU32(t, lib, name, 40), func(i int) uint32 { return uint32(k * i) })
		f, err := lib.Function(name)
		if err != nil {
			t.Fatal(err)
		}
		paths[filepath.Base(f.LibraryPath())] = true
	}
	if len(paths) != 3 {
		t.Errorf("the functions of the first, second and third parts come from %d libraries, want 3: %v", len(paths), paths)
	}
	f, _ := lib.Function("scale1")
	all := map[string]bool{}
	for _, p := range f.LibraryPaths() {
		all[filepath.Base(p)] = true
		if _, err := os.Stat(p); err != nil {
			t.Error(err)
		}
	}
	for p := range paths {
		if !all[p] || len(all) != 3 {
			t.Errorf("LibraryPaths of scale1 = %v, want the three parts %v", f.LibraryPaths(), paths)
			break
		}
	}
	again := compileT(t, partsSource(n, 0), CompileOptions{})
	if !again.Cached() {
		t.Error("compiling the same library again built it again")
	}

	src := partsSource(n, 2*partEntries+2) // the third part fails
	_, err := Compile(src, CompileOptions{CacheDir: testCacheDir})
	ce := errorAs[*CompileError](t, err, "a library whose third part does not compile compiled")
	if ce.Line != 5 || !strings.Contains(ce.Log, "scale of the bad factor") {
		t.Errorf("error at line %d:\n%s", ce.Line, ce.Log)
	}
}
