package mtl

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"unsafe"

	"github.com/puremetal/puremetal/objc"
	"golang.org/x/sys/unix"
)

// ErrNoDevice is wrapped by the error of [CreateSystemDefaultDevice] when
// the system has no Metal device: always on Linux, where the emulated
// device of package github.com/puremetal/puremetal/emu stands in.
var ErrNoDevice = errors.New("mtl: no Metal device")

// Device is an MTLDevice: one GPU, the factory of every other Metal object.
type Device struct {
	object
	// self is the MTLDevice, kept after Release: the identity that tells
	// whether two objects belong to the same device.
	self     objc.ID
	source   string
	nameOnce sync.Once
	name     string
}

// DeviceFromObject wraps an object that answers MTLDevice's selectors, such
// as the emulated device, and retains it. This is the seam through which a
// device that is not the system's plugs into the package.
func DeviceFromObject(id objc.ID) (*Device, error) {
	if id == 0 {
		return nil, fmt.Errorf("%w: DeviceFromObject was given nil", ErrNoDevice)
	}
	loadSels()
	for _, s := range []objc.SEL{sel.newCommandQueue, sel.newBufferWithLengthOptions, sel.newLibraryWithSourceOptionsError} {
		if !id.RespondsToSelector(s) {
			return nil, fmt.Errorf("mtl: object of class %s does not answer MTLDevice's selectors", id.Class().Name())
		}
	}
	d := &Device{source: "DeviceFromObject", self: id}
	d.set(id.Retain())
	return d, nil
}

// Source names where the device came from: "MTLCreateSystemDefaultDevice",
// "MTLCopyAllDevices" (the system has no default device, as in ssh
// sessions and daemons, and this is the first of all its devices) or
// "DeviceFromObject".
func (d *Device) Source() string { return d.source }

// systemDevice returns the system's default device, from
// MTLCreateSystemDefaultDevice, or, when that returns nil, the first
// device of MTLCopyAllDevices, retained; it releases the array. Both
// functions return objects the caller owns. It runs in an autorelease
// pool, for whatever Metal autoreleases while looking for devices.
func systemDevice(createSystemDefault, copyAll func() objc.ID) (*Device, error) {
	var d *Device
	inPool(func() {
		if id := createSystemDefault(); id != 0 {
			loadSels()
			d = &Device{source: "MTLCreateSystemDefaultDevice", self: id}
			d.set(id)
			return
		}
		all := copyAll()
		if all == 0 {
			return
		}
		defer all.Release()
		loadSels()
		if all.SendWord(sel.count) == 0 {
			return
		}
		if id := all.Send(sel.objectAtIndex, 0).Retain(); id != 0 {
			d = &Device{source: "MTLCopyAllDevices", self: id}
			d.set(id)
		}
	})
	if d == nil {
		return nil, fmt.Errorf("%w: MTLCreateSystemDefaultDevice returned nil and MTLCopyAllDevices no device (no GPU that supports Metal)", ErrNoDevice)
	}
	return d, nil
}

// Name returns the device's name, such as "Apple M3 Max".
func (d *Device) Name() string {
	d.nameOnce.Do(func() {
		inPool(func() { d.name = objc.GoString(d.ID().Send(sel.name)) })
	})
	return d.name
}

// RegistryID returns the device's IORegistry identifier, unique to the GPU
// across processes.
func (d *Device) RegistryID() (id uint64) {
	inPool(func() { id = uint64(d.ID().SendWord(sel.registryID)) })
	return id
}

// MaxThreadsPerThreadgroup returns the most threads a threadgroup may have
// in each dimension.
func (d *Device) MaxThreadsPerThreadgroup() Size {
	var w [3]uintptr
	inPool(func() { w = objc.SendStruct24(d.ID(), sel.maxThreadsPerThreadgroup) })
	return Size{int(w[0]), int(w[1]), int(w[2])}
}

