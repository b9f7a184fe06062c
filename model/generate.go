package model

import (
	"context"
	"errors"
	"iter"
	"slices"

	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/ops"
	"github.com/puremetal/puremetal/tensor"
)

// Sampling is how Generate picks each token, on the device: Temperature
// 0 is greedy (the argmax), otherwise ops.Kernels.Sample's temperature,
// top-k, top-p and min-p, in HF's order, its draws keyed by Seed and the
// step (so a run is reproducible). RepetitionPenalty is HF's
// repetition_penalty over the tokens the sequence holds (the prompt's
// and those generated): 0 or 1 is off; it applies before the argmax too.
type Sampling struct {
	Temperature       float32
	TopK              int
	TopP              float32 // 0 means 1: off
	MinP              float32
	Seed              uint64
	RepetitionPenalty float32
}

// GenerateOptions say when Generate stops.
type GenerateOptions struct {
	Sampling
	// MaxTokens is the most tokens generated (stop tokens not counted
	// among those yielded); 0 means until a stop token or the cache is
	// full.
	MaxTokens int
	// Stop lists tokens that end the generation (not yielded) beside the
	// config's eos_token_id, unless IgnoreEOS.
	Stop      []int32
	IgnoreEOS bool
}

// ErrCacheFull is yielded when a sequence reaches the cache's MaxLen
// before it stopped otherwise.
var ErrCacheFull = errors.New("model: the sequence filled its cache")

// Generate prefills prompt in a free slot and yields the tokens the model
// generates after it, one per decode step, until a stop token, MaxTokens,
// a full cache, ctx's end or the caller's break; the slot is freed
// afterwards.
//
// Each decode step is one command buffer for the whole model: the token
// a step samples is written on the device into the buffer the next
// step's embedding reads, so the host never waits between steps: up to
// Options.InFlight steps are committed ahead, and a step's token is read
// back once its command buffer completes. A stop token is therefore seen
// up to InFlight steps late; the steps encoded after it run but their
// tokens are dropped.
func (s *Session) Generate(ctx context.Context, prompt []int32, o GenerateOptions) iter.Seq2[int32, error] {
	return func(yield func(int32, error) bool) {
		slot, err := s.Acquire()
		if err != nil {
			yield(0, err)
			return
		}
		defer s.Free(slot)
		g, err := s.newGeneration(slot, o)
		if err == nil {
			err = g.prefill(prompt)
		}
		if err != nil {
			yield(0, err)
			return
		}
		g.run(ctx, yield)
	}
}

// generation is one sequence's pipelined decode loop.
type generation struct {
	s       *Session
	slot    []int // the one slot, as Decode's slots
	o       GenerateOptions
	sample  ops.SampleParams
	seen    tensor.View // the slot's seen set, with a RepetitionPenalty
	flight  *mtl.InFlight
	pending []*mtl.Pending // per step in flight, oldest first
	step    int            // the next step to encode; step 0 is the prefill's last pass
	cur     pass           // the pass encodeStep encodes
	encode  func(cb *mtl.CommandBuffer) error
}

func (s *Session) newGeneration(slot int, o GenerateOptions) (*generation, error) {
	if err := o.check(s.m.Config.VocabSize); err != nil {
		return nil, err
	}
	f, err := mtl.NewInFlight(s.queue, s.m.opts.InFlight)
	if err != nil {
		return nil, err
	}
	g := &generation{s: s, slot: []int{slot}, o: o, flight: f, sample: o.params(),
		pending: make([]*mtl.Pending, 0, s.m.opts.InFlight+1)}
	g.o.Stop = s.m.stopTokens(o)
	g.encode = g.encodeStep
	return g, nil
}

// params returns the sampler's settings of ops.Kernels.Sample (TopP 0
// taken as 1, off).
func (sp Sampling) params() ops.SampleParams {
	topP := sp.TopP
	if topP == 0 {
		topP = 1
	}
	return ops.SampleParams{Temperature: sp.Temperature, TopK: sp.TopK, TopP: topP, MinP: sp.MinP, Seed: sp.Seed, RepetitionPenalty: sp.RepetitionPenalty}
}

// penalized reports whether sp's draws read a seen set.
func (sp Sampling) penalized() bool { return sp.RepetitionPenalty != 0 && sp.RepetitionPenalty != 1 }

