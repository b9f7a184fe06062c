package checkpoint_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/puremetal/puremetal/checkpoint"
)

// TestWriteZeros writes checkpoints of zeros from golden models' configs
// and checks that they open with the golden checkpoints' weights (names,
// shapes, dtype), every byte zero, the experts laid out to be viewed in
// place (each expert's gate_proj then up_proj, then the down_projs in a
// run), one file per layer, and the files sparse.
func TestWriteZeros(t *testing.T) {
	for _, c := range []struct{ name, dtype string }{{"qwen3next_moe_f32", "F32"}, {"qwen3_dense_bf16", "BF16"}} {
		t.Run(c.name, func(t *testing.T) {
			config, err := os.ReadFile(filepath.Join(modelsDir, c.name, "config.json"))
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			cfg, err := checkpoint.WriteZeros(dir, config)
			if err != nil {
				t.Fatal(err)
			}
			golden, zeros := open(t, filepath.Join(modelsDir, c.name)), open(t, dir)
			if !slices.Equal(golden.Names(), zeros.Names()) {
				t.Fatalf("weights %v, the golden checkpoint's %v", zeros.Names(), golden.Names())
			}
			if len(zeros.Files) != cfg.NumLayers+1 {
				t.Errorf("%d files, want one per layer and one more", len(zeros.Files))
			}
			var size, disk int64
			for _, n := range zeros.Names() {
				z, g := weight(t, zeros, n), weight(t, golden, n)
				if !slices.Equal(z.Shape, g.Shape) || z.Data.DType != c.dtype {
					t.Errorf("%s: %s %v, want %s %v", n, z.Data.DType, z.Shape, c.dtype, g.Shape)
				}
				if i := slices.IndexFunc(z.Data.Data, func(b byte) bool { return b != 0 }); i >= 0 {
					t.Errorf("%s: byte %d is %#x", n, i, z.Data.Data[i])
				}
			}
			for e := 0; e+1 < cfg.NumExperts; e++ {
				gate := func(e int, proj string) checkpoint.Tensor {
					return weight(t, zeros, fmt.Sprintf("model.layers.0.mlp.experts.%d.%s.weight", e, proj)).Data
				}
				g, u, next := gate(e, "gate_proj"), gate(e, "up_proj"), gate(e+1, "gate_proj")
				d, nextD := gate(e, "down_proj"), gate(e+1, "down_proj")
				if u.Offset != g.Offset+int64(len(g.Data)) || next.Offset != u.Offset+int64(len(u.Data)) || nextD.Offset != d.Offset+int64(len(d.Data)) {
					t.Errorf("expert %d: gate_proj at %d, up_proj at %d, the next gate_proj at %d; down_proj at %d, the next at %d: not in runs", e, g.Offset, u.Offset, next.Offset, d.Offset, nextD.Offset)
				}
			}
			for _, f := range zeros.Files {
				st, err := os.Stat(f.Path)
				if err != nil {
					t.Fatal(err)
				}
				size += st.Size()
				disk += st.Sys().(*syscall.Stat_t).Blocks * 512
			}
			// Each file's header needs a few pages at most; its tensors none.
			if limit := int64(len(zeros.Files)) * 64 << 10; disk > limit {
				t.Errorf("the files take %d bytes of disk for %d bytes, more than %d: not sparse", disk, size, limit)
			}
			t.Logf("%d files: %d bytes, %d on disk", len(zeros.Files), size, disk)
		})
	}
}

// TestWriteZerosRefuses checks the configs WriteZeros does not write: a
// quantized one and a dtype that is not a float type, with ErrConfig.
func TestWriteZerosRefuses(t *testing.T) {
	quantized, err := os.ReadFile(filepath.Join(modelsDir, "qwen3next_moe_mlx4", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := os.ReadFile(filepath.Join(modelsDir, "qwen3_dense_bf16", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(plain, &raw); err != nil {
		t.Fatal(err)
	}
	raw["dtype"] = "int8"
	int8, err := json.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	for name, config := range map[string][]byte{"quantized": quantized, "int8": int8} {
		dir := t.TempDir()
		if _, err := checkpoint.WriteZeros(dir, config); !errors.Is(err, checkpoint.ErrConfig) {
			t.Errorf("%s: %v, want checkpoint.ErrConfig", name, err)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("%s: wrote %d files", name, len(entries))
		}
	}
}
