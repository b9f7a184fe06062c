package emu_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/mtl"
)

// Tree reductions with barriers, in threadgroup memory declared in the
// kernel and in threadgroup memory set by the encoder, in every scheduling
// order; the sums are compared bit for bit with the same tree in Go.
func TestThreadgroupReduction(t *testing.T) {
	const tg, groups = 256, 12
	for _, o := range orders {
		t.Run(o.Order.String(), func(t *testing.T) {
			g := newGPU(t, o)
			p := g.pipeline("reduce.metal", "reduce")
			in, iv := buffer[float32](g, tg*groups)
			sums, sv := buffer[float32](g, groups)
			maxes, mv := buffer[float32](g, groups)
			r := rand.New(rand.NewPCG(3, uint64(o.Order)))
			for i := range iv {
				iv[i] = float32(r.NormFloat64())
			}
			poison(sv)
			poison(mv)
			err := g.run(func(enc *mtl.ComputeCommandEncoder) {
				enc.SetComputePipelineState(p)
				enc.SetBuffers([]*mtl.Buffer{in, sums, maxes}, []int{0, 0, 0}, 0)
				enc.SetThreadgroupMemoryLength(tg*4, 0)
				enc.DispatchThreadgroups(size1(groups), size1(tg))
			})
			completed(t, err)
			for k := range groups {
				sum, mx := tree(iv[k*tg : (k+1)*tg])
				if math.Float32bits(sv[k]) != math.Float32bits(sum) || mv[k] != mx {
					t.Fatalf("threadgroup %d: sum %v max %v, want %v and %v", k, sv[k], mv[k], sum, mx)
				}
			}
		})
	}
}

// tree returns the sum and the maximum of x by reduce.metal's tree.
func tree(x []float32) (sum, max float32) {
	p := append([]float32(nil), x...)
	m := append([]float32(nil), x...)
	for stride := len(p) / 2; stride > 0; stride /= 2 {
		for i := range stride {
			p[i] += p[i+stride]
			m[i] = float32(math.Max(float64(m[i]), float64(m[i+stride])))
		}
	}
	return p[0], m[0]
}

// Threadgroup memory that the kernel needs and the encoder does not set is
// a fault of the command buffer, naming the argument, not a crash.
func TestThreadgroupMemoryLengthMissing(t *testing.T) {
	g := newGPU(t, emu.Options{})
	p := g.pipeline("reduce.metal", "reduce")
	in, _ := buffer[float32](g, 256)
	out, ov := buffer[float32](g, 1)
	poison(ov)
	err := g.run(func(enc *mtl.ComputeCommandEncoder) {
		enc.SetComputePipelineState(p)
		enc.SetBuffers([]*mtl.Buffer{in, out, out}, []int{0, 0, 0}, 0)
		enc.DispatchThreadgroups(size1(1), size1(256))
	})
	failed(t, err, errorInternal, "reduce", "threadgroup(0) (parameter scratch) has no threadgroup memory length")
	if ov[0] == ov[0] {
		t.Errorf("the refused dispatch wrote %v", ov[0])
	}
}

// Without a barrier between writing threadgroup memory and reading a
// neighbour's slot, every scheduling order fails the command buffer with a
// race naming both accesses, and nothing past the race is written.
func TestMissingBarrierCaught(t *testing.T) {
	const tg, n = 64, 64 * 4
	for _, o := range orders {
		g := newGPU(t, o)
		p := g.pipeline("barriers.metal", "shift")
		in, _ := buffer[float32](g, n)
		out, _ := buffer[float32](g, n)
		cb := g.run(func(enc *mtl.ComputeCommandEncoder) {
			enc.SetComputePipelineState(p)
			enc.SetBuffers([]*mtl.Buffer{in, out}, []int{0, 0}, 0)
			enc.DispatchThreads(size1(n), size1(tg))
		})
		failed(t, cb, errorInternal, "kernel shift at program_source:1", "threadgroup memory race", "with no barrier between them; the other access is at program_source:1")
	}
}

// A barrier that half the threadgroup cannot reach, having returned, stops
// the command buffer with an error naming the kernel and the line.
func TestBarrierAfterEarlyReturn(t *testing.T) {
	for _, o := range orders[:2] {
		g := newGPU(t, o)
		p := g.pipeline("barriers.metal", "early")
		out, ov := buffer[float32](g, 32)
		poison(ov)
		err := g.run(func(enc *mtl.ComputeCommandEncoder) {
			enc.SetComputePipelineState(p)
			enc.SetBuffer(out, 0, 0)
			enc.DispatchThreadgroups(size1(1), size1(32))
		})
		failed(t, err, errorInternal, "kernel early at program_source:25", "early return")
		for i, v := range ov {
			if v == v {
				t.Errorf("%v: out[%d] = %v was written past the faulting barrier", o.Order, i, v)
			}
		}
	}
}
