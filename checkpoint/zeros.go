package checkpoint

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// WriteZeros writes a checkpoint folder into dir from config.json's bytes:
// config.json and safetensors files holding every weight the config
// implies (the names and shapes [Open] checks), all zero, in the config's
// dtype. It is a model of a real one's shapes for measuring what a
// forward pass moves, not for its outputs: with every weight zero the
// router's logits tie, so an MoE layer picks the same experts every time,
// as many as a trained one picks.
//
// The weights are sharded as HF shards a checkpoint, with
// model.safetensors.index.json: the weights outside the layers in the
// first file, then one file per layer (a Metal buffer over a file has at
// most the device's maxBufferLength). The files are sparse: each header
// is written and the tensors' bytes are skipped over, so a checkpoint of
// any size costs a few pages of disk and its tensors read as zero. The
// tensors lie as HF saves them where that lets a loader view them in
// place: each expert's gate_proj then its
// up_proj, expert after expert (a fused gate_up_proj), then the experts'
// down_proj one after the other. The config must be a text model's (not
// a vision-language wrapper's) and not quantized; else the error matches
// [ErrConfig]. WriteZeros returns the parsed config.
func WriteZeros(dir string, config []byte) (*Config, error) {
	c, err := ParseConfig(config)
	if err != nil {
		return nil, err
	}
	dtype, ok := map[string]string{"bfloat16": "BF16", "float16": "F16", "float32": "F32"}[c.DType]
	switch {
	case !ok:
		return nil, fmt.Errorf("%w: dtype %q, want bfloat16, float16 or float32 for a checkpoint of zeros", ErrConfig, c.DType)
	case c.Quantization != nil:
		return nil, fmt.Errorf("%w: a quantized config; a checkpoint of zeros is written unquantized", ErrConfig)
	case c.Wrapped:
		return nil, fmt.Errorf("%w: model_type wraps %s; give the text model's config", ErrConfig, c.ModelType)
	}
	want := c.expected()
	names := make([]string, 0, len(want))
	largest := 0
	size := dtypeSize[dtype]
	for n, shape := range want {
		names = append(names, n)
		t := Tensor{Shape: shape}
		largest = max(largest, t.Elems()*size)
	}
	slices.SortFunc(names, func(a, b string) int { return cmpOrder(order(a), order(b)) })

	// Every tensor's bytes are the start of one read-only mapping of
	// zeros, which costs address space, not memory; the file skips them.
	zero, err := unix.Mmap(-1, 0, largest, unix.PROT_READ, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: mapping %d bytes of zeros: %w", largest, err)
	}
	defer unix.Munmap(zero)
	tensors := make([]Tensor, len(names))
	for i, n := range names {
		t := Tensor{Name: n, DType: dtype, Shape: want[n]}
		t.Data = zero[:t.Elems()*size]
		tensors[i] = t
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), config, 0o644); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	// One shard for the tensors outside the layers, then one per layer.
	var shards [][]Tensor
	for i, t := range tensors {
		if i == 0 || order(t.Name).layer != order(tensors[i-1].Name).layer {
			shards = append(shards, nil)
		}
		shards[len(shards)-1] = append(shards[len(shards)-1], t)
	}
	weightMap := map[string]string{}
	var total int64
	for i, ts := range shards {
		name := fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, len(shards))
		if err := writeSparse(filepath.Join(dir, name), ts, &zero[0]); err != nil {
			return nil, err
		}
		for _, t := range ts {
			weightMap[t.Name] = name
			total += int64(len(t.Data))
		}
	}
	index, err := json.MarshalIndent(map[string]any{"metadata": map[string]any{"total_size": total}, "weight_map": weightMap}, "", "  ")
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), index, 0o644)
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	return c, nil
}

// writeSparse writes tensors, whose bytes all begin at zero, as the
// safetensors file path, seeking past their bytes.
func writeSparse(path string, tensors []Tensor, zero *byte) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	err = WriteSafetensors(sparseWriter{f, zero}, tensors)
	if err == nil {
		var end int64
		if end, err = f.Seek(0, io.SeekCurrent); err == nil {
			err = f.Truncate(end) // the skipped tail
		}
	}
	if e := f.Close(); err == nil {
		err = e
	}
	if err != nil {
		return fmt.Errorf("checkpoint: writing %s: %w", path, err)
	}
	return nil
}

// sparseWriter writes to a file, but seeks past a write of the mapping of
// zeros (a write that starts at its first byte) instead of writing it.
type sparseWriter struct {
	f    *os.File
	zero *byte
}

func (w sparseWriter) Write(p []byte) (int, error) {
	if len(p) == 0 || &p[0] != w.zero {
		return w.f.Write(p)
	}
	if _, err := w.f.Seek(int64(len(p)), io.SeekCurrent); err != nil {
		return 0, err
	}
	return len(p), nil
}

// tensorOrder places a weight in the file: the model's own tensors first,
// then the layers in order; within a layer its other weights by name,
// then each expert's gate_proj and up_proj, then the experts' down_proj.
type tensorOrder struct {
	layer  int // -1 outside the layers
	group  int // 0 not an expert's, 1 gate and up, 2 down
	expert int
	rest   string
}

func order(name string) tensorOrder {
	rest, ok := strings.CutPrefix(name, "model.layers.")
	if !ok {
		return tensorOrder{layer: -1, rest: name}
	}
	num, rest, _ := strings.Cut(rest, ".")
	layer, _ := strconv.Atoi(num)
	o := tensorOrder{layer: layer, rest: rest}
	if e, ok := strings.CutPrefix(rest, "mlp.experts."); ok {
		num, proj, _ := strings.Cut(e, ".")
		o.expert, _ = strconv.Atoi(num)
		o.group, o.rest = 1, proj
		if proj == "down_proj.weight" {
			o.group = 2
		}
	}
	return o
}

func cmpOrder(a, b tensorOrder) int {
	return cmp.Or(cmp.Compare(a.layer, b.layer), cmp.Compare(a.group, b.group), cmp.Compare(a.expert, b.expert), cmp.Compare(a.rest, b.rest))
}
