package model

import (
	"slices"

	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/tensor"
)

// prefixCache is a Batcher's cached prompt prefixes: each entry holds, in
// a slot of its own, the caches of a sequence after a prompt prefix whose
// length is a multiple of Options.Chunk (the KV cache rows of its
// positions, the conv and recurrent states after it). A request whose
// prompt begins with a held prefix, and is longer, starts from a copy of
// it and prefills the rest in the very chunks a fresh run would (chunk
// boundaries at absolute multiples of Chunk), so its outputs are those
// of a run without reuse. Entries are keyed by their tokens (a hash,
// then an exact compare); the longest match wins; a new prefix takes the
// least recently used entry's slot.
type prefixCache struct {
	chunk   int
	entries []prefixEntry
	tick    uint64
	hashes  []uint64 // scratch: a prompt's hash at each multiple of chunk
}

// prefixEntry is one held prefix: its slot, tokens (none while empty),
// their hash and when it was last used.
type prefixEntry struct {
	slot int
	key  []int32
	hash uint64
	used uint64
}

func newPrefixCache(chunk int, slots []int) *prefixCache {
	c := &prefixCache{chunk: chunk, entries: make([]prefixEntry, len(slots))}
	for i, sl := range slots {
		c.entries[i].slot = sl
	}
	return c
}

// FNV-1a, 64 bits, over the tokens' four bytes each.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func hashTokens(h uint64, ids []int32) uint64 {
	for _, id := range ids {
		for b := range 4 {
			h = (h ^ uint64(uint8(id>>(8*b)))) * fnvPrime
		}
	}
	return h
}

// lookup returns the entry holding the longest prefix of prompt shorter
// than prompt, or nil, and marks it used.
func (c *prefixCache) lookup(prompt []int32) *prefixEntry {
	c.hashes = c.hashes[:0]
	h := uint64(fnvOffset)
	for at := 0; at < len(prompt); at += c.chunk {
		c.hashes = append(c.hashes, h) // the hash of prompt[:at]
		h = hashTokens(h, prompt[at:min(at+c.chunk, len(prompt))])
	}
	var best *prefixEntry
	for i := range c.entries {
		e := &c.entries[i]
		n := len(e.key)
		if n == 0 || n >= len(prompt) || (best != nil && n <= len(best.key)) {
			continue
		}
		if e.hash == c.hashes[n/c.chunk] && slices.Equal(e.key, prompt[:n]) {
			best = e
		}
	}
	if best != nil {
		c.tick++
		best.used = c.tick
	}
	return best
}

// store takes an entry for prefix (a multiple of chunk tokens) and
// returns it, its key set, for the caller to copy the caches into: the
// least recently used one. It returns nil when prefix is held already
// (and marks that entry used).
func (c *prefixCache) store(prefix []int32) *prefixEntry {
	h := hashTokens(fnvOffset, prefix)
	c.tick++
	lru := &c.entries[0]
	for i := range c.entries {
		e := &c.entries[i]
		if e.hash == h && slices.Equal(e.key, prefix) {
			e.used = c.tick
			return nil
		}
		if e.used < lru.used {
			lru = e
		}
	}
	lru.key, lru.hash, lru.used = append(lru.key[:0], prefix...), h, c.tick
	return lru
}

// copySlot encodes copying the caches of slot from, for its first
// positions positions, into slot to: per attention layer the KV cache
// rows of those positions (a run per KV head: the slot is the cache's
// outermost dimension), and every linear-attention layer's conv and
// recurrent states.
func (s *Session) copySlot(enc *mtl.BlitCommandEncoder, from, to, positions int) {
	c, maxLen := s.m.Config, s.m.opts.MaxLen
	for _, caches := range [][]tensor.View{s.kc, s.vc} {
		for _, v := range caches {
			run, size := maxLen*c.HeadDim*v.Type.Size(), positions*c.HeadDim*v.Type.Size()
			for h := range c.NumKVHeads {
				enc.CopyFromBuffer(v.Buffer, v.Offset+(from*c.NumKVHeads+h)*run, v.Buffer, v.Offset+(to*c.NumKVHeads+h)*run, size)
			}
		}
	}
	if s.pool == nil {
		return
	}
	for _, views := range [][]tensor.View{s.pool.States, s.pool.ConvStates} {
		for _, v := range views {
			per := v.Bytes() / len(s.used)
			enc.CopyFromBuffer(v.Buffer, v.Offset+from*per, v.Buffer, v.Offset+to*per, per)
		}
	}
}
