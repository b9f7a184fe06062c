package golden

import (
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/puremetal/puremetal/checkpoint"
	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/gdn/spec"
)

// LayerMeta is the meta.json of a case of the layer set ([LayerSubdir]).
// File shapes are listed outermost first.
type LayerMeta struct {
	Case       string             `json:"case"`
	DK         int                `json:"D_k"`
	DV         int                `json:"D_v"`
	NKHeads    int                `json:"n_k_heads"`
	NVHeads    int                `json:"n_v_heads"`
	ConvKernel int                `json:"conv_kernel"`
	ConvDim    int                `json:"conv_dim"`
	Hidden     int                `json:"hidden"`
	NSeqs      int                `json:"n_seqs"`
	HeadMap    string             `json:"head_map"`
	Type       string             `json:"type"`
	Eps        float64            `json:"eps"`
	Steps      []int              `json:"steps"`
	Peer       string             `json:"peer"`
	Errors     map[string]float64 `json:"errors"`
	Files      map[string]File    `json:"files"`
}

// LayerCase is one case of the layer set: a Qwen3-Next linear-attention
// layer's weights and the steps of a generation (a prefill from empty
// caches, then one-token decodes with both caches carried), in
// puremetal's layouts and widened to float32.
type LayerCase struct {
	Name string
	Dir  string
	Meta LayerMeta

	// Weights, as HF stores them (outermost first): InProjQKVZ [rows,
	// hidden] and InProjBA [2 n_v_heads, hidden] in Qwen3-Next's row order
	// (grouped per key head, SPEC section 13), OutProj [hidden, n_v_heads
	// D_v]; ConvWeight [conv_dim, K] (SPEC's [K, conv_dim], K fastest),
	// NormWeight [D_v], all of the case's type; ALog and DtBias [n_v_heads]
	// f32.
	InProjQKVZ, InProjBA, OutProj []float32
	ConvWeight, NormWeight        []float32
	ALog, DtBias                  []float32

	Steps []LayerStep
}

// LayerStep is one call of a layer case.
type LayerStep struct {
	// Params of the step: its tokens per sequence, the case's shape and
	// type, spec.FusedAll, spec.QwenCore() with the case's eps, q scale
	// 1/sqrt(D_k), an f32 state.
	Params spec.Params

	Hidden                 []float32 // [hidden, n_tokens, n_seqs]
	MixedQKV, Z, A, B      []float32 // the projections, in kernel order
	CoreF64, OutF64        []float32 // the truth: the gated-RMSNorm output, after out_proj
	StateF64, ConvStateF64 []float32 // the truth: the caches after the step
	CoreHF, OutHF, StateHF []float32 // HF's forward, rounded as HF rounds
}

// Projection is one of a step's projections: as computed from its hidden
// states (Got) and as the case stores it (Want).
type Projection struct {
	Name      string
	Got, Want []float32
}

// Projections pairs the projections mixed_qkv, z, a and b computed for
// step s with the ones the case stores, in that order.
func (s LayerStep) Projections(mixed, z, a, b []float32) []Projection {
	return []Projection{{"mixed_qkv", mixed, s.MixedQKV}, {"z", z, s.Z}, {"a", a, s.A}, {"b", b, s.B}}
}

// Inputs returns the inputs of step i for cpuref (and, viewed in buffers,
// for the kernels), reading the recurrent state and the conv state the
// previous step left (zeros for step 0).
func (c LayerCase) Inputs(i int, state, convState []float32) cpuref.Inputs {
	s := c.Steps[i]
	return cpuref.Inputs{
		G: s.A, Beta: s.B, StateIn: state,
		ALog: c.ALog, DtBias: c.DtBias,
		MixedQKV: s.MixedQKV, ConvWeight: c.ConvWeight, ConvState: convState,
		Z: s.Z, NormWeight: c.NormWeight,
	}
}

// LoadLayerSet returns every case of the layer set, failing the test on any
// error and skipping (failing in strict mode) when there are none.
func LoadLayerSet(t testing.TB) []LayerCase {
	t.Helper()
	return loadSet(t, LayerSubdir, LayerCases)
}

// LayerCases loads every case folder under dir (each subfolder holding a
// meta.json), sorted by name.
func LayerCases(dir string) ([]LayerCase, error) { return loadCases(dir, LoadLayer) }

