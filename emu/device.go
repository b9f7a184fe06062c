package emu

import (
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/puremetal/puremetal/emu/msl"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/objc"
)

// Options configure an emulated device.
type Options struct {
	// Order is the order in which threadgroups, and the threads of a
	// threadgroup, are scheduled. Running a kernel in other orders makes
	// races that depend on the schedule show: a race on threadgroup memory
	// is reported as a fault in any order, but one on device memory gives
	// different results.
	Order msl.Order
	// Seed seeds the shuffled order.
	Seed uint64
	// Timeout is the longest a dispatch may run before its command buffer
	// fails with MTLCommandBufferErrorTimeout, as a GPU stops a command
	// buffer that runs too long. 0 means msl.DefaultTimeout (or the
	// duration in PUREMETAL_EMU_TIMEOUT); negative means no limit.
	Timeout time.Duration
	// CountSegments makes every dispatch count the device-memory segments
	// its SIMD-group accesses touch (msl.Counters.Loads and Stores, read
	// with DispatchCounters), which slows dispatches down.
	CountSegments bool
	// DeviceRaces makes every dispatch report races on device memory
	// (msl.Dispatch.DeviceRaces): conflicting accesses to the same bytes
	// by threads of a dispatch that nothing orders, within a threadgroup
	// or between threadgroups, fail the command buffer with
	// MTLCommandBufferErrorInternal, as a race on threadgroup memory
	// does. It slows dispatches down; PUREMETAL_EMU_RACES=1 turns it on
	// for every device.
	DeviceRaces bool
}

// Name is the name the emulated device reports.
const Name = "puremetal emulated device (CPU)"

type device struct {
	opts     Options
	registry uint64
}

// String names the device in errors: its name and registry ID, which tell
// two emulated devices apart.
func (d *device) String() string {
	if d == nil {
		return "no device"
	}
	return fmt.Sprintf("%q (registry ID %#x)", Name, d.registry)
}

// otherDevice returns the error of an object of device of used with
// device want, or nil if they are the same.
func otherDevice(what string, id objc.ID, of, want *device) error {
	if of == want {
		return nil
	}
	return fmt.Errorf("%s %#x belongs to device %v, not to %v", what, uintptr(id), of, want)
}

var registryIDs atomic.Uint64

// ErrUnsupportedPlatform is the error of NewDevice on a system the
// emulated device does not run on: it runs on Linux (x86-64 and arm64).
// On macOS, the system's Metal device runs the same kernels.
var ErrUnsupportedPlatform = msl.ErrUnsupportedPlatform

// ErrEnvironment is wrapped by the error of NewDevice when
// PUREMETAL_EMU_WORKERS, PUREMETAL_EMU_TIMEOUT or PUREMETAL_EMU_RACES
// holds a value the
// dispatches could not use; the message names the variable and the
// values it takes.
var ErrEnvironment = msl.ErrEnvironment

// NewDevice returns an emulated Metal device with the default options, as
// an *mtl.Device owned by the caller.
func NewDevice() (*mtl.Device, error) { return NewDeviceWithOptions(Options{}) }

// NewDeviceWithOptions returns an emulated Metal device, as an *mtl.Device
// owned by the caller. It runs on Linux (x86-64 and arm64); elsewhere the
// error wraps [ErrUnsupportedPlatform]. A bad PUREMETAL_EMU_WORKERS,
// PUREMETAL_EMU_TIMEOUT or PUREMETAL_EMU_RACES is an error wrapping
// [ErrEnvironment].
func NewDeviceWithOptions(opts Options) (*mtl.Device, error) {
	switch opts.Order {
	case msl.Forward, msl.Reverse, msl.Shuffled:
	default:
		return nil, fmt.Errorf("emu: Options.Order %d is not msl.Forward, msl.Reverse or msl.Shuffled", int(opts.Order))
	}
	if err := msl.Supported(); err != nil {
		return nil, fmt.Errorf("emu: %w", err)
	}
	if err := msl.CheckEnvironment(); err != nil {
		return nil, fmt.Errorf("emu: %w", err)
	}
	if err := registerClasses(); err != nil {
		return nil, err
	}
	id := newObject(classes.device, &device{opts: opts, registry: 0x5000 + registryIDs.Add(1)})
	d, err := mtl.DeviceFromObject(id)
	id.Release() // d holds the only reference now
	return d, err
}

func deviceName(objc.ID, objc.SEL) objc.ID { return autoreleasedString(Name) }

func deviceRegistryID(self objc.ID, _ objc.SEL) uintptr {
	if d := stateOf[device](self); d != nil {
		return uintptr(d.registry)
	}
	return 0
}

const (
	maxThreadsPerThreadgroup = 1024
	maxBufferLength          = 1 << 33
)

// deviceMaxThreadsPerThreadgroup answers maxThreadsPerThreadgroup through
// csrc/imps.c.
func deviceMaxThreadsPerThreadgroup(_ objc.ID, _ objc.SEL, out uintptr) {
	*(*[3]uint64)(cptr(out)) = [3]uint64{maxThreadsPerThreadgroup, maxThreadsPerThreadgroup, maxThreadsPerThreadgroup}
}

