package checkpoint_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/checkpoint"
	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/internal/golden"
)

// dtypeOf names an element type as safetensors does.
func dtypeOf(t spec.ElemType) string {
	return map[spec.ElemType]string{spec.F32: "F32", spec.F16: "F16", spec.BF16: "BF16"}[t]
}

// writeQwen3Next writes a case's weights as a Qwen3-Next checkpoint
// stores them (HF's names and row order, conv1d as [conv_dim, 1, K]).
func writeQwen3Next(t *testing.T, c golden.LayerCase, prefix string) []byte {
	t.Helper()
	m := c.Meta
	act := dtypeOf(c.Steps[0].Params.Activation)
	var ts []checkpoint.Tensor
	add := func(name, dtype string, shape []int, x []float32) {
		tn, err := checkpoint.NewTensor(prefix+name, dtype, shape, x)
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, tn)
	}
	add("in_proj_qkvz.weight", act, []int{len(c.InProjQKVZ) / m.Hidden, m.Hidden}, c.InProjQKVZ)
	add("in_proj_ba.weight", act, []int{2 * m.NVHeads, m.Hidden}, c.InProjBA)
	add("conv1d.weight", act, []int{m.ConvDim, 1, m.ConvKernel}, c.ConvWeight)
	add("A_log", "F32", []int{m.NVHeads}, c.ALog)
	add("dt_bias", "F32", []int{m.NVHeads}, c.DtBias)
	add("norm.weight", act, []int{m.DV}, c.NormWeight)
	add("out_proj.weight", act, []int{m.Hidden, m.NVHeads * m.DV}, c.OutProj)
	var buf bytes.Buffer
	if err := checkpoint.WriteSafetensors(&buf, ts); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestLoadLayerFromGolden writes every golden layer's weights as a
