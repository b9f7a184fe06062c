package checkpoint

import (
	"fmt"
	"slices"
)

// Layer is a linear-attention layer's weights, widened to float32, with
// the projections' rows in the order the layer core reads (SPEC.md section
// 13): whatever checkpoint it came from, InProjQKV emits mixed_qkv (q of
// every key head, k of every key head, v of every value head), InProjZ z,
// InProjB b and InProjA a.
type Layer struct {
	Heads
	Hidden int    // the model's hidden size
	Conv   int    // K, the convolution's kernel size
	Format string // "qwen3-next" (in_proj_qkvz, in_proj_ba, rows permuted at load) or "qwen3.5"
	DType  string // the projections' dtype in the file

	InProjQKV        []float32 // [conv_dim, hidden], row-major
	InProjZ          []float32 // [n_v_heads D_v, hidden]
	InProjB, InProjA []float32 // [n_v_heads, hidden]
	ConvWeight       []float32 // [K, conv_dim], K fastest (HF's [conv_dim, 1, K])
	ALog, DtBias     []float32 // [n_v_heads]
	NormWeight       []float32 // [D_v]
	OutProj          []float32 // [hidden, n_v_heads D_v]
}

// LoadLayer reads the linear-attention layer whose tensors are named
// prefix + HF's names (prefix such as "model.layers.0.linear_attn." for
// Qwen3-Next, "model.language_model.layers.0.linear_attn." for Qwen3.5):
// in_proj_qkvz.weight and in_proj_ba.weight (Qwen3-Next; their rows are
// permuted once here, see [QKVZRows] and [BARows]) or in_proj_qkv.weight,
// in_proj_z.weight, in_proj_b.weight and in_proj_a.weight (Qwen3.5);
// conv1d.weight, A_log, dt_bias, norm.weight and out_proj.weight. h gives
// the head layout (the model's config). Every tensor's shape is checked
// against h and the hidden size out_proj implies; a missing or misshapen
// tensor is an error naming it.
func LoadLayer(st *Safetensors, prefix string, h Heads) (*Layer, error) {
	if err := h.validate(); err != nil {
		return nil, err
	}
	get := func(name string) (Tensor, []float32, error) {
		t, ok := st.Tensor(prefix + name)
		if !ok {
			return Tensor{}, nil, fmt.Errorf("checkpoint: no tensor %s%s", prefix, name)
		}
		x, err := t.Float32s()
		return t, x, err
	}
	shaped := func(t Tensor, want ...int) error {
		if !slices.Equal(t.Shape, want) {
			return fmt.Errorf("checkpoint: tensor %s has shape %v, the layer's heads %+v imply %v", t.Name, t.Shape, h, want)
		}
		return nil
	}
	l := &Layer{Heads: h}
	out, outW, err := get("out_proj.weight")
	if err != nil {
		return nil, err
	}
	if len(out.Shape) != 2 || out.Shape[1] != h.NVHeads*h.DV || out.Shape[0] <= 0 {
		return nil, fmt.Errorf("checkpoint: tensor %s has shape %v, want [hidden, n_v_heads*D_v = %d]", out.Name, out.Shape, h.NVHeads*h.DV)
	}
	l.Hidden, l.OutProj = out.Shape[0], outW
	hid, nv, vd, cd := l.Hidden, h.NVHeads, h.NVHeads*h.DV, h.ConvDim()
	if _, ok := st.Tensor(prefix + "in_proj_qkvz.weight"); ok {
		l.Format = "qwen3-next"
		qkvz, w, err := get("in_proj_qkvz.weight")
		if err != nil {
			return nil, err
		}
		if err := shaped(qkvz, cd+vd, hid); err != nil {
			return nil, err
		}
		ba, wba, err := get("in_proj_ba.weight")
		if err != nil {
			return nil, err
		}
		if err := shaped(ba, 2*nv, hid); err != nil {
			return nil, err
		}
		rows, _ := QKVZRows(h)
		if w, err = Permute(w, hid, rows); err != nil {
			return nil, err
		}
		baRows, _ := BARows(h)
		if wba, err = Permute(wba, hid, baRows); err != nil {
			return nil, err
		}
		l.DType = qkvz.DType
		l.InProjQKV, l.InProjZ = w[:cd*hid], w[cd*hid:]
		l.InProjB, l.InProjA = wba[:nv*hid], wba[nv*hid:]
	} else {
		l.Format = "qwen3.5"
		for _, p := range []struct {
			name string
			rows int
			dst  *[]float32
		}{{"in_proj_qkv.weight", cd, &l.InProjQKV}, {"in_proj_z.weight", vd, &l.InProjZ}, {"in_proj_b.weight", nv, &l.InProjB}, {"in_proj_a.weight", nv, &l.InProjA}} {
			t, x, err := get(p.name)
			if err != nil {
				return nil, fmt.Errorf("%w (neither Qwen3-Next's in_proj_qkvz nor Qwen3.5's projections are all there)", err)
			}
			if err := shaped(t, p.rows, hid); err != nil {
				return nil, err
			}
			*p.dst, l.DType = x, t.DType
		}
	}
	conv, cw, err := get("conv1d.weight")
	if err != nil {
		return nil, err
	}
	switch {
	case len(conv.Shape) == 3 && conv.Shape[0] == cd && conv.Shape[1] == 1 && conv.Shape[2] > 0:
		l.Conv = conv.Shape[2]
	case len(conv.Shape) == 2 && conv.Shape[0] == cd && conv.Shape[1] > 0:
		l.Conv = conv.Shape[1]
	default:
		return nil, fmt.Errorf("checkpoint: tensor %s has shape %v, want [conv_dim = %d, 1, K]", conv.Name, conv.Shape, cd)
	}
	l.ConvWeight = cw
	for _, p := range []struct {
		name string
		n    int
		dst  *[]float32
	}{{"A_log", nv, &l.ALog}, {"dt_bias", nv, &l.DtBias}, {"norm.weight", h.DV, &l.NormWeight}} {
		t, x, err := get(p.name)
		if err != nil {
			return nil, err
		}
		if err := shaped(t, p.n); err != nil {
			return nil, err
		}
		*p.dst = x
	}
	return l, nil
}

