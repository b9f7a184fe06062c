// Package golden loads the Gated DeltaNet golden vectors kept in the
// repository's testdata/golden (testdata/golden/README.md; the folder named
// by PUREMETAL_GOLDEN replaces it for a run): sets of cases computed with HF
// transformers' Qwen3-Next reference, already converted to puremetal's
// layouts and gate sign. [HFSubdir] holds float32 cases of the recurrence
// on given gates; [FusedSubdir] holds cases of the fused step (SPEC section
// 10: raw q and k, the raw gate projections a and b, A_log and dt_bias)
// with float32, bfloat16 or float16 activations. Each case is a folder
// with meta.json and raw little-endian files NAME.f32 (float32), NAME.bf16
// (bfloat16) or NAME.f16 (IEEE half), each widened to float32 on loading.
package golden

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/half"
	"github.com/puremetal/puremetal/internal/floats"
	"github.com/puremetal/puremetal/internal/testenv"
)

// HFSubdir is the folder of the HF transformers cases on given gates,
// relative to the golden folder.
const HFSubdir = "hf-qwen3next"

// FusedSubdir is the folder of the HF transformers cases of the fused step,
// relative to the golden folder.
const FusedSubdir = "hf-qwen3next-fused"

// LayerSubdir is the folder of the cases of the whole layer core (SPEC.md
// section 13), relative to the golden folder.
const LayerSubdir = "hf-qwen3next-layer"

// Meta is a case's meta.json. File shapes are listed outermost first.
type Meta struct {
	Name       string          `json:"name"`
	Seed       int64           `json:"seed"`
	DK         int             `json:"d_k"`
	DV         int             `json:"d_v"`
	NKHeads    int             `json:"n_k_heads"`
	NVHeads    int             `json:"n_v_heads"`
	NTokens    int             `json:"n_tokens"`
	NSeqs      int             `json:"n_seqs"`
	HeadMap    string          `json:"head_map"`
	QScale     float64         `json:"q_scale"`
	QPrescaled bool            `json:"q_prescaled"`
	Producer   string          `json:"producer"`
	Files      map[string]File `json:"files"`

	// The fused cases' activation type ("f32", "bf16", "f16"; empty in the
	// cases on given gates) and the constants of their step.
	DType             string  `json:"dtype"`
	L2NormEps         float64 `json:"l2norm_eps"`
	SoftplusThreshold float64 `json:"softplus_threshold"`

	// Agreement figures recorded by the producer (relative to the largest
	// magnitude): HF float32 against a float64 loop, and HF's chunked form
	// against the float64 loop; for the fused cases, HF's output and state
	// against the float64 truth.
	HFF32VsF64OutputRel   float64 `json:"hf_f32_vs_f64_output_rel"`
	HFF32VsF64StateRel    float64 `json:"hf_f32_vs_f64_state_rel"`
	HFChunkVsF64OutputRel float64 `json:"hf_chunk_vs_f64_output_rel"`
	HFOutputVsF64Rel      float64 `json:"hf_output_vs_f64_rel"`
	HFStateVsF64Rel       float64 `json:"hf_state_vs_f64_rel"`
}

// File is one entry of meta.json's file list: the file's shape, outermost
// first, and its name. A bare shape (the cases on given gates) names the
// float32 file NAME.f32.
type File struct {
	Shape []int
	Name  string // file name in the case folder; its extension gives the element type
}

