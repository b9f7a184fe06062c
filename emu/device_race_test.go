package emu_test

import (
	"os"
	"testing"

	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/mtl"
)

// With Options.DeviceRaces, 1,024 threads adding to one float without
// atomics fail the command buffer with a device memory race, in every
// order, whether the threads share a threadgroup or not; without it they
// run one at a time and lose no update.
func TestDeviceRaceCaught(t *testing.T) {
	for _, o := range orders {
		for _, c := range []struct {
			tg   int
			want string
		}{{1024, "device memory race: "}, {1, "device memory race between threadgroups: "}} {
			o := o
			o.DeviceRaces = true
			g := newGPU(t, o)
			p := g.pipeline("barriers.metal", "count_racy")
			total, _ := buffer[float32](g, 1)
			err := g.run(func(enc *mtl.ComputeCommandEncoder) {
				enc.SetComputePipelineState(p)
				enc.SetBuffer(total, 0, 0)
				enc.DispatchThreads(size1(1024), size1(c.tg))
			})
			failed(t, err, errorInternal, "kernel count_racy at program_source:31", c.want, "offset 0 of buffer(0)", "the other access is at program_source:31")
		}
	}
	if os.Getenv("PUREMETAL_EMU_RACES") == "1" {
		return // every device detects races
	}
	g := newGPU(t, emu.Options{})
	p := g.pipeline("barriers.metal", "count_racy")
	total, tv := buffer[float32](g, 1)
	tv[0] = 0
	completed(t, g.run(func(enc *mtl.ComputeCommandEncoder) {
		enc.SetComputePipelineState(p)
		enc.SetBuffer(total, 0, 0)
		enc.DispatchThreads(size1(1024), size1(64))
	}))
	if tv[0] != 1024 {
		t.Errorf("total = %v without DeviceRaces, want 1024 (threads run one at a time)", tv[0])
	}
}
