package model

import (
	"fmt"

	"github.com/puremetal/puremetal/gdn"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/ops"
	"github.com/puremetal/puremetal/tensor"
)

// Session holds the caches of Options.Slots sequences (the KV cache of
// every attention layer, the conv and recurrent states of every
// linear-attention layer, slot for slot), the buffers of one forward
// pass and a command queue. A sequence takes a slot with Acquire and
// gives it back with Free. A Session is not safe for concurrent use.
type Session struct {
	m      *Model
	queue  *mtl.CommandQueue
	pool   *gdn.StatePool // nil without linear-attention layers
	kc, vc []tensor.View  // per attention layer: [head_dim, MaxLen, n_kv_heads, Slots]
	bufs   []*mtl.Buffer
	seen   tensor.View // U32 [Slots][ops.SeenWords(vocab)]: the tokens each sequence holds, for a RepetitionPenalty
	lens   []int       // per slot: positions held
	used   []bool
	s      scratch
	// decoding: the pass being encoded is a decode pass (see product).
	decoding bool
	err      error // newView's first failure
}

// scratch is the activations of one pass of up to maxTokens tokens, each
// in a buffer of its own (views of the first n elements are taken per
// pass), and the small integer views the host fills per pass.
type scratch struct {
	maxTokens              int
	h                      tensor.View // f32 [T][hidden]: the residual stream
	x, y, xn               tensor.View // Act [T][hidden]
	q, gate, o             tensor.View // Act [T][heads*head_dim]
	k, v                   tensor.View // Act [T][kv_heads*head_dim]
	partialO, partialML    tensor.View // f32: decode attention's splits, [head_dim][splits][heads][S], [2][splits][heads][S]
	splits                 int
	mixed, z, core, ga, gb tensor.View // linear attention
	convStage              tensor.View // Act: one layer's conv states, [conv_dim][K-1][S], written by a prefill's first dispatch (see prefillCore)
	mg, mu, ma             tensor.View // dense MLP [T][intermediate]
	route, ids, wts        tensor.View // router: Act [T][E], U32 [T][k], F32 [T][k]
	eg, eu, ea, ed         tensor.View // experts: [T][k][moe_inter] x3, [T][k][hidden]
	sg, su, sa, sy, sgl    tensor.View // shared expert
	logits                 tensor.View // Act [T][vocab]
	in                     inputs      // of the synchronous passes, T tokens
	ring                   []inputs    // of the pipelined decode steps, S tokens each
}

// inputs are the views the host writes before a pass: token ids U32 [T],
// positions I32 [T], slots I32 [S] and the positions each slot held
// before the pass I32 [S]. A pass that samples writes the next pass's
// tokens on the device.
type inputs struct{ tokens, pos, slots, lens tensor.View }

// NewSession makes the caches and pass buffers of m's Options.
func (m *Model) NewSession() (*Session, error) { return m.newSession(m.opts.Slots) }

// newSession makes a session of slots slots (Options.Slots for
// NewSession, more for a Batcher).
func (m *Model) newSession(slots int) (*Session, error) {
	c, o := m.Config, m.opts
	o.Slots = slots
	s := &Session{m: m, lens: make([]int, o.Slots), used: make([]bool, o.Slots)}
	var err error
	if s.queue, err = m.dev.NewCommandQueue(); err != nil {
		return nil, err
	}
	alloc := func(t tensor.ElemType, n int) tensor.View {
		if err != nil || n == 0 {
			return tensor.View{}
		}
		var b *mtl.Buffer
		if b, err = m.dev.NewBuffer(n*t.Size(), mtl.ResourceStorageModeShared); err != nil {
			return tensor.View{}
		}
		s.bufs = append(s.bufs, b)
		return tensor.NewView(b, 0, t, n)
	}
	for _, ly := range m.layers {
		if ly.attn != nil {
			n := c.HeadDim * o.MaxLen * c.NumKVHeads * o.Slots
			s.kc, s.vc = append(s.kc, alloc(m.Act, n)), append(s.vc, alloc(m.Act, n))
		}
	}
	if c.Has("linear_attention") && err == nil {
		s.pool, err = gdn.NewStatePool(m.dev, m.linearParams(1, 1, slots), len(m.layers)-len(s.kc))
	}
	T, S, a := max(o.Chunk, o.Slots), o.Slots, m.Act
	hid, qw, kw := c.HiddenSize, c.NumHeads*c.HeadDim, c.NumKVHeads*c.HeadDim
	x := &s.s
	x.maxTokens = T
	x.h = alloc(tensor.F32, T*hid)
	x.x, x.y, x.xn = alloc(a, T*hid), alloc(a, T*hid), alloc(a, T*hid)
	if len(s.kc) > 0 {
		x.q, x.gate, x.o, x.k, x.v = alloc(a, T*qw), alloc(a, T*qw), alloc(a, T*qw), alloc(a, T*kw), alloc(a, T*kw)
		if x.splits = ops.AttentionSplits(o.MaxLen); x.splits > 1 {
			x.partialO, x.partialML = alloc(tensor.F32, qw*x.splits*S), alloc(tensor.F32, 2*x.splits*c.NumHeads*S)
		}
	}
	if s.pool != nil {
		h := c.LinearHeads()
		x.mixed, x.z, x.core = alloc(a, T*h.ConvDim()), alloc(a, T*h.NVHeads*h.DV), alloc(a, T*h.NVHeads*h.DV)
		x.ga, x.gb = alloc(a, T*h.NVHeads), alloc(a, T*h.NVHeads)
		x.convStage = alloc(a, m.linearParams(1, 1, len(s.used)).ConvStateLen())
	}
	dense, moe := false, false
	for i := range m.layers {
		dense, moe = dense || !c.IsMoELayer(i), moe || c.IsMoELayer(i)
	}
	if dense {
		x.mg, x.mu, x.ma = alloc(a, T*c.IntermediateSize), alloc(a, T*c.IntermediateSize), alloc(a, T*c.IntermediateSize)
	}
	if moe {
		k, mi := c.NumExpertsPerTok, c.MoEIntermediateSize
		x.route, x.ids, x.wts = alloc(a, T*c.NumExperts), alloc(tensor.U32, T*k), alloc(tensor.F32, T*k)
		x.eg, x.eu, x.ea, x.ed = alloc(a, T*k*2*mi), alloc(a, T*k*mi), alloc(a, T*k*mi), alloc(a, T*k*hid) // eg: [gate | up] when fused
		if si := c.SharedExpertIntermediateSize; si > 0 {
			x.sg, x.su, x.sa, x.sy, x.sgl = alloc(a, T*si), alloc(a, T*si), alloc(a, T*si), alloc(a, T*hid), alloc(a, T)
		}
	}
	x.logits = alloc(a, T*c.VocabSize)
	s.seen = alloc(tensor.U32, S*ops.SeenWords(c.VocabSize))
	x.in = inputs{alloc(tensor.U32, T), alloc(tensor.I32, T), alloc(tensor.I32, S), alloc(tensor.I32, S)}
	x.ring = make([]inputs, o.InFlight+1)
	for i := range x.ring {
		x.ring[i] = inputs{alloc(tensor.U32, S), alloc(tensor.I32, S), alloc(tensor.I32, S), alloc(tensor.I32, S)}
	}
	if err != nil {
		s.Release()
		return nil, err
	}
	return s, nil
}