// LoadLayer reads the layer case in folder dir, checking its parameters
// and every file's recorded shape, element type and size.
func LoadLayer(dir string) (LayerCase, error) {
	c := LayerCase{Name: filepath.Base(dir), Dir: dir}
	hm, err := readCaseMeta(dir, &c.Meta)
	if err != nil {
		return c, err
	}
	m := c.Meta
	act, err := parseType(m.Type)
	if err != nil {
		return c, fmt.Errorf("golden: %s: meta.json type: %w", c.Name, err)
	}
	if len(m.Steps) == 0 {
		return c, fmt.Errorf("golden: %s: meta.json lists no steps", c.Name)
	}
	base := spec.Params{
		Shape:      spec.Shape{DK: m.DK, DV: m.DV, NKHeads: m.NKHeads, NVHeads: m.NVHeads, NTokens: m.Steps[0], NSeqs: m.NSeqs},
		HeadMap:    hm,
		QScale:     float32(1 / math.Sqrt(float64(m.DK))),
		Activation: act,
		Fused:      spec.FusedAll,
		Core:       spec.QwenCore(),
	}
	base.Core.Conv, base.Core.NormEps = m.ConvKernel, float32(m.Eps)
	if err := base.Validate(); err != nil {
		return c, fmt.Errorf("golden: %s: %w", c.Name, err)
	}
	if m.ConvDim != base.ConvDim() {
		return c, fmt.Errorf("golden: %s: conv_dim %d, the shape implies %d", c.Name, m.ConvDim, base.ConvDim())
	}
	if m.Hidden <= 0 {
		return c, fmt.Errorf("golden: %s: hidden %d, must be > 0", c.Name, m.Hidden)
	}

	nk, nv, dk, dv, ns, hid := m.NKHeads, m.NVHeads, m.DK, m.DV, m.NSeqs, m.Hidden
	files := []caseFile{
		{"in_proj_qkvz", []int{2*nk*dk + 2*nv*dv, hid}, act, &c.InProjQKVZ, always},
		{"in_proj_ba", []int{2 * nv, hid}, act, &c.InProjBA, always},
		{"out_proj", []int{hid, nv * dv}, act, &c.OutProj, always},
		{"conv1d", []int{m.ConvDim, m.ConvKernel}, act, &c.ConvWeight, always},
		{"norm", []int{dv}, act, &c.NormWeight, always},
		{"A_log", []int{nv}, spec.F32, &c.ALog, always},
		{"dt_bias", []int{nv}, spec.F32, &c.DtBias, always},
	}
	c.Steps = make([]LayerStep, len(m.Steps))
	for i, n := range m.Steps {
		s := &c.Steps[i]
		s.Params = base
		s.Params.NTokens = n
		if err := s.Params.Validate(); err != nil {
			return c, fmt.Errorf("golden: %s: step %d: %w", c.Name, i, err)
		}
		pre := fmt.Sprintf("s%d_", i)
		act3 := []int{ns, n, nv, dv}
		files = append(files,
			caseFile{pre + "hidden", []int{ns, n, hid}, act, &s.Hidden, always},
			caseFile{pre + "mixed_qkv", []int{ns, n, m.ConvDim}, act, &s.MixedQKV, always},
			caseFile{pre + "z", act3, act, &s.Z, always},
			caseFile{pre + "a", []int{ns, n, nv}, act, &s.A, always},
			caseFile{pre + "b", []int{ns, n, nv}, act, &s.B, always},
			caseFile{pre + "core_f64", act3, spec.F32, &s.CoreF64, always},
			caseFile{pre + "out_f64", []int{ns, n, hid}, spec.F32, &s.OutF64, always},
			caseFile{pre + "state_f64", []int{ns, nv, dv, dk}, spec.F32, &s.StateF64, always},
			caseFile{pre + "conv_state_f64", []int{ns, m.ConvKernel - 1, m.ConvDim}, spec.F32, &s.ConvStateF64, always},
			caseFile{pre + "core_hf", act3, act, &s.CoreHF, always},
			caseFile{pre + "out_hf", []int{ns, n, hid}, act, &s.OutHF, always},
			caseFile{pre + "state_hf", []int{ns, nv, dv, dk}, spec.F32, &s.StateHF, always},
		)
	}
	return c, readFiles(dir, m.Files, files, false, "layer case")
}

// Project computes the projections of step i from its hidden states and
// the case's weights, in float64 on the CPU: Qwen3-Next's in_proj_qkvz and
// in_proj_ba rows permuted once into the core's order (package checkpoint),
// each product rounded once to float32 and then to the case's type, as a
// layer's projections hand the core mixed_qkv, z, a and b.
func (c LayerCase) Project(i int) (mixed, z, a, b []float32, err error) {
	m := c.Meta
	h := checkpoint.Heads{DK: m.DK, DV: m.DV, NKHeads: m.NKHeads, NVHeads: m.NVHeads}
	qkvzRows, err := checkpoint.QKVZRows(h)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	baRows, err := checkpoint.BARows(h)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	qkvz, err := checkpoint.Permute(c.InProjQKVZ, m.Hidden, qkvzRows)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	ba, err := checkpoint.Permute(c.InProjBA, m.Hidden, baRows)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	s := c.Steps[i]
	hidden := cpuref.Widen(s.Hidden)
	xz := cpuref.Linear64(hidden, cpuref.Widen(qkvz), len(qkvz)/m.Hidden, m.Hidden)
	xba := cpuref.Linear64(hidden, cpuref.Widen(ba), len(ba)/m.Hidden, m.Hidden)
	cd, nz, nv := m.ConvDim, m.NVHeads*m.DV, m.NVHeads
	for tok := 0; tok < len(s.Hidden)/m.Hidden; tok++ {
		row := xz[tok*(cd+nz) : (tok+1)*(cd+nz)]
		mixed = append(mixed, round32(row[:cd])...)
		z = append(z, round32(row[cd:])...)
		gb := xba[tok*2*nv : (tok+1)*2*nv]
		b = append(b, round32(gb[:nv])...)
		a = append(a, round32(gb[nv:])...)
	}
	for _, x := range [][]float32{mixed, z, a, b} {
		cpuref.Round(s.Params.Activation, x)
	}
	return mixed, z, a, b, nil
}

// Out applies the case's out_proj ([hidden, n_v_heads D_v]) to every
// token of a core output ([n_tokens, n_v_heads D_v]), in float64
// (cpuref.Linear64).
func (c LayerCase) Out(core []float32) []float64 {
	return cpuref.Linear64(cpuref.Widen(core), cpuref.Widen(c.OutProj), c.Meta.Hidden, c.Meta.NVHeads*c.Meta.DV)
}

func round32(x []float64) []float32 {
	y := make([]float32, len(x))
	for i, v := range x {
		y[i] = float32(v)
	}
	return y
}
