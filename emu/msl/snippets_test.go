package msl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A diagnostic shows the program's own line, the caret under the token it
// names and its column in that line, also where the translator rewrote the
// line (a vector constructor, a functional cast through a template
// parameter, an instantiation's attributes, a tab-indented line), and it
// never shows the emulator's stand-in headers.
func TestDiagnosticsShowTheProgramsLines(t *testing.T) {
	needClang(t)
	for _, c := range []struct {
		body, line, at string
	}{
		{"kernel void k(device float2* o [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n  float2 a(1.0f, undeclared);\n  o[i] = a;\n}\n",
			"  float2 a(1.0f, undeclared);", "program_source:5:18: error: use of undeclared identifier 'undeclared'"},
		{"template <typename T> [[kernel]] void k(device T* o [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n\to[i] = T(1) + nope;\n}\n" +
			"template [[host_name(\"kf\")]] [[kernel]] decltype(k<float>) k<float>;\n",
			"        o[i] = T(1) + nope;", "program_source:5:16: error: use of undeclared identifier 'nope'"},
	} {
		_, err := Compile(mslPrelude+"\n"+c.body, CompileOptions{CacheDir: testCacheDir})
		ce := errorAs[*CompileError](t, err, "a kernel with an undeclared name compiled")
		lines := strings.Split(ce.Log, "\n")
		if len(lines) < 3 || lines[0] != c.at || lines[1] != c.line {
			t.Errorf("log:\n%s\nwant it to begin\n%s\n%s", ce.Log, c.at, c.line)
			continue
		}
		tok := strings.Fields(strings.TrimPrefix(c.at[strings.LastIndex(c.at, " ")+1:], "'"))[0]
		tok = strings.Trim(tok, "'")
		if want := strings.Repeat(" ", strings.Index(c.line, tok)) + "^"; lines[2] != want {
			t.Errorf("caret line %q, want %q", lines[2], want)
		}
		if strings.Contains(ce.Log, "__pm") || strings.Contains(ce.Log, "pp-include") {
			t.Errorf("the log shows the translation:\n%s", ce.Log)
		}
	}

	// the instantiation a template's error comes from, as written
	src := mslPrelude + "template <int N> [[kernel]] void s(device uint* o [[buffer(0)]]) { static_assert(N != 3, \"three\"); o[0] = N; }\n" +
		"template [[host_name(\"s3\")]] [[kernel]] decltype(s<3>) s<3>;\n"
	_, err := Compile(src, CompileOptions{CacheDir: testCacheDir})
	ce := errorAs[*CompileError](t, err, "static_assert(N != 3) compiled for N = 3")
	if !strings.Contains(ce.Log, "\ntemplate [[host_name(\"s3\")]] [[kernel]] decltype(s<3>) s<3>;\n") {
		t.Errorf("the instantiation's note does not show its line:\n%s", ce.Log)
	}

	// a header's line, read from its file
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "h.h"), []byte("inline float2 pair(float x) {\n  return float2(x, missing);\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	main := filepath.Join(dir, "main.metal")
	if err := os.WriteFile(main, []byte(mslPrelude+"#include \"h.h\"\nkernel void k(device float2* o [[buffer(0)]]) { o[0] = pair(1.0f); }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = CompileFile(main, CompileOptions{CacheDir: testCacheDir})
	ce = errorAs[*CompileError](t, err, "a header with an undeclared name compiled")
	if !strings.Contains(ce.Log, "h.h:2:20: error: use of undeclared identifier 'missing'\n  return float2(x, missing);\n                   ^\n") {
		t.Errorf("log:\n%s", ce.Log)
	}
}
