package model

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"
	"time"

	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/tensor"
)

// BatchOptions configure a Batcher.
type BatchOptions struct {
	// MaxBatch is the most sequences decoded together (the running
	// batch); 8 when 0.
	MaxBatch int
	// Queue is the most requests that may wait for a place beyond
	// MaxBatch; 0: none wait (ErrBusy at once).
	Queue int
	// PrefixSlots is the number of prompt prefixes kept for reuse (0: no
	// reuse); each holds one slot's caches.
	PrefixSlots int
}

// ErrBusy is the error of a Batcher's Generate when the running batch and
// its queue are full.
var ErrBusy = errors.New("model: too many concurrent sequences")

// ErrClosed is matched by the error a Batcher's requests end with when it
// is closed, and by that of Generate after Close.
var ErrClosed = errors.New("model: the batcher is closed")

// ErrTooLong is matched by the error of a Batcher's Generate for a prompt
// whose length plus MaxTokens passes the cache's MaxLen (or a prompt
// longer than MaxLen). It wraps ErrInvalidArgument.
var ErrTooLong = fmt.Errorf("%w: the prompt and its token budget pass the cache", ErrInvalidArgument)

// BatchStats are a Batcher's counters.
type BatchStats struct {
	Running int    // requests holding a slot (prefilling, decoding, or ending)
	Waiting int    // requests queued for a slot
	Steps   uint64 // steps run
	Rows    uint64 // decode rows run: Rows/Steps is the mean batch
	// HostTime is the time the host spent planning, encoding and
	// committing the steps (HostTime/Steps: the host's cost of a step).
	HostTime time.Duration
	// PrefixHits and PrefixMisses count the requests that started from a
	// cached prefix and those that found none (with PrefixSlots only);
	// PrefixTokens is the prompt tokens the hits did not prefill.
	PrefixHits, PrefixMisses, PrefixTokens uint64
}

// Batcher serves concurrent generations on one model by continuous
// batching: a loop goroutine owns a Session of MaxBatch+PrefixSlots slots
// and runs steps, each one command buffer that holds at most one prefill
// chunk (Options.Chunk tokens) of a joining sequence and one decode pass
// over every running sequence. A request joins the running batch between
// steps, once its prompt is prefilled, and leaves it when it stops.
//
// A request's tokens do not depend on what runs beside it: with
// temperature 0 they are those of the same request run alone through
// Session.Generate, token for token, and a sampled request draws with
// its own seed and step count. For that, a decode pass of more rows than
// ops.MatVecMaxRows runs its products as matvecs in groups of that many
// rows (the matmul would round each row differently), each row is
// embedded and sampled by dispatches of its own, and prefill chunks are
// passes of their own, never packed with decode rows (a row through the
// prefill path computes with other kernels and rounds differently).
//
// Each sequence's next input token is drawn on the device into a per-slot
// token buffer that the next step's embedding reads, so the host never
// waits between steps: up to Options.InFlight steps are committed, and
// each one's tokens are read back as it completes. A stop token is
// therefore seen up to InFlight steps late, the later tokens dropped; a
// slot is freed once no committed command buffer uses it.
//
// With PrefixSlots, the caches after the last multiple of Options.Chunk
// of each prompt are kept (copied on the device, by a blit at the end of
// the step that prefilled them) and a later request whose prompt begins
// with a kept prefix starts from a copy (a blit at the start of its
// first step) and prefills the rest only, in the chunks a fresh run
// would use, so that its outputs are the same.
type Batcher struct {
	m      *Model
	o      BatchOptions
	s      *Session
	flight *mtl.InFlight
	encode func(cb *mtl.CommandBuffer) error // encodeStep, bound once

	mu       sync.Mutex
	closed   bool
	incoming []*request
	admitted int // requests not yet done with (running and waiting)
	stats    BatchStats
	wake     chan struct{}
	done     chan struct{} // closed when the loop has ended

	// Owned by the loop.
	active  []*request // holding a slot, in arrival order
	queue   []*request // waiting for a slot
	ring    []batchStep
	next    uint64 // the number of the next step to encode, from 1
	pending int    // steps committed and not yet processed: next-pending .. next-1
	prefix  *prefixCache
}