// Qwen3-Next safetensors file, loads it by HF's names (rows permuted at
// load), and checks that its projections of the stored hidden states are
// the stored mixed_qkv, z, a and b exactly (after rounding to the case's
// type); then writes the loaded layer under Qwen3.5's names and checks that
// loading that gives the same weights.
func TestLoadLayerFromGolden(t *testing.T) {
	for _, c := range golden.LoadLayerSet(t) {
		t.Run(c.Name, func(t *testing.T) {
			m := c.Meta
			h := checkpoint.Heads{DK: m.DK, DV: m.DV, NKHeads: m.NKHeads, NVHeads: m.NVHeads}
			const next = "model.layers.0.linear_attn."
			st, err := checkpoint.ReadSafetensors(writeFile(t, "layer.safetensors", writeQwen3Next(t, c, next)))
			if err != nil {
				t.Fatal(err)
			}
			l, err := checkpoint.LoadLayer(st, next, h)
			if err != nil {
				t.Fatal(err)
			}
			wrong := h
			wrong.DV *= 2
			if _, err := checkpoint.LoadLayer(st, next, wrong); err == nil || !strings.Contains(err.Error(), "out_proj.weight") {
				t.Errorf("LoadLayer with D_v doubled: %v, want an error naming out_proj.weight", err)
			}
			wrong = h
			wrong.DK *= 2
			if _, err := checkpoint.LoadLayer(st, next, wrong); err == nil || !strings.Contains(err.Error(), "in_proj_qkvz.weight") {
				t.Errorf("LoadLayer with D_k doubled: %v, want an error naming in_proj_qkvz.weight", err)
			}
			if l.Format != "qwen3-next" || l.Hidden != m.Hidden || l.Conv != 4 {
				t.Errorf("loaded %s, hidden %d, K %d; want qwen3-next, %d, 4", l.Format, l.Hidden, l.Conv, m.Hidden)
			}
			act := c.Steps[0].Params.Activation
			for i, s := range c.Steps {
				mixed, z, a, b, err := l.Project(s.Hidden)
				if err != nil {
					t.Fatal(err)
				}
				for _, x := range s.Projections(mixed, z, a, b) {
					cpuref.Round(act, x.Got)
					if !slices.Equal(x.Got, x.Want) {
						t.Errorf("step %d: projection %s differs from the stored one (%.3g)", i, x.Name, cpuref.MaxRelErr(x.Got, x.Want))
					}
				}
			}

			// The same layer under Qwen3.5's names.
			const q35 = "model.language_model.layers.3.linear_attn."
			var ts []checkpoint.Tensor
			for _, x := range []struct {
				name  string
				shape []int
				v     []float32
			}{
				{"in_proj_qkv.weight", []int{h.ConvDim(), l.Hidden}, l.InProjQKV},
				{"in_proj_z.weight", []int{h.NVHeads * h.DV, l.Hidden}, l.InProjZ},
				{"in_proj_b.weight", []int{h.NVHeads, l.Hidden}, l.InProjB},
				{"in_proj_a.weight", []int{h.NVHeads, l.Hidden}, l.InProjA},
				{"conv1d.weight", []int{h.ConvDim(), 1, 4}, l.ConvWeight},
				{"A_log", []int{h.NVHeads}, l.ALog},
				{"dt_bias", []int{h.NVHeads}, l.DtBias},
				{"norm.weight", []int{h.DV}, l.NormWeight},
				{"out_proj.weight", []int{l.Hidden, h.NVHeads * h.DV}, l.OutProj},
			} {
				tn, err := checkpoint.NewTensor(q35+x.name, "F32", x.shape, x.v)
				if err != nil {
					t.Fatal(err)
				}
				ts = append(ts, tn)
			}
			var buf bytes.Buffer
			if err := checkpoint.WriteSafetensors(&buf, ts); err != nil {
				t.Fatal(err)
			}
			st35, err := checkpoint.ParseSafetensors(buf.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			l35, err := checkpoint.LoadLayer(st35, q35, h)
			if err != nil {
				t.Fatal(err)
			}
			if l35.Format != "qwen3.5" || !slices.Equal(l35.InProjQKV, l.InProjQKV) || !slices.Equal(l35.InProjZ, l.InProjZ) ||
				!slices.Equal(l35.InProjA, l.InProjA) || !slices.Equal(l35.InProjB, l.InProjB) || !slices.Equal(l35.ConvWeight, l.ConvWeight) {
				t.Errorf("the Qwen3.5 file loads other weights than the Qwen3-Next one")
			}
		})
	}
}

// small returns a valid file of two tensors.
func small(t *testing.T) []byte {
	t.Helper()
	a, _ := checkpoint.NewTensor("a", "F32", []int{2, 3}, []float32{1, 2, 3, 4, 5, 6})
	b, _ := checkpoint.NewTensor("b", "BF16", []int{2}, []float32{1, -2})
	var buf bytes.Buffer
	if err := checkpoint.WriteSafetensors(&buf, []checkpoint.Tensor{a, b}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// withHeader returns a file of the given JSON header and data.
func withHeader(header string, data []byte) []byte {
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	return append(append(out, header...), data...)
}

// TestSafetensorsRefusesMalformed checks clear errors on truncated and
// malformed files, and that no truncation of a valid file panics or
// parses.
func TestSafetensorsRefusesMalformed(t *testing.T) {
	good := small(t)
	st, err := checkpoint.ParseSafetensors(good)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Names(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("names %v", got)
	}
	b, _ := st.Tensor("b")
	if x, err := b.Float32s(); err != nil || !slices.Equal(x, []float32{1, -2}) {
		t.Errorf("b = %v, %v", x, err)
	}
	for n := 0; n < len(good); n++ {
		if _, err := checkpoint.ParseSafetensors(good[:n]); !errors.Is(err, checkpoint.ErrMalformed) {
			t.Errorf("a file truncated to %d of %d bytes: %v, want an error wrapping checkpoint.ErrMalformed", n, len(good), err)
		}
	}
	data := make([]byte, 16)
	for _, c := range []struct {
		name string
		file []byte
		want string
	}{
		{"short", []byte{1, 2, 3}, "fewer than the 8"},
		{"huge header", binary.LittleEndian.AppendUint64(nil, 1<<40), "beyond"},
		{"header past the end", withHeader("{}", nil)[:9], "truncated"},
		{"bad json", withHeader(`{"a": `, data), "header"},
		{"unknown dtype", withHeader(`{"a": {"dtype": "Q4", "shape": [1], "data_offsets": [0, 1]}}`, data), "unknown dtype"},
		{"offsets past data", withHeader(`{"a": {"dtype": "F32", "shape": [8], "data_offsets": [0, 32]}}`, data), "outside"},
		{"offsets reversed", withHeader(`{"a": {"dtype": "F32", "shape": [0], "data_offsets": [8, 4]}}`, data), "outside"},
		{"size vs shape", withHeader(`{"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}`, data), "needs 3 elements"},
		{"negative dim", withHeader(`{"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}`, data), "negative"},
		{"overflow", withHeader(`{"a": {"dtype": "F32", "shape": [4294967296, 4294967296, 4], "data_offsets": [0, 4]}}`, data), "overflows"},
		{"overlap", withHeader(`{"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}`, data), "overlap"},
		{"offsets count", withHeader(`{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0]}}`, data), "data_offsets"},
	} {
		_, err := checkpoint.ParseSafetensors(c.file)
		if !errors.Is(err, checkpoint.ErrMalformed) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one wrapping checkpoint.ErrMalformed saying %q", c.name, err, c.want)
		}
	}
	// A layer with a tensor missing or misshapen.
	h := checkpoint.Heads{DK: 2, DV: 2, NKHeads: 1, NVHeads: 1}
	if _, err := checkpoint.LoadLayer(st, "", h); err == nil || !strings.Contains(err.Error(), "out_proj.weight") {
		t.Errorf("LoadLayer on a file without a layer: %v, want an error naming out_proj.weight", err)
	}
}
