package ops_test

import (
	"testing"

	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/emu/msl"
	"github.com/puremetal/puremetal/kernels"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/ops"
	"github.com/puremetal/puremetal/tensor"
)

// Buffer indices of attention.metal, as the counters name them.
const (
	bindQ, bindKCache, bindVCache, bindOut = 0, 1, 2, 3
	bindGate                               = 8
	bindPartialO, bindPartialML            = 9, 10
)

// qwen3NextAttention is the attention layer of Qwen3-Next-80B-A3B: 16
// query heads, 2 KV heads, head size 256, bf16, with the output gate read
// from q_proj's output.
func qwen3NextAttention(slots, maxLen, splits int, seqs []attnSeq) attnCase {
	return attnCase{typ: tensor.BF16, dim: 256, heads: 16, kvHeads: 2, slots: slots, maxLen: maxLen,
		splits: splits, gate: 2, seqs: seqs, varlen: splits == 0}
}

// TestAttentionDecodeTraffic measures, from the emulator's counters, the
// bytes one decode step of Qwen3-Next's attention layer loads at cache
// lengths from 1 to 2048, and checks that the keys and values are each
// loaded exactly once (the floor: 2 * length * KV heads * head size * 2
// bytes) and q once per split used, whatever the splits; it logs what the
// decode and reduction dispatches load in all (q, gate, partials,
// parameters and sequence data included) against that floor.
func TestAttentionDecodeTraffic(t *testing.T) {
	r := newRig(t, emu.Options{})
	const size = 2 // bf16
	t.Logf("%6s %6s %4s %9s %9s %7s %7s %8s %8s %9s %7s", "keys", "splits", "used", "floor", "cache", "q", "gate", "partials", "other", "loaded", "ratio")
	for i, keys := range []int{1, 33, 300, 2048} {
		c := qwen3NextAttention(1, keys, ops.AttentionSplits(keys), []attnSeq{{0, keys - 1, 1}})
		u := setUpAttn(r, c, uint64(i))
		cs := r.step(u)
		if want := 2 + min(c.splits-1, 1); len(cs) != want {
			t.Fatalf("%d keys: %d dispatches, want %d", keys, len(cs), want)
		}
		blocks := (keys + kernels.AttentionDecodeBlock - 1) / kernels.AttentionDecodeBlock
		per := (blocks + c.splits - 1) / c.splits
		used := (blocks + per - 1) / per
		floor := uint64(2 * keys * c.kvHeads * c.dim * size)
		d := cs[1]
		cache := d.Loaded[bindKCache] + d.Loaded[bindVCache]
		if cache != floor {
			t.Errorf("%d keys: decode loaded %d bytes of the caches, want each key and value once: %d", keys, cache, floor)
		}
		if got, want := d.Loaded[bindQ], uint64(used*c.heads*c.dim*size); got != want {
			t.Errorf("%d keys: decode loaded %d bytes of q, want once per split used (%d): %d", keys, got, used, want)
		}
		var loaded, gate, partials uint64
		for _, cc := range cs[1:] {
			for b, n := range cc.Loaded {
				loaded += n
				switch b {
				case bindGate:
					gate += n
				case bindPartialO, bindPartialML:
					partials += n
				}
			}
		}
		other := loaded - cache - d.Loaded[bindQ] - gate - partials
		t.Logf("%6d %6d %4d %9d %9d %7d %7d %8d %8d %9d %7.3f", keys, c.splits, used, floor, cache, d.Loaded[bindQ], gate, partials, other, loaded, float64(loaded)/float64(floor))
	}
}

// TestAttentionPrefillStructure checks the prefill kernel's tiles on a
// chunk of 16 tokens after 24 cached positions at Qwen3-Next's shape: the
// threadgroup memory [kernels.AttentionPrefillThreadgroupMemory] says, two
// barriers per tile of keys, and each threadgroup loading each key and
// value it sees once (the keys up to its last row's position); it logs
// the cache bytes against the floor of reading the sequence once.
func TestAttentionPrefillStructure(t *testing.T) {
	r := newRig(t, emu.Options{CountSegments: true})
	const size, past, tokens = 2, 24, 16
	c := qwen3NextAttention(1, 48, 0, []attnSeq{{0, past, tokens}})
	u := setUpAttn(r, c, 1)
	cs := r.step(u)
	p := cs[1]
	if want := kernels.AttentionPrefillThreadgroupMemory(c.dim); p.ThreadgroupMemory != want {
		t.Errorf("threadgroup memory %d bytes, want %d", p.ThreadgroupMemory, want)
	}
	bk := kernels.AttentionPrefillKeys(c.dim)
	group := c.heads / c.kvHeads
	var tiles, keys uint64
	for first := 0; first < tokens*group; first += kernels.AttentionRows {
		last := min(tokens*group, first+kernels.AttentionRows) - 1
		seen := past + last/group + 1
		tiles += uint64((seen + bk - 1) / bk)
		keys += uint64(seen)
	}
	tiles *= uint64(c.kvHeads)
	keys *= uint64(c.kvHeads)
	if p.Barriers != 2*tiles {
		t.Errorf("%d barriers, want 2 per tile: %d", p.Barriers, 2*tiles)
	}
	cache := p.Loaded[bindKCache] + p.Loaded[bindVCache]
	if want := 2 * keys * uint64(c.dim*size); cache != want {
		t.Errorf("the caches: %d bytes loaded, want each seen key and value once per threadgroup: %d", cache, want)
	}
	floor := uint64(2 * (past + tokens) * c.kvHeads * c.dim * size)
	t.Logf("prefill, %d tokens after %d, head size %d, %d/%d heads: %d threadgroups of %d threads, %d bytes of threadgroup memory, %d tiles of %d keys, %d barriers (2 per tile); cache bytes loaded %d, %.2f times the floor %d (the K and V of the sequence once)",
		tokens, past, c.dim, c.heads, c.kvHeads, p.Threadgroups[0]*p.Threadgroups[1]*p.Threadgroups[2], p.ThreadsPerThreadgroup[0]*p.ThreadsPerThreadgroup[1],
		p.ThreadgroupMemory, tiles, bk, p.Barriers, cache, float64(cache)/float64(floor), floor)
}

// step runs u's append and attention on one command buffer and returns
// the counters of each dispatch.
func (r *rig) step(u *attnRun) []msl.Counters {
	r.T.Helper()
	cs, err := r.commit(func(enc *mtl.ComputeCommandEncoder) error { return u.encode(r.k, enc) })
	if err != nil {
		r.T.Fatal(err)
	}
	return cs
}
