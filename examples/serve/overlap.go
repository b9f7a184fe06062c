package main

import (
	"fmt"
	"io"
	"time"

	"github.com/puremetal/puremetal/examples/internal/layerstack"
	"github.com/puremetal/puremetal/gdn"
	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/mtl"
)

// An overlapper is a backend that runs a step without waiting for it, so
// the next step is prepared meanwhile: it holds two sets of the batches'
// buffers, one written while the other's step runs.
type overlapper interface {
	backend
	// Stage writes the plan's inputs to the buffers of set (0 or 1) for
	// its kind of batch (prefill or decode); the set's previous step must
	// be done.
	Stage(set int, plan batchPlan) error
	// Launch commits the staged batch of set and kind without waiting.
	Launch(set int, plan batchPlan) (*layerstack.Submitted, error)
	// Outputs reads every layer's outputs of a staged batch whose step
	// is done.
	Outputs(set int, plan batchPlan) [][]float32
}

// stepRun is a step committed to the device: its batches (prefill, then
// decode; either may be missing), their command buffers, and the requests
// that finished with it, whose final states are read once it is done.
type stepRun struct {
	set      int
	plans    []batchPlan
	subs     []*layerstack.Submitted
	retiring []retired
}

type retired struct {
	r    *request
	slot int
}

// serveOverlapped serves as serveSerial does, the same requests in the
// same steps, but prepares step t+1 while the device runs step t: the
// arrivals, the admissions, the retirements and the inputs of step t+1 are
// decided and drawn on the host, and written to the second set of
// buffers, before it waits for step t. What needs step t done waits for
// it: reading the outputs and the final states of the requests step t
// finished, and zeroing the slots step t+1 admits into (a slot step t
// freed is still being written by it). It measures how much of the host's
// preparation ran while the device was busy.
func serveOverlapped(cfg config, be overlapper, stderr io.Writer) (result, []*request, error) {
	var (
		res  result
		s    = newScheduler(cfg)
		prev *stepRun
	)
	res.Overlapped = true
	// finish waits for a step, records its outputs and reads the final
	// states of the requests it finished; the host's preparation from
	// prepStart to prepEnd counts as hidden while the step was running.
	finish := func(sr *stepRun, prepStart, prepEnd time.Time, overlapped bool) error {
		var last time.Time
		for i, sub := range sr.subs {
			done, err := sub.Wait()
			if err != nil {
				return err
			}
			if done.After(last) {
				last = done
			}
			record(sr.plans[i], be.Outputs(sr.set, sr.plans[i]), &res)
		}
		if len(sr.subs) > 0 {
			res.Busy += last.Sub(sr.subs[0].Committed)
		}
		if overlapped {
			res.HostPrep += prepEnd.Sub(prepStart)
			end := prepEnd
			if last.Before(end) {
				end = last
			}
			if end.After(prepStart) {
				res.HostHidden += end.Sub(prepStart)
			}
		}
		for _, f := range sr.retiring {
			for l := range f.r.final {
				f.r.final[l] = be.State(l, f.slot)
				f.r.finalConv[l] = be.ConvState(l, f.slot)
			}
		}
		return nil
	}
	for step := 0; ; step++ {
		prepStart := time.Now()
		// 1. Admission; the slots are zeroed once the previous step is
		// done.
		var resets []int
		admitted, decoding := s.admit(step, &res, func(slot int) { resets = append(resets, slot) })
		// 2. and 3.: the batches, drawn, packed and staged.
		sr := &stepRun{set: step % 2}
		if len(admitted) > 0 {
			plan, err := prefillBatch(cfg, admitted, &res)
			if err != nil {
				return result{}, nil, fmt.Errorf("step %d: prefill: %w", step, err)
			}
			sr.plans = append(sr.plans, plan)
		}
		if len(decoding) > 0 {
			plan, err := decodeBatch(cfg, decoding)
			if err != nil {
				return result{}, nil, fmt.Errorf("step %d: decode: %w", step, err)
			}
			sr.plans = append(sr.plans, plan)
		}
		for _, plan := range sr.plans {
			if err := be.Stage(sr.set, plan); err != nil {
				return result{}, nil, fmt.Errorf("step %d: %w", step, err)
			}
		}
		// 4. Retirement, decided now; the states are read once this step
		// is done.
		s.retire(step, func(r *request, slot int) { sr.retiring = append(sr.retiring, retired{r, slot}) })
		over, err := s.end(step, &res, admitted, decoding, stderr)
		if err != nil {
			return result{}, nil, err
		}
		prepEnd := time.Now()
		if prev != nil {
			if err := finish(prev, prepStart, prepEnd, true); err != nil {
				return result{}, nil, fmt.Errorf("step %d: %w", step-1, err)
			}
		}
		for _, slot := range resets {
			be.Reset(slot)
		}
		for _, plan := range sr.plans {
			sub, err := be.Launch(sr.set, plan)
			if err != nil {
				return result{}, nil, fmt.Errorf("step %d: %w", step, err)
			}
			sr.subs = append(sr.subs, sub)
		}
		prev = sr
		if over {
			break
		}
	}
	if err := finish(prev, time.Time{}, time.Time{}, false); err != nil {
		return result{}, nil, err
	}
	return res, s.finished, nil
}

// kind is a batch's place among a set's buffers: 0 for a prefill, 1 for a
// decode.
func kind(plan batchPlan) int {
	if plan.kern == gdn.KernelDecode {
		return 1
	}
	return 0
}

// Stage writes the plan's inputs to set's buffers of its kind.
func (b *deviceBackend) Stage(set int, plan batchPlan) error {
	if err := b.ensureSets(plan.p); err != nil {
		return err
	}
	acts := b.sets[set][kind(plan)]
	if err := acts.Reshape(plan.p); err != nil {
		return err
	}
	for l, x := range plan.batch {
		acts.Write(l, x)
	}
	if b.core != nil {
		return b.core.stage(b.d.Dev, set, kind(plan), plan.p, plan.batch)
	}
	return nil
}

// Launch commits the staged batch, reading and writing the pools in place.
func (b *deviceBackend) Launch(set int, plan batchPlan) (*layerstack.Submitted, error) {
	acts := b.sets[set][kind(plan)]
	views := make([]gdn.Buffers, len(plan.batch))
	for l := range views {
		views[l] = acts.Buffers(l)
		pool := b.states.Pool(l)
		views[l].StateIn, views[l].StateOut = pool, pool
	}
	if b.core != nil {
		return b.d.Submit(plan.p, func(cb *mtl.CommandBuffer) error {
			return b.core.encode(b.d.Kernels, cb, set, kind(plan), plan.p, func(l int) gdn.Buffers { return views[l] })
		})
	}
	return b.d.SubmitLayers(dispatcher(plan.kern), plan.p, len(views), func(l int) gdn.Buffers { return views[l] })
}

// Outputs reads the outputs of a staged batch whose step is done.
func (b *deviceBackend) Outputs(set int, plan batchPlan) [][]float32 {
	acts := b.sets[set][kind(plan)]
	out := make([][]float32, len(plan.batch))
	for l := range out {
		out[l] = acts.ReadOutput(l, make([]float32, plan.p.VLen()))
	}
	return out
}

// ensureSets makes the two sets of buffers on first use.
func (b *deviceBackend) ensureSets(p spec.Params) error {
	for s := range b.sets {
		for k := range b.sets[s] {
			if b.sets[s][k] == nil {
				a, err := layerstack.NewActivations(b.d.Dev, p, b.layers)
				if err != nil {
					return err
				}
				b.sets[s][k] = a
			}
		}
	}
	return nil
}
