package tokenizer

// A merge joins two adjacent tokens into one; rank orders merges (lower
// first) as their place in tokenizer.json's merges list.
type merge struct {
	rank int32
	id   int32 // the joined token
}

func pairKey(left, right int32) uint64 { return uint64(uint32(left))<<32 | uint64(uint32(right)) }

// symbol is one token of a word being merged, in a linked list over the
// word's byte positions; a symbol merged into its left neighbour has
// id -1.
type symbol struct {
	id         int32
	prev, next int32
}

// candidate is a pair of adjacent symbols that has a merge, at position
// pos (the left symbol), for the heap that picks the next merge.
type candidate struct {
	rank, pos int32
	left      int32 // ids the pair had when it was pushed, to tell
	right     int32 // a stale candidate from a live one
	id        int32
}

func (c candidate) before(d candidate) bool {
	return c.rank < d.rank || (c.rank == d.rank && c.pos < d.pos)
}

// bpeScratch holds the buffers of one word's merging, reused from word to
// word.
type bpeScratch struct {
	syms []symbol
	heap []candidate
}

// bpe appends to dst the tokens of word (raw bytes, at least one): every
// byte starts as its byte-level token, then the pair of lowest rank (the
// leftmost among equal ranks) is merged until no adjacent pair has a
// merge, the order of HF's BPE model.
func (t *Tokenizer) bpe(dst []int32, word string, s *bpeScratch) []int32 {
	if t.ignoreMerges {
		if id, ok := t.wordID[word]; ok {
			return append(dst, id)
		}
	}
	s.syms = s.syms[:0]
	s.heap = s.heap[:0]
	for i := 0; i < len(word); i++ {
		s.syms = append(s.syms, symbol{id: t.byteID[word[i]], prev: int32(i - 1), next: int32(i + 1)})
	}
	s.syms[len(s.syms)-1].next = -1
	for i := 0; i+1 < len(s.syms); i++ {
		s.push(t, int32(i))
	}
	for len(s.heap) > 0 {
		c := s.pop()
		l := &s.syms[c.pos]
		if l.id != c.left || l.next < 0 || s.syms[l.next].id != c.right {
			continue // one of the pair was merged since it was pushed
		}
		r := &s.syms[l.next]
		l.id = c.id
		l.next = r.next
		if r.next >= 0 {
			s.syms[r.next].prev = c.pos
		}
		r.id = -1
		if l.prev >= 0 {
			s.push(t, l.prev)
		}
		s.push(t, c.pos)
	}
	for i := int32(0); i >= 0; i = s.syms[i].next {
		dst = append(dst, s.syms[i].id)
	}
	return dst
}

// push adds the pair starting at symbol pos to the heap if it has a merge.
func (s *bpeScratch) push(t *Tokenizer, pos int32) {
	l := s.syms[pos]
	if l.next < 0 {
		return
	}
	r := s.syms[l.next].id
	m, ok := t.merges[pairKey(l.id, r)]
	if !ok {
		return
	}
	s.heap = append(s.heap, candidate{rank: m.rank, pos: pos, left: l.id, right: r, id: m.id})
	h := s.heap
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h[i].before(h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

// pop removes and returns the heap's first candidate.
func (s *bpeScratch) pop() candidate {
	h := s.heap
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	for i := 0; ; {
		c := 2*i + 1
		if c >= n {
			break
		}
		if c+1 < n && h[c+1].before(h[c]) {
			c++
		}
		if !h[c].before(h[i]) {
			break
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
	s.heap = h
	return top
}
