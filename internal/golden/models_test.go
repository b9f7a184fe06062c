package golden

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/checkpoint"
	"github.com/puremetal/puremetal/internal/testenv"
)

// TestLoadModelSet loads every whole-model case: prompts, the truth's
// logits for every step of its path, and prompt 0's hidden states.
func TestLoadModelSet(t *testing.T) {
	cases := LoadModelSet(t)
	if os.Getenv(testenv.GoldenEnv) == "" && len(cases) < 6 {
		t.Errorf("%d whole-model cases in the repository, want the 6 of its set", len(cases))
	}
	for _, c := range cases {
		for i, p := range c.Prompts {
			if len(p.Logits) != len(p.Tokens)*p.Vocab || p.Vocab == 0 || p.F32PeerRel() == 0 {
				t.Errorf("%s prompt %d: %d logits for %d steps of %d, f32 peer %v", c.Name, i, len(p.Logits), len(p.Tokens), p.Vocab, p.F32PeerRel())
			}
		}
		if h := c.Prompts[0].Hidden; len(h) == 0 || len(h[0]) == 0 {
			t.Errorf("%s: no hidden states for prompt 0", c.Name)
		}
	}
}

// TestModelCaseDroppedIn: a case folder copied into a folder that
// PUREMETAL_GOLDEN names is loaded under its new name; one whose logits
// are cut is an error naming the tensor.
func TestModelCaseDroppedIn(t *testing.T) {
	if os.Getenv(testenv.GoldenEnv) != "" {
		t.Skipf("%s is set for this run", testenv.GoldenEnv)
	}
	src := filepath.Join(SetDir(t, ModelsSubdir), "qwen3_dense_bf16")
	alt := t.TempDir()
	dst := filepath.Join(alt, ModelsSubdir, "new_case")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"config.json", "model.safetensors", "golden.json", "golden.safetensors"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(testenv.GoldenEnv, alt)
	cases := LoadModelSet(t)
	if len(cases) != 1 || cases[0].Name != "new_case" {
		t.Fatalf("loaded %d cases, want the one new case", len(cases))
	}
	// The truth's logits with one step fewer than golden.json's path.
	st, err := checkpoint.ReadSafetensors(filepath.Join(dst, "golden.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	var ts []checkpoint.Tensor
	for _, n := range st.Names() {
		x, _ := st.Tensor(n)
		if n == "p1.logits_f64" {
			x.Shape[0]--
			x.Data = x.Data[:len(x.Data)-4*x.Shape[1]]
		}
		ts = append(ts, x)
	}
	f, err := os.Create(filepath.Join(dst, "golden.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.WriteSafetensors(f, ts); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := LoadModel(dst); err == nil || !strings.Contains(err.Error(), "p1.logits_f64") {
		t.Errorf("a cut p1.logits_f64: %v, want an error naming it", err)
	}
}