// HasUnifiedMemory reports whether the CPU and the GPU share memory.
func (d *Device) HasUnifiedMemory() (unified bool) {
	inPool(func() { unified = objc.SendBool(d.ID(), sel.hasUnifiedMemory) })
	return unified
}

// RecommendedMaxWorkingSetSize returns about how many bytes of memory the
// device can use without hurting performance.
func (d *Device) RecommendedMaxWorkingSetSize() uint64 {
	var n uintptr
	inPool(func() { n = d.ID().SendWord(sel.recommendedMaxWorkingSetSize) })
	return uint64(n)
}

// MaxBufferLength returns the largest buffer the device can make, in bytes.
func (d *Device) MaxBufferLength() (n int) {
	inPool(func() { n = int(d.ID().SendWord(sel.maxBufferLength)) })
	return n
}

// SupportsFamily reports whether the device has the features of a GPU
// family.
func (d *Device) SupportsFamily(f GPUFamily) bool {
	var ok bool
	inPool(func() { ok = objc.SendBool(d.ID(), sel.supportsFamily, uintptr(f)) })
	return ok
}

// NewCommandQueue makes a queue that orders the command buffers made from
// it.
func (d *Device) NewCommandQueue() (*CommandQueue, error) {
	if err := d.usable("Device.NewCommandQueue"); err != nil {
		return nil, err
	}
	var id objc.ID
	inPool(func() { id = d.ID().Send(sel.newCommandQueue) })
	if id == 0 {
		return nil, fmt.Errorf("mtl: newCommandQueue returned nil on %s", d.Name())
	}
	q := &CommandQueue{dev: d}
	q.set(id)
	return q, nil
}

// usable returns the error of method on a nil or released device.
func (d *Device) usable(method string) error {
	if d == nil {
		return invalidf("%s: nil device", method)
	}
	if d.ID() == 0 {
		return released(method, "device")
	}
	return nil
}

// Released reports whether Release was called on the device.
func (d *Device) Released() bool { return d == nil || d.ID() == 0 }

// describe names the device in errors: its name and its object's address,
// which tell apart two devices of the same name.
func (d *Device) describe() string {
	if d == nil {
		return "no device"
	}
	if d.ID() == 0 {
		return fmt.Sprintf("released device %#x", uintptr(d.self))
	}
	return fmt.Sprintf("device %q (registry ID %#x)", d.Name(), d.RegistryID())
}

// Same reports whether d and other are the same MTLDevice (two Go values
// may wrap one, such as two DeviceFromObject of the same object), released
// or not. A nil device is the same only as nil.
func (d *Device) Same(other *Device) bool {
	if d == nil || other == nil {
		return d == other
	}
	return d == other || d.self == other.self
}

// String names the device, and its object's address, which tells apart
// two devices of the same name: "device \"Apple M3 Max\" (0x...)".
func (d *Device) String() string { return d.describe() }

// sameDevice reports whether a and b are the same MTLDevice; an object
// whose device is not known (nil) matches any.
func sameDevice(a, b *Device) bool { return a == b || a == nil || b == nil || a.self == b.self }

func (d *Device) checkLength(method string, length int) error {
	if err := d.usable(method); err != nil {
		return err
	}
	if length <= 0 {
		return invalidf("%s: buffer length %d is not positive", method, length)
	}
	if max := d.MaxBufferLength(); max > 0 && length > max {
		return invalidf("%s: buffer length %d exceeds the device's maxBufferLength %d", method, length, max)
	}
	return nil
}

// NewBuffer makes a buffer of length bytes, zero-filled, with the given
// storage options (newBufferWithLength:options:).
func (d *Device) NewBuffer(length int, opts ResourceOptions) (*Buffer, error) {
	if err := d.checkLength("Device.NewBuffer", length); err != nil {
		return nil, err
	}
	var id objc.ID
	inPool(func() { id = d.ID().Send(sel.newBufferWithLengthOptions, uintptr(length), uintptr(opts)) })
	return newBuffer(d, id, length, opts)
}