// batchStep is what one step of the ring holds: its inputs, the token
// each of its rows drew, and what the host reads back when it completes.
type batchStep struct {
	tok     tensor.View // U32 [slots]: the token drawn for each slot
	pre     inputs      // the prefill chunk's
	dec     inputs      // the decode pass's (tokens unused: rows read tok)
	preSlot [1]int
	prePass pass
	slots   []int // the decode rows' slots
	rows    []rowIO
	got     []*request // the requests that drew a token, and their slots
	gotSlot []int
	restore []slotCopy // copies before the passes, snapshots after
	save    []slotCopy
	p       *mtl.Pending
}

// slotCopy is a copy of a slot's caches for its first n positions.
type slotCopy struct{ from, to, n int }

// request is one Generate call.
type request struct {
	ctx    context.Context
	cancel context.CancelFunc
	prompt []int32
	o      GenerateOptions
	slot   int
	fed    int    // prompt tokens prefilled (or restored)
	steps  int    // tokens scheduled: the prefill's last pass, then one per decode row
	got    int    // tokens read back
	last   uint64 // the last step that used its slot
	ended  bool   // told its end: no more steps
	left   bool   // no longer counted among the admitted (b.mu)

	mu     sync.Mutex
	toks   []int32 // read back, not yet yielded
	end    bool
	err    error
	signal chan struct{}
}

// NewBatcher makes a Session of MaxBatch+PrefixSlots slots on m and
// starts the loop goroutine. Release the Batcher with Close.
func (m *Model) NewBatcher(o BatchOptions) (*Batcher, error) {
	if o.MaxBatch == 0 {
		o.MaxBatch = 8
	}
	if o.MaxBatch < 1 || o.Queue < 0 || o.PrefixSlots < 0 {
		return nil, tensor.Invalid("BatchOptions", "MaxBatch %d, Queue %d, PrefixSlots %d: want MaxBatch positive, the others not negative", o.MaxBatch, o.Queue, o.PrefixSlots)
	}
	s, err := m.newSession(o.MaxBatch + o.PrefixSlots)
	if err != nil {
		return nil, err
	}
	b := &Batcher{m: m, o: o, s: s, wake: make(chan struct{}, 1), done: make(chan struct{})}
	if err := b.init(); err != nil {
		s.Release()
		return nil, err
	}
	b.encode = b.encodeStep
	b.next = 1 // step 0: none, before every step
	go b.loop()
	return b, nil
}

func (b *Batcher) init() error {
	s, o, opts := b.s, b.o, b.m.opts
	if o.PrefixSlots > 0 {
		if err := s.checkCopies(); err != nil {
			return err
		}
		slots := make([]int, o.PrefixSlots)
		for i := range slots {
			slots[i] = o.MaxBatch + i
			s.used[slots[i]] = true // never Acquired
		}
		b.prefix = newPrefixCache(opts.Chunk, slots)
	}
	var err error
	if b.flight, err = mtl.NewInFlight(s.queue, opts.InFlight); err != nil {
		return err
	}
	b.ring = make([]batchStep, opts.InFlight+1)
	for i := range b.ring {
		st := &b.ring[i]
		st.tok = s.newView(tensor.U32, len(s.used))
		st.pre = inputs{s.newView(tensor.U32, opts.Chunk), s.newView(tensor.I32, opts.Chunk), s.newView(tensor.I32, 1), s.newView(tensor.I32, 1)}
		st.dec = inputs{s.newView(tensor.U32, o.MaxBatch), s.newView(tensor.I32, o.MaxBatch), s.newView(tensor.I32, o.MaxBatch), s.newView(tensor.I32, o.MaxBatch)}
		st.slots, st.rows = make([]int, 0, o.MaxBatch), make([]rowIO, 0, o.MaxBatch)
		st.got, st.gotSlot = make([]*request, 0, o.MaxBatch+1), make([]int, 0, o.MaxBatch+1)
		st.restore, st.save = make([]slotCopy, 0, o.MaxBatch), make([]slotCopy, 0, 1)
	}
	return s.err
}

