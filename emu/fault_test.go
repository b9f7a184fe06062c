package emu_test

import (
	"os"
	"testing"
	"time"
	"unsafe"

	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/mtl"
)

// An out-of-bounds load or store stops the command buffer with a page
// fault naming the kernel, the line and the access, before the access
// happens; the queue then runs the next command buffer as usual.
func TestOutOfBoundsReported(t *testing.T) {
	const n = 64
	for _, o := range orders[:2] {
		g := newGPU(t, o)
		in, iv := buffer[float32](g, n)
		out, _ := buffer[float32](g, n)
		for i := range iv {
			iv[i] = float32(i) + 0.25
		}
		// The emulated buffer's memory is whole pages: an access past its
		// length that the runtime did not stop would succeed, and show here.
		page := unsafe.Slice((*float32)(unsafe.Pointer(&out.Contents()[0])), os.Getpagesize()/4)
		for _, c := range []struct {
			kernel string
			want   []string
		}{
			{"oob_load", []string{"kernel oob_load at program_source:7", "out-of-bounds", "load of 4 bytes", "threadgroup [1 0 0], thread [31 0 0]"}},
			{"oob_store", []string{"kernel oob_store at program_source:14", "out-of-bounds", "store of 4 bytes"}},
		} {
			p := g.pipeline("out_of_bounds.metal", c.kernel)
			poison(page)
			err := g.run(func(enc *mtl.ComputeCommandEncoder) {
				enc.SetComputePipelineState(p)
				enc.SetBuffers([]*mtl.Buffer{in, out}, []int{0, 0}, 0)
				enc.DispatchThreads(size1(n), size1(32))
			})
			t.Logf("%v: %s", o.Order, failed(t, err, errorPageFault, c.want...))
			for i := n; i < len(page); i++ {
				if page[i] == page[i] {
					t.Fatalf("%v, %s: float %d past the buffer's end was written: %v", o.Order, c.kernel, i, page[i])
				}
			}
		}
		// the same kernel within bounds, on the same queue
		p := g.pipeline("out_of_bounds.metal", "oob_store")
		poison(page)
		completed(t, g.run(func(enc *mtl.ComputeCommandEncoder) {
			enc.SetComputePipelineState(p)
			enc.SetBuffers([]*mtl.Buffer{in, out}, []int{0, 0}, 0)
			enc.DispatchThreads(size1(n/2), size1(32))
		}))
		for i := range page {
			want := nan
			if i < n && i%2 == 0 {
				want = iv[i/2]
			}
			if page[i] != want && !(page[i] != page[i] && want != want) {
				t.Fatalf("%v: out[%d] = %v, want %v", o.Order, i, page[i], want)
			}
		}
	}
}

// A dispatch running past Options.Timeout stops its command buffer with
// MTLCommandBufferErrorTimeout naming the loop, soon after the limit; the
// queue then runs the next command buffer as usual.
func TestTimeoutReported(t *testing.T) {
	const limit = 200 * time.Millisecond
	g := newGPU(t, emu.Options{Timeout: limit})
	p := g.pipeline("endless_loop.metal", "spin")
	out, ov := buffer[uint32](g, 8)
	ov[3] = 2
	dispatch := func(enc *mtl.ComputeCommandEncoder) {
		enc.SetComputePipelineState(p)
		enc.SetBuffer(out, 0, 0)
		enc.DispatchThreads(size1(4), size1(4))
	}
	start := time.Now()
	err := g.run(dispatch)
	took := time.Since(start)
	t.Log(failed(t, err, errorTimeout, "kernel spin at program_source:", "time limit of 0.2 s", "thread [1 0 0]"))
	if took < limit || took > 10*time.Second {
		t.Errorf("the command buffer failed after %v, want soon after %v", took, limit)
	}
	ov[0] = 1
	completed(t, g.run(dispatch))
	if ov[2] != 3 {
		t.Errorf("out[2] = %d after the loop ended, want 3", ov[2])
	}
}
