package mtl_test

import (
	"errors"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/puremetal/puremetal/mtl"
)

// A buffer over memory the caller mapped aliases it (no copy): what the
// CPU wrote is the buffer's contents, and the memory is the caller's to
// unmap after the buffer's release. Memory that is not whole pages is
// refused, naming the numbers.
func TestNewBufferOverMemory(t *testing.T) {
	g := newGPU(t)
	page := os.Getpagesize()
	mem, err := unix.Mmap(-1, 0, 2*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	for i := range mem {
		mem[i] = byte(i * 7)
	}
	b, err := g.D.NewBufferOverMemory(mem, mtl.ResourceStorageModeShared)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Contents(); len(got) != len(mem) || &got[0] != &mem[0] {
		t.Errorf("contents of %d bytes at %p, want the caller's %d at %p", len(got), &got[0], len(mem), &mem[0])
	}
	b.Release()
	for _, bad := range [][]byte{mem[1 : page+1], mem[:page-8]} {
		if _, err := g.D.NewBufferOverMemory(bad, mtl.ResourceStorageModeShared); !errors.Is(err, mtl.ErrInvalidArgument) {
			t.Errorf("%d bytes off a page: %v, want ErrInvalidArgument", len(bad), err)
		}
	}
	if _, err := g.D.NewBufferOverMemory(mem, mtl.ResourceStorageModePrivate); !errors.Is(err, mtl.ErrInvalidArgument) {
		t.Errorf("private storage: %v, want ErrInvalidArgument", err)
	}
}