// Model returns the model the Batcher runs.
func (b *Batcher) Model() *Model { return b.m }

// Stats returns the Batcher's counters.
func (b *Batcher) Stats() BatchStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.stats
	st.Waiting += len(b.incoming)
	return st
}

// Generate is Session.Generate's contract for one request among many: it
// yields the tokens generated after prompt until a stop token,
// MaxTokens, a full cache (ErrCacheFull), ctx's end (its error) or the
// caller's break. It is safe for concurrent use: the request waits for a
// place in the running batch (ErrBusy when the batch and the queue are
// full), joins it between decode steps and leaves it when it stops; ctx's
// end frees its slot at the next step. A prompt that, with MaxTokens,
// passes the cache's MaxLen is refused (ErrTooLong), as are tokens
// outside the vocabulary and sampling settings out of range
// (ErrInvalidArgument).
func (b *Batcher) Generate(ctx context.Context, prompt []int32, o GenerateOptions) iter.Seq2[int32, error] {
	return func(yield func(int32, error) bool) {
		if err := b.check(prompt, o); err != nil {
			yield(0, err)
			return
		}
		rctx, cancel := context.WithCancel(ctx)
		defer cancel()
		r := &request{ctx: rctx, cancel: cancel, prompt: slices.Clone(prompt), o: o, signal: make(chan struct{}, 1)}
		r.o.Stop = b.m.stopTokens(o)
		if err := b.admit(r); err != nil {
			yield(0, err)
			return
		}
		// The caller is done with r once this returns: its place counts
		// no more, though its slot is freed only once the steps that use
		// it complete (a request admitted meanwhile waits for it).
		defer b.leave(r)
		var held []int32
		for {
			<-r.signal
			r.mu.Lock()
			held, r.toks = r.toks, held[:0]
			end, err := r.end, r.err
			r.mu.Unlock()
			for _, tok := range held {
				if !yield(tok, nil) {
					return
				}
			}
			if end {
				if err != nil {
					yield(0, err)
				}
				return
			}
		}
	}
}

// check validates a request before it is queued.
func (b *Batcher) check(prompt []int32, o GenerateOptions) error {
	maxLen := b.m.opts.MaxLen
	if len(prompt) == 0 {
		return tensor.Invalid("prompt", "empty")
	}
	if o.MaxTokens < 0 {
		return tensor.Invalid("MaxTokens", "%d, must be 0 (no limit) or positive", o.MaxTokens)
	}
	if len(prompt)+o.MaxTokens > maxLen {
		return fmt.Errorf("%w: %d prompt tokens and MaxTokens %d, the cache holds %d positions", ErrTooLong, len(prompt), o.MaxTokens, maxLen)
	}
	if err := b.s.checkTokens(prompt, 0); err != nil {
		return err
	}
	return o.Sampling.check(b.m.Config.VocabSize)
}

// admit hands r to the loop, or refuses it.
func (b *Batcher) admit(r *request) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.closed:
		return ErrClosed
	case b.admitted >= b.o.MaxBatch+b.o.Queue:
		return fmt.Errorf("%w: %d running or waiting, MaxBatch %d and Queue %d", ErrBusy, b.admitted, b.o.MaxBatch, b.o.Queue)
	}
	b.admitted++
	b.incoming = append(b.incoming, r)
	b.poke()
	return nil
}

func (b *Batcher) poke() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// Close stops admitting, ends the requests in flight (their iterators
// yield an error matching ErrClosed), waits for the device and releases
// the session. A second call does nothing.
func (b *Batcher) Close() error {
	b.mu.Lock()
	first := !b.closed
	b.closed = true
	b.mu.Unlock()
	if first {
		b.poke()
	}
	<-b.done
	return nil
}

