package layerstack

import (
	"github.com/puremetal/puremetal/gdn"
	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/mtl"
)

// States are every layer's pool of recurrent states: one shared buffer per
// layer holding slots states (n_v_heads matrices of D_v x D_k each) in
// the state type, slot i at offset i * (one state). The kernels read and
// write a layer's pool in place, each sequence in the slot the batch
// gives it; the CPU sets and reads slots between command buffers. A
// single sequence's state is a pool of one slot.
type States struct {
	one   spec.Params // the shape and state type of one state
	slots int
	pools []*mtl.Buffer
}

// NewStates allocates the zeroed pools of slots states of layers layers,
// each state of the shape and state type of one.
func NewStates(dev *mtl.Device, one spec.Params, layers, slots int) (*States, error) {
	s := &States{one: one, slots: slots}
	for range layers {
		buf, err := dev.NewBuffer(slots*one.StateLen()*one.State.Size(), mtl.ResourceStorageModeShared)
		if err != nil {
			s.Release()
			return nil, err
		}
		s.pools = append(s.pools, buf)
	}
	return s, nil
}

// Pool returns the view of layer l's whole pool: a kernel's state_in, or
// state_out.
func (s *States) Pool(l int) gdn.View {
	return gdn.NewView(s.pools[l], 0, s.one.State, s.slots*s.one.StateLen())
}

// Slot returns the view of state slot of layer l's pool.
func (s *States) Slot(l, slot int) gdn.View {
	n := s.one.StateLen()
	return gdn.NewView(s.pools[l], slot*n*s.one.State.Size(), s.one.State, n)
}

// Set stores x as state slot of layer l, rounded to the state type.
func (s *States) Set(l, slot int, x []float32) { Store(s.Slot(l, slot), x) }

// Read returns a copy of state slot of layer l, widened to float32.
func (s *States) Read(l, slot int) []float32 {
	return Load(s.Slot(l, slot), make([]float32, s.one.StateLen()))
}

// Reset zeroes state slot of every layer's pool.
func (s *States) Reset(slot int) {
	bytes := s.one.StateLen() * s.one.State.Size()
	for _, pool := range s.pools {
		clear(mtl.Slice[byte](pool)[slot*bytes : (slot+1)*bytes])
	}
}

// Release releases the pools.
func (s *States) Release() {
	for _, pool := range s.pools {
		pool.Release()
	}
}
