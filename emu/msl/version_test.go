package msl

import (
	"strings"
	"testing"
)

// Below MSL 3.1 there is no bfloat: Apple's compiler reports an unknown
// type name at each use, in the program's file and line, and so does
// Compile; from 3.1 (and with the default version) the program compiles.
func TestBfloatLanguageVersion(t *testing.T) {
	needClang(t)
	src := mslPrelude + `kernel void k(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    bfloat b = bfloat(out[i]);
    vec<bfloat, 2> v = bfloat2(b, b);
    out[i] = float(v.x) + float(b);
}
`
	for _, c := range []struct {
		version uint32
		ok      bool
	}{
		{2<<16 | 4, false}, {3 << 16, false}, {3<<16 | 1, true}, {3<<16 | 2, true}, {0, true},
	} {
		_, err := Compile(src, CompileOptions{LanguageVersion: c.version, CacheDir: testCacheDir})
		if c.ok {
			if err != nil {
				t.Errorf("MSL %#x: %v", c.version, err)
			}
			continue
		}
		ce := errorAs[*CompileError](t, err, "bfloat compiled below MSL 3.1")
		for _, want := range []string{
			DefaultFileName + ":4:5: error: unknown type name 'bfloat'",
			DefaultFileName + ":4:16: error: unknown type name 'bfloat'",
			DefaultFileName + ":5:9: error: unknown type name 'bfloat'",
			DefaultFileName + ":5:24: error: unknown type name 'bfloat2'",
		} {
			if !strings.Contains(ce.Log, want) {
				t.Errorf("MSL %#x: the log does not hold %q:\n%s", c.version, want, ce.Log)
			}
		}
		if strings.Contains(ce.Log, "__pm") {
			t.Errorf("MSL %#x: the log shows the translation:\n%s", c.version, ce.Log)
		}
	}
}
