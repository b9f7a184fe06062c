package gdn

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"

	"github.com/puremetal/puremetal/mtl"
)

// Shape holds the dimensions of one Gated DeltaNet call.
type Shape struct {
	DK      int // D_k: columns of S, length of q and k
	DV      int // D_v: rows of S, length of v and of the output
	NKHeads int // key heads (q, k)
	NVHeads int // value heads (v, g, beta, S); a multiple of NKHeads
	NTokens int // tokens per sequence
	NSeqs   int // sequences
}

// HeadMap says which key head a value head reads q and k from when
// NVHeads = r * NKHeads.
type HeadMap uint32

const (
	// Block maps value head h to key head h / r: HF transformers, MLX /
	// mlx-lm, flash-linear-attention (repeat_interleave). The zero value.
	Block HeadMap = 0
	// Tiled maps value head h to key head h % NKHeads: GGUF files converted
	// for llama.cpp.
	Tiled HeadMap = 1
)

// String returns "block", "tiled", or "HeadMap(n)" for an unknown value.
func (m HeadMap) String() string {
	switch m {
	case Block:
		return "block"
	case Tiled:
		return "tiled"
	}
	return fmt.Sprintf("HeadMap(%d)", uint32(m))
}

// Params are the typed parameters of a dispatch.
type Params struct {
	Shape   Shape
	HeadMap HeadMap
	// QScale multiplies every output at write-back (typically 1/sqrt(D_k)),
	// which saves scaling q in a dispatch of its own. 0 means q is already
	// scaled: the outputs are not multiplied.
	QScale float32
}

// words packs the parameters into the nine 32-bit words the kernels read at
// buffer index 8: D_k, D_v, n_k_heads, n_v_heads, n_tokens, n_seqs, head
// map, reserved (0), q scale bits (0 for no scale). It assumes p is valid.
func (p Params) words() [9]uint32 {
	s := p.Shape
	var scale uint32
	if p.QScale != 0 { // -0 also means "no scale"
		scale = math.Float32bits(p.QScale)
	}
	return [9]uint32{
		uint32(s.DK), uint32(s.DV), uint32(s.NKHeads), uint32(s.NVHeads),
		uint32(s.NTokens), uint32(s.NSeqs), uint32(p.HeadMap), 0, scale,
	}
}

// bytes returns the parameter words as the kernels read them, little-endian.
func (p Params) bytes() [36]byte {
	var b [36]byte
	for i, w := range p.words() {
		binary.LittleEndian.PutUint32(b[4*i:], w)
	}
	return b
}

// Element counts each buffer must hold; see checkedCount.
func (s Shape) qkLen() uint64 {
	return checkedCount(s.DK, s.NKHeads, s.NTokens, s.NSeqs)
}

func (s Shape) vLen() uint64 {
	return checkedCount(s.DV, s.NVHeads, s.NTokens, s.NSeqs)
}

func (s Shape) gateLen() uint64 {
	return checkedCount(s.NVHeads, s.NTokens, s.NSeqs)
}

func (s Shape) stateLen() uint64 {
	return checkedCount(s.DK, s.DV, s.NVHeads, s.NSeqs)
}

func (s Shape) captureLen() uint64 {
	return checkedCount(s.DK, s.DV, s.NVHeads, s.NTokens, s.NSeqs)
}

// checkedCount multiplies dimensions and saturates at 2^64-1 instead of
// wrapping, so a count at or above the 2^32 limit is always seen as such.
// It returns 0 when a dimension is not positive.
func checkedCount(dims ...int) uint64 {
	n := uint64(1)
	for _, d := range dims {
		if d <= 0 {
			return 0
		}
		hi, lo := bits.Mul64(n, uint64(d))
		if hi != 0 {
			return math.MaxUint64
		}
		n = lo
	}
	return n
}

// nsg is the number of SIMD groups per threadgroup of the decode family:
// D_k / 32.
func (s Shape) nsg() int { return s.DK / 32 }

// prefillGeometry returns the grid (in threadgroups) and threadgroup size of
// the prefill kernel: (n_v_heads, n_seqs, 1) threadgroups of (D_v, 1, 1).
func prefillGeometry(s Shape) (grid, group mtl.Size) {
	return mtl.Size{Width: uint(s.NVHeads), Height: uint(s.NSeqs), Depth: 1},
		mtl.Size{Width: uint(s.DV), Height: 1, Depth: 1}
}

// decodeGeometry returns the grid (in threadgroups) and threadgroup size of
// the decode family: (D_v / NSG, n_v_heads, n_seqs) threadgroups of
// (32, NSG, 1), NSG = D_k / 32.
func decodeGeometry(s Shape) (grid, group mtl.Size) {
	nsg := s.nsg()
	return mtl.Size{Width: uint(s.DV / nsg), Height: uint(s.NVHeads), Depth: uint(s.NSeqs)},
		mtl.Size{Width: 32, Height: uint(nsg), Depth: 1}
}

// prefillThreadgroupMemory returns the threadgroup memory the prefill kernel
// stages each token in: (2*D_k + 2*D_v) floats, rounded up to the multiple
// of 16 bytes Metal requires of setThreadgroupMemoryLength.
func prefillThreadgroupMemory(s Shape) int {
	n := (2*s.DK + 2*s.DV) * 4
	return (n + 15) &^ 15
}
