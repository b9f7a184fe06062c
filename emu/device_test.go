package emu_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/mtl"
)

func TestDeviceProperties(t *testing.T) {
	g := newGPU(t, emu.Options{})
	if !strings.Contains(g.D.Name(), "emulated") {
		t.Errorf("device name %q does not say it is emulated", g.D.Name())
	}
	if got := g.D.MaxThreadsPerThreadgroup(); got != (mtl.Size{Width: 1024, Height: 1024, Depth: 1024}) {
		t.Errorf("MaxThreadsPerThreadgroup = %v", got)
	}
	if !g.D.HasUnifiedMemory() {
		t.Errorf("HasUnifiedMemory = false")
	}
	p := g.pipeline("vector_add.metal", "vector_add")
	if p.ThreadExecutionWidth() != 32 || p.MaxTotalThreadsPerThreadgroup() != 1024 {
		t.Errorf("pipeline width %d, max threads %d; want 32 and 1024", p.ThreadExecutionWidth(), p.MaxTotalThreadsPerThreadgroup())
	}
}

// A grid that is not a multiple of the threadgroup size, in every
// scheduling order, with buffers of each kind the device makes.
func TestVectorAdd(t *testing.T) {
	const n = 1000
	for _, o := range orders {
		t.Run(o.Order.String(), func(t *testing.T) {
			g := newGPU(t, o)
			p := g.pipeline("vector_add.metal", "vector_add")
			r := rand.New(rand.NewPCG(1, 2))
			a, av := buffer[float32](g, n)
			bb, err := g.D.NewBufferNoCopy(4*n, mtl.ResourceStorageModeShared)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(bb.Release)
			bv := mtl.Slice[float32](bb)[:n]
			for i := range n {
				av[i], bv[i] = r.Float32()*2-1, r.Float32()*2-1
			}
			out, err := g.D.NewBufferWithBytes(make([]byte, 4*(n+24)), mtl.ResourceStorageModeShared)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(out.Release)
			ov := mtl.Slice[float32](out)
			poison(ov)
			secs, err := g.Q.RunTimed(func(enc *mtl.ComputeCommandEncoder) error {
				enc.SetComputePipelineState(p)
				enc.SetBuffers([]*mtl.Buffer{a, bb}, []int{0, 0}, 0)
				enc.SetBuffer(out, 4*24, 2) // an offset: out[24:] is the result
				enc.SetBytes(u32Bytes(n), 3)
				enc.DispatchThreads(size1(n+30), size1(256)) // threads past n do nothing
				return nil
			})
			completed(t, err)
			if !(secs > 0) {
				t.Errorf("GPU time %v s, want the positive time the dispatch took", secs)
			}
			for i := range 24 {
				if ov[i] == ov[i] { // not NaN
					t.Fatalf("out[%d], before the bound offset, was written: %v", i, ov[i])
				}
			}
			for i := range n {
				if got, want := ov[24+i], av[i]+bv[i]; got != want {
					t.Fatalf("out[%d] = %v, want %v", i, got, want)
				}
			}
		})
	}
}

// The counters of each dispatch of a command buffer, in order; a memory
// barrier between them is not a dispatch.
func TestDispatchCounters(t *testing.T) {
	g := newGPU(t, emu.Options{})
	add := g.pipeline("vector_add.metal", "vector_add")
	scale := g.pipeline("vector_add.metal", "scale")
	const n = 512
	a, av := buffer[float32](g, n)
	b, bv := buffer[float32](g, n)
	out, ov := buffer[float32](g, n)
	r := rand.New(rand.NewPCG(3, 4))
	for i := range n {
		av[i], bv[i] = r.Float32(), r.Float32()
	}
	poison(ov)
	cb, err := g.Q.CommandBuffer()
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Release()
	if _, err := emu.DispatchCounters(cb); err == nil || !strings.Contains(err.Error(), "not completed") {
		t.Errorf("counters of an uncommitted command buffer: %v, want an error", err)
	}
	enc, err := cb.ComputeCommandEncoder()
	if err != nil {
		t.Fatal(err)
	}
	enc.SetComputePipelineState(add)
	enc.SetBuffers([]*mtl.Buffer{a, b, out}, []int{0, 0, 0}, 0)
	enc.SetBytes(u32Bytes(n), 3)
	enc.DispatchThreadgroups(size1(n/64), size1(64))
	enc.MemoryBarrier(mtl.BarrierScopeBuffers)
	setScale(enc, scale, out, -3)
	enc.DispatchThreads(size1(n), size1(128))
	if err := enc.EndEncoding(); err != nil {
		t.Fatal(err)
	}
	if s := enc.Sends(); s != 10 {
		t.Errorf("encoding sent %d messages, want 10", s)
	}
	cb.Commit()
	cb.WaitUntilCompleted()
	completed(t, ended(t, cb))
	for i := range n {
		if got, want := ov[i], (av[i]+bv[i])*-3; got != want {
			t.Fatalf("out[%d] = %v, want %v", i, got, want)
		}
	}
	c, err := emu.DispatchCounters(cb)
	if err != nil {
		t.Fatal(err)
	}
	if len(c) != 2 {
		t.Fatalf("%d dispatch counters, want 2", len(c))
	}
	const bytes = 4 * n
	if c[0].Loaded[0] != bytes || c[0].Loaded[1] != bytes || c[0].Stored[2] != bytes || c[0].Loaded[2] != 0 || c[0].Stored[0] != 0 {
		t.Errorf("vector_add: loaded %v, stored %v", c[0].Loaded[:3], c[0].Stored[:3])
	}
	if c[1].Loaded[0] != bytes || c[1].Stored[0] != bytes || c[1].Loaded[1] != 4*n {
		t.Errorf("scale: loaded %v, stored %v", c[1].Loaded[:2], c[1].Stored[:2])
	}
}

