package golden

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/internal/testenv"
)

// The six cases of the README table, with their shapes and head maps.
var wantCases = map[string]spec.Params{
	"decode_qwen35_hv32":   {Shape: spec.Shape{DK: 128, DV: 128, NKHeads: 16, NVHeads: 32, NTokens: 1, NSeqs: 1}, HeadMap: spec.Block},
	"seq5_block_d128":      {Shape: spec.Shape{DK: 128, DV: 128, NKHeads: 2, NVHeads: 4, NTokens: 5, NSeqs: 2}, HeadMap: spec.Block},
	"seq3_tiled_d64":       {Shape: spec.Shape{DK: 64, DV: 64, NKHeads: 2, NVHeads: 6, NTokens: 3, NSeqs: 1}, HeadMap: spec.Tiled},
	"prefill64_block_d128": {Shape: spec.Shape{DK: 128, DV: 128, NKHeads: 4, NVHeads: 8, NTokens: 64, NSeqs: 1}, HeadMap: spec.Block},
	"decode_d32_mha":       {Shape: spec.Shape{DK: 32, DV: 32, NKHeads: 3, NVHeads: 3, NTokens: 1, NSeqs: 3}, HeadMap: spec.Block},
	"seq7_tiled_d32":       {Shape: spec.Shape{DK: 32, DV: 32, NKHeads: 1, NVHeads: 4, NTokens: 7, NSeqs: 3}, HeadMap: spec.Tiled},
}

// eachWanted loads the repository's set of cases with load and checks that
// it holds exactly the cases of want, by name, calling check on each case
// with what want says of it. It skips where the environment names another
// set of cases.
func eachWanted[C, W any](t *testing.T, load func(testing.TB) []C, name func(C) string, want map[string]W, check func(C, W)) {
	t.Helper()
	if os.Getenv(testenv.GoldenEnv) != "" {
		t.Skipf("%s names another set of cases; this test checks the repository's", testenv.GoldenEnv)
	}
	cases := load(t)
	if len(cases) != len(want) {
		t.Errorf("loaded %d cases, want %d", len(cases), len(want))
	}
	for _, c := range cases {
		w, ok := want[name(c)]
		if !ok {
			t.Errorf("unexpected case %s", name(c))
			continue
		}
		check(c, w)
	}
}

func TestLoadAllCases(t *testing.T) {
	eachWanted(t, LoadAll, func(c Case) string { return c.Name }, wantCases, func(c Case, want spec.Params) {
		got := c.Params
		if got.Shape != want.Shape || got.HeadMap != want.HeadMap {
			t.Errorf("%s: params %v %v, want %v %v", c.Name, got.Shape, got.HeadMap, want.Shape, want.HeadMap)
		}
		if wantScale := float32(1 / math.Sqrt(float64(got.DK))); got.QScale != wantScale {
			t.Errorf("%s: q scale %v, want 1/sqrt(D_k) = %v", c.Name, got.QScale, wantScale)
		}
		if err := c.Inputs.Validate(c.Params); err != nil {
			t.Errorf("%s: %v", c.Name, err)
		}
		if (c.Capture != nil) != (got.NTokens <= 8) {
			t.Errorf("%s: capture present = %v, want it exactly when n_tokens <= 8", c.Name, c.Capture != nil)
		}
		if c.Capture != nil && len(c.Capture) != got.CaptureLen() {
			t.Errorf("%s: capture has %d elements, want %d", c.Name, len(c.Capture), got.CaptureLen())
		}
		for name, x := range map[string][]float32{
			"q": c.Inputs.Q, "k": c.Inputs.K, "v": c.Inputs.V, "g": c.Inputs.G,
			"beta": c.Inputs.Beta, "state_in": c.Inputs.StateIn,
			"output": c.Output, "state_out": c.StateOut,
			"output_f64": c.OutputF64, "state_out_f64": c.StateOutF64, "capture": c.Capture,
		} {
			nonzero := false
			for _, v := range x {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					t.Fatalf("%s: %s holds a non-finite value", c.Name, name)
				}
				nonzero = nonzero || v != 0
			}
			if len(x) > 0 && !nonzero {
				t.Errorf("%s: %s is all zeros", c.Name, name)
			}
		}
		// The gate convention: g >= 0 and beta in (0, 1).
		for i, g := range c.Inputs.G {
			if g < 0 {
				t.Fatalf("%s: g[%d] = %v < 0: gate sign not converted", c.Name, i, g)
			}
		}
		for i, b := range c.Inputs.Beta {
			if b <= 0 || b >= 1 {
				t.Fatalf("%s: beta[%d] = %v outside (0, 1)", c.Name, i, b)
			}
		}
	})
}

