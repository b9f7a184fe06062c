package msl

import (
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
	"testing"
)

// hostSet is one set of function constant values a host gives the
// functions of a kernel family when it makes their pipelines.
type hostSet struct {
	name   string
	values []ConstantValue
}

// fcInt is an int function constant value by index, as fcBool and fcShort
// give theirs.
func fcInt(index int, v int32) ConstantValue {
	return ConstantValue{Index: index, Type: "int", Bytes: binary.LittleEndian.AppendUint32(nil, uint32(v))}
}

// bools gives each of indices the value v.
func bools(v bool, indices ...int) []ConstantValue {
	var vs []ConstantValue
	for _, i := range indices {
		vs = append(vs, fcBool(i, v))
	}
	return vs
}

// boolSets are the sets all false and all true of a family whose host
// gives only booleans, every combination of which it can produce.
func boolSets(indices ...int) []hostSet {
	return []hostSet{{"all false", bools(false, indices...)}, {"all true", bools(true, indices...)}}
}

// mlxHostConstants are, for each MLX kernel file (by base name), the
// function constants MLX's host code (mlx/backend/metal/*.cpp) gives the
// functions of the file that need them: a representative choice of the
// sets it can produce.
var mlxHostConstants = map[string][]hostSet{
	// rope.cpp: forward 1, traditional 2, head_seq_transpose 3
	"rope": boolSets(1, 2, 3),
	// normalization.cpp: has_w 20
	"layer_norm": boolSets(20),
	"rms_norm":   boolSets(20),
	// matmul.cpp (gemv_wide): has_batch 0, do_axpby 1
	"gemv": boolSets(0, 1),
	// scaled_dot_product_attention.cpp (sdpa_vector, 1 and 2 pass):
	// has_mask 20, query_transposed 21, do_causal 22, bool_mask 23,
	// float_mask 24, has_sinks 25, blocks 26 (2 pass: 64 to 1024); a mask
	// is either boolean or additive
	"scaled_dot_product_attention": {
		{"no mask", append(bools(false, 20, 21, 22, 23, 24, 25), fcInt(26, 64))},
		{"float mask, transposed query, sinks", append(append(bools(true, 20, 21, 24, 25), bools(false, 22, 23)...), fcInt(26, 128))},
		{"causal, bool mask", append(append(bools(true, 20, 22, 23), bools(false, 21, 24, 25)...), fcInt(26, 1024))},
	},
	// scaled_dot_product_attention.cpp (steel attention): align_Q 200,
	// align_K 201, has_mask 300, do_causal 301, has_sinks 302
	"steel_attention": {
		{"unaligned, no mask", bools(false, 200, 201, 300, 301, 302)},
		{"aligned, mask, sinks", append(bools(true, 200, 201, 300, 302), fcBool(301, false))},
		{"aligned, causal", append(bools(true, 200, 201, 301), bools(false, 300, 302)...)},
	},
	// matmul.cpp (steel gemm): has_batch 10, use_out_source 100,
	// do_axpby 110, align_M 200, align_N 201, align_K 202
	// (one set: a build of these large files takes minutes)
	"steel_gemm_fused": {{"batched, C source, axpby, M unaligned", append(bools(true, 10, 100, 110, 201, 202), fcBool(200, false))}},
	// matmul.cpp (gather_mm): has_batch 10, align_M 200, align_N 201, align_K 202
	"steel_gemm_gather": {{"unbatched, K unaligned", append(bools(false, 10, 202), bools(true, 200, 201)...)}},
	// matmul.cpp (segmented_mm): segments_contiguous 199, align_M 200, align_N 201
	"steel_gemm_segmented": {{"contiguous, aligned", bools(true, 199, 200, 201)}},
	// conv.cpp (implicit gemm conv, general): align_C 200
	"steel_conv_general": boolSets(200),
	// quantized.cpp (qmm): align_M 200, align_N 201, align_K 202
	"quantized":    {{"M unaligned", append(bools(true, 201, 202), fcBool(200, false))}},
	"fp_quantized": {{"M unaligned", append(bools(true, 201, 202), fcBool(200, false))}},
	// conv.cpp (depthwise_conv_2D_gpu): ker_h 0, ker_w 1, str_h 10,
	// str_w 11, th 100, tw 101 (4 and 8), do_flip 200
	"conv": {
		{"3x3 stride 1", []ConstantValue{fcInt(0, 3), fcInt(1, 3), fcInt(10, 1), fcInt(11, 1), fcInt(100, 4), fcInt(101, 8), fcBool(200, false)}},
		{"5x5 stride 2 flipped", []ConstantValue{fcInt(0, 5), fcInt(1, 5), fcInt(10, 2), fcInt(11, 2), fcInt(100, 4), fcInt(101, 8), fcBool(200, true)}},
	},
	// fft.cpp: inverse 0, power of 2 1, elems_per_thread 2, rader_m 3,
	// the Stockham steps of radices 13, 11, 8, 7, 6, 5, 4, 3, 2 from 4 and
	// the Rader steps from 13, use_bluestein_twiddle_table 22: the plans
	// of n = 256 (8 * 8 * 4) and of n = 60 (5 * 4 * 3), inverse
	"fft": {
		{"n=256", fftPlan(false, true, 8, 256, [9]int32{0, 0, 2, 0, 0, 0, 1, 0, 0})},
		{"n=60 inverse", fftPlan(true, false, 5, 60, [9]int32{0, 0, 0, 0, 0, 1, 1, 1, 0})},
	},
}