// LiveObjects counts each emulated object while it lives, and every
// Release brings the count back.
func TestLiveObjectsBackToZero(t *testing.T) {
	before := emu.LiveObjects()
	g := newGPU(t, emu.Options{}) // a device and a queue
	if got := emu.LiveObjects() - before; got != 2 {
		t.Errorf("%d live objects after making a device and a queue, want 2", got)
	}
	lib, err := g.D.NewLibraryWithSource(source(t, "vector_add.metal"), mtl.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fn, err := lib.NewFunction("scale")
	if err != nil {
		t.Fatal(err)
	}
	p, err := g.D.NewComputePipelineState(fn)
	if err != nil {
		t.Fatal(err)
	}
	x, err := g.D.NewBuffer(4*64, mtl.ResourceStorageModeShared)
	if err != nil {
		t.Fatal(err)
	}
	x2, err := g.D.NewBufferNoCopy(4*64, mtl.ResourceStorageModeShared)
	if err != nil {
		t.Fatal(err)
	}
	cb, enc := g.Encoder()
	if got := emu.LiveObjects() - before; got != 9 {
		t.Errorf("%d live objects with a library, function, pipeline, two buffers, command buffer and encoder, want 9", got)
	}
	setScale(enc, p, x, 2)
	enc.DispatchThreads(size1(64), size1(64))
	if err := enc.EndEncoding(); err != nil {
		t.Fatal(err)
	}
	cb.Commit()
	// released in an order that leaves the command buffer holding the
	// pipeline and the buffer it uses, as Metal's do
	for _, o := range []interface{ Release() }{fn, lib, p, x2} {
		o.Release()
		o.Release() // a second release does nothing
	}
	cb.WaitUntilCompleted()
	completed(t, ended(t, cb))
	x.Release()
	cb.Release()
	if got := emu.LiveObjects() - before; got != 2 {
		t.Errorf("%d live objects after releasing all but the device and the queue, want 2", got)
	}
}

// A committed command buffer runs to completion after the program has
// released it and the buffers it uses, as on Metal, where the queue keeps
// committed work alive.
func TestReleasedAfterCommit(t *testing.T) {
	g := newGPU(t, emu.Options{})
	p := g.pipeline("vector_add.metal", "scale")
	const n = 1 << 16
	keep, kv := buffer[float32](g, n)
	for round := 0; round < 8; round++ {
		x, err := g.D.NewBuffer(4*n, mtl.ResourceStorageModeShared)
		if err != nil {
			t.Fatal(err)
		}
		xv := mtl.Slice[float32](x)
		for i := range xv {
			xv[i] = float32(i)
		}
		cb, enc := g.Encoder()
		setScale(enc, p, x, 2)
		enc.DispatchThreads(size1(n), size1(256))
		if err := enc.EndEncoding(); err != nil {
			t.Fatal(err)
		}
		cb.Commit()
		cb.Release()
		x.Release()
	}
	// the queue runs command buffers in commit order: when this one is
	// done, so are the released ones
	for i := range kv {
		kv[i] = float32(i)
	}
	err := g.run(func(enc *mtl.ComputeCommandEncoder) {
		setScale(enc, p, keep, 2)
		enc.DispatchThreads(size1(n), size1(256))
	})
	completed(t, err)
	for i := range kv {
		if kv[i] != float32(2*i) {
			t.Fatalf("keep[%d] = %v, want %v", i, kv[i], 2*i)
		}
	}
}

func TestAddressSpaceMismatchReported(t *testing.T) {
	g := newGPU(t, emu.Options{})
	log := g.compileError(source(t, "address_space.metal"))
	if !strings.Contains(log, "program_source:8:") || !strings.Contains(log, "threadgroup") {
		t.Errorf("log does not name program_source:8 and the threadgroup address space:\n%s", log)
	}
}

func TestSyntaxErrorReported(t *testing.T) {
	g := newGPU(t, emu.Options{})
	log := g.compileError(source(t, "syntax_error.metal"))
	if !strings.Contains(log, "program_source:9:") || !strings.Contains(log, "error") {
		t.Errorf("log does not name an error at program_source:9:\n%s", log)
	}
}

func TestOptionsChecked(t *testing.T) {
	testdevice.CheckReleased(t)
	d, err := emu.NewDeviceWithOptions(emu.Options{Order: 3})
	if err == nil {
		d.Release()
		t.Fatal("an unknown scheduling order made a device")
	}
	if !strings.Contains(err.Error(), "Options.Order 3") {
		t.Errorf("error %q does not name Options.Order and its value", err)
	}
}

// Committing a command buffer whose encoder was not ended fails it
// without running anything, instead of running part of the encoding.
func TestCommitWithOpenEncoder(t *testing.T) {
	g, p, x, xv := newScaleGPU(t)
	for i := range xv {
		xv[i] = float32(i)
	}
	cb, enc := g.Encoder()
	setScale(enc, p, x, 2)
	enc.DispatchThreads(size1(64), size1(64))
	cb.Commit()
	enc.DispatchThreads(size1(64), size1(64)) // recorded nowhere
	cb.WaitUntilCompleted()
	if err := enc.EndEncoding(); err != nil {
		t.Fatal(err)
	}
	failed(t, ended(t, cb), errorInternal, "encoder that was not ended")
	for i, v := range xv {
		if v != float32(i) {
			t.Fatalf("x[%d] = %v: the failed command buffer ran", i, v)
		}
	}
}