func deviceHasUnifiedMemory(objc.ID, objc.SEL) uintptr { return 1 }

func deviceRecommendedMaxWorkingSetSize(objc.ID, objc.SEL) uintptr { return 16 << 30 }

func deviceMaxBufferLength(objc.ID, objc.SEL) uintptr { return maxBufferLength }

// deviceSupportsFamily answers for the families whose compute features the
// emulator runs: Apple7 to Apple9 and Metal3.
func deviceSupportsFamily(_ objc.ID, _ objc.SEL, family uintptr) uintptr {
	switch mtl.GPUFamily(family) {
	case mtl.GPUFamilyApple7, mtl.GPUFamilyApple8, mtl.GPUFamilyApple9, mtl.GPUFamilyMetal3:
		return 1
	}
	return 0
}

func deviceNewCommandQueue(self objc.ID, _ objc.SEL) objc.ID {
	d := stateOf[device](self)
	if d == nil {
		return 0
	}
	return newObject(classes.queue, newQueue(d))
}

func deviceNewBufferWithLengthOptions(self objc.ID, _ objc.SEL, length, opts uintptr) objc.ID {
	b, err := newBufferMemory(int(length), opts)
	if err != nil {
		return 0
	}
	b.dev = stateOf[device](self)
	return newObject(classes.buffer, b)
}

func deviceNewBufferWithBytesLengthOptions(self objc.ID, _ objc.SEL, bytes, length, opts uintptr) objc.ID {
	b, err := newBufferMemory(int(length), opts)
	if err != nil || bytes == 0 {
		if b != nil {
			b.free()
		}
		return 0
	}
	copy(b.bytes(), unsafe.Slice((*byte)(cptr(bytes)), int(length)))
	copy(b.cpu, b.bytes())
	b.dev = stateOf[device](self)
	return newObject(classes.buffer, b)
}

// deviceNewBufferWithBytesNoCopyLengthOptionsDeallocator keeps a copy of the deallocator block, as Metal
// does, and runs it when the buffer is deallocated.
func deviceNewBufferWithBytesNoCopyLengthOptionsDeallocator(self objc.ID, _ objc.SEL, bytes, length, opts uintptr, deallocator objc.Block) objc.ID {
	page := uintptr(os.Getpagesize())
	if bytes == 0 || bytes%page != 0 || length == 0 || length%page != 0 {
		return 0 // Metal requires page-aligned memory and length
	}
	return newObject(classes.buffer, &buffer{data: bytes, length: int(length), deallocator: deallocator.Copy(),
		private: storageMode(opts) == mtl.ResourceStorageModePrivate, dev: stateOf[device](self)})
}

// libraryErrorCompileFailure is MTLLibraryErrorCompileFailure, the code of a
// compilation failure in MTLLibraryErrorDomain.
const libraryErrorCompileFailure = 3

func deviceNewLibraryWithSourceOptionsError(self objc.ID, _ objc.SEL, source, options objc.ID, errOut uintptr) objc.ID {
	opts := msl.CompileOptions{FastMath: true}
	if options != 0 {
		// Read the options through their selectors, so that Apple's
		// MTLCompileOptions would do as well as the emulated one.
		if options.RespondsToSelector(fsel.mathMode) {
			opts.FastMath = mtl.MathMode(objc.SendWord(options, fsel.mathMode)) == mtl.MathModeFast
		} else {
			opts.FastMath = objc.SendBool(options, fsel.fastMathEnabled)
		}
		opts.LanguageVersion = uint32(objc.SendWord(options, fsel.languageVersion))
		if options.RespondsToSelector(fsel.preprocessorMacros) {
			opts.PreprocessorMacros = macrosOf(options.Send(fsel.preprocessorMacros))
		}
	}
	lib, err := msl.Compile(objc.GoString(source), opts)
	if err != nil {
		storeCompileError(errOut, err)
		return 0
	}
	if !lib.Cached() {
		libraryBuilds.Add(1)
	}
	return newObject(classes.library, &library{lib: lib, dev: stateOf[device](self)})
}

func deviceNewComputePipelineStateWithFunctionError(self objc.ID, _ objc.SEL, fn objc.ID, errOut uintptr) objc.ID {
	f := stateOf[function](fn)
	if f == nil {
		storeOut(errOut, newNSError("CompilerError", 1, "newComputePipelineStateWithFunction: the function is not one of the emulated device's"))
		return 0
	}
	if err := otherDevice("function", fn, f.dev, stateOf[device](self)); err != nil {
		storeOut(errOut, newNSError("CompilerError", 1, "newComputePipelineStateWithFunction: "+err.Error()))
		return 0
	}
	if need := unspecialized(f.fn); need != nil {
		storeOut(errOut, newNSError("CompilerError", 1, fmt.Sprintf("newComputePipelineStateWithFunction: function %s uses function constants without values: %s; create it with newFunctionWithName:constantValues:error:", f.fn.Name, strings.Join(need, ", "))))
		return 0
	}
	return newObject(classes.pipeline, &pipeline{fn: f.fn, dev: f.dev})
}
