package ops

import (
	"testing"

	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/kernels"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/tensor"
)

// TestAttentionHostCostAllocatesNothing checks that what the attention
// dispatchers do on the host before they encode (the shape checks, the
// views' checks, the sequences' values read from shared buffers, the
// entry-point names and the pipeline look-up) allocates nothing, so that a
// decode step costs only its messages to Metal.
func TestAttentionHostCostAllocatesNothing(t *testing.T) {
	g := testdevice.NewEmulated(t, emu.Options{})
	k, err := New(g.D, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Release()
	a := Attention{Type: tensor.F16, HeadDim: 128, Heads: 8, KVHeads: 2, Slots: 4, MaxLen: 64, GateStride: 256}
	s := AttentionStep{Tokens: 2, Seqs: 2, Splits: 4}
	view := func(typ tensor.ElemType, n int) tensor.View {
		return tensor.NewView(g.Buffer(n*typ.Size(), mtl.ResourceStorageModeShared), 0, typ, n)
	}
	v := AttentionViews{
		Q: view(a.Type, 128*8*2), Out: view(a.Type, 128*8*2), Gate: view(a.Type, (2*8-1)*256+128),
		K: view(a.Type, 128*2*2), V: view(a.Type, 128*2*2),
		KCache: view(a.Type, 128*64*2*4), VCache: view(a.Type, 128*64*2*4),
		Slots: view(tensor.I32, 2), CacheLens: view(tensor.I32, 2),
		PartialO: view(tensor.F32, 128*4*8*2), PartialML: view(tensor.F32, 2*4*8*2),
	}
	if err := tensor.StoreInts(v.Slots, []int32{3, 1}); err != nil {
		t.Fatal(err)
	}
	if err := tensor.StoreInts(v.CacheLens, []int32{10, 63}); err != nil {
		t.Fatal(err)
	}
	if err := k.Prepare(kernels.AttentionDecodeOf(a.Type, a.HeadDim)); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []attnKind{attnAppend, attnDecode, attnPrefill, attnAdvance} {
		var err error
		n := testing.AllocsPerRun(100, func() {
			_, _, err = k.prepareAttention(a, s, v, kind, kernels.AttentionDecodeOf(a.Type, a.HeadDim))
		})
		if err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("attention kind %d: %v allocations per dispatch on the host", kind, n)
		}
	}
}
