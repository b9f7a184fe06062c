package model

import (
	"github.com/puremetal/puremetal/gdn"
	"github.com/puremetal/puremetal/mtl"
)

// EncodePrefillPass encodes one prefill pass of tokens (at most
// Options.Chunk) into the sequence in slot onto cb, one compute encoder,
// ended, as EncodeDecode does a decode step: for the traffic tests.
func (s *Session) EncodePrefillPass(cb *mtl.CommandBuffer, slot int, tokens []int32) error {
	s.s.in.fill(tokens, []int{slot}, s.lens)
	enc, err := cb.ComputeCommandEncoder()
	if err != nil {
		return err
	}
	err = s.encode(enc, pass{n: len(tokens), seqs: 1, lastOnly: true, in: s.s.in})
	if e := enc.EndEncoding(); err == nil {
		err = e
	}
	return err
}

// LinearParams is linearParams, for the traffic tests.
func (m *Model) LinearParams(perSeq, seqs int) gdn.Params { return m.linearParams(perSeq, seqs, 1) }
