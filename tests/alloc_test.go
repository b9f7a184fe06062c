package tests

import (
	"errors"
	"testing"

	"github.com/puremetal/puremetal/gdn"
	"github.com/puremetal/puremetal/kernels"
	"github.com/puremetal/puremetal/mtl"
)

// TestEmulatedDispatchAllocatesNoMore checks that a dispatch through gdn
// (validation, kernel choice, pipeline lookup, encoding) allocates no more
// than the same four messages sent through mtl directly: gdn's own host
// cost per dispatch allocates nothing. (TestEmulatedDecodeStepHostCost
// does the same for a 32-layer decode step in one command buffer.)
func TestEmulatedDispatchAllocatesNoMore(t *testing.T) {
	onEmulatedIn(t, allOrders[:1], func(t *testing.T, r *rig) {
		p := gdn.Params{Shape: gdn.Shape{DK: 128, DV: 32, NKHeads: 2, NVHeads: 4, NTokens: 1, NSeqs: 1}, QScale: 0.5}
		state := r.poisoned(t, p.StateLen())
		b := gdn.Buffers{Q: r.poisoned(t, p.QKLen()), K: r.poisoned(t, p.QKLen()), V: r.poisoned(t, p.VLen()),
			G: r.poisoned(t, p.GateLen()), Beta: r.poisoned(t, p.GateLen()), StateIn: state,
			Output: r.poisoned(t, p.VLen()), StateOut: state}
		pso, err := r.reg.Pipeline(r.dev, kernels.DecodePackedOf(gdn.F32, gdn.F32, 4)) // Decode's choice here
		if err != nil {
			t.Fatal(err)
		}
		// buffers 0-13 as gdn binds them: Q's stands in at 8 (setBytes binds
		// it next), G's at 9-13 (no capture, A_log and dt_bias unread, no
		// slot index, no cu_seqlens)
		raw := []*mtl.Buffer{b.Q.Buffer, b.K.Buffer, b.V.Buffer, b.G.Buffer, b.Beta.Buffer, b.StateIn.Buffer, b.Output.Buffer, b.StateOut.Buffer,
			b.Q.Buffer, b.G.Buffer, b.G.Buffer, b.G.Buffer, b.G.Buffer, b.G.Buffer}
		offsets := make([]int, len(raw))
		params := paramBytes(p)
		grid, group := mtl.Size{Width: 1, Height: 4, Depth: 1}, mtl.Size{Width: 32, Height: 4, Depth: 1}

		measured := errors.New("measured; not committed")
		_, err = r.execute(func(enc *mtl.ComputeCommandEncoder) error {
			var derr error
			direct := testing.AllocsPerRun(200, func() {
				enc.SetComputePipelineState(pso)
				enc.SetBuffers(raw, offsets, 0)
				enc.SetBytes(params, 8)
				enc.DispatchThreadgroups(grid, group)
			})
			viaGDN := testing.AllocsPerRun(200, func() { derr = r.k.Decode(enc, p, b) })
			if derr != nil {
				return derr
			}
			if viaGDN > direct {
				t.Errorf("%v allocations per gdn dispatch, %v for the same messages sent directly", viaGDN, direct)
			}
			t.Logf("allocations per dispatch: %v through gdn, %v direct (the emulated device's own)", viaGDN, direct)
			return measured
		})
		if !errors.Is(err, measured) {
			t.Fatal(err)
		}
	})
}
