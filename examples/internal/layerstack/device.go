package layerstack

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/emu/msl"
	"github.com/puremetal/puremetal/gdn"
	"github.com/puremetal/puremetal/kernels"
	"github.com/puremetal/puremetal/mtl"
)

// emulatorNeeds says what the emulated device needs and how to install it.
const emulatorNeeds = "the emulated device needs the GNU Objective-C runtime and clang; on Debian or Ubuntu: apt-get install libobjc4 libgnustep-base1.28 clang"

// Device is a Metal device with what the examples run on it: a registry of
// the kernels' pipeline states, the dispatchers and a command queue.
type Device struct {
	Dev      *mtl.Device
	Desc     string // what runs the kernels, for the report
	GPU      bool   // the command buffers' timestamps are a GPU's
	Registry *kernels.Registry
	Kernels  *gdn.Kernels
	Queue    *mtl.CommandQueue
	capture  *stepCapture // armed by CaptureEnv
}

// NewDevice makes the registry, dispatchers and command queue of dev. It
// takes ownership of dev: [Device.Close] releases it, as does a failed
// NewDevice.
func NewDevice(dev *mtl.Device, desc string, gpu bool) (*Device, error) {
	d := &Device{Dev: dev, Desc: desc, GPU: gpu, Registry: kernels.NewRegistry(), capture: &stepCapture{path: os.Getenv(CaptureEnv)}}
	if os.Getenv(kernels.CacheDirEnv) != "" {
		// The pipelines persist in a binary archive there, and a later
		// run makes them from it.
		d.Registry = kernels.NewRegistryWithCache("", nil)
	}
	var err error
	if d.Kernels, err = gdn.New(dev, d.Registry); err == nil {
		d.Queue, err = dev.NewCommandQueue()
	}
	if err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// Compile builds the pipeline states of the named kernels now, as an
// engine does when it loads a model, so that the first step's latency is a
// step's; it returns how long that took (compiled, or taken from a cache).
// It says on w, before it starts, what it compiles and where the compiled
// kernels are cached.
func (d *Device) Compile(w io.Writer, entries ...string) (time.Duration, error) {
	if d.GPU {
		fmt.Fprintf(w, "compiling %s (Metal compiles the kernels from source when a program starts)\n", strings.Join(entries, " and "))
	} else {
		fmt.Fprintf(w, "compiling %s for the emulated device (several seconds the first time; cached in %s)\n", strings.Join(entries, " and "), msl.DefaultCacheDir())
	}
	start := time.Now()
	for _, e := range entries {
		if _, err := d.Registry.Pipeline(d.Dev, e); err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}

// A Dispatcher encodes one dispatch with a dispatcher of gdn.Kernels,
// which picks the kernel: the method expressions (*gdn.Kernels).Prefill,
// (*gdn.Kernels).Decode and (*gdn.Kernels).DecodeWithCapture.
type Dispatcher func(k *gdn.Kernels, enc *mtl.ComputeCommandEncoder, p gdn.Params, b gdn.Buffers) error

// RunLayers runs one command buffer carrying one dispatch of p per layer,
// layer l's on the views bufs(l), commits it and waits for it, as an
// engine runs a step through its layers. It returns the wall clock from
// the start of encoding to the end of the wait and, on a GPU, the
// command buffer's GPU time (0 elsewhere). An error names the layer whose
// dispatch was refused.
func (d *Device) RunLayers(dispatch Dispatcher, p gdn.Params, layers int, bufs func(l int) gdn.Buffers) (wall, gpu time.Duration, err error) {
	start := time.Now()
	var seconds float64
	err = d.capture.around(d.Queue, p, func() (err error) {
		seconds, err = d.Queue.RunTimed(func(enc *mtl.ComputeCommandEncoder) error {
			for l := range layers {
				if err := dispatch(d.Kernels, enc, p, bufs(l)); err != nil {
					return fmt.Errorf("layer %d: %w", l, err)
				}
			}
			return nil
		})
		return err
	})
	wall = time.Since(start)
	if err != nil {
		return 0, 0, err
	}
	if d.GPU {
		gpu = time.Duration(seconds * 1e9)
	}
	return wall, gpu, nil
}

// Close releases the queue, the dispatchers, the registry and the device.
func (d *Device) Close() {
	if d.Queue != nil {
		d.Queue.Release()
	}
	d.Kernels.Release()
	d.Registry.Release()
	d.Dev.Release()
}

// openMetal returns the system's Metal device and a description of it. The
// error wraps mtl.ErrNoDevice where there is no Metal.
func openMetal() (*mtl.Device, string, error) {
	dev, err := mtl.CreateSystemDefaultDevice()
	if err != nil {
		return nil, "", err
	}
	return dev, "metal: " + dev.Name() + " (GPU)", nil
}

// openEmulated returns the emulated Metal device of package emu, which runs
// the real kernels on the CPU, and a description of it.
func openEmulated() (*mtl.Device, string, error) {
	dev, err := emu.NewDevice()
	if err != nil {
		return nil, "", err
	}
	return dev, "emu: " + dev.Name() + ", the real kernels run on the CPU", nil
}

// Fallback is the CPU backend of an example that has one: what "auto"
// becomes where neither Metal nor the emulated device runs, and what the
// example says when it does. The zero Fallback means the example has none.
type Fallback struct {
	Backend string // the example's own backend, such as "cpu"; empty for none
	Says    string
}

// Smaller is a smaller default the emulated device takes for flags the
// command line left unset: the emulator runs a kernel about a hundred
// times slower than a GPU.
type Smaller struct {
	Flags []string // it applies when none of these was given
	Apply func()   // sets the smaller values
	Says  string   // the smaller values, "4 layers"
	Full  string   // the defaults it replaces, as flags: "-layers 32"
}

// Open opens the backend the flags name, as [OpenDevice] does, and sets
// f.Backend to the one it opened ("auto" resolved). Both devices need a D_k
// the decode kernels take. On the emulated device the smaller defaults
// apply, 2 key heads and 4 value heads unless a shape flag was given, then
// each of more, announced on w. The Device is nil for a backend other than
// metal and emu, which is the caller's.
func (f *Flags) Open(w io.Writer, cpu Fallback, more ...Smaller) (*Device, error) {
	if f.Backend == "auto" || f.Backend == "metal" || f.Backend == "emu" {
		if err := f.CheckDecodeDK(); err != nil {
			return nil, err
		}
	}
	d, backend, err := OpenDevice(w, f.Backend, cpu)
	if err != nil {
		return nil, err
	}
	f.Backend = backend
	if d != nil && !d.GPU {
		f.emulatorDefaults(w, more)
	}
	return d, nil
}

// OpenDevice opens backend: "metal", the system's GPU; "emu", the
// emulated device; "auto", the first of these that runs here: Metal, the
// emulated device, then cpu.Backend (when the example has one), each step
// down announced on w with the reason. It returns the Device and the
// backend it opened ("auto" resolved); the Device is nil for a backend
// other than metal and emu, which is the caller's.
func OpenDevice(w io.Writer, backend string, cpu Fallback) (*Device, string, error) {
	auto := backend == "auto"
	var metalErr error
	if auto || backend == "metal" {
		dev, desc, err := openMetal()
		switch {
		case err == nil:
			d, err := NewDevice(dev, desc, true)
			return d, "metal", err
		case !auto || !errors.Is(err, mtl.ErrNoDevice):
			return nil, backend, fmt.Errorf("-backend %s: %w", backend, err)
		}
		metalErr = err
		fmt.Fprintf(w, "no Metal on %s/%s: trying the emulated device, which runs the real kernels on the CPU\n", runtime.GOOS, runtime.GOARCH)
		backend = "emu"
	}
	if backend != "emu" {
		return nil, backend, nil
	}
	dev, desc, err := openEmulated()
	switch {
	case err != nil && auto && cpu.Backend != "":
		fmt.Fprintf(w, "no emulated device either (%v): %s\n", err, cpu.Says)
		return nil, cpu.Backend, nil
	case err != nil && metalErr != nil:
		return nil, backend, fmt.Errorf("neither Metal nor the emulated device is available:\n  Metal: %v\n  emulated device: %v\n%s", metalErr, err, emulatorNeeds)
	case err != nil:
		return nil, backend, fmt.Errorf("-backend emu: %w\n%s", err, emulatorNeeds)
	}
	d, err := NewDevice(dev, desc, false)
	return d, "emu", err
}

// emulatorDefaults applies the smaller defaults of the emulated device and
// says which on w.
func (f *Flags) emulatorDefaults(w io.Writer, more []Smaller) {
	shape := Smaller{Flags: shapeFlags, Apply: func() { f.NK, f.NV = 2, 4 }, Says: "2 key heads, 4 value heads", Full: "-kheads 16 -vheads 32"}
	var says, full []string
	for _, s := range append([]Smaller{shape}, more...) {
		if !f.Given(s.Flags...) {
			s.Apply()
			says, full = append(says, s.Says), append(full, s.Full)
		}
	}
	if len(says) > 0 {
		fmt.Fprintf(w, "emu: the emulated device runs the kernels on the CPU, so this run uses smaller defaults: %s (Qwen3.5's: %s)\n",
			strings.Join(says, ", "), strings.Join(full, " "))
	}
}
