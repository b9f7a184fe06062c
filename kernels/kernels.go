// Package kernels holds puremetal's Metal Shading Language sources, embedded
// in the binary: the Gated DeltaNet recurrence (package gdn dispatches it)
// and the model's other kernels (package ops dispatches them); and a
// [Registry] that compiles them into compute pipeline states on a device.
//
// There is one source per kernel family. The Gated DeltaNet's:
//
//	gdn_prefill.metal   gated_delta_net_{A}_{S}
//	                    gated_delta_net_prefill_core_{A}_{S}
//	gdn_decode.metal    gated_delta_net_decode_{A}_{S}_{NSG}
//	                    gated_delta_net_decode_seq_{A}_{S}_{NSG}
//	                    gated_delta_net_decode_legacy_{A}_{S}_{NSG}
//	gdn_capture.metal   gated_delta_net_decode_capture_{A}_{S}_{NSG}
//	gdn_chunked.metal   gated_delta_net_chunked_{A}_{S}
//	                    gated_delta_net_chunked_core_{A}_{S}
//	gdn_packed.metal    gated_delta_net_decode_packed_{A}_{S}_{NSG}
//	                    gated_delta_net_decode_packed_seq_{A}_{S}_{NSG}
//	                    gated_delta_net_decode_packed_capture_{A}_{S}_{NSG}
//	gdn_prefill_blocked.metal
//	                    gated_delta_net_prefill_blocked_{A}_{S}_{NSG}
//	                    gated_delta_net_prefill_blocked_core_{A}_{S}_{NSG}
//	gdn_core.metal      gated_delta_net_core_packed_{A}_{S}_{NSG}
//
// A is the activation type (q, k, v, output and the gate inputs), S the
// state type (state_in, state_out, capture), each f32, f16 or bf16, and NSG
// = D_k / 32 is 1, 2 or 4. With both types f32 the name carries one "f32"
// (gated_delta_net_f32, gated_delta_net_decode_f32_4): the names of the
// f32 kernels are unchanged. [Prefill], [PrefillChunked], [Decode],
// [DecodeSeq], [DecodeLegacy] and [DecodeCapture] name the f32 kernels;
// [PrefillOf], [PrefillChunkedOf], [DecodeOf], [DecodeSeqOf],
// [DecodeLegacyOf] and [DecodeCaptureOf] any.
//
// Every kernel binds q, k, v, g (or a), beta (or b), state_in, output and
// state_out at buffer indices 0-7, the nine parameter words at 8 (word 7:
// the fused parts, bit 0 L2 norm, bit 1 gate, bit 2 beta), capture at 9
// (capture kernels only) and A_log and dt_bias ([n_v_heads] f32, read with
// the fused gate only) at 10 and 11.
//
// The packed kernels (gdn_packed.metal, gdn_prefill_blocked.metal) hold 8
// rows of the state per SIMD-group, 4 lanes per row, and exist for NSG 2
// and 4 (D_k = 64, 128; [PackedNSGs]): [DecodePackedOf],
// [DecodePackedSeqOf], [DecodePackedCaptureOf] and [PrefillBlockedOf] name
// them. They are compiled behind gdn_packed_common.metal as well, which
// holds their layout and per-token step.
//
// Each GDN source is compiled behind gdn_common.metal, which holds the
// parameter block, the fused gates and norm, and the per-token arithmetic
// shared by the decode family.
//
// The model's other sources ([OpsSources]), where A is the activation type
// (the input x and the output), W a weight's, H the residual stream's, S
// the quantization scales' and biases', each f32, f16 or bf16, B the bits
// of a quantized weight (4 or 8, [QuantBits]) and D a head size of
// [AttentionHeadDims]:
//
//	matmul.metal        matvec_{W}_{A}, matmul_{W}_{A}, gather_matvec_{W}_{A}
//	quant.metal         quant_matvec_{A}_{S}_{B}, quant_gather_matvec_{A}_{S}_{B}
//	                    quant_matmul_{A}_{S}_{B}, quant_embed_{A}_{S}_{B}
//	                    embed_{W}_{A}
//	attention.metal     attn_kv_append_{A}, attn_decode_{A}_{D},
//	                    attn_decode_reduce_{A}, attn_prefill_{A}_{D},
//	                    attn_advance
//	norm.metal          rms_norm_{A}_{W}, rms_norm_residual_{H}_{A}_{W}
//	                    rms_norm_rope_{A}_{W}
//	rope.metal          rope_{A}
//	swiglu.metal        swiglu_{A}
//	moe.metal           moe_route_{A}, moe_combine_{A}
//	sample.metal        argmax_{A}, sample_{A} (A: the logits' type)
//
// The functions named after them give the names: [MatVecOf], [MatMulOf],
// [GatherMatVecOf], [QuantOf], [EmbedOf], [KVAppendOf],
// [AttentionDecodeOf], [AttentionDecodeReduceOf], [AttentionPrefillOf],
// [KVAdvance], [RMSNormOf], [RMSNormResidualOf], [RMSNormRoPEOf], [RoPEOf],
// [SwiGLUOf], [MoERouteOf], [MoECombineOf], [ArgmaxOf] and [SampleOf].
// moe.metal and sample.metal are compiled behind rank_common.metal, which
// orders logits as torch.argmax does.
//
// Every source is compiled behind elem.metal, which holds the element
// types and their conversions. bf16 data is MSL's
// bfloat where the library is compiled as language version 3.1 or later,
// which a [Registry] does on macOS 14 with an Apple-silicon GPU (see
// [LanguageVersion]), and 16-bit integers converted by hand below it; the
// entry points have the same names either way. Packages gdn and ops validate
// arguments and dispatch these kernels; the contract they implement is SPEC.md at
// the repository root ("SPEC section N" in this documentation).
package kernels

