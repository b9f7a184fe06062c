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

// deviceMaxThreadsPerThreadgroup answers maxThreadsPerThreadgroup through
// csrc/imps.c.
func deviceMaxThreadsPerThreadgroup(_ objc.ID, _ objc.SEL, out uintptr) {
	*(*[3]uint64)(cptr(out)) = [3]uint64{maxThreadsPerThreadgroup, maxThreadsPerThreadgroup, maxThreadsPerThreadgroup}
}

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
//
// A managed buffer the device allocates has two copies, as on a Mac whose
// GPU has memory of its own: data, which kernels and blits use, and cpu,
// which contents returns. didModifyRange: copies a range from cpu to data;
// a blit encoder's synchronizeResource: copies data to cpu when the
// command buffer runs. A program that forgets either sees stale bytes,
// here as on such a Mac.
type buffer struct {
	labeled
	mapping     []byte     // the whole mapping, guard pages included; nil for no-copy
	cpu         []byte     // a managed buffer's CPU copy; nil otherwise
	deallocator objc.Block // a no-copy buffer's, run at dealloc; may be 0
	data        uintptr
	length      int
	private     bool
	modified    int // didModifyRange: calls
}

func (b *buffer) free() {
	if b.mapping != nil {
		unix.Munmap(b.mapping)
		b.mapping = nil
	}
	if b.cpu != nil {
		unix.Munmap(b.cpu)
		b.cpu = nil
	}
	if b.deallocator != 0 {
		// void (^)(void *pointer, NSUInteger length)
		b.deallocator.Invoke(b.data, uintptr(b.length))
		b.deallocator.Release()
		b.deallocator = 0
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
	b := &buffer{
		mapping: mem,
		data:    uintptr(unsafe.Pointer(&mem[page])),
		length:  length,
		private: storageMode(opts) == mtl.ResourceStorageModePrivate,
	}
	if storageMode(opts) == mtl.ResourceStorageModeManaged {
		if b.cpu, err = unix.Mmap(-1, 0, length, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE); err != nil {
			b.free()
			return nil, err
		}
	}
	return b, nil
}

func storageMode(opts uintptr) mtl.ResourceOptions { return mtl.ResourceOptions(opts) & 0xf0 }

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
	copy(b.cpu, b.bytes())
	return newObject(classes.buffer, b)
}

// deviceNewBufferNoCopy keeps a copy of the deallocator block, as Metal
// does, and runs it when the buffer is deallocated.
func deviceNewBufferNoCopy(_ objc.ID, _ objc.SEL, bytes, length, opts uintptr, deallocator objc.Block) objc.ID {
	page := uintptr(os.Getpagesize())
	if bytes == 0 || bytes%page != 0 || length == 0 || length%page != 0 {
		return 0 // Metal requires page-aligned memory and length
	}
	return newObject(classes.buffer, &buffer{data: bytes, length: int(length), deallocator: deallocator.Copy(),
		private: storageMode(opts) == mtl.ResourceStorageModePrivate})
}

func (b *buffer) bytes() []byte { return unsafe.Slice((*byte)(cptr(b.data)), b.length) }

func bufferContents(self objc.ID, _ objc.SEL) uintptr {
	b := stateOf[buffer](self)
	switch {
	case b == nil || b.private:
		return 0
	case b.cpu != nil:
		return uintptr(unsafe.Pointer(&b.cpu[0]))
	}
	return b.data
}

// didModifyRange copies the CPU's writes to bytes [location,
// location+length) of a managed buffer to the GPU's copy.
func (b *buffer) didModifyRange(location, length uintptr) {
	b.modified++
	if b.cpu != nil && location <= uintptr(b.length) && length <= uintptr(b.length)-location {
		copy(b.bytes()[location:location+length], b.cpu[location:location+length])
	}
}

// synchronize copies the GPU's copy of a managed buffer to the CPU's.
func (b *buffer) synchronize() { copy(b.cpu, b.bytes()) }

func bufferLength(self objc.ID, _ objc.SEL) uintptr {
	if b := stateOf[buffer](self); b != nil {
		return uintptr(b.length)
	}
	return 0
}

// cptr converts an address given by the runtime into a pointer.
func cptr(p uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }
