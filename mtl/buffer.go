package mtl

import (
	"fmt"
	"unsafe"

	"github.com/puremetal/puremetal/objc"
	"golang.org/x/sys/unix"
)

// Buffer is an MTLBuffer: memory the GPU reads and writes.
type Buffer struct {
	object
	length   int
	opts     ResourceOptions
	contents unsafe.Pointer
	mapped   []byte // memory this buffer owns (NewBufferNoCopy), unmapped on Release
}

func newBuffer(id objc.ID, length int, opts ResourceOptions, mapped []byte) (*Buffer, error) {
	if id == 0 {
		return nil, fmt.Errorf("mtl: the device returned no buffer for %d bytes with options %#x", length, uint(opts))
	}
	b := &Buffer{length: length, opts: opts, mapped: mapped}
	b.set(id)
	if opts&storageModeMask != ResourceStorageModePrivate {
		p := id.SendWord(sel.contents)
		b.contents = *(*unsafe.Pointer)(unsafe.Pointer(&p))
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
// that fit in its length; nil for private storage.
func Slice[T any](b *Buffer) []T {
	var zero T
	n := b.length / int(unsafe.Sizeof(zero))
	if b.contents == nil || b.ID() == 0 || n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(b.contents), n)
}

// DidModifyRange tells Metal that the CPU wrote bytes [offset, offset+n) of
// a managed buffer, so the GPU's copy is updated (didModifyRange:). Other
// storage modes need no call, and it does nothing for them.
func (b *Buffer) DidModifyRange(offset, n int) error {
	if offset < 0 || n < 0 || offset+n > b.length {
		return fmt.Errorf("mtl: range [%d, %d) is outside the buffer's %d bytes", offset, offset+n, b.length)
	}
	if b.opts&storageModeMask != ResourceStorageModeManaged {
		return nil
	}
	objc.SendArgs(b.ID(), sel.didModifyRange, objc.Struct16(uintptr(offset), uintptr(n)))
	return nil
}

// SetLabel names the buffer for debugging tools.
func (b *Buffer) SetLabel(label string) error { return setLabel(b.ID(), label) }

// Label returns the buffer's label.
func (b *Buffer) Label() string { return getLabel(b.ID()) }

// Release releases the buffer, and unmaps its memory if it owns it. A
// second call does nothing.
func (b *Buffer) Release() {
	if id := b.id.Swap(0); id != 0 {
		objc.ID(id).Release()
		if b.mapped != nil {
			unix.Munmap(b.mapped)
			b.mapped = nil
		}
	}
}

func setLabel(id objc.ID, label string) error {
	s, err := objc.NewNSString(label)
	if err != nil {
		return err
	}
	id.Send(sel.setLabel, uintptr(s))
	s.Release()
	return nil
}

func getLabel(id objc.ID) string {
	var s string
	inPool(func() { s = objc.GoString(id.Send(sel.label)) })
	return s
}
