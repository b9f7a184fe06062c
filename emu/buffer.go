package emu

import (
	"fmt"
	"os"
	"unsafe"

	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/objc"
	"golang.org/x/sys/unix"
)

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
	modified    int     // didModifyRange: calls
	dev         *device // the device that made it
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

// bufferDidModifyRange answers didModifyRange: through csrc/imps.c.
func bufferDidModifyRange(self objc.ID, _ objc.SEL, location, length uintptr) {
	if b := stateOf[buffer](self); b != nil {
		b.didModifyRange(location, length)
	}
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