import (
	"embed"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/puremetal/puremetal/gdn/spec"
)

//go:embed *.metal
var files embed.FS

// The source files, by name.
const (
	ElemFile    = "elem.metal"        // element types and conversions, in front of every source
	CommonFile  = "gdn_common.metal"  // the GDN prelude, after ElemFile in front of every GDN source
	PrefillFile = "gdn_prefill.metal" // the prefill kernel
	DecodeFile  = "gdn_decode.metal"  // decode, seq and legacy kernels
	CaptureFile = "gdn_capture.metal" // decode with per-token state capture
	ChunkedFile = "gdn_chunked.metal" // the chunked (WY form) prefill kernel

	PackedCommonFile = "gdn_packed_common.metal"   // the packed layout, after CommonFile in front of PackedFile and BlockedFile
	PackedFile       = "gdn_packed.metal"          // packed decode, seq and capture kernels
	BlockedFile      = "gdn_prefill_blocked.metal" // the blocked prefill kernel
	CoreFile         = "gdn_core.metal"            // the layer core: convolution, step, gated norm
	CoreCommonFile   = "gdn_core_common.metal"     // the layer core's convolution and norm, in front of CoreFile, ChunkedFile, BlockedFile and PrefillFile
)

// Entry-point names of the kernels.
const (
	// Prefill is the f32 prefill kernel: threadgroup (D_v, 1, 1), grid
	// (n_v_heads, n_seqs, 1), D_k and D_v at most 128.
	Prefill = "gated_delta_net_f32"
	// PrefillChunked is the f32 chunked prefill kernel: threadgroup
	// ([ChunkLanes] * D_v, 1, 1), grid (n_v_heads, n_seqs, 1), D_k and D_v
	// at most 128, the tokens taken [ChunkLen] at a time.
	PrefillChunked = "gated_delta_net_chunked_f32"
)

// ElemTypes lists the element types the kernels take, for activations and
// state alike.
var ElemTypes = [...]spec.ElemType{spec.F32, spec.F16, spec.BF16}

// NSGs lists the SIMD groups per threadgroup of the decode family: D_k / 32
// for D_k = 32, 64, 128.
var NSGs = [...]int{1, 2, 4}

// PackedNSGs lists the NSG = D_k / 32 of the packed kernels: D_k = 64 and
// 128.
var PackedNSGs = [...]int{2, 4}

// PrefillOf returns the name of the prefill kernel for activation type act
// and state type state: gated_delta_net_{act}_{state}, gated_delta_net_f32
// for f32/f32.
func PrefillOf(act, state spec.ElemType) string { return prefillNames.name(act, state, 0) }

// PrefillChunkedOf returns the name of the chunked prefill kernel for
// activation type act and state type state: gated_delta_net_chunked_{act}_{state},
// gated_delta_net_chunked_f32 for f32/f32.
func PrefillChunkedOf(act, state spec.ElemType) string { return chunkedNames.name(act, state, 0) }

// ChunkLen is the number of tokens the chunked prefill kernel takes at a
// time (GDN_CHUNK in gdn_chunked.metal, which says why 16).
const ChunkLen = 16

// ChunkLanes is the number of threads of the chunked prefill kernel that
// share a row of the state (GDN_CHUNK_LANES in gdn_chunked.metal).
const ChunkLanes = 4

