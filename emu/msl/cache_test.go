package msl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A lazy library lists every function at once and builds each when asked
// for: a kernel whose body does not compile fails only when fetched.
func TestLazyLibrary(t *testing.T) {
	needClang(t)
	src := mslPrelude + `
template <int N> [[kernel]] void scale(device uint* out [[buffer(0)]], uint i [[thread_position_in_grid]]) { out[i] = i * N; }
template [[host_name("scale2")]] [[kernel]] decltype(scale<2>) scale<2>;
template [[host_name("scale5")]] [[kernel]] decltype(scale<5>) scale<5>;
kernel void broken(device uint* out [[buffer(0)]]) {
  out[0] = undeclared_name;
}
`
	if _, err := Compile(src, CompileOptions{CacheDir: testCacheDir}); err == nil {
		t.Fatal("compiling the whole library succeeded despite broken")
	}
	lib, err := Compile(src, CompileOptions{CacheDir: testCacheDir, Lazy: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(lib.FunctionNames(), " "); got != "broken scale2 scale5" {
		t.Fatalf("functions %q", got)
	}
	wantU32(t, "scale5", runU32(t, lib, "scale5", 40), func(i int) uint32 { return uint32(5 * i) })
	f1, _ := lib.Function("scale5")
	if f2, _ := lib.Function("scale5"); f1 != f2 {
		t.Error("a second Function call built the function again")
	}
	_, err = lib.Function("broken")
	ce := errorAs[*CompileError](t, err, "building broken succeeded")
	if ce.Line != 8 || !strings.Contains(ce.Log, "undeclared_name") {
		t.Errorf("error at line %d:\n%s", ce.Line, ce.Log)
	}
	if _, err := lib.Function("nothing"); err == nil || !strings.Contains(err.Error(), `no function "nothing"`) {
		t.Errorf("Function(nothing) = %v", err)
	}
}

// The cache is pruned, least recently used first, down to 80% of its cap,
// keeping what was used in the last minutes; the cap comes from
// PUREMETAL_EMU_CACHE_MAX.
func TestPruneCache(t *testing.T) {
	root := t.TempDir()
	old := time.Now().Add(-time.Hour)
	for i, name := range []string{"lib/aa/1.so", "lib/aa/2.so", "lib/bb/3.so", "pp/cc/4.ii", "lib/dd/5.so"} {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, make([]byte, 1000), 0o644); err != nil {
			t.Fatal(err)
		}
		if i < 4 { // 5.so was used just now
			at := old.Add(time.Duration(i) * time.Minute)
			if err := os.Chtimes(p, at, at); err != nil {
				t.Fatal(err)
			}
		}
	}
	removed, err := pruneCache(root, 3000)
	if err != nil || removed != 3000 {
		t.Fatalf("pruneCache removed %d bytes (%v), want 3000", removed, err)
	}
	for name, want := range map[string]bool{"lib/aa/1.so": false, "lib/aa/2.so": false, "lib/bb/3.so": false, "pp/cc/4.ii": true, "lib/dd/5.so": true} {
		if _, err := os.Stat(filepath.Join(root, name)); (err == nil) != want {
			t.Errorf("%s kept %v, want %v", name, err == nil, want)
		}
	}
	if removed, _ := pruneCache(root, 1); removed != 1000 {
		t.Errorf("under a 1-byte cap, removed %d bytes, want 1000 (the recent file stays)", removed)
	}
	for env, want := range map[string]int64{"": DefaultCacheMax, "0": 0, "512M": 512 << 20, "2G": 2 << 30, "1000": 1000} {
		t.Setenv(CacheMaxEnv, env)
		if got, err := cacheMax(); err != nil || got != want {
			t.Errorf("%s=%q: %d, %v; want %d", CacheMaxEnv, env, got, err, want)
		}
	}
	t.Setenv(CacheMaxEnv, "lots")
	if _, err := cacheMax(); err == nil || !strings.Contains(err.Error(), CacheMaxEnv) {
		t.Errorf("%s=lots: %v", CacheMaxEnv, err)
	}
}