// copyCase copies a case folder so a test can damage it.
func copyCase(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	copyFiles(t, src, dst)
	return dst
}

// copyFiles copies the files of folder src into folder dst, making dst.
func copyFiles(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// damage is a way to damage a copy of a case (edit) and what the
// loader's error must name.
type damage struct {
	name string
	edit func(dir string) error
	want []string
}

// checkRejectsDamaged copies the case folder src once per damage, damages
// the copy and checks that load refuses it with an error naming each of
// the damage's want.
func checkRejectsDamaged[C any](t *testing.T, src string, load func(dir string) (C, error), damages []damage) {
	t.Helper()
	for _, d := range damages {
		dir := copyCase(t, src)
		if err := d.edit(dir); err != nil {
			t.Fatal(err)
		}
		_, err := load(dir)
		if err == nil || slices.ContainsFunc(d.want, func(w string) bool { return !strings.Contains(err.Error(), w) }) {
			t.Errorf("%s: error %v, want one naming %s", d.name, err, strings.Join(d.want, " and "))
		}
	}
}

func TestLoadRejectsDamagedCase(t *testing.T) {
	checkRejectsDamaged(t, filepath.Join(Dir(t), "seq3_tiled_d64"), Load, []damage{
		{"truncated v.f32", func(dir string) error {
			path := filepath.Join(dir, "v.f32")
			fi, err := os.Stat(path)
			if err != nil {
				return err
			}
			return os.Truncate(path, fi.Size()-4)
		}, []string{"v.f32", "bytes"}},
		{"unknown head map", func(dir string) error { return editMeta(dir, `"tiled"`, `"diagonal"`) }, []string{"diagonal"}},
	})
	if _, err := Cases(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("Cases on a missing folder: no error")
	}
}

// TestLoadFusedCases loads every case of the fused set and checks what the
// set's README promises: the raw inputs in the activation type, the
// planted edge values, and the truth's capture exactly for n_tokens <= 8.
func TestLoadFusedCases(t *testing.T) {
	for _, c := range LoadSet(t, FusedSubdir) {
		t.Run(c.Name, func(t *testing.T) {
			p := c.Params
			if p.Fused != spec.FusedAll {
				t.Fatalf("fused parts %+v, want all", p.Fused)
			}
			if p.Activation.String() != c.Meta.DType || !strings.HasSuffix(c.Name, "_"+c.Meta.DType) {
				t.Errorf("activation type %v, meta.json dtype %q, case %s", p.Activation, c.Meta.DType, c.Name)
			}
			if wantScale := float32(1 / math.Sqrt(float64(p.DK))); p.QScale != wantScale {
				t.Errorf("q scale %v, want 1/sqrt(D_k) = %v", p.QScale, wantScale)
			}
			// Validate also checks that every activation is a value of the type.
			if err := c.Inputs.Validate(p); err != nil {
				t.Fatal(err)
			}
			if (c.CaptureF64 != nil) != (p.NTokens <= 8) || c.Capture != nil {
				t.Errorf("capture_f64 present = %v, HF capture = %v; want the truth's exactly when n_tokens <= 8", c.CaptureF64 != nil, c.Capture != nil)
			}
			if slices.ContainsFunc(c.Inputs.K[:p.DK], func(x float32) bool { return x != 0 }) {
				t.Errorf("first key vector %v, want all zeros (the epsilon path)", c.Inputs.K[:p.DK])
			}
			for _, w := range []struct {
				name string
				x    []float32
				v    float32
			}{{"a", c.Inputs.G, 25}, {"a", c.Inputs.G, -30}, {"b", c.Inputs.Beta, 30}, {"b", c.Inputs.Beta, -30}} {
				if !slices.Contains(w.x, w.v) {
					t.Errorf("%s holds no planted %v", w.name, w.v)
				}
			}
			for i, g := range c.GF64 {
				if g < 0 || c.BetaF64[i] < 0 || c.BetaF64[i] > 1 {
					t.Fatalf("g_f64[%d] = %v, beta_f64 = %v: want g >= 0 and beta in [0, 1]", i, g, c.BetaF64[i])
				}
			}
			for name, x := range map[string][]float32{
				"output_hf": c.Output, "state_out_hf": c.StateOut, "output_f64": c.OutputF64,
				"state_out_f64": c.StateOutF64, "A_log": c.Inputs.ALog, "dt_bias": c.Inputs.DtBias,
			} {
				if !slices.ContainsFunc(x, func(v float32) bool { return v != 0 }) || slices.ContainsFunc(x, func(v float32) bool { return math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) }) {
					t.Errorf("%s is all zeros or holds a non-finite value", name)
				}
			}
		})
	}
}

