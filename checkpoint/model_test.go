package checkpoint

import (
	"os"
	"path/filepath"
	"testing"
)

func TestOpenGoldenModels(t *testing.T) {
	dirs, _ := filepath.Glob("../testdata/golden/hf-models/*/config.json")
	for _, c := range dirs {
		dir := filepath.Dir(c)
		m, err := Open(dir)
		if err != nil {
			t.Errorf("%s: %v", dir, err)
			continue
		}
		t.Logf("%s: %s %d weights", filepath.Base(dir), m.Config.ModelType, len(m.Names()))
		m.Close()
	}
	_ = os.Getenv
}
