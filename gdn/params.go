package gdn

import (
	"encoding/binary"
	"math"

	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/kernels"
	"github.com/puremetal/puremetal/mtl"
)

// The contract's types, defined in package spec and used here under the
// same names.
type (
	// Shape holds the dimensions of one Gated DeltaNet call; see
	// [spec.Shape].
	Shape = spec.Shape
	// HeadMap says which key head a value head reads q and k from; see
	// [spec.HeadMap].
	HeadMap = spec.HeadMap
	// Params are the typed parameters of a dispatch; see [spec.Params].
	Params = spec.Params
	// ElemType is the element type of a buffer view; see [spec.ElemType].
	ElemType = spec.ElemType
	// Fused says which parts of a layer's step the kernel computes itself;
	// see [spec.Fused].
	Fused = spec.Fused
)

// FusedAll turns every part of [Fused] on: a Qwen3-Next or Qwen3.5 layer's
// whole recurrent step in one dispatch; see [spec.FusedAll].
var FusedAll = spec.FusedAll

// Head mappings and element types; see package spec.
const (
	Block = spec.Block // value head h reads key head h / r
	Tiled = spec.Tiled // value head h reads key head h % n_k_heads

	F32  = spec.F32  // IEEE-754 binary32
	F16  = spec.F16  // IEEE-754 binary16
	BF16 = spec.BF16 // bfloat16
)

// Bits of parameter word 7, the fused parts of the step the kernel computes
// (GDN_FUSED_* in kernels/gdn_common.metal).
const (
	fusedL2Norm = 1 << 0 // normalise q and k
	fusedGate   = 1 << 1 // g from a, A_log and dt_bias
	fusedBeta   = 1 << 2 // beta = sigmoid(b)
)

// fusedBits returns parameter word 7 for f.
func fusedBits(f spec.Fused) uint32 {
	var w uint32
	if f.L2Norm {
		w |= fusedL2Norm
	}
	if f.Gate {
		w |= fusedGate
	}
	if f.Beta {
		w |= fusedBeta
	}
	return w
}

// words packs the parameters into the nine 32-bit words the kernels read at
// buffer index 8: D_k, D_v, n_k_heads, n_v_heads, n_tokens, n_seqs, head
// map, the fused parts (fusedBits), q scale bits (0 for no scale). The
// element types are not among them: each type combination is a kernel of
// its own. It assumes p is valid.
func words(p Params) [9]uint32 {
	s := p.Shape
	var scale uint32
	if p.QScale != 0 { // -0 also means "no scale"
		scale = math.Float32bits(p.QScale)
	}
	return [9]uint32{
		uint32(s.DK), uint32(s.DV), uint32(s.NKHeads), uint32(s.NVHeads),
		uint32(s.NTokens), uint32(s.NSeqs), uint32(p.HeadMap), fusedBits(p.Fused), scale,
	}
}

// paramsLen is the size of the parameter block: the nine words of
// [words], then n_slots, varlen and a reserved word (servingWords).
const paramsLen = 48

// servingWords are parameter words 9 to 11: n_slots (0 without a state
// pool), 1 when the tokens are packed (cu_seqlens), and a reserved 0.
func servingWords(s Shape) [3]uint32 {
	var varlen uint32
	if s.Varlen {
		varlen = 1
	}
	return [3]uint32{uint32(s.NSlots), varlen, 0}
}

// paramBytes returns the parameter words as the kernels read them,
// little-endian.
func paramBytes(p Params) [paramsLen]byte {
	var b [paramsLen]byte
	for i, w := range words(p) {
		binary.LittleEndian.PutUint32(b[4*i:], w)
	}
	for i, w := range servingWords(p.Shape) {
		binary.LittleEndian.PutUint32(b[36+4*i:], w)
	}
	return b
}

// nsg is the number of SIMD groups per threadgroup of the decode family:
// D_k / 32.
func nsg(s Shape) int { return s.DK / 32 }

// prefillGeometry returns the grid (in threadgroups) and threadgroup size of
// the prefill kernel: (n_v_heads, n_seqs, 1) threadgroups of (D_v, 1, 1).
func prefillGeometry(s Shape) (grid, group mtl.Size) {
	return mtl.Size{Width: s.NVHeads, Height: s.NSeqs, Depth: 1},
		mtl.Size{Width: s.DV, Height: 1, Depth: 1}
}

// chunkedGeometry returns the grid (in threadgroups) and threadgroup size
// of the chunked prefill kernel: (n_v_heads, n_seqs, 1) threadgroups of
// (kernels.ChunkLanes * D_v, 1, 1).
func chunkedGeometry(s Shape) (grid, group mtl.Size) {
	return mtl.Size{Width: s.NVHeads, Height: s.NSeqs, Depth: 1},
		mtl.Size{Width: kernels.ChunkLanes * s.DV, Height: 1, Depth: 1}
}

// decodeGeometry returns the grid (in threadgroups) and threadgroup size of
// the decode family: (D_v / NSG, n_v_heads, n_seqs) threadgroups of
// (32, NSG, 1), NSG = D_k / 32.
func decodeGeometry(s Shape) (grid, group mtl.Size) {
	nsg := nsg(s)
	return mtl.Size{Width: s.DV / nsg, Height: s.NVHeads, Depth: s.NSeqs},
		mtl.Size{Width: 32, Height: nsg, Depth: 1}
}

// prefillThreadgroupMemory returns the threadgroup memory the prefill kernel
// stages each token in: (2*D_k + 2*D_v) floats, rounded up to the multiple
// of 16 bytes Metal requires of setThreadgroupMemoryLength.
func prefillThreadgroupMemory(s Shape) int {
	n := (2*s.DK + 2*s.DV) * 4
	return (n + 15) &^ 15
}

// The packed layout (kernels/gdn_packed_common.metal): 8 rows of S per
// SIMD-group, GDN_PACKED_SIMDGROUPS = 4 SIMD-groups per threadgroup.
const (
	packedRows    = 32     // rows of S per threadgroup
	packedThreads = 32 * 4 // threads per threadgroup
	blockBytes    = 64     // GDN_BLOCK_BYTES of the blocked prefill
)

// packedGeometry returns the grid (in threadgroups) and threadgroup size of
// the packed kernels: (D_v / 32, n_v_heads, n_seqs) threadgroups of
// (32, 4, 1).
func packedGeometry(s Shape) (grid, group mtl.Size) {
	return mtl.Size{Width: s.DV / packedRows, Height: s.NVHeads, Depth: s.NSeqs},
		mtl.Size{Width: 32, Height: packedThreads / 32, Depth: 1}
}

// blockedThreadgroupMemory returns the threadgroup memory the blocked
// prefill stages a block of tokens in: 64 / (activation size) tokens
// (16 of f32, 32 of f16 or bf16), each with k and q (D_k elements each)
// and the v of the threadgroup's 32 rows in the activation type, and g
// and beta as f32; a multiple of 16 bytes.
func blockedThreadgroupMemory(p Params) int {
	a := p.Activation.Size()
	tokens := blockBytes / a
	return tokens*(2*p.Shape.DK+packedRows)*a + tokens*2*4
}
