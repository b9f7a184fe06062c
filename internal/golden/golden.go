// Package golden loads the Gated DeltaNet golden vectors kept beside the
// repository in ../shared/golden/hf-qwen3next/: cases computed by HF
// transformers' Qwen3-Next reference, already converted to puremetal's
// layouts and gate sign. Each case is a folder with meta.json and raw
// little-endian float32 files NAME.f32.
package golden

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/internal/testenv"
)

// HFSubdir is the folder of the HF transformers cases, relative to shared/.
const HFSubdir = "golden/hf-qwen3next"

// Meta is a case's meta.json. File shapes are listed outermost first.
type Meta struct {
	Name       string           `json:"name"`
	Seed       int64            `json:"seed"`
	DK         int              `json:"d_k"`
	DV         int              `json:"d_v"`
	NKHeads    int              `json:"n_k_heads"`
	NVHeads    int              `json:"n_v_heads"`
	NTokens    int              `json:"n_tokens"`
	NSeqs      int              `json:"n_seqs"`
	HeadMap    string           `json:"head_map"`
	QScale     float64          `json:"q_scale"`
	QPrescaled bool             `json:"q_prescaled"`
	Producer   string           `json:"producer"`
	Files      map[string][]int `json:"files"`

	// Agreement figures recorded by the producer (relative to the largest
	// magnitude): HF float32 against a float64 loop, and HF's chunked form
	// against the float64 loop.
	HFF32VsF64OutputRel   float64 `json:"hf_f32_vs_f64_output_rel"`
	HFF32VsF64StateRel    float64 `json:"hf_f32_vs_f64_state_rel"`
	HFChunkVsF64OutputRel float64 `json:"hf_chunk_vs_f64_output_rel"`
}

// Case is one golden case: parameters and inputs for cpuref and the
// kernels, and the expected results, all in puremetal's layouts.
type Case struct {
	Name   string
	Dir    string
	Meta   Meta
	Params spec.Params
	Inputs cpuref.Inputs

	Output      []float32 // HF's float32 output
	StateOut    []float32 // HF's float32 final state
	OutputF64   []float32 // the producer's float64 loop, rounded to float32
	StateOutF64 []float32 // likewise
	Capture     []float32 // state after each token; nil when the case has none
}

// Dir returns the folder of the HF cases, ../shared/golden/hf-qwen3next,
// skipping the test (failing it in strict mode) when it is missing.
func Dir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(testenv.SharedDir(t), filepath.FromSlash(HFSubdir))
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		testenv.SkipOrFail(t, "golden vectors not found at "+dir)
	}
	return dir
}

// LoadAll returns every case under Dir(t), failing the test on any error
// and skipping (failing in strict mode) when there are none.
func LoadAll(t testing.TB) []Case {
	t.Helper()
	dir := Dir(t)
	cases, err := Cases(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		testenv.SkipOrFail(t, "no golden cases in "+dir)
	}
	return cases
}

// Cases loads every case folder under dir (each subfolder holding a
// meta.json), sorted by name.
func Cases(dir string) ([]Case, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("golden: %w", err)
	}
	var cases []Case
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		sub := filepath.Join(dir, e.Name())
		if _, err := os.Stat(filepath.Join(sub, "meta.json")); err != nil {
			continue
		}
		c, err := Load(sub)
		if err != nil {
			return nil, err
		}
		cases = append(cases, c)
	}
	slices.SortFunc(cases, func(a, b Case) int { return cmp.Compare(a.Name, b.Name) })
	return cases, nil
}

// Load reads the case in folder dir, checking every file's recorded shape
// and size against the case's parameters.
func Load(dir string) (Case, error) {
	c := Case{Name: filepath.Base(dir), Dir: dir}
	raw, err := os.ReadFile(filepath.Join(dir, "meta.json"))
	if err != nil {
		return c, fmt.Errorf("golden: %w", err)
	}
	if err := json.Unmarshal(raw, &c.Meta); err != nil {
		return c, fmt.Errorf("golden: %s/meta.json: %w", c.Name, err)
	}
	m := c.Meta
	hm, err := spec.ParseHeadMap(m.HeadMap)
	if err != nil {
		return c, fmt.Errorf("golden: %s: %w", c.Name, err)
	}
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
	if err := c.Params.Validate(); err != nil {
		return c, fmt.Errorf("golden: %s: %w", c.Name, err)
	}

	// Shapes outermost first, as meta.json records them.
	qk := []int{m.NSeqs, m.NTokens, m.NKHeads, m.DK}
	v := []int{m.NSeqs, m.NTokens, m.NVHeads, m.DV}
	gate := []int{m.NSeqs, m.NTokens, m.NVHeads}
	state := []int{m.NSeqs, m.NVHeads, m.DV, m.DK}
	capture := []int{m.NSeqs, m.NTokens, m.NVHeads, m.DV, m.DK}
	files := []struct {
		name     string
		shape    []int
		dst      *[]float32
		optional bool
	}{
		{"q", qk, &c.Inputs.Q, false},
		{"k", qk, &c.Inputs.K, false},
		{"v", v, &c.Inputs.V, false},
		{"g", gate, &c.Inputs.G, false},
		{"beta", gate, &c.Inputs.Beta, false},
		{"state_in", state, &c.Inputs.StateIn, false},
		{"output", v, &c.Output, false},
		{"state_out", state, &c.StateOut, false},
		{"output_f64", v, &c.OutputF64, false},
		{"state_out_f64", state, &c.StateOutF64, false},
		{"capture", capture, &c.Capture, true},
	}
	for _, f := range files {
		recorded, listed := m.Files[f.name]
		if !listed {
			if f.optional {
				continue
			}
			return c, fmt.Errorf("golden: %s: meta.json lists no %s", c.Name, f.name)
		}
		if !slices.Equal(recorded, f.shape) {
			return c, fmt.Errorf("golden: %s: %s has shape %v in meta.json, the parameters imply %v", c.Name, f.name, recorded, f.shape)
		}
		n := 1
		for _, d := range f.shape {
			n *= d
		}
		data, err := readF32(filepath.Join(dir, f.name+".f32"), n)
		if err != nil {
			return c, fmt.Errorf("golden: %s: %w", c.Name, err)
		}
		*f.dst = data
	}
	return c, nil
}

// readF32 reads a file of exactly n little-endian float32 values.
func readF32(path string, n int) ([]float32, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(raw) != 4*n {
		return nil, fmt.Errorf("%s has %d bytes, want %d (%d float32)", filepath.Base(path), len(raw), 4*n, n)
	}
	x := make([]float32, n)
	for i := range x {
		x[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return x, nil
}
