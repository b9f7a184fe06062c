package emu_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/emu/msl"
	"github.com/puremetal/puremetal/mtl"
)

// A PUREMETAL_EMU_WORKERS or PUREMETAL_EMU_TIMEOUT that holds no valid
// value is reported by NewDevice, naming it, not by the first dispatch.
func TestNewDeviceBadEnvironment(t *testing.T) {
	if err := msl.Supported(); err != nil {
		t.Skip(err) // NewDevice refuses the platform before it reads the environment
	}
	for _, c := range []struct{ name, value, want string }{
		{"PUREMETAL_EMU_WORKERS", "many", `PUREMETAL_EMU_WORKERS="many" is not a number of workers`},
		{"PUREMETAL_EMU_WORKERS", "65", `PUREMETAL_EMU_WORKERS="65"`},
		{"PUREMETAL_EMU_TIMEOUT", "90", `PUREMETAL_EMU_TIMEOUT="90" is not a time limit`},
	} {
		t.Run(c.name+"="+c.value, func(t *testing.T) {
			t.Setenv(c.name, c.value)
			d, err := emu.NewDevice()
			if d != nil {
				d.Release()
			}
			if !errors.Is(err, emu.ErrEnvironment) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("NewDevice with %s=%q: %v; want an error wrapping emu.ErrEnvironment saying %s", c.name, c.value, err, c.want)
			}
		})
	}
}

// A value bound with setBytes to a reference parameter must be exactly
// the parameter's size: SetValue(enc, 2.0, 1) binds a float64 where the
// kernel reads a float (which would be 0, the low half of 2.0's bits),
// and an untyped integer binds an int where it reads a uint. The command
// buffer fails naming the parameter and both sizes; nothing runs.
func TestSetBytesSizeOfReferenceParameter(t *testing.T) {
	g := newGPU(t, emu.Options{})
	p := g.pipeline("vector_add.metal", "scale")
	const n = 32
	x, xv := buffer[float32](g, n)
	for _, c := range []struct {
		name  string
		bytes []byte
		want  string
	}{
		{"float32", []byte{0, 0, 0, 0x40}, ""},
		{"float64", []byte{0, 0, 0, 0, 0, 0, 0, 0x40}, "8 bytes bound with setBytes at index 1, but parameter s of scale is a reference to 4 bytes"},
		{"two bytes", []byte{0, 0x40}, "2 bytes bound with setBytes at index 1, but parameter s of scale is a reference to 4 bytes"},
	} {
		for i := range xv {
			xv[i] = 1
		}
		err := g.Q.Run(func(enc *mtl.ComputeCommandEncoder) error {
			enc.SetComputePipelineState(p)
			enc.SetBuffer(x, 0, 0)
			enc.SetBytes(c.bytes, 1)
			enc.DispatchThreads(size1(n), size1(n))
			return nil
		})
		if c.want == "" {
			if err != nil || xv[0] != 2 {
				t.Errorf("%s: %v, x[0] = %v; want 2", c.name, err, xv[0])
			}
			continue
		}
		var cbe *mtl.CommandBufferError
		if !errors.As(err, &cbe) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want a command buffer error saying %q", c.name, err, c.want)
		}
		if xv[0] != 1 {
			t.Errorf("%s: the dispatch ran: x[0] = %v", c.name, xv[0])
		}
	}
}
