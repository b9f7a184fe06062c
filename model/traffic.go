package model

import (
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/tensor"
)

// EncodeDecode encodes one decode step of the sequence in slot, fed
// token, onto cb (one compute encoder, ended), for profiling: the caller
// commits cb, and once it completes the slot holds one more position.
// The logits are left on the device.
func (s *Session) EncodeDecode(cb *mtl.CommandBuffer, slot int, token int32) error {
	if err := s.checkSlot(slot); err != nil {
		return err
	}
	if err := s.checkTokens([]int32{token}, s.lens[slot]); err != nil {
		return err
	}
	s.s.in.fill([]int32{token}, []int{slot}, s.lens)
	enc, err := cb.ComputeCommandEncoder()
	if err != nil {
		return err
	}
	err = s.encode(enc, pass{n: 1, seqs: 1, decode: true, in: s.s.in})
	if e := enc.EndEncoding(); err == nil {
		err = e
	}
	if err == nil {
		s.lens[slot]++
	}
	return err
}

// DecodeFloor returns the bytes a decode step of one sequence holding
// held positions must move at least: every weight it uses read once (an
// MoE layer's router, shared expert and only its top-k experts; one row of
// the embedding), the KV caches' held+1 positions read and the new one
// written, and the linear-attention layers' recurrent and conv states
// read and written once.
func (m *Model) DecodeFloor(held int) int64 {
	c := m.Config
	var n int64
	lin := func(l linear) int64 {
		if l.quantized() {
			return int64(l.q.Words.Bytes() + l.q.Scales.Bytes() + l.q.Biases.Bytes())
		}
		return int64(l.w.Bytes())
	}
	perExpert := func(l linear) int64 { return lin(l) / int64(max(l.experts, 1)) * int64(c.NumExpertsPerTok) }
	n += lin(m.embed) / int64(c.VocabSize)
	n += lin(m.lmHead) + int64(m.norm.w.Bytes())
	for _, ly := range m.layers {
		n += int64(ly.in.w.Bytes() + ly.post.w.Bytes())
		if at := ly.attn; at != nil {
			n += lin(at.q) + lin(at.gate) + lin(at.k) + lin(at.v) + lin(at.o) + int64(at.qNorm.w.Bytes()+at.kNorm.w.Bytes())
			kv := int64(2 * c.NumKVHeads * c.HeadDim * m.Act.Size())
			n += kv*int64(held+1) + kv
		}
		if l := ly.lin; l != nil {
			n += lin(l.qkv) + lin(l.z) + lin(l.b) + lin(l.a) + lin(l.out) + int64(l.conv.Bytes()+l.normW.Bytes()+l.aLog.Bytes()+l.dtBias.Bytes())
			h := c.LinearHeads()
			n += 2 * int64(h.NVHeads*h.DV*h.DK*tensor.F32.Size()+(c.LinearConvKernel-1)*h.ConvDim()*m.Act.Size())
		}
		ml := ly.mlp
		if ml.router.out == 0 {
			n += lin(ml.gate) + lin(ml.up) + lin(ml.down)
			continue
		}
		n += lin(ml.router) + perExpert(ml.gateUp) + perExpert(ml.gate) + perExpert(ml.up) + perExpert(ml.down)
		if ml.shared != nil {
			n += lin(ml.shared.gate) + lin(ml.shared.up) + lin(ml.shared.down) + lin(ml.sharedGate)
		}
	}
	return n
}
