package msl

import (
	"testing"
)

// Bytes are charged to the binding index of the buffer they went through,
// also when lower indices are unbound; two bindings sharing a page are told
// apart, and an access just past the end of a small binding is caught even
// after accesses inside it.
func TestCountersPerBindingIndex(t *testing.T) {
	const src = `kernel void gather(device const uint* idx [[buffer(2)]],
                   device const float* a [[buffer(5)]],
                   device const float* b [[buffer(6)]],
                   device float* out [[buffer(9)]],
                   uint i [[thread_position_in_grid]]) {
    out[i] = a[idx[i]] + b[idx[i] % 3];
}
`
	f := functionT(t, compileT(t, src, CompileOptions{}), "gather")
	const n = 64
	idx, out := newMem(t, 4*n), newF32(t, n)
	page := newMem(t, 4096)
	a := Binding{Ptr: page.binding().Ptr, Len: 4 * 16}         // a[0..15]
	b := Binding{Ptr: page.binding().Ptr + 4*16 + 16, Len: 12} // b[0..2], same page
	for i := range idx.u32() {
		idx.u32()[i] = uint32(i % 16)
	}
	d := &Dispatch{Grid: ThreadsGrid([3]int{n, 1, 1}, [3]int{32, 1, 1})}
	d.Buffers[2], d.Buffers[5], d.Buffers[6], d.Buffers[9] = idx.binding(), a, b, out.binding()
	c, err := f.Run(d)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range map[int]uint64{2: 4 * n, 5: 4 * n, 6: 4 * n} {
		if c.Loaded[i] != want {
			t.Errorf("Loaded[%d] = %d, want %d (all: %v)", i, c.Loaded[i], want, c.Loaded[:10])
		}
	}
	if c.Stored[9] != 4*n || c.Loaded[0] != 0 || c.Loaded[1] != 0 || c.Loaded[3] != 0 {
		t.Errorf("Stored[9] = %d, want %d; Loaded %v", c.Stored[9], 4*n, c.Loaded[:10])
	}
	// thread 40 reads a[16], in the page but past the end of a
	idx.u32()[40] = 16
	_, err = f.Run(d)
	ke := kernelErrorT(t, err)
	if !ke.OutOfBounds() || ke.Thread != [3]int{8, 0, 0} || ke.Threadgroup != [3]int{1, 0, 0} || !contains(ke.Msg, "0 bytes past the end of buffer(5) (length 64)") {
		t.Fatalf("%v, want thread 40 reading past the end of buffer(5)", err)
	}
}
