package msl

import (
	"errors"
	"strings"
	"testing"
)

// The engine runs on Linux x86-64 and arm64; elsewhere Compile refuses
// with ErrUnsupportedPlatform naming the system, before it runs clang.
func TestSupportedPlatforms(t *testing.T) {
	for _, c := range []struct {
		goos, goarch string
		want         string // "" where it runs
	}{
		{"linux", "amd64", ""},
		{"linux", "arm64", ""},
		{"darwin", "arm64", "not on darwin/arm64; on macOS the system's Metal device runs the kernels"},
		{"darwin", "amd64", "not on darwin/amd64"},
		{"linux", "riscv64", "not on linux/riscv64"},
		{"windows", "amd64", "not on windows/amd64"},
	} {
		err := supportedOn(c.goos, c.goarch)
		if c.want == "" {
			if err != nil {
				t.Errorf("%s/%s: %v", c.goos, c.goarch, err)
			}
			continue
		}
		if !errors.Is(err, ErrUnsupportedPlatform) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s/%s: %v, want ErrUnsupportedPlatform mentioning %q", c.goos, c.goarch, err, c.want)
		}
	}
	t.Setenv(UnsupportedEnv, "1")
	if _, err := Compile("kernel void k() {}", CompileOptions{}); !errors.Is(err, ErrUnsupportedPlatform) {
		t.Errorf("Compile with %s=1: %v, want ErrUnsupportedPlatform", UnsupportedEnv, err)
	}
}