// Project returns the projections of hidden ([hidden, tokens], token
// after token) in the core's order: mixed_qkv [conv_dim, tokens], z
// [n_v_heads D_v, tokens], a and b [n_v_heads, tokens]; each a float64 sum
// rounded once to float32 (round them to the activation type for a core
// of 16-bit activations).
func (l *Layer) Project(hidden []float32) (mixed, z, a, b []float32, err error) {
	if len(hidden)%l.Hidden != 0 {
		return nil, nil, nil, nil, fmt.Errorf("checkpoint: %d hidden values are not tokens of %d", len(hidden), l.Hidden)
	}
	return matVec(l.InProjQKV, l.Hidden, hidden), matVec(l.InProjZ, l.Hidden, hidden),
		matVec(l.InProjA, l.Hidden, hidden), matVec(l.InProjB, l.Hidden, hidden), nil
}

// Out returns out_proj applied to a core output ([n_v_heads D_v, tokens]):
// [hidden, tokens], float64 sums rounded once.
func (l *Layer) Out(core []float32) ([]float32, error) {
	if w := l.NVHeads * l.DV; len(core)%w != 0 {
		return nil, fmt.Errorf("checkpoint: %d core values are not tokens of %d", len(core), w)
	}
	return matVec(l.OutProj, l.NVHeads*l.DV, core), nil
}

func matVec(w []float32, cols int, x []float32) []float32 {
	rows := len(w) / cols
	var y []float32
	for t := 0; t+cols <= len(x); t += cols {
		for r := 0; r < rows; r++ {
			var acc float64
			for j, v := range w[r*cols : (r+1)*cols] {
				acc += float64(v) * float64(x[t+j])
			}
			y = append(y, float32(acc))
		}
	}
	return y
}
