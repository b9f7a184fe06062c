package testdevice

import (
	"errors"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/mtl"
)

// BindingKernels are the kernels the binding's tests run: fill writes
// v + i to x[i], add_into adds a[i] to b[i].
const BindingKernels = `
#include <metal_stdlib>
using namespace metal;

kernel void fill(device float *x [[buffer(0)]],
                 constant float &v [[buffer(1)]],
                 uint i [[thread_position_in_grid]]) {
    x[i] = v + float(i);
}

kernel void add_into(device const float *a [[buffer(0)]],
                     device float *b       [[buffer(1)]],
                     uint i [[thread_position_in_grid]]) {
    b[i] += a[i];
}
`

// EncodeFill returns an encode function, for CommandQueue.Run, that runs
// BindingKernels' fill pipeline over the first n floats of x: x[i] = 1 + i.
func EncodeFill(fill *mtl.ComputePipelineState, x *mtl.Buffer, n int) func(*mtl.ComputeCommandEncoder) error {
	return func(e *mtl.ComputeCommandEncoder) error {
		e.SetComputePipelineState(fill)
		e.SetBuffer(x, 0, 0)
		mtl.SetValue(e, float32(1), 1)
		e.DispatchThreads(mtl.Sz(n, 1, 1), mtl.Sz(32, 1, 1))
		return nil
	}
}

// EncodeFillIn encodes EncodeFill's dispatch on cb in a compute encoder of
// its own, which it ends.
func EncodeFillIn(cb *mtl.CommandBuffer, fill *mtl.ComputePipelineState, x *mtl.Buffer, n int) error {
	enc, err := cb.ComputeCommandEncoder()
	if err != nil {
		return err
	}
	if err := EncodeFill(fill, x, n)(enc); err != nil {
		return err
	}
	return enc.EndEncoding()
}

