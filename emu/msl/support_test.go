package msl

import (
	"math"
	"testing"

	"github.com/ebitengine/purego"
)

func TestSupportLibraryDoubleIMP(t *testing.T) {
	needClang(t)
	h, err := SupportLibrary(testCacheDir)
	if err != nil {
		t.Fatal(err)
	}
	setSource, err := purego.Dlsym(h, "puremetal_emu_set_double_source")
	if err != nil {
		t.Fatal(err)
	}
	impPtr, err := purego.Dlsym(h, "puremetal_emu_double_imp")
	if err != nil {
		t.Fatal(err)
	}
	var gotSelf, gotSel uintptr
	cb := purego.NewCallback(func(self, sel uintptr) uint64 {
		gotSelf, gotSel = self, sel
		return math.Float64bits(float64(self) + 0.25)
	})
	purego.SyscallN(setSource, cb)
	defer purego.SyscallN(setSource, 0)
	var imp func(self, sel uintptr) float64
	purego.RegisterFunc(&imp, impPtr)
	for _, self := range []uintptr{1, 12345, 1 << 40} {
		if got, want := imp(self, 99), float64(self)+0.25; got != want || gotSelf != self || gotSel != 99 {
			t.Fatalf("imp(%d, 99) = %v (callback saw %d, %d), want %v", self, got, gotSelf, gotSel, want)
		}
	}
}
