package tokenizer

import (
	"strings"
	"sync"
)

// Bounds of the cache of merged words: words longer than maxCachedWord
// bytes are merged every time, and once maxCachedWords words are cached
// new ones are no longer added (HF's BPE cache stops filling the same way).
const (
	maxCachedWord  = 256
	maxCachedWords = 1 << 17
)

// wordCache maps a word's bytes to its ids, kept one after another in a
// shared arena.
type wordCache struct {
	mu    sync.RWMutex
	spans map[string]span
	ids   []int32
}

type span struct{ off, n uint32 }

// reset empties the cache (and makes a new one ready).
func (c *wordCache) reset() {
	c.mu.Lock()
	c.spans = make(map[string]span)
	c.ids = c.ids[:0]
	c.mu.Unlock()
}

// get returns the ids of word, which alias the arena: the caller copies
// them before the next put.
func (c *wordCache) get(word string) ([]int32, bool) {
	c.mu.RLock()
	s, ok := c.spans[word]
	ids := c.ids[s.off : s.off+s.n]
	c.mu.RUnlock()
	return ids, ok
}

func (c *wordCache) put(word string, ids []int32) {
	if len(word) > maxCachedWord {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.spans) >= maxCachedWords {
		return
	}
	if _, ok := c.spans[word]; ok {
		return
	}
	c.spans[strings.Clone(word)] = span{off: uint32(len(c.ids)), n: uint32(len(ids))}
	c.ids = append(c.ids, ids...)
}
