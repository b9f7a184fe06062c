package kernels

import (
	"regexp"
	"strings"
	"testing"
)

// The packed kernels keep every private array at 32 floats (128 bytes) at
// D_k = 128: the lane's cells of S and of k, declared with 8 * NSG
// elements; the blocked prefill with the layer core adds its block's
// outputs before the norm, GDN_BLOCK_CORE = 16 floats (64 bytes). (The
// one-row prefill holds a whole row, GDN_MAX_DK = 128 floats: 512 bytes.)
func TestPackedPrivateArrays(t *testing.T) {
	decl := regexp.MustCompile(`\b(float|half|uint|int)\s+(\w+)\s*\[([^\]]+)\]\s*;`)
	n := 0
	for _, f := range []string{PackedCommonFile, PackedFile, BlockedFile} {
		for _, m := range decl.FindAllStringSubmatch(code(t, f), -1) {
			n++
			if m[1] == "float" && m[2] == "oo" && strings.TrimSpace(m[3]) == "GDN_BLOCK_CORE" && strings.Contains(code(t, f), "#define GDN_BLOCK_CORE 16") {
				continue
			}
			if m[1] != "float" || strings.TrimSpace(m[3]) != "8 * NSG" {
				t.Errorf("%s: private array %s %s[%s]: want float [8 * NSG], 128 bytes at NSG = 4", f, m[1], m[2], m[3])
			}
		}
	}
	if n == 0 {
		t.Fatal("no private arrays found: the pattern is out of date")
	}
	if !strings.Contains(code(t, PrefillFile), "float s[GDN_MAX_DK];") || !strings.Contains(code(t, PrefillFile), "#define GDN_MAX_DK 128") {
		t.Errorf("the one-row prefill's state array is not float s[GDN_MAX_DK] with GDN_MAX_DK 128 any more: update the structural table's note")
	}
}