// ChunkedThreadgroupMemory returns the threadgroup memory, in bytes, the
// chunked prefill kernel needs at index 0 for key size dk and value size
// dv: the staged k and q (C x dk each) and v (C x dv), the C x C matrices
// A and M, and 6C floats of decays, gates and norms, C = [ChunkLen],
// rounded up to the multiple of 16 bytes Metal requires of
// setThreadgroupMemoryLength.
func ChunkedThreadgroupMemory(dk, dv int) int {
	const c = ChunkLen
	n := (2*c*dk + c*dv + 2*c*c + 6*c) * 4
	return (n + 15) &^ 15
}

// ChunkedCoreThreadgroupMemory returns the threadgroup memory, in bytes,
// of the chunked prefill kernel with the layer core
// ([PrefillChunkedCoreOf]): [ChunkedThreadgroupMemory] and the gated
// norm's partial sums, C x dv/8 floats (one per token and SIMD-group of 8
// rows).
func ChunkedCoreThreadgroupMemory(dk, dv int) int {
	return ChunkedThreadgroupMemory(dk, dv) + ChunkLen*(dv/8)*4
}

// Decode returns the name of the f32 decode kernel (indices rebuilt every
// token, the choice at n_tokens == 1) for nsg = D_k / 32 in {1, 2, 4}.
func Decode(nsg int) string { return DecodeOf(spec.F32, spec.F32, nsg) }

// DecodeOf is [Decode] for activation type act and state type state:
// gated_delta_net_decode_{act}_{state}_{nsg}.
func DecodeOf(act, state spec.ElemType, nsg int) string { return decodeNames.name(act, state, nsg) }

// DecodeSeq returns the name of the f32 seq kernel (per-lane pointers
// advanced once per token, the choice at n_tokens >= 2) for nsg in
// {1, 2, 4}.
func DecodeSeq(nsg int) string { return DecodeSeqOf(spec.F32, spec.F32, nsg) }

// DecodeSeqOf is [DecodeSeq] for activation type act and state type state.
func DecodeSeqOf(act, state spec.ElemType, nsg int) string { return seqNames.name(act, state, nsg) }

// DecodeLegacy returns the name of the f32 legacy decode kernel, the index
// kernel kept for tests and benchmarks, for nsg in {1, 2, 4}.
func DecodeLegacy(nsg int) string { return DecodeLegacyOf(spec.F32, spec.F32, nsg) }

// DecodeLegacyOf is [DecodeLegacy] for activation type act and state type
// state.
func DecodeLegacyOf(act, state spec.ElemType, nsg int) string {
	return legacyNames.name(act, state, nsg)
}

// DecodeCapture returns the name of the f32 decode kernel that also writes
// the state after every token (speculative decoding), for nsg in {1, 2, 4}.
func DecodeCapture(nsg int) string { return DecodeCaptureOf(spec.F32, spec.F32, nsg) }

// DecodeCaptureOf is [DecodeCapture] for activation type act and state
// type state.
func DecodeCaptureOf(act, state spec.ElemType, nsg int) string {
	return captureNames.name(act, state, nsg)
}

// DecodePackedOf returns the name of the packed decode kernel (indices
// rebuilt every token) for activation type act, state type state and nsg
// in [PackedNSGs]: gated_delta_net_decode_packed_{act}_{state}_{nsg}.
func DecodePackedOf(act, state spec.ElemType, nsg int) string {
	return packedNames.name(act, state, nsg)
}

// DecodePackedSeqOf returns the name of the packed seq kernel (pointers
// advanced once per token).
func DecodePackedSeqOf(act, state spec.ElemType, nsg int) string {
	return packedSeqNames.name(act, state, nsg)
}

// DecodePackedCaptureOf returns the name of the packed decode kernel that
// also writes the state after every token.
func DecodePackedCaptureOf(act, state spec.ElemType, nsg int) string {
	return packedCaptureNames.name(act, state, nsg)
}

// PrefillBlockedOf returns the name of the blocked prefill kernel (packed
// layout, tokens staged in blocks) for nsg in [PackedNSGs].
func PrefillBlockedOf(act, state spec.ElemType, nsg int) string {
	return blockedNames.name(act, state, nsg)
}

// variants are the names of one kernel family's entry points, by activation
// type, state type and NSG (0 for prefill), made once so that looking one
// up, on every dispatch, allocates nothing.
type variants struct {
	base  string
	nsg   bool                                      // the names end in NSG
	names [len(ElemTypes)][len(ElemTypes)][5]string // by NSG: 0 (prefill) or 1, 2, 4
}

