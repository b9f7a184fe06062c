package msl

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/puremetal/puremetal/internal/testenv"
)

// FuzzTranslate checks that the translator returns, with a translation or
// an error, on any input: it never panics and never loops. The seeds are
// the repository's .metal files and the test kernels.
func FuzzTranslate(f *testing.F) {
	root := testenv.RepoRoot(f)
	for _, pattern := range []string{"kernels/*.metal", "emu/testdata/*.metal"} {
		files, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			f.Fatal(err)
		}
		for _, file := range files {
			b, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(string(b))
		}
	}
	for _, s := range []string{vecAddSrc, builtinsSrc, bfloatSrc, unattributedSrc, constantsSrc, mlxStyleSrc, simdgroupMatrixSrc,
		"# 1 \"a.metal\"\n#pragma puremetal include <metal_stdlib>\nkernel void k(device float* x) {}\n",
		"template [[host_name(\"a\" \"b\")]] [[kernel]] decltype(f<1>) f<1>;", "constant int c [[function_constant((1 << 2) + 3)]];",
		"struct S { S() threadgroup {} S() device {} };", "[[", "kernel void (", "threadgroup float x[", "#line 0 \"\"\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		done := make(chan struct{})
		go func() {
			defer close(done)
			tr, err := translate(src, "fuzz.metal", nil, "")
			if err == nil && tr == nil {
				t.Errorf("translate returned neither a translation nor an error")
			}
			if err == nil && len(tr.entries) > 0 {
				// as Library.Specialize translates: one entry point alone
				if one, err := translate(src, "fuzz.metal", nil, tr.entries[0].name); err != nil || len(one.entries) != 1 {
					t.Errorf("translating %s alone: %v", tr.entries[0].name, err)
				}
			}
			if err != nil {
				if _, ok := err.(*CompileError); !ok {
					t.Errorf("translate error %v is a %T, not a *CompileError", err, err)
				}
			}
		}()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("translate did not return within 20s on %q", src)
		}
	})
}
