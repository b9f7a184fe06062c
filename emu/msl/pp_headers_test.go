package msl

import (
	"os"
	"path/filepath"
	"testing"
)

// The preprocessing step's headers live in a folder named by what they
// hold: headers made differently (a new list of the shim's headers, a
// changed line) land in another folder, never reusing a stale copy.
func TestPPHeadersKeyedByContent(t *testing.T) {
	dir := t.TempDir()
	a := map[string][]byte{"metal_stdlib": []byte(ppInclude + " <metal_stdlib>\n"), "simd/simd.h": []byte(ppInclude + " <simd/simd.h>\n")}
	b := map[string][]byte{"metal_stdlib": []byte(ppInclude + " <metal_stdlib>\n")}
	pa, err := writeHeaders(dir, a)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := writeHeaders(dir, b)
	if err != nil {
		t.Fatal(err)
	}
	if pa == pb {
		t.Fatalf("two different header sets share the folder %s", pa)
	}
	again, err := writeHeaders(dir, a)
	if err != nil || again != pa {
		t.Fatalf("the same headers again: %s, %v; want %s", again, err, pa)
	}
	for _, c := range []struct {
		dir   string
		files map[string][]byte
	}{{pa, a}, {pb, b}} {
		for n, want := range c.files {
			got, err := os.ReadFile(filepath.Join(c.dir, n))
			if err != nil || string(got) != string(want) {
				t.Errorf("%s/%s = %q, %v; want %q", c.dir, n, got, err, want)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(pb, "simd/simd.h")); err == nil {
		t.Errorf("%s holds simd/simd.h, which its set does not", pb)
	}
	// the shim's own set: every header but the translation's own
	files, err := ppHeaderFiles()
	if err != nil {
		t.Fatal(err)
	}
	for _, own := range []string{"prelude.h", "pm_abi.h"} {
		if _, ok := files[own]; ok {
			t.Errorf("the preprocessor's headers include %s", own)
		}
	}
	if _, ok := files["metal_stdlib"]; !ok {
		t.Errorf("the preprocessor's headers lack metal_stdlib: %d files", len(files))
	}
}