func newVariants(base string, nsg bool) *variants {
	v := &variants{base: base, nsg: nsg}
	for _, a := range ElemTypes {
		for _, s := range ElemTypes {
			if !nsg {
				v.names[a][s][0] = v.build(a, s, 0)
				continue
			}
			for _, n := range NSGs {
				v.names[a][s][n] = v.build(a, s, n)
			}
		}
	}
	return v
}

// build returns the name of a variant: the base, the activation and state
// types (one "f32" when both are f32), and NSG for the decode family.
func (v *variants) build(act, state spec.ElemType, nsg int) string {
	name := v.base + "_" + act.String()
	if act != spec.F32 || state != spec.F32 {
		name += "_" + state.String()
	}
	if v.nsg {
		name += "_" + strconv.Itoa(nsg)
	}
	return name
}

// name returns the entry point of a variant; one without a kernel (an
// unknown type, an NSG other than 1, 2, 4) gets the name such a kernel
// would have, which no source defines.
func (v *variants) name(act, state spec.ElemType, nsg int) string {
	if int(act) < len(ElemTypes) && int(state) < len(ElemTypes) && nsg >= 0 && nsg < 5 {
		if n := v.names[act][state][nsg]; n != "" {
			return n
		}
	}
	return v.build(act, state, nsg)
}

var (
	prefillNames = newVariants("gated_delta_net", false)
	chunkedNames = newVariants("gated_delta_net_chunked", false)
	decodeNames  = newVariants("gated_delta_net_decode", true)
	seqNames     = newVariants("gated_delta_net_decode_seq", true)
	legacyNames  = newVariants("gated_delta_net_decode_legacy", true)
	captureNames = newVariants("gated_delta_net_decode_capture", true)

	packedNames        = newVariants("gated_delta_net_decode_packed", true)
	packedSeqNames     = newVariants("gated_delta_net_decode_packed_seq", true)
	packedCaptureNames = newVariants("gated_delta_net_decode_packed_capture", true)
	blockedNames       = newVariants("gated_delta_net_prefill_blocked", true)
	coreNames          = newVariants("gated_delta_net_core_packed", true)
	chunkedCoreNames   = newVariants("gated_delta_net_chunked_core", false)
	blockedCoreNames   = newVariants("gated_delta_net_prefill_blocked_core", true)
	prefillCoreNames   = newVariants("gated_delta_net_prefill_core", false)
)

// PrefillCoreOf returns the name of the token-by-token prefill kernel that
// also runs the layer core: gated_delta_net_prefill_core_{act}_{state}.
// The same threadgroups as [PrefillOf] (one of D_v threads per value head
// and sequence), threadgroup memory [PrefillCoreThreadgroupMemory].
func PrefillCoreOf(act, state spec.ElemType) string { return prefillCoreNames.name(act, state, 0) }

// PrefillCoreThreadgroupMemory returns the threadgroup memory, in bytes, of
// the token-by-token prefill with the layer core for key size dk and value
// size dv: the staged k, q and v and the L2 norm's sums (2 dk + 2 dv
// floats, as without the core), then the gated norm's sum per SIMD-group
// of 32 rows; a multiple of 16 bytes.
func PrefillCoreThreadgroupMemory(dk, dv int) int {
	n := (2*dk + 2*dv + (dv+31)/32) * 4
	return (n + 15) &^ 15
}

// PrefillBlockedCoreOf returns the name of the blocked prefill kernel that
// also runs the layer core, for nsg in [PackedNSGs]:
// gated_delta_net_prefill_blocked_core_{act}_{state}_{nsg}. Its grid is
// the core kernel's (one threadgroup of 4 D_v threads per value head and
// sequence, so that the norm's sum over D_v stays in it), its threadgroup
// memory [BlockedCoreThreadgroupMemory].
func PrefillBlockedCoreOf(act, state spec.ElemType, nsg int) string {
	return blockedCoreNames.name(act, state, nsg)
}

// BlockedCoreLen is the number of tokens the blocked prefill with the
// layer core stages at a time (GDN_BLOCK_CORE in
// gdn_prefill_blocked.metal).
const BlockedCoreLen = 16

// BlockedCoreThreadgroupMemory returns the threadgroup memory, in bytes,
// of the blocked prefill with the layer core for key size dk and value
// size dv: [BlockedCoreLen] tokens of k, q (dk each) and v (dv), their g
// and beta, and the norm's dv/8 sums per token, all float.
func BlockedCoreThreadgroupMemory(dk, dv int) int {
	const c = BlockedCoreLen
	n := (2*c*dk + c*dv + 2*c + c*(dv/8)) * 4
	return (n + 15) &^ 15
}

