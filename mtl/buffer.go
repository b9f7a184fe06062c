package mtl

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/puremetal/puremetal/objc"
	"golang.org/x/sys/unix"
)

// Buffer is an MTLBuffer: memory the GPU reads and writes.
type Buffer struct {
	object
	dev      *Device
	length   int
	opts     ResourceOptions
	contents unsafe.Pointer
}

func newBuffer(d *Device, id objc.ID, length int, opts ResourceOptions) (*Buffer, error) {
	if id == 0 {
		return nil, fmt.Errorf("mtl: %s returned no buffer for %d bytes with options %#x", d.describe(), length, uint(opts))
	}
	b := &Buffer{dev: d, length: length, opts: opts}
	b.set(id)
	if opts&storageModeMask != ResourceStorageModePrivate {
		var p uintptr
		inPool(func() { p = id.SendWord(sel.contents) })
		b.contents = cptr(p)
	}
	return b, nil
}

// Length returns the buffer's length in bytes.
func (b *Buffer) Length() int { return b.length }

// Options returns the resource options the buffer was made with.
func (b *Buffer) Options() ResourceOptions { return b.opts }

// Contents returns the buffer's memory as the CPU sees it (the contents
// pointer), or nil for private storage. The slice aliases GPU memory: read
// it after the command buffers that write it complete.
func (b *Buffer) Contents() []byte {
	if b.contents == nil || b.ID() == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(b.contents), b.length)
}

// Slice returns the buffer's contents as a slice of T, the whole elements
// that fit in its length. It returns nil, without saying why, for a
// buffer the CPU cannot read: private storage, a released or nil buffer,
// or one shorter than a T. [Elements] is Slice with an error that says
// which.
func Slice[T any](b *Buffer) []T {
	s, _ := Elements[T](b)
	return s
}

// Elements returns the buffer's contents as a slice of T, the whole
// elements that fit in its length, as [Slice] does; where Slice returns
// nil, Elements returns an error: a nil buffer or one shorter than a T or
// in private storage (no CPU copy) wraps [ErrInvalidArgument], a released
// buffer [ErrReleased].
func Elements[T any](b *Buffer) ([]T, error) {
	var zero T
	size := int(unsafe.Sizeof(zero))
	switch {
	case b == nil:
		return nil, invalidf("Elements: nil buffer")
	case b.ID() == 0:
		return nil, released("Elements", "buffer")
	case b.contents == nil:
		return nil, invalidf("Elements: the buffer is in private storage: the CPU has no copy of it")
	case size == 0 || b.length/size == 0:
		return nil, invalidf("Elements: a %T is %d bytes, the buffer %d: not one whole element", zero, size, b.length)
	}
	return unsafe.Slice((*T)(b.contents), b.length/size), nil
}

// DidModifyRange tells Metal that the CPU wrote bytes [offset, offset+n) of
// a managed buffer, so the GPU's copy is updated (didModifyRange:). Other
// storage modes need no call, and it does nothing for them.
func (b *Buffer) DidModifyRange(offset, n int) error {
	if b.ID() == 0 {
		return released("Buffer.DidModifyRange", "buffer")
	}
	if offset < 0 || n < 0 || offset > b.length || n > b.length-offset {
		return invalidf("Buffer.DidModifyRange: range [%d, %s) is outside the buffer's %d bytes", offset, end(offset, n), b.length)
	}
	if b.opts&storageModeMask != ResourceStorageModeManaged {
		return nil
	}
	inPool(func() { objc.SendArgs(b.ID(), sel.didModifyRange, objc.Struct16(uintptr(offset), uintptr(n))) })
	return nil
}

// SetLabel names the buffer for debugging tools.
func (b *Buffer) SetLabel(label string) error {
	return setLabel(b.ID(), "Buffer.SetLabel", "buffer", label)
}

// Device returns the device that made the buffer (which may have been
// released since: a buffer outlives its device's Go value).
func (b *Buffer) Device() *Device { return b.dev }

// Label returns the buffer's label.
func (b *Buffer) Label() string { return getLabel(b.ID()) }

// unmapOnDealloc is the deallocator block of no-copy buffers: Metal runs
// it with the memory's address and length when the MTLBuffer is
// deallocated, after the last command buffer that uses it, and it unmaps
// the memory. One block serves every buffer, since it captures nothing.
var unmapOnDealloc struct {
	once  sync.Once
	err   error
	block objc.Block
}

// unmapped counts the no-copy buffers' memory unmapped, for tests.
var unmapped atomic.Int64

func deallocator() (objc.Block, error) {
	unmapOnDealloc.once.Do(func() {
		invoke := purego.NewCallback(func(_, pointer, length uintptr) {
			unix.Munmap(unsafe.Slice((*byte)(cptr(pointer)), length))
			unmapped.Add(1)
		})
		unmapOnDealloc.block, unmapOnDealloc.err = objc.NewBlock(invoke)
	})
	return unmapOnDealloc.block, unmapOnDealloc.err
}

// cptr converts an address the runtime gives into a pointer.
func cptr(p uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }

func setLabel(id objc.ID, method, object, label string) error {
	if id == 0 {
		return released(method, object)
	}
	s, err := objc.NewNSString(label)
	if err != nil {
		return err
	}
	inPool(func() { id.Send(sel.setLabel, uintptr(s)) })
	s.Release()
	return nil
}

func getLabel(id objc.ID) string {
	var s string
	inPool(func() { s = objc.GoString(id.Send(sel.label)) })
	return s
}
