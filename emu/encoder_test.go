package emu_test

import (
	"fmt"
	"strings"
	"testing"
	"unsafe"

	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/objc"
)

// A dispatch whose thread counts overflow, sent to the emulated encoder
// directly (package mtl refuses it before sending), fails the command
// buffer, naming the sizes, instead of completing without running.
func TestDispatchOverflowFailsCommandBuffer(t *testing.T) {
	g, p, x, xv := newScaleGPU(t)
	dispatchThreads := objc.RegisterName("dispatchThreads:threadsPerThreadgroup:")
	dispatchThreadgroups := objc.RegisterName("dispatchThreadgroups:threadsPerThreadgroup:")
	for _, tc := range []struct {
		name        string
		sel         objc.SEL
		grid, group [3]uintptr
		want        string
	}{
		{"threadgroup product wraps to 0", dispatchThreadgroups, [3]uintptr{1, 1, 1}, [3]uintptr{1 << 22, 1 << 21, 1 << 21}, "threadgroup [4194304 2097152 2097152]"},
		{"threadgroup too large", dispatchThreads, [3]uintptr{64, 1, 1}, [3]uintptr{2048, 1, 1}, "want 1 to 1024 threads"},
		{"grid product wraps", dispatchThreads, [3]uintptr{1 << 32, 1 << 32, 1}, [3]uintptr{32, 1, 1}, "grid [4294967296 4294967296 1]"},
		{"threadgroups times threads wraps", dispatchThreadgroups, [3]uintptr{1 << 31, 1 << 31, 1}, [3]uintptr{32, 1, 1}, "overflows"},
		{"grid beyond int", dispatchThreads, [3]uintptr{1 << 63, 1, 1}, [3]uintptr{32, 1, 1}, "overflows"},
	} {
		for i := range xv {
			xv[i] = float32(i)
		}
		cb, enc := g.Encoder()
		setScale(enc, p, x, 2)
		a, b := tc.grid, tc.group
		objc.SendArgs(enc.ID(), tc.sel, objc.Struct24(a[0], a[1], a[2]), objc.Struct24(b[0], b[1], b[2]))
		enc.DispatchThreads(size1(64), size1(64)) // a valid dispatch after it does not run either
		if err := enc.EndEncoding(); err != nil {
			t.Fatal(err)
		}
		cb.Commit()
		cb.WaitUntilCompleted()
		t.Run(tc.name, func(t *testing.T) { failed(t, ended(t, cb), errorInternal, tc.want) })
		for i, v := range xv {
			if v != float32(i) {
				t.Fatalf("%s: x[%d] = %v: the failed command buffer ran", tc.name, i, v)
			}
		}
		cb.Release()
	}
}