// loop runs steps while there is work, until Close.
func (b *Batcher) loop() {
	defer close(b.done)
	for {
		if !b.take() {
			break
		}
		for b.pending > 0 && b.ring[(b.next-uint64(b.pending))%uint64(len(b.ring))].completed() {
			b.complete()
		}
		b.reap()
		if b.pending < len(b.ring)-1 && b.hasWork() {
			if err := b.step(); err != nil {
				b.fail(err)
			}
			b.publish()
			continue
		}
		b.publish()
		if b.pending > 0 {
			select {
			case <-b.ring[(b.next-uint64(b.pending))%uint64(len(b.ring))].p.Done():
			case <-b.wake:
			}
			continue
		}
		<-b.wake
	}
	b.flight.Wait(context.Background())
	for b.pending > 0 {
		b.complete()
	}
	b.mu.Lock()
	rest := b.incoming
	b.incoming = nil
	b.mu.Unlock()
	for _, r := range slices.Concat(b.active, b.queue, rest) {
		b.end(r, ErrClosed)
	}
	b.s.Release()
	b.mu.Lock()
	b.stats.Running, b.stats.Waiting = 0, 0
	b.mu.Unlock()
}

func (st *batchStep) completed() bool {
	select {
	case <-st.p.Done():
		return true
	default:
		return false
	}
}

