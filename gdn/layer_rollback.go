package gdn

import (
	"fmt"

	"github.com/puremetal/puremetal/mtl"
)

// RollbackCore is [Rollback] for a [Kernels.DecodeCore] dispatch with b.Capture
// set: every sequence continues from its last accepted token with both of
// its states. The recurrent state is restored as Rollback restores it. The
// conv state after accepted[s] = a tokens is the newest K-1 inputs of the
// conv state before the window followed by the sequence's first a tokens of
// MixedQKV, row j (conv_dim elements) being input a-(K-1)+j: a row of
// ConvStateIn (of the sequence's slot) for a-(K-1)+j < 0, the token's row of
// MixedQKV otherwise. RollbackCore copies those K-1 rows into ConvStateOut
// for every sequence that accepted fewer tokens than it drafted (and for an
// empty one when ConvStateOut is apart from ConvStateIn), so the conv state
// needs no capture of its own: the kernel's inputs are the record. In
// place (ConvStateOut = ConvStateIn) the rows before the window are gone, so a sequence must then accept at least
// K-1 tokens or all it drafted.
//
// The arguments are those of the dispatch and are validated as
// [ValidateCore] does, b.Capture set, Params.Core.Conv on; accepted has
// n_seqs counts. Errors wrap [ErrInvalidArgument]; nothing is encoded then.
func RollbackCore(blit *mtl.BlitCommandEncoder, p Params, b Buffers, c CoreBuffers, accepted []int32) error {
	if blit == nil {
		return invalid("blit", "nil blit command encoder")
	}
	return rollbackCore(blit, p, b, c, accepted)
}

func rollbackCore(blit blitEncoder, p Params, b Buffers, c CoreBuffers, accepted []int32) error {
	if b.Capture == (View{}) {
		return invalid("Capture", "no buffer: a rollback restores the state from the capture of the dispatch")
	}
	if p.Core.Conv == 0 {
		return invalid("Params.Core.Conv", "off: without the convolution there is no conv state, use Rollback")
	}
	if err := ValidateCore(p, b, c); err != nil {
		return err
	}
	ws, err := windows("RollbackCore", p, b, accepted)
	if err != nil {
		return err
	}
	km1 := p.Core.Conv - 1
	rowBytes := p.ConvDim() * p.Activation.Size()
	inPlace := c.ConvStateOut == c.ConvStateIn
	var ops [][3]int // (source: 0 conv state in, 1 mixed; source row; destination row), flattened below
	for seq, a := range accepted {
		state, tok0, n := ws[seq].state, ws[seq].tok0, ws[seq].n
		if state < 0 {
			continue // padding
		}
		switch {
		case a < 0 || int(a) > n:
			return invalid("accepted", "sequence %d accepted %d tokens of the %d it drafted", seq, a, n)
		case int(a) == n && (n > 0 || inPlace):
			continue // the kernel wrote the conv state after the last token, or left it in place
		case inPlace && int(a) < km1:
			return invalid("accepted", "sequence %d accepted %d tokens, but the window updated its conv state in place: the %d inputs before the window are gone (accept at least K-1 = %d, or keep ConvStateOut apart from ConvStateIn)", seq, a, km1-int(a), km1)
		}
		for j := 0; j < km1; j++ {
			t := int(a) - km1 + j
			dst := state*km1 + j
			if t < 0 {
				ops = append(ops, [3]int{0, state*km1 + km1 + t, dst})
			} else {
				ops = append(ops, [3]int{1, tok0 + t, dst})
			}
		}
	}
	if err := rollbackStates(blit, p, b, accepted, ws); err != nil {
		return err
	}
	for _, op := range ops {
		src := c.ConvStateIn
		if op[0] == 1 {
			src = c.MixedQKV
		}
		blit.CopyFromBuffer(src.Buffer, src.Offset+op[1]*rowBytes, c.ConvStateOut.Buffer, c.ConvStateOut.Offset+op[2]*rowBytes, rowBytes)
	}
	if err := blit.Err(); err != nil {
		return fmt.Errorf("gdn: rollback: %w", err)
	}
	return nil
}