// A copy that Metal's validation refuses, sent to the emulated blit
// encoder directly (package mtl refuses it before sending), fails the
// command buffer, naming the numbers, and copies nothing.
func TestBlitCopyRefused(t *testing.T) {
	g := newGPU(t, emu.Options{})
	src, sv := buffer[uint32](g, 64)
	dst, dv := buffer[uint32](g, 64)
	for i := range sv {
		sv[i], dv[i] = uint32(i), 0xDEADBEEF
	}
	copySel := objc.RegisterName("copyFromBuffer:sourceOffset:toBuffer:destinationOffset:size:")
	for _, tc := range []struct {
		name                   string
		src, dst               objc.ID
		srcOff, dstOff, length uintptr
		want                   string
	}{
		{"source range", src.ID(), dst.ID(), 200, 0, 64, "source range [200, 200+64)"},
		{"destination range", src.ID(), dst.ID(), 0, 256, 4, "destination range [256, 256+4)"},
		{"wrapping size", src.ID(), dst.ID(), 4, 0, ^uintptr(0) - 2, "source range"},
		{"alignment", src.ID(), dst.ID(), 0, 0, 6, "size 6 must be multiples of 4"},
		{"not a buffer", g.Q.ID(), dst.ID(), 0, 0, 4, "not a buffer of the emulated device"},
		{"overlap", src.ID(), src.ID(), 0, 4, 64, "source range [0, 64) and destination range [4, 68) overlap in the same buffer"},
		{"overlap below", src.ID(), src.ID(), 64, 0, 68, "source range [64, 132) and destination range [0, 68) overlap"},
		{"onto itself", src.ID(), src.ID(), 8, 8, 4, "source range [8, 12) and destination range [8, 12) overlap"},
	} {
		cb, err := g.Q.CommandBuffer()
		if err != nil {
			t.Fatal(err)
		}
		blit, err := cb.BlitCommandEncoder()
		if err != nil {
			t.Fatal(err)
		}
		objc.Send(blit.ID(), copySel, uintptr(tc.src), tc.srcOff, uintptr(tc.dst), tc.dstOff, tc.length)
		blit.CopyFromBuffer(src, 0, dst, 0, 256) // valid, after it: does not run either
		if err := blit.EndEncoding(); err != nil {
			t.Fatal(err)
		}
		cb.Commit()
		cb.WaitUntilCompleted()
		t.Run(tc.name, func(t *testing.T) {
			failed(t, ended(t, cb), errorInternal, "copyFromBuffer:sourceOffset:toBuffer:destinationOffset:size:", tc.want)
		})
		cb.Release()
		for i, v := range dv {
			if v != 0xDEADBEEF {
				t.Fatalf("%s: dst[%d] = %#x: the failed command buffer copied", tc.name, i, v)
			}
		}
		for i, v := range sv {
			if v != uint32(i) {
				t.Fatalf("%s: src[%d] = %#x: the failed command buffer copied", tc.name, i, v)
			}
		}
	}
	// adjacent ranges of one buffer do not overlap: that copy runs
	err := g.Q.RunCommandBuffer(func(cb *mtl.CommandBuffer) error {
		blit, err := cb.BlitCommandEncoder()
		if err != nil {
			return err
		}
		objc.Send(blit.ID(), copySel, uintptr(src.ID()), 0, uintptr(src.ID()), 32, 32)
		return blit.EndEncoding()
	})
	if err != nil || sv[8] != 0 || sv[15] != 7 || sv[16] != 16 {
		t.Fatalf("copy of [0, 32) to [32, 64) of one buffer: %v, src[8], src[15], src[16] = %d, %d, %d, want 0, 7, 16", err, sv[8], sv[15], sv[16])
	}
}

// Buffers and pipelines of another emulated device, sent to this one's
// encoders directly (package mtl refuses them before sending), fail the
// command buffer with an error naming both devices; a function of another
// device's library makes no pipeline.
func TestOtherDeviceRefused(t *testing.T) {
	g, p, x, xv := newScaleGPU(t)
	other, err := emu.NewDevice()
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release()
	ob, err := other.NewBuffer(256, mtl.ResourceStorageModeShared)
	if err != nil {
		t.Fatal(err)
	}
	defer ob.Release()
	lib, err := other.NewLibraryWithSource(source(t, "vector_add.metal"), mtl.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer lib.Release()
	fn := testdevice.Function(t, lib, "scale", nil)
	defer fn.Release()
	op, err := other.NewComputePipelineState(fn)
	if err != nil {
		t.Fatal(err)
	}
	defer op.Release()
	if _, err := g.D.NewComputePipelineState(fn); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("registry ID %#x", other.RegistryID())) ||
		!strings.Contains(err.Error(), fmt.Sprintf("registry ID %#x", g.D.RegistryID())) {
		t.Errorf("pipeline of another device's function: %v, want an error naming both devices", err)
	}
	both := []string{fmt.Sprintf("registry ID %#x", other.RegistryID()), fmt.Sprintf("registry ID %#x", g.D.RegistryID())}
	setBuffer := objc.RegisterName("setBuffer:offset:atIndex:")
	setPipeline := objc.RegisterName("setComputePipelineState:")
	for _, tc := range []struct {
		name string
		send func(enc objc.ID)
		want string
	}{
		{"buffer", func(enc objc.ID) { objc.Send(enc, setBuffer, uintptr(ob.ID()), 0, 0) }, "buffer at index 0:"},
		{"pipeline", func(enc objc.ID) { objc.Send(enc, setPipeline, uintptr(op.ID())) }, "setComputePipelineState: pipeline"},
	} {
		for i := range xv {
			xv[i] = float32(i)
		}
		cb, enc := g.Encoder()
		setScale(enc, p, x, 2)
		tc.send(enc.ID())
		enc.DispatchThreads(size1(64), size1(64))
		if err := enc.EndEncoding(); err != nil {
			t.Fatal(err)
		}
		cb.Commit()
		cb.WaitUntilCompleted()
		t.Run(tc.name, func(t *testing.T) { failed(t, ended(t, cb), errorInternal, append([]string{tc.want}, both...)...) })
		cb.Release()
		for i, v := range xv {
			if v != float32(i) {
				t.Fatalf("%s: x[%d] = %v: the failed command buffer ran", tc.name, i, v)
			}
		}
	}
	copySel := objc.RegisterName("copyFromBuffer:sourceOffset:toBuffer:destinationOffset:size:")
	cb, err := g.Q.CommandBuffer()
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Release()
	blit, err := cb.BlitCommandEncoder()
	if err != nil {
		t.Fatal(err)
	}
	objc.Send(blit.ID(), copySel, uintptr(ob.ID()), 0, uintptr(x.ID()), 0, 64)
	if err := blit.EndEncoding(); err != nil {
		t.Fatal(err)
	}
	cb.Commit()
	cb.WaitUntilCompleted()
	failed(t, ended(t, cb), errorInternal, append([]string{"source buffer"}, both...)...)
}