// check refuses the settings ops.Kernels.Sample refuses, before any pass
// of the sequence is encoded.
func (sp Sampling) check(vocab int) error {
	p := sp.params()
	p.Rows, p.Vocab = 1, vocab
	return p.Check()
}

// stopTokens returns the tokens that end a generation of o: o.Stop and,
// unless o.IgnoreEOS, the config's eos tokens.
func (m *Model) stopTokens(o GenerateOptions) []int32 {
	if o.IgnoreEOS {
		return o.Stop
	}
	return append(slices.Clone(o.Stop), m.Config.EOSTokenIDs...)
}

// ring returns the inputs of step i.
func (g *generation) ring(i int) inputs { return g.s.s.ring[i%len(g.s.s.ring)] }

// encodeStep encodes g.cur in cb's one compute encoder.
func (g *generation) encodeStep(cb *mtl.CommandBuffer) error {
	enc, err := cb.ComputeCommandEncoder()
	if err != nil {
		return err
	}
	err = g.s.encode(enc, g.cur)
	if e := enc.EndEncoding(); err == nil {
		err = e
	}
	return err
}

// prefill runs the prompt's passes; the last samples step 1's input
// token on the device.
func (g *generation) prefill(prompt []int32) error {
	s, slot := g.s, g.slot[0]
	if len(prompt) == 0 {
		return tensor.Invalid("prompt", "empty")
	}
	if err := s.checkTokens(prompt, s.lens[slot]); err != nil {
		return err
	}
	if g.o.penalized() {
		s.markSeen(slot, prompt)
		g.seen = s.seenRow(slot, g.o.Sampling)
	}
	chunk := s.m.opts.Chunk
	for i := 0; i < len(prompt); i += chunk {
		part := prompt[i:min(i+chunk, len(prompt))]
		s.s.in.fill(part, g.slot, s.lens)
		p := pass{n: len(part), seqs: 1, lastOnly: true, in: s.s.in}
		if i+chunk >= len(prompt) {
			p.sample.SampleParams, p.sample.Tokens, p.sample.Seen = g.sample, g.ring(1).tokens, g.seen
		}
		if err := s.run(p); err != nil {
			return err
		}
		s.lens[slot] += len(part)
	}
	g.step = 1
	return nil
}

// submit encodes and commits decode step g.step, whose input token the
// step before wrote.
func (g *generation) submit(ctx context.Context) error {
	s, slot := g.s, g.slot[0]
	in := g.ring(g.step)
	in.fill(nil, g.slot, s.lens)
	g.cur = pass{n: 1, seqs: 1, decode: true, in: in}
	g.cur.sample.SampleParams, g.cur.sample.Tokens, g.cur.sample.Seen = g.sample, g.ring(g.step+1).tokens, g.seen
	g.cur.sample.Step = uint32(g.step)
	p, err := g.flight.Submit(ctx, g.encode)
	if err != nil {
		return err
	}
	g.pending = append(g.pending, p)
	s.lens[slot]++
	g.step++
	return nil
}

// run yields the prefill's token, then keeps InFlight decode steps
// committed and yields each one's token as it completes.
func (g *generation) run(ctx context.Context, yield func(int32, error) bool) {
	s := g.s
	defer g.flight.Wait(context.Background())
	done := 0 // tokens read back: the output of step done-1
	for {
		// Commit steps ahead while room remains and more may be wanted.
		for len(g.pending) < s.m.opts.InFlight && (g.o.MaxTokens == 0 || g.step < g.o.MaxTokens) && s.lens[g.slot[0]] < s.m.opts.MaxLen {
			if err := ctx.Err(); err != nil {
				yield(0, err)
				return
			}
			if err := g.submit(ctx); err != nil {
				yield(0, err)
				return
			}
		}
		// The token step done-1 sampled (the prefill's for done == 0):
		// wait for the step that wrote it.
		if done > 0 {
			if len(g.pending) == 0 {
				yield(0, ErrCacheFull)
				return
			}
			err := g.pending[0].Wait(ctx)
			g.pending = append(g.pending[:0], g.pending[1:]...)
			if err != nil {
				yield(0, err)
				return
			}
		}
		tok := int32(mtl.Slice[uint32](g.ring(done + 1).tokens.Buffer)[0])
		done++
		if slices.Contains(g.o.Stop, tok) || !yield(tok, nil) {
			return
		}
		if g.o.MaxTokens > 0 && done >= g.o.MaxTokens {
			return
		}
	}
}