// DeviceSuite checks, on whichever device g has, what a program relies on
// the binding for: the device's properties, compiling (and a compile
// error's log), function constants, shared, managed, private and no-copy
// buffers, Run, RunTimed and RunCommandBuffer with compute and blit
// encoders in order, and that nothing is committed when an argument is
// refused. It asserts only what Apple documents for every Mac, so the
// same checks run on the emulated device and on the GPU.
func DeviceSuite(t *testing.T, g *GPU) {
	d, q := g.D, g.Q
	opts := mtl.CompileOptions{LanguageVersion: mtl.LanguageVersion3_1}
	fill, add := g.Pipeline(BindingKernels, opts, "fill"), g.Pipeline(BindingKernels, opts, "add_into")
	const n = 1000 // not a multiple of any SIMD-group width

	t.Run("properties", func(t *testing.T) {
		if d.Name() == "" || d.RegistryID() == 0 {
			t.Errorf("name %q, registry ID %d", d.Name(), d.RegistryID())
		}
		if m := d.MaxThreadsPerThreadgroup(); m.Width < 512 || m.Height < 512 || m.Depth < 64 {
			t.Errorf("maxThreadsPerThreadgroup %v, below every Mac GPU's", m)
		}
		if d.MaxBufferLength() < 256<<20 || d.RecommendedMaxWorkingSetSize() == 0 {
			t.Errorf("maxBufferLength %d, recommendedMaxWorkingSetSize %d", d.MaxBufferLength(), d.RecommendedMaxWorkingSetSize())
		}
		w, total := fill.ThreadExecutionWidth(), fill.MaxTotalThreadsPerThreadgroup()
		if w <= 0 || total < w || total > 1024 || total%w != 0 {
			t.Errorf("threadExecutionWidth %d, maxTotalThreadsPerThreadgroup %d", w, total)
		}
	})

	t.Run("compile error", func(t *testing.T) {
		lib, err := d.NewLibraryWithSource("kernel void k(device float *x [[buffer(0)]]) {\n  x[0] = undeclared;\n}\n", mtl.CompileOptions{})
		if err == nil {
			lib.Release()
			t.Fatal("a kernel using an undeclared name compiled")
		}
		var ce *mtl.CompileError
		if !errors.As(err, &ce) || !strings.Contains(ce.Log, "undeclared") {
			t.Errorf("%v: want a CompileError whose log names the identifier", err)
		}
	})

	t.Run("function constants", func(t *testing.T) {
		var values mtl.FunctionConstantValues
		if err := values.SetAtIndex(0, uint32(7)); err != nil {
			t.Fatal(err)
		}
		p := SpecializedPipeline(t, d, `#include <metal_stdlib>
using namespace metal;
constant uint factor [[function_constant(0)]];
kernel void scaled(device uint *x [[buffer(0)]], uint i [[thread_position_in_grid]]) { x[i] = i * factor; }
`, mtl.CompileOptions{LanguageVersion: mtl.LanguageVersion3_1}, "scaled", &values)
		defer p.Release()
		x := g.Buffer(4*64, mtl.ResourceStorageModeShared)
		err := q.Run(func(e *mtl.ComputeCommandEncoder) error {
			e.SetComputePipelineState(p)
			e.SetBuffer(x, 0, 0)
			e.DispatchThreads(mtl.Sz(64, 1, 1), mtl.Sz(32, 1, 1))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range mtl.Slice[uint32](x) {
			if v != uint32(7*i) {
				t.Fatalf("x[%d] = %d, want %d", i, v, 7*i)
			}
		}
	})

	// check fails the test unless x holds want(i) at every i < n.
	check := func(t *testing.T, what string, x []float32, want func(i int) float32) {
		t.Helper()
		for i := range n {
			if x[i] != want(i) {
				t.Fatalf("%s[%d] = %v, want %v", what, i, x[i], want(i))
			}
		}
	}
	filled := func(i int) float32 { return 1 + float32(i) }

	t.Run("Run and RunTimed", func(t *testing.T) {
		x := g.Buffer(4*n, mtl.ResourceStorageModeShared)
		if err := q.Run(EncodeFill(fill, x, n)); err != nil {
			t.Fatal(err)
		}
		check(t, "x", mtl.Slice[float32](x), filled)
		clear(x.Contents())
		secs, err := q.RunTimed(EncodeFill(fill, x, n))
		if err != nil || !(secs >= 0 && secs < 10) {
			t.Fatalf("RunTimed: %v s, %v", secs, err)
		}
		check(t, "x after RunTimed", mtl.Slice[float32](x), filled)
	})

	t.Run("storage modes", func(t *testing.T) {
		// CPU writes to a shared and a managed buffer (DidModifyRange) reach
		// the kernel, which adds them into a private buffer; blits bring it
		// back, and SynchronizeResource a managed one's GPU writes.
		shared, managed := g.Buffer(4*n, mtl.ResourceStorageModeShared), g.Buffer(4*n, mtl.ResourceStorageModeManaged)
		private, back := g.Buffer(4*n, mtl.ResourceStorageModePrivate), g.Buffer(4*n, mtl.ResourceStorageModeManaged)
		nc, err := d.NewBufferNoCopy(4*n, mtl.ResourceStorageModeShared)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Release()
		for i := range n {
			mtl.Slice[float32](shared)[i] = float32(i)
			mtl.Slice[float32](managed)[i] = 0.5
			mtl.Slice[float32](nc)[i] = -1
		}
		if err := managed.DidModifyRange(0, 4*n); err != nil {
			t.Fatal(err)
		}
		err = q.RunCommandBuffer(func(cb *mtl.CommandBuffer) error {
			blit, err := cb.BlitCommandEncoder()
			if err != nil {
				return err
			}
			blit.CopyFromBuffer(shared, 0, private, 0, 4*n)
			if err := blit.EndEncoding(); err != nil {
				return err
			}
			e, err := cb.ComputeCommandEncoder()
			if err != nil {
				return err
			}
			e.SetComputePipelineState(add)
			e.SetBuffers([]*mtl.Buffer{managed, private}, []int{0, 0}, 0) // private += managed
			e.DispatchThreads(mtl.Sz(n, 1, 1), mtl.Sz(64, 1, 1))
			e.SetBuffers([]*mtl.Buffer{private, nc}, []int{0, 0}, 0) // nc += private
			e.DispatchThreads(mtl.Sz(n, 1, 1), mtl.Sz(64, 1, 1))
			if err := e.EndEncoding(); err != nil {
				return err
			}
			if blit, err = cb.BlitCommandEncoder(); err != nil {
				return err
			}
			blit.CopyFromBuffer(private, 0, back, 0, 4*n)
			blit.SynchronizeResource(back)
			return blit.EndEncoding()
		})
		if err != nil {
			t.Fatal(err)
		}
		check(t, "back (managed, synchronized)", mtl.Slice[float32](back), func(i int) float32 { return float32(i) + 0.5 })
		check(t, "no-copy", mtl.Slice[float32](nc), func(i int) float32 { return float32(i) - 0.5 })
	})

	t.Run("refused arguments commit nothing", func(t *testing.T) {
		x := g.Buffer(4*n, mtl.ResourceStorageModeShared)
		clear(x.Contents())
		for _, encode := range []func(cb *mtl.CommandBuffer) error{
			func(cb *mtl.CommandBuffer) error {
				e, err := cb.ComputeCommandEncoder()
				if err != nil {
					return err
				}
				_ = EncodeFill(fill, x, n)(e)
				e.SetBuffer(x, 4*n+4, 2) // past the end
				return e.EndEncoding()
			},
			func(cb *mtl.CommandBuffer) error {
				e, err := cb.ComputeCommandEncoder()
				if err != nil {
					return err
				}
				return EncodeFill(fill, x, n)(e) // left open
			},
		} {
			if err := q.RunCommandBuffer(encode); err == nil {
				t.Error("RunCommandBuffer returned nil")
			}
			check(t, "x", mtl.Slice[float32](x), func(int) float32 { return 0 })
		}
		err := q.Run(func(e *mtl.ComputeCommandEncoder) error {
			e.SetBuffer(x, 4*n+4, 2)
			return nil
		})
		if !errors.Is(err, mtl.ErrInvalidArgument) || !strings.Contains(err.Error(), "offset 4004 at index 2") {
			t.Errorf("a buffer offset past the end: %v, want an error wrapping mtl.ErrInvalidArgument naming it", err)
		}
	})

	t.Run("buffers from slices and values", func(t *testing.T) {
		type pair struct {
			A int32
			B float32
		}
		src := []pair{{1, 0.5}, {-2, 2.5}, {3, -1}}
		b, err := mtl.NewBufferFromSlice(d, src, mtl.ResourceStorageModeShared)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Release()
		if got := mtl.Slice[pair](b); b.Length() != 24 || len(got) != 3 || got[1] != src[1] {
			t.Errorf("buffer of %d bytes holds %v, want %v", b.Length(), got, src)
		}
		x := g.Buffer(4*n, mtl.ResourceStorageModeShared)
		err = q.Run(func(e *mtl.ComputeCommandEncoder) error {
			e.SetComputePipelineState(fill)
			e.SetBuffer(x, 0, 0)
			mtl.SetValue(e, float32(-3), 1)
			e.DispatchThreads(mtl.Sz(n, 1, 1), mtl.Sz(32, 1, 1))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		check(t, "x", mtl.Slice[float32](x), func(i int) float32 { return float32(i) - 3 })
	})

	t.Run("released objects", func(t *testing.T) {
		b, err := d.NewBuffer(16, mtl.ResourceStorageModeManaged)
		if err != nil {
			t.Fatal(err)
		}
		b.Release()
		if err := b.DidModifyRange(0, 4); !errors.Is(err, mtl.ErrReleased) || !strings.Contains(err.Error(), "the buffer was released") {
			t.Errorf("DidModifyRange on a released buffer: %v", err)
		}
		err = q.Run(func(e *mtl.ComputeCommandEncoder) error {
			e.SetComputePipelineState(fill)
			e.SetBuffer(b, 0, 0)
			return nil
		})
		if !errors.Is(err, mtl.ErrReleased) || !errors.Is(err, mtl.ErrInvalidArgument) {
			t.Errorf("a released buffer bound: %v", err)
		}
	})
}