// Arguments that Metal's validation refuses, sent to the emulated encoder
// directly (package mtl refuses them before sending), fail the command
// buffer, naming them, and the dispatch after them does not run.
func TestBadArgumentsFailCommandBuffer(t *testing.T) {
	g, p, x, xv := newScaleGPU(t)
	setBuffer := objc.RegisterName("setBuffer:offset:atIndex:")
	setBytes := objc.RegisterName("setBytes:length:atIndex:")
	setBuffers := objc.RegisterName("setBuffers:offsets:withRange:")
	dispatchThreads := objc.RegisterName("dispatchThreads:threadsPerThreadgroup:")
	endEncoding := objc.RegisterName("endEncoding")
	setThreadgroupMemoryLength := objc.RegisterName("setThreadgroupMemoryLength:atIndex:")
	big := make([]byte, 5000)
	ids, offsets := []uintptr{uintptr(x.ID()), uintptr(x.ID())}, []uintptr{0, 0}
	for _, tc := range []struct {
		name string
		send func(enc objc.ID)
		want string
	}{
		{"offset past the end", func(enc objc.ID) { objc.Send(enc, setBuffer, uintptr(x.ID()), 260, 0) }, "offset 260 at buffer index 0 outside the buffer's 256 bytes"},
		{"buffer index", func(enc objc.ID) { objc.Send(enc, setBuffer, uintptr(x.ID()), 0, 31) }, "buffer index 31 outside [0, 31)"},
		{"too many bytes", func(enc objc.ID) { objc.Send(enc, setBytes, uintptr(unsafe.Pointer(&big[0])), 5000, 1) }, "5000 bytes"},
		{"wrapping range", func(enc objc.ID) {
			objc.SendArgs(enc, setBuffers, objc.Word(uintptr(unsafe.Pointer(&ids[0]))), objc.Word(uintptr(unsafe.Pointer(&offsets[0]))),
				objc.Struct16(^uintptr(0), 2))
		}, "range {18446744073709551615, 2}"},
		{"threadgroup memory index", func(enc objc.ID) { objc.Send(enc, setThreadgroupMemoryLength, 16, 40) }, "threadgroup memory index 40"},
		{"threadgroup memory length", func(enc objc.ID) { objc.Send(enc, setThreadgroupMemoryLength, 20, 0) }, "multiple of 16"},
		{"after endEncoding", func(enc objc.ID) {
			objc.Send(enc, endEncoding)
			objc.Send(enc, setBuffer, uintptr(x.ID()), 0, 0)
			objc.Send(enc, endEncoding) // a second endEncoding is no error
		}, "after its endEncoding"},
		{"no pipeline", func(enc objc.ID) {
			objc.SendArgs(enc, dispatchThreads, objc.Struct24(64, 1, 1), objc.Struct24(64, 1, 1))
		}, "no compute pipeline state"},
	} {
		for i := range xv {
			xv[i] = float32(i)
		}
		cb, enc := g.Encoder()
		tc.send(enc.ID()) // first, before the pipeline is set
		setScale(enc, p, x, 2)
		enc.DispatchThreads(size1(64), size1(64))
		if err := enc.EndEncoding(); err != nil {
			t.Fatal(err)
		}
		cb.Commit()
		cb.WaitUntilCompleted()
		t.Run(tc.name, func(t *testing.T) { failed(t, ended(t, cb), errorInternal, tc.want) })
		cb.Release()
		for i, v := range xv {
			if v != float32(i) {
				t.Fatalf("%s: x[%d] = %v: the failed command buffer ran", tc.name, i, v)
			}
		}
	}
}