func fftPlan(inverse, pow2 bool, elemsPerThread, raderM int32, stockham [9]int32) []ConstantValue {
	vs := []ConstantValue{fcBool(0, inverse), fcBool(1, pow2), fcInt(2, elemsPerThread), fcInt(3, raderM), fcBool(22, false)}
	for i, s := range stockham {
		vs = append(vs, fcInt(4+i, s), fcInt(13+i, 0))
	}
	return vs
}

// needsConstants lists the functions of lib that require a function
// constant, which their host makes pipelines of only with values.
func needsConstants(t *testing.T, lib *Library) []string {
	t.Helper()
	var names []string
	for _, name := range lib.FunctionNames() {
		f, err := lib.Function(name)
		if err != nil {
			t.Error(err)
			continue
		}
		for _, c := range f.Constants {
			if c.Required {
				names = append(names, name)
				break
			}
		}
	}
	return names
}

// hostPipelines makes the pipelines of the functions of lib that need
// function constants with each of the host's sets, failing the test for a
// function that cannot make one, and returns how many it made and a
// summary.
func hostPipelines(t *testing.T, lib *Library, file string, sets []hostSet) (int, string) {
	t.Helper()
	names := needsConstants(t, lib)
	if len(names) == 0 {
		return 0, ""
	}
	if len(sets) == 0 {
		t.Errorf("%s: %d functions need function constants (%s ...), and no host constants are listed for them", file, len(names), names[0])
		return 0, ""
	}
	n := 0
	var done []string
	for _, s := range sets {
		fs, err := lib.SpecializeFunctions(names, s.values)
		if err != nil {
			t.Errorf("%s: the host's constants %q: %v", file, s.name, err)
			continue
		}
		for i, f := range fs {
			if f.Name != names[i] || !f.Specialized {
				t.Errorf("%s: %q: got function %s (specialized %v), want %s", file, s.name, f.Name, f.Specialized, names[i])
				continue
			}
			for _, c := range f.Constants {
				if c.Required && constantValues(s.values).lookup(c.Index, c.Name) == nil {
					t.Errorf("%s: %q: %s has no value for %s", file, s.name, f.Name, c.Name)
				}
			}
			n++
		}
		done = append(done, fmt.Sprintf("%q", s.name))
	}
	sort.Strings(done)
	return n, fmt.Sprintf("%d functions x sets %s", len(names), strings.Join(done, ", "))
}

func shorts(base int, vs ...int16) []ConstantValue {
	var cs []ConstantValue
	for i, v := range vs {
		cs = append(cs, fcShort(base+i, v))
	}
	return cs
}

func cat(vss ...[]ConstantValue) []ConstantValue {
	var all []ConstantValue
	for _, vs := range vss {
		all = append(all, vs...)
	}
	return all
}

// ggmlFamily is a kernel family of ggml's host
// (src/ggml-metal/ggml-metal-device.cpp, ggml_metal_library_get_pipeline_*):
// the functions whose names begin with prefix, and the constants the host
// gives them (ggml_metal_cv_set_*), for a few typical operands.
type ggmlFamily struct {
	prefix string
	sets   []hostSet
}

