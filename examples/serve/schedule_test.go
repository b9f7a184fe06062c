package main

import (
	"io"
	"slices"
	"testing"

	"github.com/puremetal/puremetal/examples/internal/layerstack/layerstacktest"
)

// The scheduler both serving loops share, driven alone: every request
// arrives once, is admitted into a slot no running request holds (and
// that slot alone is handed to reset, unless keepStale), decodes from the
// step after its admission, and retires once it has generated its
// tokens, freeing its slot; the pool's slots are always the free ones and
// the running requests' ones.
func TestScheduler(t *testing.T) {
	for _, stale := range []bool{false, true} {
		cfg := layerstacktest.Flags(t, parseFlags, tiny, "-backend", "cpu", "-requests", "30", "-arrive", "4")
		cfg.keepStale = stale
		var res result
		s := newScheduler(cfg)
		for step := 0; ; step++ {
			var resets []int
			admitted, decoding := s.admit(step, &res, func(slot int) { resets = append(resets, slot) })
			want := []int{}
			for _, r := range admitted {
				if r.admitted != step || r.generated != 0 {
					t.Fatalf("step %d: request %d admitted at %d, %d generated", step, r.id, r.admitted, r.generated)
				}
				if !stale {
					want = append(want, r.slot)
				}
			}
			if !slices.Equal(resets, want) {
				t.Fatalf("step %d: slots reset %v, want %v (keepStale %v)", step, resets, want, stale)
			}
			if len(decoding)+len(admitted) != len(s.running) {
				t.Fatalf("step %d: %d decoded and %d admitted, %d running", step, len(decoding), len(admitted), len(s.running))
			}
			slots := slices.Clone(s.free)
			for _, r := range s.running {
				slots = append(slots, r.slot)
			}
			slices.Sort(slots)
			if len(slots) != cfg.slots || slots[0] != 0 || slots[len(slots)-1] != cfg.slots-1 || len(slices.Compact(slots)) != cfg.slots {
				t.Fatalf("step %d: free %v and running slots do not make the pool of %d", step, s.free, cfg.slots)
			}
			for _, r := range decoding {
				if r.admitted >= step {
					t.Fatalf("step %d: request %d admitted at %d decodes", step, r.id, r.admitted)
				}
				r.generated++
			}
			var freed []int
			s.retire(step, func(r *request, slot int) {
				if r.generated != r.gen || len(r.final) != cfg.Layers {
					t.Fatalf("step %d: request %d retires with %d of %d generated", step, r.id, r.generated, r.gen)
				}
				freed = append(freed, slot)
			})
			for _, slot := range freed {
				if !slices.Contains(s.free, slot) {
					t.Fatalf("step %d: slot %d retired but not free: %v", step, slot, s.free)
				}
			}
			over, err := s.end(step, &res, admitted, decoding, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if over {
				break
			}
		}
		ids := make([]int, len(s.finished))
		for i, r := range s.finished {
			ids[i] = r.id
			if r.slot != -1 || r.done != r.admitted+r.gen {
				t.Errorf("request %d: slot %d, admitted at %d, done at %d with %d to generate", r.id, r.slot, r.admitted, r.done, r.gen)
			}
		}
		slices.Sort(ids)
		if len(ids) != cfg.requests || ids[0] != 0 || ids[len(ids)-1] != cfg.requests-1 || len(slices.Compact(ids)) != cfg.requests {
			t.Errorf("finished %v, want each of %d requests once", ids, cfg.requests)
		}
		if res.Steps != len(res.Occupancy) || res.SlotsReused == 0 {
			t.Errorf("%d steps, %d occupancies, %d slots reused", res.Steps, len(res.Occupancy), res.SlotsReused)
		}
	}
}
