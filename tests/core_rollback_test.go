package tests

import (
	"errors"
	"fmt"
	"testing"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/gdn"
	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/internal/testdevice"
)

// TestEmulatedCoreRollback runs speculative windows through the core
// kernel with capture, rolls back with gdn.RollbackCore on one blit
// encoder, and checks that every sequence then holds the recurrent state
// and the conv state of its accepted tokens alone, computed by
// Reference32 on those tokens: the state within SPEC section 9's bound,
// the conv state bit for bit. The capture itself is checked against
// Reference32's. Cases: grouped heads (conv state apart), a state pool
// with packed sequences and padding, and in place (without grouped heads,
// with them, and a pool with grouped heads), where accepting fewer than
// K-1 tokens is refused.
func TestEmulatedCoreRollback(t *testing.T) {
	type rbCase struct {
		name     string
		p        spec.Params
		slots    []int32
		cu       []int32
		accepted []int32
		inPlace  bool
	}
	base := spec.Params{Shape: spec.Shape{DK: 64, DV: 32, NKHeads: 1, NVHeads: 2, NTokens: 4, NSeqs: 3},
		QScale: 0.125, Activation: spec.BF16, Fused: spec.FusedAll, Core: spec.QwenCore()}
	pool := base
	pool.NTokens, pool.NSlots, pool.Varlen = 8, 4, true
	mha := base
	mha.NVHeads, mha.NKHeads, mha.NSeqs, mha.Activation = 2, 2, 2, spec.F16
	cases := []rbCase{
		{"grouped", base, nil, nil, []int32{4, 2, 0}, false},
		{"pool_packed", pool, []int32{2, 0, -1}, []int32{0, 3, 3, 8}, []int32{1, 0, 5}, false},
		{"mha_in_place", mha, nil, nil, []int32{3, 4}, true},
		{"grouped_in_place", base, nil, nil, []int32{4, 3, 3}, true},
		{"pool_packed_grouped_in_place", pool, []int32{2, 0, -1}, []int32{0, 5, 5, 8}, []int32{3, 0, 3}, true},
	}
	onEmulated(t, func(t *testing.T, r *rig) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				p := c.p
				in, err := cpuref.RandomInputs(p, 3)
				if err != nil {
					t.Fatal(err)
				}
				if c.slots != nil {
					in.Slots = c.slots
				}
				if c.cu != nil {
					in.CuSeqlens = c.cu
				}
				o, b, cb, err := r.runCoreBuffers(t, coreJob{p: p, in: in, capture: true, inPlace: c.inPlace})
				if err != nil {
					t.Fatal(err)
				}
				ref, err := cpuref.Reference32(p, in, true)
				if err != nil {
					t.Fatal(err)
				}
				parts := coreParts(t, p, in)
				sw := p.DK * p.DV * p.NVHeads
				for _, pt := range parts {
					if pt.Skip || pt.N == 0 {
						continue
					}
					lo, hi := pt.Tok0*sw, (pt.Tok0+pt.N)*sw
					checkWritten(t, "capture", o.Capture[lo:hi])
					checkBound(t, fmt.Sprintf("capture of tokens %d..%d vs Reference32", pt.Tok0, pt.Tok0+pt.N-1), cpuref.MaxRelErr(o.Capture[lo:hi], ref.Capture[lo:hi]), typeBound(p.State, boundRef32))
				}
				g := &testdevice.GPU{T: t, D: r.dev, Q: r.queue}
				if c.inPlace {
					short := make([]int32, len(c.accepted))
					short[0] = 1
					blitCB, blit := g.Blit()
					err := gdn.RollbackCore(blit, p, b, cb, short)
					blit.EndEncoding()
					blitCB.Release()
					if !errors.Is(err, gdn.ErrInvalidArgument) {
						t.Errorf("in place, 1 token accepted: error %v, want ErrInvalidArgument", err)
					}
				}
				blitCB, blit := g.Blit()
				if err := gdn.RollbackCore(blit, p, b, cb, c.accepted); err != nil {
					t.Fatal(err)
				}
				if err := blit.EndEncoding(); err != nil {
					t.Fatal(err)
				}
				if err := completed(blitCB); err != nil {
					t.Fatal(err)
				}
				blitCB.Release()
				state, conv := readBack(b.StateOut), readBack(cb.ConvStateOut)
				cw := p.ConvDim() * (p.Core.Conv - 1)
				for s, pt := range parts {
					if pt.Skip {
						continue
					}
					a := int(c.accepted[s])
					wantState := in.StateIn[pt.State*sw : (pt.State+1)*sw]
					wantConv := in.ConvState[pt.State*cw : (pt.State+1)*cw]
					if a > 0 {
						one := truncate(pt, a)
						rs, err := cpuref.Reference32(one.Params, one.Inputs, false)
						if err != nil {
							t.Fatal(err)
						}
						wantState, wantConv = rs.StateOut, rs.ConvState
					}
					name := fmt.Sprintf("sequence %d (slot %d) accepting %d of %d", s, pt.State, a, pt.N)
					checkBound(t, name+": state", cpuref.MaxRelErr(state[pt.State*sw:(pt.State+1)*sw], wantState), typeBound(p.State, boundRef32))
					checkSameBytes(t, name+": conv state", p.Activation, encode(p.Activation, conv[pt.State*cw:(pt.State+1)*cw]), encode(p.Activation, wantConv))
				}
			})
		}
	})
}

// truncate returns the part run alone on its first n tokens.
func truncate(pt cpuref.Part, n int) cpuref.Part {
	p := pt.Params
	p.NTokens = n
	in := pt.Inputs
	nv, cd := p.NVHeads, p.ConvDim()
	in.G, in.Beta = in.G[:n*nv], in.Beta[:n*nv]
	if p.Core.Conv > 0 {
		in.MixedQKV = in.MixedQKV[:n*cd]
	} else {
		in.Q, in.K, in.V = in.Q[:n*p.DK*p.NKHeads], in.K[:n*p.DK*p.NKHeads], in.V[:n*p.DV*nv]
	}
	if p.Core.Norm {
		in.Z = in.Z[:n*p.DV*nv]
	}
	pt.Params, pt.Inputs = p, in
	return pt
}