// Release releases the session's caches and buffers. A second call does
// nothing.
func (s *Session) Release() {
	if s == nil {
		return
	}
	for _, b := range s.bufs {
		b.Release()
	}
	s.bufs = nil
	if s.pool != nil {
		s.pool.Release()
		s.pool = nil
	}
	if s.queue != nil {
		s.queue.Release()
		s.queue = nil
	}
}

// Acquire gives a new sequence a free slot, its caches empty.
func (s *Session) Acquire() (int, error) {
	for i, u := range s.used {
		if !u {
			s.used[i], s.lens[i] = true, 0
			s.clearStates(i)
			return i, nil
		}
	}
	return 0, fmt.Errorf("model: all %d slots in use", len(s.used))
}

// Free gives slot back. Free a slot only once the command buffers that
// use it have completed.
func (s *Session) Free(slot int) error {
	if err := s.checkSlot(slot); err != nil {
		return err
	}
	s.used[slot] = false
	return nil
}

// Len returns the positions slot's caches hold.
func (s *Session) Len(slot int) int { return s.lens[slot] }

func (s *Session) checkSlot(slot int) error {
	if slot < 0 || slot >= len(s.used) || !s.used[slot] {
		return tensor.Invalid("slot", "%d is not a slot in use (of %d)", slot, len(s.used))
	}
	return nil
}

// clearStates zeroes slot's recurrent and conv states (a fresh
// sequence); the KV cache needs none, as only held positions are read.
func (s *Session) clearStates(slot int) {
	if s.pool == nil {
		return
	}
	for _, views := range [][]tensor.View{s.pool.States, s.pool.ConvStates} {
		for _, v := range views {
			per := v.Bytes() / len(s.used)
			clear(v.Buffer.Contents()[v.Offset+slot*per : v.Offset+(slot+1)*per])
		}
	}
}

// markSeen makes tokens the seen set of slot's sequence (the host writes
// it: no command buffer in flight uses a slot being started); the sampler
// adds each token it draws on the device.
func (s *Session) markSeen(slot int, tokens []int32) {
	words := ops.SeenWords(s.m.Config.VocabSize)
	set := mtl.Slice[uint32](s.seen.Buffer)[slot*words : (slot+1)*words]
	clear(set)
	for _, t := range tokens {
		set[t/32] |= 1 << (t % 32)
	}
}

// seenRow returns slot's seen set for draws of sp, or the zero View when
// sp has no repetition penalty.
func (s *Session) seenRow(slot int, sp Sampling) tensor.View {
	if !sp.penalized() {
		return tensor.View{}
	}
	return row(s.seen, slot, ops.SeenWords(s.m.Config.VocabSize))
}

// head returns the first n elements of v.
func head(v tensor.View, n int) tensor.View { return tensor.NewView(v.Buffer, v.Offset, v.Type, n) }

// Model returns the model the session runs.
func (s *Session) Model() *Model { return s.m }

// Bytes is the device memory the session holds: caches and pass buffers.
func (s *Session) Bytes() int64 {
	var n int64
	for _, b := range s.bufs {
		n += int64(b.Length())
	}
	if s.pool != nil {
		for _, views := range [][]tensor.View{s.pool.States, s.pool.ConvStates} {
			for _, v := range views {
				n += int64(v.Bytes())
			}
		}
	}
	return n
}