// UnmarshalJSON reads either {"shape": [...], "file": "..."} or a bare
// shape.
func (f *File) UnmarshalJSON(b []byte) error {
	if b = bytes.TrimSpace(b); len(b) > 0 && b[0] == '[' {
		return json.Unmarshal(b, &f.Shape)
	}
	var v struct {
		Shape []int  `json:"shape"`
		File  string `json:"file"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	f.Shape, f.Name = v.Shape, v.File
	return nil
}

// Case is one golden case: parameters and inputs for cpuref and the
// kernels, and the expected results, all in puremetal's layouts and
// widened to float32. A fused case has Params.Fused = spec.FusedAll, its
// activation type in Params.Activation, and a and b in Inputs.G and
// Inputs.Beta.
type Case struct {
	Name   string
	Dir    string
	Meta   Meta
	Params spec.Params
	Inputs cpuref.Inputs

	Output      []float32 // HF's output, in the activation type
	StateOut    []float32 // HF's final state
	OutputF64   []float32 // the producer's float64 loop (the truth), rounded to float32
	StateOutF64 []float32 // likewise
	Capture     []float32 // HF's state after each token; nil when the case has none
	CaptureF64  []float32 // the float64 loop's state after each token; nil when the case has none
	GF64        []float32 // a fused case's gates from the float64 loop (alpha = exp(-g)); nil otherwise
	BetaF64     []float32 // likewise
}

// Fused reports whether c is a case of the fused step.
func (c Case) Fused() bool { return c.Params.Fused != spec.Fused{} }

// Dir returns the folder of the HF cases on given gates,
// testdata/golden/hf-qwen3next, skipping the test (failing it in strict
// mode) when it is missing.
func Dir(t testing.TB) string {
	t.Helper()
	return SetDir(t, HFSubdir)
}

// SetDir returns the folder of the set subdir (such as [FusedSubdir])
// under the golden folder. A set missing from the repository fails the
// test; one missing from the folder $PUREMETAL_GOLDEN names skips it (fails
// it in strict mode).
func SetDir(t testing.TB, subdir string) string {
	t.Helper()
	dir := filepath.Join(testenv.GoldenDir(t), filepath.FromSlash(subdir))
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		if os.Getenv(testenv.GoldenEnv) != "" {
			testenv.SkipOrFail(t, "golden set not found at "+dir+" ("+testenv.GoldenEnv+" names a folder without it)")
		}
		t.Fatalf("golden set missing from the repository at %s", dir)
	}
	return dir
}

// LoadAll returns every case under Dir(t), failing the test on any error
// and skipping (failing in strict mode) when there are none.
func LoadAll(t testing.TB) []Case {
	t.Helper()
	return LoadSet(t, HFSubdir)
}

// LoadSet returns every case of the set subdir (see [SetDir]), failing the
// test on any error and skipping (failing in strict mode) when there are
// none.
func LoadSet(t testing.TB, subdir string) []Case {
	t.Helper()
	return loadSet(t, subdir, Cases)
}

// loadSet returns the cases cases loads from the set subdir, failing the
// test on any error and skipping (failing in strict mode) when there are
// none.
func loadSet[C any](t testing.TB, subdir string, cases func(dir string) ([]C, error)) []C {
	t.Helper()
	dir := SetDir(t, subdir)
	cs, err := cases(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) == 0 {
		testenv.SkipOrFail(t, "no golden cases in "+dir)
	}
	return cs
}

// Cases loads every case folder under dir (each subfolder holding a
// meta.json), sorted by name.
func Cases(dir string) ([]Case, error) { return loadCases(dir, Load) }

// loadCases loads with load every folder under dir that holds a
// meta.json, in the order of their names.
func loadCases[C any](dir string, load func(dir string) (C, error)) ([]C, error) {
	entries, err := os.ReadDir(dir) // sorted by name
	if err != nil {
		return nil, fmt.Errorf("golden: %w", err)
	}
	var cases []C
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		sub := filepath.Join(dir, e.Name())
		if _, err := os.Stat(filepath.Join(sub, "meta.json")); err != nil {
			continue
		}
		c, err := load(sub)
		if err != nil {
			return nil, err
		}
		cases = append(cases, c)
	}
	return cases, nil
}

// readMeta decodes the meta.json of the case folder dir into meta.
func readMeta(dir string, meta any) error {
	raw, err := os.ReadFile(filepath.Join(dir, "meta.json"))
	if err != nil {
		return fmt.Errorf("golden: %w", err)
	}
	if err := json.Unmarshal(raw, meta); err != nil {
		return fmt.Errorf("golden: %s/meta.json: %w", filepath.Base(dir), err)
	}
	return nil
}

// readCaseMeta reads the meta.json of the case in folder dir into meta and
// parses the head map it records.
func readCaseMeta[M interface{ headMap() string }](dir string, meta *M) (spec.HeadMap, error) {
	if err := readMeta(dir, meta); err != nil {
		return 0, err
	}
	hm, err := spec.ParseHeadMap((*meta).headMap())
	if err != nil {
		return 0, fmt.Errorf("golden: %s: %w", filepath.Base(dir), err)
	}
	return hm, nil
}

func (m Meta) headMap() string      { return m.HeadMap }
func (m LayerMeta) headMap() string { return m.HeadMap }

// Files of a case and where they go. Each needs one of the sets, or is
// optional in both.
type need int

const (
	always need = iota
	givenGates
	fusedStep
	optional
)

// Load reads the case in folder dir, checking every file's recorded shape,
// element type and size against the case's parameters. A case listing the
// raw gate projection a is a case of the fused step.
func Load(dir string) (Case, error) {
	c := Case{Name: filepath.Base(dir), Dir: dir}
	hm, err := readCaseMeta(dir, &c.Meta)
	if err != nil {
		return c, err
	}
	m := c.Meta
	c.Params = spec.Params{
		Shape: spec.Shape{
			DK: m.DK, DV: m.DV, NKHeads: m.NKHeads, NVHeads: m.NVHeads,
			NTokens: m.NTokens, NSeqs: m.NSeqs,
		},
		HeadMap: hm,
		QScale:  float32(m.QScale),
	}
	if m.QPrescaled {
		c.Params.QScale = 0
	}
	_, fused := m.Files["a"]
	if fused {
		c.Params.Fused = spec.FusedAll
		if c.Params.Activation, err = parseType(m.DType); err != nil {
			return c, fmt.Errorf("golden: %s: meta.json dtype: %w", c.Name, err)
		}
		if m.L2NormEps != 1e-6 || m.SoftplusThreshold != 20 {
			return c, fmt.Errorf("golden: %s: l2norm_eps %g and softplus_threshold %g, SPEC section 10 fixes 1e-6 and 20", c.Name, m.L2NormEps, m.SoftplusThreshold)
		}
	}
	if err := c.Params.Validate(); err != nil {
		return c, fmt.Errorf("golden: %s: %w", c.Name, err)
	}

	// Shapes outermost first, as meta.json records them.
	act, st := c.Params.Activation, c.Params.State
	qk := []int{m.NSeqs, m.NTokens, m.NKHeads, m.DK}
	v := []int{m.NSeqs, m.NTokens, m.NVHeads, m.DV}
	gate := []int{m.NSeqs, m.NTokens, m.NVHeads}
	heads := []int{m.NVHeads}
	state := []int{m.NSeqs, m.NVHeads, m.DV, m.DK}
	capture := []int{m.NSeqs, m.NTokens, m.NVHeads, m.DV, m.DK}
	files := []caseFile{
		{"q", qk, act, &c.Inputs.Q, always},
		{"k", qk, act, &c.Inputs.K, always},
		{"v", v, act, &c.Inputs.V, always},
		{"g", gate, act, &c.Inputs.G, givenGates},
		{"beta", gate, act, &c.Inputs.Beta, givenGates},
		{"a", gate, act, &c.Inputs.G, fusedStep},
		{"b", gate, act, &c.Inputs.Beta, fusedStep},
		{"A_log", heads, spec.F32, &c.Inputs.ALog, fusedStep},
		{"dt_bias", heads, spec.F32, &c.Inputs.DtBias, fusedStep},
		{"state_in", state, st, &c.Inputs.StateIn, always},
		{"output", v, act, &c.Output, givenGates},
		{"state_out", state, st, &c.StateOut, givenGates},
		{"output_hf", v, act, &c.Output, fusedStep},
		{"state_out_hf", state, st, &c.StateOut, fusedStep},
		{"output_f64", v, spec.F32, &c.OutputF64, always},
		{"state_out_f64", state, spec.F32, &c.StateOutF64, always},
		{"g_f64", gate, spec.F32, &c.GF64, fusedStep},
		{"beta_f64", gate, spec.F32, &c.BetaF64, fusedStep},
		{"capture", capture, st, &c.Capture, optional},
		{"capture_f64", capture, spec.F32, &c.CaptureF64, optional},
	}
	return c, readFiles(dir, m.Files, files, fused, "case")
}

// caseFile is a file of a case: its name in meta.json, the shape the
// parameters imply (outermost first), its element type, where its values
// go and which cases have it.
type caseFile struct {
	name  string
	shape []int
	typ   spec.ElemType
	dst   *[]float32
	need  need
}

// readFiles reads files from the case folder dir as meta.json lists them
// (listed; a bare shape names the file NAME.f32), after checking that
// listed names none but files, and of those every one that a case (of the
// fused step or not) needs and none that it does not have; that each
// recorded shape is the one the parameters imply; and that each file name
// is NAME.TYPE for the file's element type. kind names the case in the
// messages.
func readFiles(dir string, listed map[string]File, files []caseFile, fused bool, kind string) error {
	name := filepath.Base(dir)
	for l := range listed {
		if !slices.ContainsFunc(files, func(f caseFile) bool { return f.name == l }) {
			return fmt.Errorf("golden: %s: meta.json lists %s, which is no file of a %s", name, l, kind)
		}
	}
	for _, f := range files {
		recorded, ok := listed[f.name]
		needed := f.need == always || f.need == givenGates && !fused || f.need == fusedStep && fused
		switch {
		case !ok && needed:
			return fmt.Errorf("golden: %s: meta.json lists no %s", name, f.name)
		case !ok:
			continue
		case !needed && f.need != optional && fused:
			return fmt.Errorf("golden: %s: meta.json lists %s, which a case of the fused step does not have", name, f.name)
		case !needed && f.need != optional:
			return fmt.Errorf("golden: %s: meta.json lists %s, which a case on given gates does not have", name, f.name)
		}
		if !slices.Equal(recorded.Shape, f.shape) {
			return fmt.Errorf("golden: %s: %s has shape %v in meta.json, the parameters imply %v", name, f.name, recorded.Shape, f.shape)
		}
		if recorded.Name == "" {
			recorded.Name = f.name + ".f32"
		}
		if want := f.name + "." + f.typ.String(); recorded.Name != want {
			return fmt.Errorf("golden: %s: %s is in %q, want %s (element type %v)", name, f.name, recorded.Name, want, f.typ)
		}
		n := 1
		for _, d := range f.shape {
			n *= d
		}
		data, err := readFile(filepath.Join(dir, recorded.Name), f.typ, n)
		if err != nil {
			return fmt.Errorf("golden: %s: %w", name, err)
		}
		*f.dst = data
	}
	return nil
}

// parseType turns "f32", "f16" or "bf16" into an element type.
func parseType(s string) (spec.ElemType, error) {
	for _, t := range []spec.ElemType{spec.F32, spec.F16, spec.BF16} {
		if s == t.String() {
			return t, nil
		}
	}
	return 0, fmt.Errorf("element type %q: want f32, f16 or bf16", s)
}

// readFile reads a file of exactly n little-endian values of type t,
// widened to float32.
func readFile(path string, t spec.ElemType, n int) ([]float32, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(raw) != t.Size()*n {
		return nil, fmt.Errorf("%s has %d bytes, want %d (%d %v)", filepath.Base(path), len(raw), t.Size()*n, n, t)
	}
	switch t {
	case spec.F16:
		x := make([]float32, n)
		half.DecodeFloat16(x, raw)
		return x, nil
	case spec.BF16:
		x := make([]float32, n)
		half.DecodeBFloat16(x, raw)
		return x, nil
	}
	return floats.FromBytes(raw), nil
}