// The FC_* bases of ggml-metal-impl.h.
const (
	fcFlashAttnExtPad       = 100
	fcFlashAttnExtBlk       = 200
	fcFlashAttnExt          = 300
	fcFlashAttnExtVec       = 400
	fcFlashAttnExtVecReduce = 500
	fcMulMv                 = 600
	fcMulMm                 = 700
	fcRope                  = 800
	fcSsmConv               = 900
	fcSolveTri              = 1000
	fcCountEqual            = 1100
	fcUnary                 = 1200
	fcBin                   = 1300
	fcSumRows               = 1400
	fcUpscale               = 1500
	fcGatedDeltaNet         = 1600
)

// ggmlHostConstants are ggml's families that take function constants,
// longest prefix first where prefixes nest (one set for the large
// families: mul_mm and flash attention, whose builds take minutes).
var ggmlHostConstants = []ggmlFamily{
	// get_pipeline_unary: op_num (OP_UNARY_NUM_*), is_cnt
	{"kernel_unary_", []hostSet{
		{"scale", cat(shorts(fcUnary, 10), bools(false, fcUnary+1))},
		{"sigmoid, contiguous count", cat(shorts(fcUnary, 102), bools(true, fcUnary+1))}}},
	// get_pipeline_sum_rows: op_num
	{"kernel_sum_rows_", []hostSet{{"sum", shorts(fcSumRows, 0)}}},
	// get_pipeline_ssm_conv: ssm_conv_bs
	{"kernel_ssm_conv_", []hostSet{{"bs=4", shorts(fcSsmConv, 4)}}},
	// get_pipeline_gated_delta_net: ne20 (S_v, a multiple of 32), ne30, K
	{"kernel_gated_delta_net_", []hostSet{{"S_v=128 G=16 K=1", shorts(fcGatedDeltaNet, 128, 16, 1)}}},
	// get_pipeline_solve_tri: nsg 8, n, k
	{"kernel_solve_tri", []hostSet{{"n=64 k=16", shorts(fcSolveTri, 8, 64, 16)}}},
	// get_pipeline_mul_mv_ext: nsg, nxpsg, ne12, r2, r3
	{"kernel_mul_mv_ext_", []hostSet{{"nsg=2 nxpsg=8", shorts(fcMulMv, 2, 8, 1, 1, 1)}}},
	// get_pipeline_mul_mv_id: nsg, ne12 = r2 = r3 = 1 (no nxpsg)
	{"kernel_mul_mv_id_", []hostSet{{"nsg=2", cat(shorts(fcMulMv, 2), shorts(fcMulMv+2, 1, 1, 1))}}},
	// get_pipeline_mul_mv: nsg, ne12, r2, r3 (no nxpsg)
	{"kernel_mul_mv_", []hostSet{
		{"nsg=2 ne12=1", cat(shorts(fcMulMv, 2), shorts(fcMulMv+2, 1, 1, 1))},
		{"nsg=4 ne12=8 r2=4", cat(shorts(fcMulMv, 4), shorts(fcMulMv+2, 8, 4, 1))}}},
	// get_pipeline_mul_mm_id: bc_inp
	{"kernel_mul_mm_id_", []hostSet{{"bc_inp=1", bools(true, fcMulMm)}}},
	// get_pipeline_mul_mm: bc_inp, bc_out, ne12, ne13, r2, r3
	{"kernel_mul_mm_", []hostSet{
		{"bounds checked, broadcast", cat(bools(true, fcMulMm, fcMulMm+1), shorts(fcMulMm+2, 8, 2, 4, 1))}}},
	// get_pipeline_flash_attn_ext_pad: has_mask, ncpsg
	{"kernel_flash_attn_ext_pad", []hostSet{{"mask, ncpsg=64", []ConstantValue{fcBool(fcFlashAttnExtPad, true), fcInt(fcFlashAttnExtPad+25, 64)}}}},
	// get_pipeline_flash_attn_ext_blk: nqptg, ncpsg
	{"kernel_flash_attn_ext_blk", []hostSet{{"nqptg=8 ncpsg=64", []ConstantValue{fcInt(fcFlashAttnExtBlk+24, 8), fcInt(fcFlashAttnExtBlk+25, 64)}}}},
	// get_pipeline_flash_attn_ext_vec_reduce: dv, nwg
	{"kernel_flash_attn_ext_vec_reduce", []hostSet{{"dv=128 nwg=32", []ConstantValue{fcInt(fcFlashAttnExtVecReduce, 128), fcInt(fcFlashAttnExtVecReduce+1, 32)}}}},
	// get_pipeline_flash_attn_ext_vec: has_mask, has_sinks, has_bias,
	// has_scap, has_kvpad, ns10, ns20, nsg, nwg
	{"kernel_flash_attn_ext_vec_", []hostSet{
		{"mask", cat(bools(true, fcFlashAttnExtVec), bools(false, fcFlashAttnExtVec+1, fcFlashAttnExtVec+2, fcFlashAttnExtVec+3, fcFlashAttnExtVec+4),
			[]ConstantValue{fcInt(fcFlashAttnExtVec+20, 128), fcInt(fcFlashAttnExtVec+21, 128), fcInt(fcFlashAttnExtVec+22, 1), fcInt(fcFlashAttnExtVec+23, 32)})}}},
	// get_pipeline_flash_attn_ext: has_mask, has_sinks, has_bias,
	// has_scap, has_kvpad, bc_mask, ns10, ns20, nsg
	{"kernel_flash_attn_ext_", []hostSet{
		{"mask", cat(bools(true, fcFlashAttnExt), bools(false, fcFlashAttnExt+1, fcFlashAttnExt+2, fcFlashAttnExt+3, fcFlashAttnExt+4, fcFlashAttnExt+10),
			[]ConstantValue{fcInt(fcFlashAttnExt+20, 128), fcInt(fcFlashAttnExt+21, 128), fcInt(fcFlashAttnExt+22, 4)})}}},
	// get_pipeline_bin: op_num (OP_BIN_NUM_*), n_fuse, is_rb, is_cb
	{"kernel_bin_fuse_", []hostSet{
		{"add", cat(shorts(fcBin, 0, 1), bools(false, fcBin+2, fcBin+3))},
		{"mul, 4 fused, row broadcast", cat(shorts(fcBin, 2, 4), bools(true, fcBin+2), bools(false, fcBin+3))}}},
	// get_pipeline_rope: is_imrope, is_back
	{"kernel_rope_", []hostSet{{"forward", bools(false, fcRope, fcRope+1)}, {"imrope, back", bools(true, fcRope, fcRope+1)}}},
	// get_pipeline_upscale: antialias
	{"kernel_upscale_", []hostSet{{"aa=0", bools(false, fcUpscale)}, {"aa=1", bools(true, fcUpscale)}}},
	// get_pipeline_count_equal: nsg
	{"kernel_count_equal_", []hostSet{{"nsg=4", shorts(fcCountEqual, 4)}}},
}