// TestLoadRejectsWrongType: a 16-bit file whose name does not match the
// case's type, or whose size is that of another type, is an error naming
// the file.
func TestLoadRejectsWrongType(t *testing.T) {
	var c Case
	for _, x := range LoadSet(t, FusedSubdir) {
		if x.Params.Activation != spec.F32 {
			c = x
			break
		}
	}
	if c.Dir == "" {
		t.Fatal("the fused set has no case with 16-bit activations")
	}
	typ := c.Params.Activation.String()
	other := map[string]string{"f16": "bf16", "bf16": "f16"}[typ]
	a := "a." + typ
	checkRejectsDamaged(t, c.Dir, Load, []damage{
		{"dtype " + other + " over ." + typ + " files", func(dir string) error {
			return editMeta(dir, `"dtype": "`+typ+`"`, `"dtype": "`+other+`"`)
		}, []string{"q." + typ, other}},
		{a + " of twice the size", func(dir string) error {
			path := filepath.Join(dir, a)
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			return os.WriteFile(path, append(b, b...), 0o644)
		}, []string{a, "bytes"}},
	})
}

// TestGoldenEnvReplacesSets: PUREMETAL_GOLDEN names a folder laid out like
// testdata/golden, and the loaders read it instead of the repository's.
func TestGoldenEnvReplacesSets(t *testing.T) {
	if os.Getenv(testenv.GoldenEnv) != "" {
		t.Skipf("%s is set for this run", testenv.GoldenEnv)
	}
	repo := SetDir(t, HFSubdir)
	alt := t.TempDir()
	const name = "decode_d32_mha"
	copyFiles(t, filepath.Join(repo, name), filepath.Join(alt, HFSubdir, "renamed_case"))
	t.Setenv(testenv.GoldenEnv, alt)
	if got := SetDir(t, HFSubdir); got != filepath.Join(alt, HFSubdir) {
		t.Fatalf("SetDir = %s, want the folder under %s", got, alt)
	}
	cases := LoadAll(t)
	if len(cases) != 1 || cases[0].Name != "renamed_case" || cases[0].Params.Shape != wantCases[name].Shape {
		t.Fatalf("with %s=%s loaded %d cases, want the one renamed case", testenv.GoldenEnv, alt, len(cases))
	}
}

// TestSharedMaterialCopied: where the project's shared folder is checked
// out beside the repository (../shared, from which new contract material
// arrives), every golden case and Apple API list there is also in the
// repository's testdata, byte for byte, so nothing the tests should load
// is left outside the clone. A clone with nothing beside it has nothing to
// compare and skips.
func TestSharedMaterialCopied(t *testing.T) {
	root := testenv.RepoRoot(t)
	shared := filepath.Join(filepath.Dir(root), "shared")
	if _, err := os.Stat(shared); err != nil {
		t.Skipf("no shared folder beside the repository at %s: nothing to compare", shared)
	}
	data := testenv.DataDir(t)
	compared := 0
	err := filepath.WalkDir(filepath.Join(shared, "golden"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == "README.md" {
			return err
		}
		rel, _ := filepath.Rel(shared, path)
		compareFile(t, path, filepath.Join(data, rel))
		compared++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"selectors.txt", "signatures.txt"} {
		compareFile(t, filepath.Join(shared, "apple-api", name), filepath.Join(data, "apple-api", name))
		compared++
	}
	t.Logf("%d files of %s are in %s", compared, shared, data)
}

func compareFile(t *testing.T, want, got string) {
	t.Helper()
	w, err := os.ReadFile(want)
	if err != nil {
		t.Fatal(err)
	}
	g, err := os.ReadFile(got)
	if err != nil {
		t.Errorf("%s is not in the repository (copy it to %s): %v", want, got, err)
		return
	}
	if !bytes.Equal(w, g) {
		t.Errorf("%s differs from %s: copy it again", got, want)
	}
}
