package gdn

import (
	"fmt"

	"github.com/puremetal/puremetal/mtl"
)

// blitEncoder is the part of *mtl.BlitCommandEncoder a rollback uses.
type blitEncoder interface {
	CopyFromBuffer(src *mtl.Buffer, srcOffset int, dst *mtl.Buffer, dstOffset, size int)
	Err() error
}

// Rollback encodes onto one blit encoder what makes every sequence of a
// speculative batch continue from its last accepted token: after a
// [Kernels.DecodeWithCapture] dispatch with p and b, sequence s, which
// drafted n_s tokens and accepted accepted[s] of them, gets as its state
// (its slot of StateOut with a state pool) the state after token
// accepted[s]:
//
//   - accepted[s] == n_s > 0: nothing to copy, StateOut already holds it;
//   - 0 < accepted[s] < n_s: capture[..., accepted[s]-1, s] is copied to
//     it (capture[..., cu_seqlens[s] + accepted[s]-1] with packed tokens);
//   - accepted[s] == 0: the state before the window, which only a
//     StateIn distinct from StateOut still holds, is copied from StateIn
//     (nothing to copy in place for an empty sequence, which the kernel
//     left alone).
//
// One copy per sequence that needs one, a whole state each, in one
// encoder: no host round trip per sequence, and nothing of a sequence
// skipped by the dispatch (padding) is touched. The copies are bytes, so
// every state type works. The slot indices and cu_seqlens are read on the
// host, so with a state pool or packed tokens b.Slots and b.CuSeqlens must
// be in shared storage. With StateOut equal to StateIn (the pool updated
// in place) the state before the window is gone: make the window's first
// token the one already accepted (the token the target model chose last
// step, as servers verify drafts), so that accepted[s] >= 1.
//
// The arguments are those of the capture dispatch and are validated as
// such; accepted has n_seqs counts. Errors wrap [ErrInvalidArgument] and
// name the sequence; nothing is encoded then.
func Rollback(blit *mtl.BlitCommandEncoder, p Params, b Buffers, accepted []int32) error {
	if blit == nil {
		return invalid("blit", "nil blit command encoder")
	}
	return rollback(blit, p, b, accepted)
}

func rollback(blit blitEncoder, p Params, b Buffers, accepted []int32) error {
	if err := Validate(KernelDecodeCapture, p, b); err != nil {
		return err
	}
	ws, err := windows("Rollback", p, b, accepted)
	if err != nil {
		return err
	}
	return rollbackStates(blit, p, b, accepted, ws)
}

// A window is one sequence's part of a speculative window: the state it
// reads and writes (its slot; negative for padding), its first token in the
// packed order and its token count.
type window struct{ state, tok0, n int }

// windows reads each sequence's window on the host for the rollback
// named who, after checking that accepted has one count per sequence and
// that the slots and cu_seqlens it reads are in shared storage.
func windows(who string, p Params, b Buffers, accepted []int32) ([]window, error) {
	s := p.Shape
	if len(accepted) != s.NSeqs {
		return nil, invalid("accepted", "%d counts, want one per sequence, n_seqs = %d", len(accepted), s.NSeqs)
	}
	var slots, cu []byte
	if s.NSlots > 0 {
		if slots = int32s(b.Slots); slots == nil {
			return nil, invalid("Slots", "not CPU-readable: %s reads the slots on the host, so they must be in shared storage", who)
		}
	}
	if s.Varlen {
		if cu = int32s(b.CuSeqlens); cu == nil {
			return nil, invalid("CuSeqlens", "not CPU-readable: %s reads cu_seqlens on the host, so it must be in shared storage", who)
		}
	}
	ws := make([]window, s.NSeqs)
	for seq := range ws {
		w := window{state: seq, tok0: seq * s.NTokens, n: s.NTokens}
		if slots != nil {
			w.state = int(int32At(slots, seq))
		}
		if cu != nil {
			w.tok0 = int(int32At(cu, seq))
			w.n = int(int32At(cu, seq+1)) - w.tok0
		}
		ws[seq] = w
	}
	return ws, nil
}

// rollbackStates is rollback for arguments already validated, with the
// sequences' windows ws.
func rollbackStates(blit blitEncoder, p Params, b Buffers, accepted []int32, ws []window) error {
	s := p.Shape
	// First every check, so that nothing is encoded for a bad count.
	for pass := range 2 {
		for seq, a := range accepted {
			state, tok0, n := ws[seq].state, ws[seq].tok0, ws[seq].n
			if state < 0 {
				continue // padding
			}
			inPlace := b.StateIn == b.StateOut
			switch {
			case a < 0 || int(a) > n:
				return invalid("accepted", "sequence %d accepted %d tokens of the %d it drafted", seq, a, n)
			case a == 0 && inPlace && n > 0:
				return invalid("accepted", "sequence %d accepted no token, but the window updated its state in place: the state before the window is gone (make the window's first token an accepted one)", seq)
			case pass == 0, a == 0 && inPlace, int(a) == n && n > 0:
				continue // checked; or the state is where it belongs
			}
			size := s.DK * s.DV * s.NVHeads * b.StateOut.Type.Size()
			dst := b.StateOut.Offset + state*size
			if a == 0 {
				blit.CopyFromBuffer(b.StateIn.Buffer, b.StateIn.Offset+state*size, b.StateOut.Buffer, dst, size)
			} else {
				blit.CopyFromBuffer(b.Capture.Buffer, b.Capture.Offset+(tok0+int(a)-1)*size, b.StateOut.Buffer, dst, size)
			}
		}
	}
	if err := blit.Err(); err != nil {
		return fmt.Errorf("gdn: rollback: %w", err)
	}
	return nil
}