// ggmlHostPipelines makes the pipelines of ggml's functions that need
// function constants, each family's with the host's constants; a function
// of a family the host names that cannot make one fails the test. It
// returns the pipelines made, the functions of no family listed here, and
// a summary.
func ggmlHostPipelines(t *testing.T, lib *Library) (int, []string, string) {
	t.Helper()
	byFamily := map[int][]string{}
	var other []string
	for _, name := range needsConstants(t, lib) {
		fam := -1
		for i, f := range ggmlHostConstants {
			if strings.HasPrefix(name, f.prefix) {
				fam = i
				break
			}
		}
		if fam < 0 {
			other = append(other, name)
			continue
		}
		byFamily[fam] = append(byFamily[fam], name)
	}
	n := 0
	var parts []string
	for i, f := range ggmlHostConstants {
		names := byFamily[i]
		if len(names) == 0 {
			t.Errorf("ggml: no function of family %s needs function constants", f.prefix)
			continue
		}
		made := 0
		for _, s := range f.sets {
			fs, err := lib.SpecializeFunctions(names, s.values)
			if err != nil {
				t.Errorf("ggml: %s* (%d functions) with the host's constants %q: %v", f.prefix, len(names), s.name, err)
				continue
			}
			made += len(fs)
		}
		n += made
		parts = append(parts, fmt.Sprintf("%s* %d x %d", f.prefix, len(names), len(f.sets)))
	}
	return n, other, strings.Join(parts, ", ")
}
