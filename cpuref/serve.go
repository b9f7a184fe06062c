package cpuref

import (
	"github.com/puremetal/puremetal/gdn/spec"
)

// sequence is where one sequence of a call lives in the buffers: its state
// and its tokens.
type sequence struct {
	state int  // index of its state in state_in and state_out
	tok0  int  // index of its first token along the token axis
	n     int  // its tokens
	skip  bool // padding or a slot beyond the pool: nothing is read or written
}

// sequences returns where every sequence of a valid call lives.
func sequences(p spec.Params, in Inputs) []sequence {
	seqs := make([]sequence, p.NSeqs)
	for s := range seqs {
		q := &seqs[s]
		q.state, q.tok0, q.n = s, s*p.NTokens, p.NTokens
		if p.NSlots > 0 {
			q.state = int(in.Slots[s])
			q.skip = q.state < 0 || q.state >= p.NSlots
		}
		if p.Varlen {
			q.tok0, q.n = int(in.CuSeqlens[s]), int(in.CuSeqlens[s+1]-in.CuSeqlens[s])
		}
	}
	return seqs
}

// headRun is the recurrence of one value head of one sequence: the
// sequence's tokens, the value head h, the key head kh it reads q and k
// from, and st, where its D_v x D_k state starts in state_in and
// state_out.
type headRun struct {
	sequence
	h, kh, st int
}

// headRuns returns the recurrences a valid call runs, sequence by sequence
// and value head by value head; padding runs none.
func headRuns(p spec.Params, in Inputs) []headRun {
	var runs []headRun
	for _, seq := range sequences(p, in) {
		if seq.skip {
			continue
		}
		for h := 0; h < p.NVHeads; h++ {
			kh := p.HeadMap.KeyHead(h, p.NKHeads, p.NVHeads)
			runs = append(runs, headRun{seq, h, kh, (seq.state*p.NVHeads + h) * p.DV * p.DK})
		}
	}
	return runs
}

// at returns where token t of the run has its inputs: qk, the start of its
// q and k (D_k each); vo, the start of its v and output (D_v each); gi, the
// index of its g and beta, which is also its capture slot.
func (r headRun) at(p spec.Params, t int) (qk, vo, gi int) {
	gi = t*p.NVHeads + r.h
	return (t*p.NKHeads + r.kh) * p.DK, gi * p.DV, gi
}

// newResult64 returns the result of a call with its outputs zero and every
// state as state_in has it (the states no sequence writes stay so), and
// room for a state per token with capture set.
func newResult64(p spec.Params, in Inputs, capture bool) Result64 {
	res := Result64{
		Output:   make([]float64, p.VLen()),
		StateOut: make([]float64, p.StateLen()),
	}
	if capture {
		res.Capture = make([]float64, p.CaptureLen())
	}
	for i, v := range in.StateIn {
		res.StateOut[i] = float64(v)
	}
	return res
}

// validIndices checks Slots and CuSeqlens against p: their lengths, no
// slot named twice, and cu_seqlens 0 first, non-decreasing and p.NTokens
// last.
func (in Inputs) validIndices(p spec.Params) error {
	if len(in.Slots) != p.SlotsLen() {
		return invalidf("slots has %d elements, shape %v needs %d", len(in.Slots), p.Shape, p.SlotsLen())
	}
	if len(in.CuSeqlens) != p.CuSeqlensLen() {
		return invalidf("cu_seqlens has %d elements, shape %v needs %d", len(in.CuSeqlens), p.Shape, p.CuSeqlensLen())
	}
	if len(in.Slots) > 0 {
		first := make(map[int32]int, len(in.Slots))
		for s, slot := range in.Slots {
			if slot < 0 || int(slot) >= p.NSlots {
				continue
			}
			if r, ok := first[slot]; ok {
				return invalidf("slots[%d] = %d, already the slot of sequence %d", s, slot, r)
			}
			first[slot] = s
		}
	}
	if len(in.CuSeqlens) > 0 {
		cu := in.CuSeqlens
		if cu[0] != 0 {
			return invalidf("cu_seqlens[0] = %d, must be 0", cu[0])
		}
		for s := 1; s < len(cu); s++ {
			if cu[s] < cu[s-1] {
				return invalidf("cu_seqlens[%d] = %d is below cu_seqlens[%d] = %d", s, cu[s], s-1, cu[s-1])
			}
		}
		if last := cu[len(cu)-1]; int(last) != p.NTokens {
			return invalidf("cu_seqlens[%d] = %d, must be the %d tokens of the call", len(cu)-1, last, p.NTokens)
		}
	}
	return nil
}

// Part is one sequence of a batched call: where it lives in the buffers,
// and the call that runs it alone.
type Part struct {
	State int  // its state's index in state_in and state_out: its slot with a state pool
	Tok0  int  // its first token along the token axis
	N     int  // its tokens
	Skip  bool // padding or a slot beyond the pool: the kernels leave it alone

	// Params and Inputs run the sequence alone: one sequence, its own
	// tokens and state, no slot index, no packing; the buffers are copies.
	// They are zero when Skip is set or N is 0.
	Params spec.Params
	Inputs Inputs
}

// Split returns every sequence of a batched call as a [Part], for
// comparing a batch with its sequences run one by one.
func Split(p spec.Params, in Inputs) ([]Part, error) {
	if err := in.Validate(p); err != nil {
		return nil, err
	}
	qk, v, g := p.DK*p.NKHeads, p.DV*p.NVHeads, p.NVHeads
	st := p.DK * p.DV * p.NVHeads
	var parts []Part
	for _, sq := range sequences(p, in) {
		pt := Part{State: sq.state, Tok0: sq.tok0, N: sq.n, Skip: sq.skip}
		if !sq.skip && sq.n > 0 {
			part := func(x []float32, width int) []float32 {
				if len(x) == 0 {
					return nil // a buffer the call does not have
				}
				return append([]float32(nil), x[sq.tok0*width:(sq.tok0+sq.n)*width]...)
			}
			pt.Params = p
			pt.Params.NTokens, pt.Params.NSeqs, pt.Params.NSlots, pt.Params.Varlen = sq.n, 1, 0, false
			pt.Inputs = Inputs{
				Q: part(in.Q, qk), K: part(in.K, qk), V: part(in.V, v),
				G: part(in.G, g), Beta: part(in.Beta, g),
				StateIn: append([]float32(nil), in.StateIn[sq.state*st:(sq.state+1)*st]...),
				ALog:    append([]float32(nil), in.ALog...), DtBias: append([]float32(nil), in.DtBias...),
			}
			if p.Core.Conv > 0 {
				cs := p.ConvDim() * (p.Core.Conv - 1)
				pt.Inputs.MixedQKV = part(in.MixedQKV, p.ConvDim())
				pt.Inputs.ConvWeight = append([]float32(nil), in.ConvWeight...)
				pt.Inputs.ConvState = append([]float32(nil), in.ConvState[sq.state*cs:(sq.state+1)*cs]...)
			}
			if p.Core.Norm {
				pt.Inputs.Z = part(in.Z, v)
				pt.Inputs.NormWeight = append([]float32(nil), in.NormWeight...)
			}
		}
		parts = append(parts, pt)
	}
	return parts, nil
}
