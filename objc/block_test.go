package objc

import (
	"os"
	"os/exec"
	"runtime"
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

// A block survives garbage collections that free and clobber whatever only
// C refers to (GODEBUG=clobberfree=1, in a child process): the runtime's
// copy may be the literal NewBlock made.
func TestBlockSurvivesCollection(t *testing.T) {
	needFoundation(t)
	if os.Getenv("PUREMETAL_BLOCK_CHILD") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestBlockSurvivesCollection$", "-test.count=1")
		cmd.Env = append(os.Environ(), "PUREMETAL_BLOCK_CHILD=1", "GODEBUG=clobberfree=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		return
	}
	called := 0
	invoke := purego.NewCallback(func(block, a uintptr) { called += int(a) })
	var kept []Block
	for range 64 {
		blk, err := NewBlock(invoke)
		if err != nil {
			t.Fatal(err)
		}
		kept = append(kept, blk)
	}
	for range 3 {
		runtime.GC()
		_ = make([]byte, 1<<20) // reuse what was freed
	}
	for _, b := range kept {
		b.Invoke(1)
		b.Release()
	}
	if called != len(kept) {
		t.Errorf("%d of %d blocks ran their function after collections", called, len(kept))
	}
}
