package layerstack

import (
	"github.com/puremetal/puremetal/gdn"
	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/mtl"
)

// States are every layer's pool of recurrent states, and with the layer
// core's convolution its pool of conv states, slot for slot: a
// gdn.StatePool, one shared buffer per layer and kind holding slots states
// (n_v_heads matrices of D_v x D_k each, in the state type; conv_dim x
// K-1 activations), slot i at offset i * (one state). The kernels read and
// write a layer's pools in place, each sequence in the slot the batch
// gives it; the CPU sets and reads slots between command buffers. A
// single sequence's state is a pool of one slot. The program picks the
// slots itself (the pool's Acquire and Free are not used): Reset zeroes
// one.
type States struct {
	one   spec.Params // the shape, state type and core of one state
	slots int
	pool  *gdn.StatePool
}

// NewStates allocates the zeroed pools of slots states of layers layers,
// each state of the shape and state type of one, with one's
// Core.Conv a conv state per slot too.
func NewStates(dev *mtl.Device, one spec.Params, layers, slots int) (*States, error) {
	p := one
	p.NSlots = slots
	pool, err := gdn.NewStatePool(dev, p, layers)
	if err != nil {
		return nil, err
	}
	return &States{one: one, slots: slots, pool: pool}, nil
}

// Pool returns the view of layer l's whole pool: a kernel's state_in, or
// state_out.
func (s *States) Pool(l int) gdn.View { return s.pool.States[l] }

// Slot returns the view of state slot of layer l's pool.
func (s *States) Slot(l, slot int) gdn.View {
	n := s.one.StateLen()
	return gdn.NewView(s.pool.States[l].Buffer, slot*n*s.one.State.Size(), s.one.State, n)
}

// ConvPool returns the view of layer l's whole conv-state pool: the core
// kernel's conv_state_in and conv_state_out. It is empty without the
// convolution.
func (s *States) ConvPool(l int) gdn.View {
	if s.pool.ConvStates == nil {
		return gdn.View{}
	}
	return s.pool.ConvStates[l]
}

// ConvSlot returns the view of conv state slot of layer l's pool (the
// layer core's convolution).
func (s *States) ConvSlot(l, slot int) gdn.View {
	n := s.one.ConvStateLen()
	return gdn.NewView(s.pool.ConvStates[l].Buffer, slot*n*s.one.Activation.Size(), s.one.Activation, n)
}

// Set stores x as state slot of layer l, rounded to the state type.
func (s *States) Set(l, slot int, x []float32) { Store(s.Slot(l, slot), x) }

// Read returns a copy of state slot of layer l, widened to float32.
func (s *States) Read(l, slot int) []float32 {
	return Load(s.Slot(l, slot), make([]float32, s.one.StateLen()))
}

// ReadConv returns a copy of conv state slot of layer l, widened to
// float32.
func (s *States) ReadConv(l, slot int) []float32 {
	return Load(s.ConvSlot(l, slot), make([]float32, s.one.ConvStateLen()))
}

// Reset zeroes state slot, and its conv state, of every layer's pools.
func (s *States) Reset(slot int) {
	for l := range s.pool.States {
		clear(viewBytes(s.Slot(l, slot)))
		if s.pool.ConvStates != nil {
			clear(viewBytes(s.ConvSlot(l, slot)))
		}
	}
}

// viewBytes returns the bytes of v in its shared buffer.
func viewBytes(v gdn.View) []byte {
	return mtl.Slice[byte](v.Buffer)[v.Offset : v.Offset+v.Len*v.Type.Size()]
}

// Release releases the pools.
func (s *States) Release() { s.pool.Release() }
