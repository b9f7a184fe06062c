package typeenc

import (
	"strings"
	"testing"
)

func TestSplitAndKinds(t *testing.T) {
	for _, c := range []struct {
		enc   string
		types string
		kinds []Kind
	}{
		{"v@:{MTLSize=QQQ}^Q", "v @ : {MTLSize=QQQ} ^Q", []Kind{Void, Object, Word, Struct24, Word}},
		{"@@:r*Q", "@ @ : r* Q", []Kind{Object, Object, Word, Word, Word}},
		{"v@:^@^Q{_NSRange=QQ}", "v @ : ^@ ^Q {_NSRange=QQ}", []Kind{Void, Object, Word, Word, Word, Struct16}},
		{"@@:^vQQ@?", "@ @ : ^v Q Q @?", []Kind{Object, Object, Word, Word, Word, Word, Word}},
		{"c@:cSiLdf", "c @ : c S i L d f", []Kind{Int8, Object, Word, Int8, Int16, Int32, Int32, Double, Float}},
		{"v@:{S={T=QQ}}{U=dd}", "v @ : {S={T=QQ}} {U=dd}", []Kind{Void, Object, Word, Unknown, Unknown}},
	} {
		got := Split(c.enc)
		if strings.Join(got, " ") != c.types {
			t.Errorf("Split(%q) = %q, want %q", c.enc, got, c.types)
			continue
		}
		for i, s := range got {
			if k := KindOf(s); k != c.kinds[i] {
				t.Errorf("KindOf(%q) in %q = %v, want %v", s, c.enc, k, c.kinds[i])
			}
		}
	}
}