// NewBufferWithBytes makes a buffer holding a copy of b
// (newBufferWithBytes:length:options:).
func (d *Device) NewBufferWithBytes(b []byte, opts ResourceOptions) (*Buffer, error) {
	if err := d.checkLength("Device.NewBufferWithBytes", len(b)); err != nil {
		return nil, err
	}
	var id objc.ID
	inPool(func() {
		id = d.ID().Send(sel.newBufferWithBytesLengthOptions, objc.Pointer(&b[0]), uintptr(len(b)), uintptr(opts))
	})
	runtime.KeepAlive(b)
	return newBuffer(d, id, len(b), opts)
}

// NewBufferNoCopy makes a buffer over new page-aligned memory that the CPU
// and the GPU share without a copy (newBufferWithBytesNoCopy:length:options:
// deallocator:). The memory is mapped with mmap, its length rounded up to a
// whole number of pages, and unmapped by the deallocator block, which Metal
// runs when the MTLBuffer is deallocated: after Release and after the last
// command buffer that uses the buffer is done with it, so Release may come
// before those command buffers complete. The buffer's Length is the
// rounded length.
func (d *Device) NewBufferNoCopy(length int, opts ResourceOptions) (*Buffer, error) {
	if err := d.checkLength("Device.NewBufferNoCopy", length); err != nil {
		return nil, err
	}
	if opts&storageModeMask == ResourceStorageModePrivate {
		return nil, invalidf("Device.NewBufferNoCopy: a no-copy buffer needs CPU-visible storage, not private (options %#x)", uint(opts))
	}
	page := os.Getpagesize()
	n := (length + page - 1) / page * page
	mem, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("mtl: mmap of %d bytes: %w", n, err)
	}
	block, err := deallocator()
	if err != nil {
		unix.Munmap(mem)
		return nil, fmt.Errorf("mtl: the no-copy buffer's deallocator: %w", err)
	}
	var id objc.ID
	inPool(func() {
		id = d.ID().Send(sel.newBufferWithBytesNoCopy, objc.Pointer(&mem[0]), uintptr(n), uintptr(opts), uintptr(block))
	})
	b, err := newBuffer(d, id, n, opts)
	if err != nil {
		unix.Munmap(mem) // no buffer, so no deallocator will run
	}
	return b, err
}

// NewBufferOverMemory makes a buffer over mem, memory the caller owns,
// without copying it (newBufferWithBytesNoCopy:length:options:deallocator:
// with no deallocator): a memory-mapped checkpoint's pages become weights
// the GPU reads in place. mem must start on a page boundary and span a
// whole number of pages, as Metal requires. The caller keeps mem mapped
// until the buffer is released and the last command buffer that uses it
// has completed; Metal never frees it. Read-only memory (a file mapped
// PROT_READ) suits buffers the GPU only reads.
func (d *Device) NewBufferOverMemory(mem []byte, opts ResourceOptions) (*Buffer, error) {
	if err := d.checkLength("Device.NewBufferOverMemory", len(mem)); err != nil {
		return nil, err
	}
	if opts&storageModeMask == ResourceStorageModePrivate {
		return nil, invalidf("Device.NewBufferOverMemory: memory the CPU owns needs CPU-visible storage, not private (options %#x)", uint(opts))
	}
	page := os.Getpagesize()
	if addr := uintptr(unsafe.Pointer(&mem[0])); addr%uintptr(page) != 0 || len(mem)%page != 0 {
		return nil, invalidf("Device.NewBufferOverMemory: memory at %#x of %d bytes is not whole pages of %d bytes", addr, len(mem), page)
	}
	var id objc.ID
	inPool(func() {
		id = d.ID().Send(sel.newBufferWithBytesNoCopy, objc.Pointer(&mem[0]), uintptr(len(mem)), uintptr(opts), 0)
	})
	runtime.KeepAlive(mem)
	return newBuffer(d, id, len(mem), opts)
}
