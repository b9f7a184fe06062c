package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
)

// A scheduler is the serving loop's bookkeeping, shared by the serial loop
// (serveSerial) and the overlapped one (serveOverlapped): the requests'
// arrivals, their admission into free slots of the pool and their
// retirement. It draws every choice from one random stream, in the same
// order whichever loop runs it, so both loops serve the same requests in
// the same steps; what they differ in is when the device runs a step and
// when its results are read.
type scheduler struct {
	cfg      config
	rng      *rand.Rand
	all      []*request // every request arrived so far
	waiting  []*request // arrived, not admitted yet
	running  []*request // admission order: the decode batch's positions
	free     []int      // slots no request holds
	used     []bool     // slots some request has held
	finished []*request // in the order they finished
}

func newScheduler(cfg config) *scheduler {
	s := &scheduler{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 0x5e7e)), free: make([]int, cfg.slots), used: make([]bool, cfg.slots)}
	for i := range s.free {
		s.free[i] = i
	}
	return s
}

// arrive adds the requests arriving at a step to the waiting ones: 0 to
// cfg.arrive of them, each with a prompt and a number of tokens to
// generate drawn from 1 to cfg.prompt and cfg.gen, until cfg.requests have
// arrived.
func (s *scheduler) arrive() {
	for range s.rng.IntN(s.cfg.arrive + 1) {
		if len(s.all) == s.cfg.requests {
			break
		}
		r := &request{id: len(s.all), prompt: 1 + s.rng.IntN(s.cfg.prompt), gen: 1 + s.rng.IntN(s.cfg.gen), slot: -1}
		r.outputs = make([][]float32, s.cfg.Layers)
		s.all, s.waiting = append(s.all, r), append(s.waiting, r)
	}
}

// admit begins a step with the arrivals and the admission (step 1 of the
// package's plan): the admission of waiting requests while the pool has a free slot,
// each into a free slot drawn at random, whose state reset must zero
// (every slot admitted into, unless cfg.keepStale). It returns the
// requests admitted, which the step prefills, and those admitted before,
// which it decodes (a slice of its own: retire edits the running ones in
// place), and counts the reused slots and the occupancy into res.
func (s *scheduler) admit(step int, res *result, reset func(slot int)) (admitted, decoding []*request) {
	s.arrive()
	for len(s.waiting) > 0 && len(s.free) > 0 {
		r := s.waiting[0]
		s.waiting = s.waiting[1:]
		i := s.rng.IntN(len(s.free))
		r.slot, r.admitted = s.free[i], step
		s.free = slices.Delete(s.free, i, i+1)
		if s.used[r.slot] {
			res.SlotsReused++
		}
		s.used[r.slot] = true
		if !s.cfg.keepStale {
			reset(r.slot)
		}
		admitted = append(admitted, r)
	}
	res.Occupancy = append(res.Occupancy, s.cfg.slots-len(s.free))
	decoding = slices.Clone(s.running)
	s.running = append(s.running, admitted...)
	return admitted, decoding
}

// retire retires the running requests that generated all their tokens
// (step 4): each is finished at step and its slot freed, after final(r,
// slot) has read or arranged to read its final states from the slot into
// r.final and r.finalConv (one entry per layer, made here).
func (s *scheduler) retire(step int, final func(r *request, slot int)) {
	s.running = slices.DeleteFunc(s.running, func(r *request) bool {
		if r.generated < r.gen {
			return false
		}
		r.final = make([][]float32, s.cfg.Layers)
		r.finalConv = make([][]float32, s.cfg.Layers)
		final(r, r.slot)
		r.done = step
		s.free = append(s.free, r.slot)
		r.slot = -1
		s.finished = append(s.finished, r)
		return true
	})
}

// end ends a step: it counts it into res, says it on stderr, and reports
// whether every request has finished; an error when the simulation runs
// far longer than its requests need.
func (s *scheduler) end(step int, res *result, admitted, decoding []*request, stderr io.Writer) (bool, error) {
	res.Steps++
	fmt.Fprintf(stderr, "step %3d: %d waiting, %d admitted, %d decoded, %d in flight, %d finished\n",
		step, len(s.waiting), len(admitted), len(decoding), len(s.running), len(s.finished))
	if len(s.all) == s.cfg.requests && len(s.running) == 0 && len(s.waiting) == 0 {
		return true, nil
	}
	if step > 100*s.cfg.requests*(s.cfg.prompt+s.cfg.gen) {
		return false, fmt.Errorf("the simulation did not finish")
	}
	return false, nil
}
