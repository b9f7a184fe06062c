// Package checkpoint reads model checkpoints as HF transformers and mlx-lm
// save them (SPEC.md section 14): config.json ([Config]: Qwen3-Next,
// Qwen3.5 dense and MoE, the Qwen3.5 vision-language wrapper, Qwen3 dense
// and MoE) and safetensors files, one or sharded.
//
// [Open] maps a checkpoint folder's files read-only ([MapSafetensors]):
// tensors are byte ranges of the mappings, never copied nor widened, so a
// checkpoint larger than memory opens at once and a GPU buffer can be made
// over a whole file without a copy ([MappedFile.Bytes], [Tensor.Offset]).
// The resulting [Model] finds every weight by its canonical HF name
// whatever the layout it was saved in (HF's Qwen3-Next and Qwen3 names,
// Qwen3.5's model.language_model prefix, mlx-lm's sanitized names with
// stacked experts and affine-quantized modules, HF's fused experts), says
// which convention each norm weight is stored in ([Weight.NormOffset]) and
// checks every shape against the config.
//
// Qwen3.5's linear-attention projections (in_proj_qkv, in_proj_z,
// in_proj_b, in_proj_a) emit mixed_qkv, z, b and a in the order the layer
// core reads (SPEC.md section 13). Qwen3-Next's in_proj_qkvz and in_proj_ba
// group their rows per key head: for each key head h, [q_h (D_k), k_h
// (D_k), v (r D_v), z (r D_v)] and [b (r), a (r)], r = n_v_heads /
// n_k_heads (HF's fix_query_key_value_ordering). [QKVZRows] and [BARows]
// give the permutation that, applied to the weight rows once at load time,
// makes the projections emit mixed_qkv | z and b | a ([Permute]).
// [LoadLayer] loads one linear-attention layer so, widened to float32.
//
// Malformed files are errors matching [ErrMalformed]; configs this package
// cannot run, [ErrConfig]; tensors that do not match the config,
// [ErrTensors]. Each error names the file, field or tensor and the numbers.
package checkpoint