// PrefillChunkedCoreOf returns the name of the chunked prefill kernel that
// also runs the layer core (SPEC section 13: the short convolution with
// its state before the step, the gated RMSNorm after it, each a flag of
// the core parameters): gated_delta_net_chunked_core_{act}_{state}. The
// same threadgroups as [PrefillChunkedOf]; its threadgroup memory is
// [ChunkedCoreThreadgroupMemory].
func PrefillChunkedCoreOf(act, state spec.ElemType) string {
	return chunkedCoreNames.name(act, state, 0)
}

// CorePackedOf returns the name of the layer-core kernel (SPEC section 13:
// the short convolution with its state, the step and the gated RMSNorm in
// one dispatch; one threadgroup per value head and sequence, the packed
// layout) for nsg in [NSGs]: gated_delta_net_core_packed_{act}_{state}_{nsg}.
func CorePackedOf(act, state spec.ElemType, nsg int) string {
	return coreNames.name(act, state, nsg)
}

// entryFile maps every entry point to the source file that defines it.
var entryFile = func() map[string]string {
	m := map[string]string{}
	noNSG := []int{0}
	for _, f := range []struct {
		names *variants
		nsgs  []int // the NSGs the source instantiates; 0: names without one
		file  string
	}{
		{prefillNames, noNSG, PrefillFile},
		{prefillCoreNames, noNSG, PrefillFile},
		{chunkedNames, noNSG, ChunkedFile},
		{chunkedCoreNames, noNSG, ChunkedFile},
		{decodeNames, NSGs[:], DecodeFile},
		{seqNames, NSGs[:], DecodeFile},
		{legacyNames, NSGs[:], DecodeFile},
		{captureNames, NSGs[:], CaptureFile},
		{coreNames, NSGs[:], CoreFile},
		{packedNames, PackedNSGs[:], PackedFile},
		{packedSeqNames, PackedNSGs[:], PackedFile},
		{packedCaptureNames, PackedNSGs[:], PackedFile},
		{blockedNames, PackedNSGs[:], BlockedFile},
		{blockedCoreNames, PackedNSGs[:], BlockedFile},
	} {
		for _, a := range ElemTypes {
			for _, s := range ElemTypes {
				for _, nsg := range f.nsgs {
					m[f.names.name(a, s, nsg)] = f.file
				}
			}
		}
	}
	for _, s := range opsSources {
		for _, e := range s.Entries() {
			m[e] = s.File
		}
	}
	return m
}()

// EntryPoints returns the names of every kernel, sorted.
func EntryPoints() []string { return slices.Sorted(maps.Keys(entryFile)) }

// SourceFile returns the name of the source file that defines the entry
// point, and false for an unknown name.
func SourceFile(entry string) (string, bool) {
	f, ok := entryFile[entry]
	return f, ok
}

// SourceFiles returns the names of the kernel sources, preludes excluded:
// the GDN sources, then those of [OpsSources].
func SourceFiles() []string {
	files := []string{PrefillFile, DecodeFile, CaptureFile, ChunkedFile, PackedFile, BlockedFile, CoreFile}
	for _, s := range opsSources {
		files = append(files, s.File)
	}
	return files
}

// Source returns the compilable text of a kernel source file: [ElemFile]
// and the file's preludes (for the GDN sources [CommonFile], for the
// packed kernels [PackedCommonFile] too, for the kernels that run the
// layer core [CoreCommonFile]; for [OpsSources] their headers) followed by
// the file, each behind a #line directive so that compiler messages name
// the right file and line. It returns "" for a name that is not one of
// [SourceFiles].
func Source(name string) string {
	parts := []string{ElemFile, CommonFile, name}
	switch name {
	case ElemFile, CommonFile, PackedCommonFile, CoreCommonFile:
		return ""
	case PackedFile:
		parts = []string{ElemFile, CommonFile, PackedCommonFile, name}
	case CoreFile, BlockedFile:
		parts = []string{ElemFile, CommonFile, PackedCommonFile, CoreCommonFile, name}
	case ChunkedFile, PrefillFile:
		parts = []string{ElemFile, CommonFile, CoreCommonFile, name}
	}
	for _, s := range opsSources {
		if s.File == name {
			parts = append(append([]string{ElemFile}, s.Headers...), name)
		} else if slices.Contains(s.Headers, name) {
			return ""
		}
	}
	var src strings.Builder
	for i, part := range parts {
		text, err := files.ReadFile(part)
		if err != nil {
			return ""
		}
		if i > 0 {
			src.WriteString("\n")
		}
		fmt.Fprintf(&src, "#line 1 %q\n%s", part, text)
	}
	return src.String()
}
