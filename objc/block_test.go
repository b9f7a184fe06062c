package objc

import (
	"testing"

	"github.com/ebitengine/purego"
)

// A block made by NewBlock runs its function with itself and the caller's
// arguments, survives a copy and a release of the copy, and is released.
func TestBlock(t *testing.T) {
	needFoundation(t)
	var calls []([3]uintptr)
	invoke := purego.NewCallback(func(block, a, b uintptr) {
		calls = append(calls, [3]uintptr{block, a, b})
	})
	blk, err := NewBlock(invoke)
	if err != nil {
		t.Fatal(err)
	}
	kept := blk.Copy()
	if kept == 0 {
		t.Fatal("Copy returned nil")
	}
	blk.Release()
	kept.Invoke(0x1000, 42)
	if len(calls) != 1 || calls[0] != [3]uintptr{uintptr(kept), 0x1000, 42} {
		t.Errorf("invoke got %#x, want one call with the block, 0x1000 and 42", calls)
	}
	kept.Release()
}