// take moves the incoming requests to the queue; false once closed.
func (b *Batcher) take() bool {
	select {
	case <-b.wake:
	default:
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.queue = append(b.queue, b.incoming...)
	clear(b.incoming)
	b.incoming = b.incoming[:0]
	return true
}

// reap ends the requests whose context is done and frees the slots no
// committed step uses any more.
func (b *Batcher) reap() {
	q := b.queue[:0]
	for _, r := range b.queue {
		if err := r.ctx.Err(); err != nil {
			b.end(r, err)
			b.leave(r)
			continue
		}
		q = append(q, r)
	}
	clear(b.queue[len(q):])
	b.queue = q
	oldest := b.next - uint64(b.pending) // steps before it have completed
	a := b.active[:0]
	for _, r := range b.active {
		if !r.ended {
			if err := r.ctx.Err(); err != nil {
				b.end(r, err)
			}
		}
		if r.ended && r.last < oldest {
			b.s.Free(r.slot)
			b.leave(r)
			continue
		}
		a = append(a, r)
	}
	clear(b.active[len(a):])
	b.active = a
}

// leave stops counting r among the admitted requests, once.
func (b *Batcher) leave(r *request) {
	b.mu.Lock()
	if !r.left {
		r.left = true
		b.admitted--
	}
	b.mu.Unlock()
}

// publish copies the loop's counts into the stats.
func (b *Batcher) publish() {
	b.mu.Lock()
	b.stats.Running, b.stats.Waiting = len(b.active), len(b.queue)
	b.mu.Unlock()
}

// hasWork reports whether a step would do anything: a queued request and
// a free slot, a prompt to prefill or a sequence to decode.
func (b *Batcher) hasWork() bool {
	if len(b.queue) > 0 && len(b.active) < b.o.MaxBatch {
		return true
	}
	for _, r := range b.active {
		if !r.ended && (r.fed < len(r.prompt) || b.decodes(r)) {
			return true
		}
	}
	return false
}

// decodes reports whether r's next decode step is to be run: its prompt
// prefilled, its budget and its cache not spent.
func (b *Batcher) decodes(r *request) bool {
	return !r.ended && r.fed == len(r.prompt) && (r.o.MaxTokens == 0 || r.steps < r.o.MaxTokens) && b.s.lens[r.slot] < b.m.opts.MaxLen
}

// step encodes and commits the next step: queued requests take the free
// slots (from a cached prefix when one matches), the first request with
// prompt left prefills one chunk, every decoding one decodes a token.
func (b *Batcher) step() error {
	start := time.Now()
	s, n := b.s, b.next
	st := &b.ring[n%uint64(len(b.ring))]
	st.restore, st.save, st.got, st.gotSlot = st.restore[:0], st.save[:0], st.got[:0], st.gotSlot[:0]
	st.slots, st.rows = st.slots[:0], st.rows[:0]
	for len(b.queue) > 0 && len(b.active) < b.o.MaxBatch {
		r := b.queue[0]
		b.queue = b.queue[1:]
		var err error
		if r.slot, err = s.Acquire(); err != nil {
			return err
		}
		if r.o.penalized() {
			s.markSeen(r.slot, r.prompt)
		}
		r.last = n // a copy into it may come first
		b.active = append(b.active, r)
		b.reuse(st, r)
	}
	// Decode rows first: their sampling params and token views.
	prev := b.ring[(n+uint64(len(b.ring))-1)%uint64(len(b.ring))].tok
	for _, r := range b.active {
		if !b.decodes(r) || r.steps == 0 {
			continue
		}
		sp := r.o.Sampling.params()
		sp.Step = uint32(r.steps)
		st.rows = append(st.rows, rowIO{in: row(prev, r.slot, 1), out: row(st.tok, r.slot, 1), sample: sp, seen: s.seenRow(r.slot, r.o.Sampling)})
		st.slots = append(st.slots, r.slot)
		st.got, st.gotSlot = append(st.got, r), append(st.gotSlot, r.slot)
		r.steps++
		r.last = n
	}
	if len(st.slots) > 0 {
		st.dec.fill(nil, st.slots, s.lens)
		for _, sl := range st.slots {
			s.lens[sl]++
		}
	}
	// One prefill chunk.
	st.prePass = pass{}
	for _, r := range b.active {
		if r.ended || r.fed == len(r.prompt) {
			continue
		}
		chunk := b.m.opts.Chunk
		part := r.prompt[r.fed:min(r.fed+chunk, len(r.prompt))]
		st.preSlot[0] = r.slot
		st.pre.fill(part, st.preSlot[:], s.lens)
		st.prePass = pass{n: len(part), seqs: 1, lastOnly: true, in: st.pre}
		s.lens[r.slot] += len(part)
		r.fed += len(part)
		r.last = n
		if r.fed == len(r.prompt) {
			st.prePass.sample.SampleParams, st.prePass.sample.Tokens, st.prePass.sample.Seen = r.o.Sampling.params(), row(st.tok, r.slot, 1), s.seenRow(r.slot, r.o.Sampling)
			st.got, st.gotSlot = append(st.got, r), append(st.gotSlot, r.slot)
			r.steps = 1
		}
		if b.prefix != nil && r.fed == len(r.prompt)/chunk*chunk {
			// The last multiple of Chunk of the prompt: keep it.
			if e := b.prefix.store(r.prompt[:r.fed]); e != nil {
				st.save = append(st.save, slotCopy{from: r.slot, to: e.slot, n: r.fed})
			}
		}
		break
	}
	p, err := b.flight.Submit(context.Background(), b.encode)
	if err != nil {
		return err
	}
	st.p = p
	b.next++
	b.pending++
	b.mu.Lock()
	b.stats.Steps++
	b.stats.Rows += uint64(len(st.rows))
	b.stats.HostTime += time.Since(start)
	b.mu.Unlock()
	return nil
}

// reuse starts r from the longest cached prefix of its prompt, if any:
// a copy into its slot at the start of step st.
func (b *Batcher) reuse(st *batchStep, r *request) {
	if b.prefix == nil {
		return
	}
	e := b.prefix.lookup(r.prompt)
	b.mu.Lock()
	defer b.mu.Unlock()
	if e == nil {
		b.stats.PrefixMisses++
		return
	}
	n := len(e.key)
	st.restore = append(st.restore, slotCopy{from: e.slot, to: r.slot, n: n})
	b.s.lens[r.slot], r.fed = n, n
	b.stats.PrefixHits++
	b.stats.PrefixTokens += uint64(n)
}

// encodeStep encodes the step b.next in cb: the prefix copies into
// joining slots, the prefill chunk and the decode pass in one compute
// encoder, and the copies of prefixes kept.
func (b *Batcher) encodeStep(cb *mtl.CommandBuffer) error {
	st := &b.ring[b.next%uint64(len(b.ring))]
	if err := b.copies(cb, st.restore); err != nil {
		return err
	}
	enc, err := cb.ComputeCommandEncoder()
	if err != nil {
		return err
	}
	if st.prePass.n > 0 {
		err = b.s.encode(enc, st.prePass)
	}
	if k := len(st.rows); err == nil && k > 0 {
		err = b.s.encode(enc, pass{n: k, seqs: k, decode: true, in: st.dec, rows: st.rows})
	}
	if e := enc.EndEncoding(); err == nil {
		err = e
	}
	if err != nil {
		return err
	}
	return b.copies(cb, st.save)
}

func (b *Batcher) copies(cb *mtl.CommandBuffer, cs []slotCopy) error {
	if len(cs) == 0 {
		return nil
	}
	enc, err := cb.BlitCommandEncoder()
	if err != nil {
		return err
	}
	for _, c := range cs {
		b.s.copySlot(enc, c.from, c.to, c.n)
	}
	return enc.EndEncoding()
}

// complete reads back the tokens of the oldest step in flight (which has
// completed) and hands them to their requests.
func (b *Batcher) complete() {
	st := &b.ring[(b.next-uint64(b.pending))%uint64(len(b.ring))]
	b.pending--
	err := st.p.Wait(context.Background())
	st.p = nil
	toks := mtl.Slice[uint32](st.tok.Buffer)
	for i, r := range st.got {
		if r.ended {
			continue
		}
		if err != nil {
			b.end(r, err)
			continue
		}
		tok := int32(toks[st.gotSlot[i]])
		r.got++
		if slices.Contains(r.o.Stop, tok) {
			b.end(r, nil)
			continue
		}
		r.mu.Lock()
		r.toks = append(r.toks, tok)
		r.mu.Unlock()
		switch {
		case r.o.MaxTokens > 0 && r.got >= r.o.MaxTokens:
			b.end(r, nil)
		case r.got == r.steps && !b.decodes(r):
			b.end(r, ErrCacheFull)
		default:
			r.notify()
		}
	}
	clear(st.got)
}

// end tells r its end, with err (nil: a stop), and runs no more of its
// steps.
func (b *Batcher) end(r *request, err error) {
	if r.ended {
		return
	}
	r.ended = true
	r.mu.Lock()
	r.end, r.err = true, err
	r.mu.Unlock()
	r.notify()
}

func (r *request) notify() {
	select {
	case r.signal <- struct{}{}:
	default:
	}
}

// fail ends every request with err, after a step could not be encoded
// (nothing of it was committed), and forgets the cached prefixes, as the
// copy into the one it stored did not run.
func (b *Batcher) fail(err error) {
	for _, r := range b.active {
		b.end(r, err)
		r.last = min(r.last, b.next-1)
	}
	if b.prefix != nil {
		for i := range b.prefix.entries {
			b.prefix.entries[i].key = b.prefix.entries[i].key[:0]
		}
	}
}

// newView allocates a buffer of n elements of type t that the session
// releases; s.err keeps the first failure.
func (s *Session) newView(t tensor.ElemType, n int) tensor.View {
	if s.err != nil {
		return tensor.View{}
	}
	buf, err := s.m.dev.NewBuffer(n*t.Size(), mtl.ResourceStorageModeShared)
	if err != nil {
		s.err = err
		return tensor.View{}
	}
	s.bufs = append(s.bufs, buf)
	return tensor.NewView(buf, 0, t, n)
}

// checkCopies checks that the caches of a slot can be copied by a blit,
// whose offsets and sizes must be multiples of 4 bytes.
func (s *Session) checkCopies() error {
	c := s.m.Config
	for _, v := range slices.Concat(s.kc, s.vc) {
		if c.HeadDim*v.Type.Size()%4 != 0 {
			return fmt.Errorf("%w: a KV cache row of %d bytes cannot be copied by a blit (multiples of 4)", ErrUnsupported, c.HeadDim*v.Type.Size())
		}
	}
	if s.pool != nil {
		for _, v := range slices.Concat(s.pool.States, s.pool.ConvStates) {
			if (v.Bytes()/len(s.used))%4 != 0 || v.Offset%4 != 0 {
				return fmt.Errorf("%w: a slot's linear-attention state of %d bytes cannot be copied by a blit (multiples of 4)", ErrUnsupported, v.Bytes()/len(s.used))
			}
		}
	}
	return nil
}
