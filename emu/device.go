package emu

import (
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"github.com/puremetal/puremetal/emu/msl"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/objc"
	"golang.org/x/sys/unix"
)

// Options configure an emulated device.
type Options struct {
	// Order is the order in which threadgroups, and the threads of a
	// threadgroup, are scheduled. Running a kernel in two orders exposes
	// races: a missing barrier gives different results.
	Order msl.Order
	// Seed seeds the shuffled order.
	Seed uint64
	// CountSegments makes every dispatch count the device-memory segments
	// its SIMD-group accesses touch (msl.Counters.Loads and Stores, read
	// with DispatchCounters), which slows dispatches down.
	CountSegments bool
}

// Name is the name the emulated device reports.
const Name = "puremetal emulated device (CPU)"

type device struct {
	opts     Options
	registry uint64
}

var registryIDs atomic.Uint64

// NewDevice returns an emulated Metal device with the default options, as
// an *mtl.Device owned by the caller.
func NewDevice() (*mtl.Device, error) { return NewDeviceWithOptions(Options{}) }

// NewDeviceWithOptions returns an emulated Metal device, as an *mtl.Device
// owned by the caller.
func NewDeviceWithOptions(opts Options) (*mtl.Device, error) {
	switch opts.Order {
	case msl.Forward, msl.Reverse, msl.Shuffled:
	default:
		return nil, fmt.Errorf("emu: Options.Order %d is not msl.Forward, msl.Reverse or msl.Shuffled", int(opts.Order))
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

func deviceWorkingSet(objc.ID, objc.SEL) uintptr      { return 16 << 30 }
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

// buffer is an MTLBuffer's state. Its memory is mapped with a guard page on
// each side (none for no-copy buffers, whose memory is the caller's).
type buffer struct {
	labeled
	mapping  []byte // the whole mapping, guard pages included; nil for no-copy
	data     uintptr
	length   int
	private  bool
	modified int // didModifyRange: calls
}

func (b *buffer) free() {
	if b.mapping != nil {
		unix.Munmap(b.mapping)
		b.mapping = nil
	}
}

func newBufferMemory(length int, opts uintptr) (*buffer, error) {
	if length <= 0 || length > maxBufferLength {
		return nil, fmt.Errorf("buffer length %d outside (0, %d]", length, maxBufferLength)
	}
	page := os.Getpagesize()
	n := (length + page - 1) / page * page
	mem, err := unix.Mmap(-1, 0, n+2*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, err
	}
	unix.Mprotect(mem[:page], unix.PROT_NONE)
	unix.Mprotect(mem[page+n:], unix.PROT_NONE)
	return &buffer{
		mapping: mem,
		data:    uintptr(unsafe.Pointer(&mem[page])),
		length:  length,
		private: mtl.ResourceOptions(opts)&0xf0 == mtl.ResourceStorageModePrivate,
	}, nil
}

func deviceNewBuffer(_ objc.ID, _ objc.SEL, length, opts uintptr) objc.ID {
	b, err := newBufferMemory(int(length), opts)
	if err != nil {
		return 0
	}
	return newObject(classes.buffer, b)
}

func deviceNewBufferWithBytes(_ objc.ID, _ objc.SEL, bytes, length, opts uintptr) objc.ID {
	b, err := newBufferMemory(int(length), opts)
	if err != nil || bytes == 0 {
		if b != nil {
			b.free()
		}
		return 0
	}
	copy(b.bytes(), unsafe.Slice((*byte)(cptr(bytes)), int(length)))
	return newObject(classes.buffer, b)
}

func deviceNewBufferNoCopy(_ objc.ID, _ objc.SEL, bytes, length, opts, deallocator uintptr) objc.ID {
	page := uintptr(os.Getpagesize())
	if bytes == 0 || bytes%page != 0 || length == 0 || length%page != 0 || deallocator != 0 {
		// Metal requires page-aligned memory and length; deallocator
		// blocks are not supported by the emulator.
		return 0
	}
	return newObject(classes.buffer, &buffer{data: bytes, length: int(length),
		private: mtl.ResourceOptions(opts)&0xf0 == mtl.ResourceStorageModePrivate})
}

func (b *buffer) bytes() []byte { return unsafe.Slice((*byte)(cptr(b.data)), b.length) }

func bufferContents(self objc.ID, _ objc.SEL) uintptr {
	if b := stateOf[buffer](self); b != nil && !b.private {
		return b.data
	}
	return 0
}

func bufferLength(self objc.ID, _ objc.SEL) uintptr {
	if b := stateOf[buffer](self); b != nil {
		return uintptr(b.length)
	}
	return 0
}

// cptr converts an address given by the runtime into a pointer.
func cptr(p uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }
