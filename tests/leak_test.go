package tests

import (
	"testing"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/internal/testdevice"
)

// TestEmulatedReleasesEverything runs every kernel, in place and not, and a
// dispatch that fails validation, on a device of its own, releases it all,
// and checks that the emulator's live objects are back where they started.
// (Every TestEmulated... test checks the same after each scheduling order;
// this one also checks that the count rose, so the check can fail.)
func TestEmulatedReleasesEverything(t *testing.T) {
	before := emu.LiveObjects()
	var during int
	completed := false
	t.Run("run", func(t *testing.T) {
		r := newRig(t, testdevice.Emulated(t, testdevice.Orders[1]), true)
		p := spec.Params{
			Shape:   spec.Shape{DK: 64, DV: 16, NKHeads: 1, NVHeads: 2, NTokens: 3, NSeqs: 1},
			HeadMap: spec.Tiled,
		}
		in, err := cpuref.RandomInputs(p, 77)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range allKernels {
			r.run(t, job{kern: k, p: p, in: in})
			r.run(t, job{kern: k, p: p, in: in, inPlace: true})
		}
		bad := p
		bad.DK = 96
		if _, err := r.tryRun(t, job{kern: kSeq, p: bad, in: in}); err == nil {
			t.Errorf("D_k = 96 accepted by the seq kernel")
		}
		during = emu.LiveObjects()
		completed = true
	})
	if !completed {
		return // the subtest said why it skipped or failed
	}
	if during <= before {
		t.Errorf("live emulated objects: %d before, %d with a device, pipelines and a queue: the count does not see them", before, during)
	}
	if after := emu.LiveObjects(); after != before {
		t.Errorf("live emulated objects: %d before, %d after releasing everything", before, after)
	}
}
