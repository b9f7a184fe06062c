package kernels

import (
	"strconv"

	"github.com/puremetal/puremetal/gdn/spec"
)

// AttentionFile is the source of the attention kernels over a KV cache:
// the append, decode split over the cache and its reduction, and the tiled
// causal prefill. Its comment block gives the layouts, buffer indices and
// parameter block.
const AttentionFile = "attention.metal"

// AttentionHeadDims lists the head sizes of the attention kernels that
// keep a head in registers (decode and prefill).
var AttentionHeadDims = [...]int{64, 128, 256}

// AttentionMaxGroup is the largest GQA ratio n_heads / n_kv_heads the
// decode kernel takes (ATTN_MAX_GROUP in attention.metal).
const AttentionMaxGroup = 8

// AttentionDecodeBlock is the number of keys the decode kernel takes at a
// time, one per lane (ATTN_DECODE_BLOCK): a split holds a whole number of
// such blocks.
const AttentionDecodeBlock = 32

// AttentionRows is the number of query rows (token, head) of one prefill
// threadgroup, one SIMD group each (ATTN_ROWS).
const AttentionRows = 8

// AttentionPrefillKeys returns the number of keys the prefill kernel
// stages per tile for head size d: 2048 / d.
func AttentionPrefillKeys(d int) int { return 2048 / d }

// AttentionPrefillThreadgroupMemory returns the threadgroup memory, in
// bytes, the prefill kernel declares for head size d: a tile of keys and
// one of values, [AttentionPrefillKeys] rows of d + 1 floats each.
func AttentionPrefillThreadgroupMemory(d int) int { return 2 * AttentionPrefillKeys(d) * (d + 1) * 4 }

// KVAppendOf returns the name of the kernel that writes a step's keys and
// values into the cache, for activation type act: attn_kv_append_{act}.
func KVAppendOf(act spec.ElemType) string { return attnAppendNames.of(act, 0) }

// AttentionDecodeOf returns the name of the decode attention kernel for
// activation type act and head size d in [AttentionHeadDims]:
// attn_decode_{act}_{d}.
func AttentionDecodeOf(act spec.ElemType, d int) string { return attnDecodeNames.of(act, d) }

// AttentionDecodeReduceOf returns the name of the kernel that combines the
// splits of decode attention: attn_decode_reduce_{act}.
func AttentionDecodeReduceOf(act spec.ElemType) string { return attnReduceNames.of(act, 0) }

// AttentionPrefillOf returns the name of the tiled causal prefill
// attention kernel for activation type act and head size d in
// [AttentionHeadDims]: attn_prefill_{act}_{d}.
func AttentionPrefillOf(act spec.ElemType, d int) string { return attnPrefillNames.of(act, d) }

// attnNames are the entry points of one attention kernel by activation
// type and, for the kernels that have one, head size; made once, so that a
// dispatch's look-up allocates nothing.
type attnNames struct {
	base  string
	dims  bool
	names [len(ElemTypes)][len(AttentionHeadDims) + 1]string
}

func newAttnNames(base string, dims bool) *attnNames {
	n := &attnNames{base: base, dims: dims}
	for _, a := range ElemTypes {
		n.names[a][0] = n.build(a, 0)
		for i, d := range AttentionHeadDims {
			n.names[a][i+1] = n.build(a, d)
		}
	}
	return n
}

func (n *attnNames) build(act spec.ElemType, d int) string {
	name := n.base + "_" + act.String()
	if n.dims {
		name += "_" + strconv.Itoa(d)
	}
	return name
}

// of returns the entry point; one without a kernel gets the name such a
// kernel would have, which the source does not define.
func (n *attnNames) of(act spec.ElemType, d int) string {
	if int(act) < len(ElemTypes) {
		if !n.dims {
			return n.names[act][0]
		}
		for i, hd := range AttentionHeadDims {
			if hd == d {
				return n.names[act][i+1]
			}
		}
	}
	return n.build(act, d)
}

var (
	attnAppendNames  = newAttnNames("attn_kv_append", false)
	attnDecodeNames  = newAttnNames("attn_decode", true)
	attnReduceNames  = newAttnNames("attn_decode_reduce", false)
	attnPrefillNames = newAttnNames("attn_prefill", true)
)

// attentionEntries returns every entry point of [AttentionFile].
func attentionEntries() []string {
	var e []string
	for _, a := range ElemTypes {
		e = append(e, KVAppendOf(a), AttentionDecodeReduceOf(a))
		for _, d := range AttentionHeadDims {
			e = append(e, AttentionDecodeOf(a, d), AttentionPrefillOf(a, d))
		}
	}
	return e
}
