package model

import (
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/tensor"
)

// Prefill feeds a prompt (or its continuation) to the sequence in slot,
// in passes of at most Options.Chunk tokens, the caches carried from one
// to the next, and returns the logits after its last token [vocab]
// (widened to float32 into dst when it has room, else a new slice).
func (s *Session) Prefill(slot int, tokens []int32, dst []float32) ([]float32, error) {
	if err := s.checkSlot(slot); err != nil {
		return nil, err
	}
	if len(tokens) == 0 {
		return nil, tensor.Invalid("tokens", "an empty prompt")
	}
	if err := s.checkTokens(tokens, s.lens[slot]); err != nil {
		return nil, err
	}
	chunk := s.m.opts.Chunk
	for i := 0; i < len(tokens); i += chunk {
		part := tokens[i:min(i+chunk, len(tokens))]
		s.s.in.fill(part, []int{slot}, s.lens)
		if err := s.run(pass{n: len(part), seqs: 1, lastOnly: true, in: s.s.in}); err != nil {
			return nil, err
		}
		s.lens[slot] += len(part)
	}
	return s.readLogits(1, dst)
}

// Decode feeds one token to each sequence of slots (tokens[i] to
// slots[i]) in one pass and returns their logits [len(slots)][vocab].
func (s *Session) Decode(slots []int, tokens []int32, dst []float32) ([]float32, error) {
	if len(slots) != len(tokens) || len(slots) == 0 || len(slots) > len(s.used) {
		return nil, tensor.Invalid("slots", "%d slots for %d tokens: want as many, 1 to %d", len(slots), len(tokens), len(s.used))
	}
	for i, sl := range slots {
		if err := s.checkSlot(sl); err != nil {
			return nil, err
		}
		for _, other := range slots[:i] {
			if other == sl {
				return nil, tensor.Invalid("slots", "slot %d named twice", sl)
			}
		}
		if err := s.checkTokens(tokens[i:i+1], s.lens[sl]); err != nil {
			return nil, err
		}
	}
	s.s.in.fill(tokens, slots, s.lens)
	if err := s.run(pass{n: len(tokens), seqs: len(slots), decode: true, in: s.s.in}); err != nil {
		return nil, err
	}
	for _, sl := range slots {
		s.lens[sl]++
	}
	return s.readLogits(len(slots), dst)
}

// checkTokens checks ids against the vocabulary and the cache's room.
func (s *Session) checkTokens(ids []int32, held int) error {
	vocab := s.m.Config.VocabSize
	for i, id := range ids {
		if id < 0 || int(id) >= vocab {
			return tensor.Invalid("tokens", "token %d at %d is outside the vocabulary of %d", id, i, vocab)
		}
	}
	if held+len(ids) > s.m.opts.MaxLen {
		return tensor.Invalid("tokens", "%d positions held and %d more pass the cache's MaxLen %d", held, len(ids), s.m.opts.MaxLen)
	}
	return nil
}

// fill writes a pass's token ids (when tokens is not nil), positions,
// slots and cache lengths (held, per slot): the tokens (or, without them,
// one per slot) split evenly among the slots, in order.
func (in inputs) fill(tokens []int32, slots []int, held []int) {
	ids, pos := mtl.Slice[uint32](in.tokens.Buffer), mtl.Slice[int32](in.pos.Buffer)
	sl, lens := mtl.Slice[int32](in.slots.Buffer), mtl.Slice[int32](in.lens.Buffer)
	n := len(tokens)
	if tokens == nil {
		n = len(slots)
	}
	per := n / len(slots)
	for i := 0; i < n; i++ {
		if tokens != nil {
			ids[i] = uint32(tokens[i])
		}
		pos[i] = int32(held[slots[i/per]] + i%per)
	}
	for i, slot := range slots {
		sl[i], lens[i] = int32(slot), int32(held[slot])
	}
}

// run encodes pass p in one command buffer, commits it and waits.
func (s *Session) run(p pass) error {
	return s.queue.Run(func(enc *mtl.ComputeCommandEncoder) error { return s.encode(enc, p) })
}

// readLogits widens the first rows rows of logits into dst.
func (s *Session) readLogits(rows int, dst []float32) ([]float32, error) {
	n := rows * s.m.Config.VocabSize
	if cap(dst) < n {
		dst = make([]float32, n)
	}
	dst = dst[:n]
	return dst, head(s.s.logits, n).Load(dst)
}
