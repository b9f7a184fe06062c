package objc

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/ebitengine/purego"
	"github.com/puremetal/puremetal/internal/clang"
	"github.com/puremetal/puremetal/internal/testenv"
)

func TestMain(m *testing.M) {
	if testenv.FoundationDisabled() {
		disableFoundation()
	}
	os.Exit(testenv.RunMain(m, Load))
}

// needRuntime loads the runtime, or skips the test (fails it in strict
// mode) when the runtime is not installed.
func needRuntime(t testing.TB) {
	t.Helper()
	if err := Load(); err != nil {
		testenv.SkipOrFail(t, err.Error())
	}
}

// needFoundation is needRuntime for tests that use Foundation's classes.
func needFoundation(t testing.TB) {
	t.Helper()
	needRuntime(t)
	if testenv.FoundationDisabled() {
		// A deliberate configuration for the arm64 run, not a missing
		// prerequisite: strict mode does not turn it into a failure there.
		// On amd64, where GNUstep Base installs, strict mode refuses it so
		// that it cannot hide the Foundation tests.
		if testenv.Strict() && runtime.GOARCH == "amd64" {
			t.Fatalf("%s=none with %s=1 on amd64: the Foundation tests must run here", testenv.NoFoundationEnv, testenv.StrictEnv)
		}
		t.Skipf("Foundation is not loaded (%s=none, the arm64 run under qemu where GNUstep Base cannot be installed); this test runs in the amd64 run", testenv.NoFoundationEnv)
	}
	if GetClass("NSObject") == 0 {
		testenv.SkipOrFail(t, "the runtime has no NSObject class: Foundation (GNUstep Base on Linux: apt-get install libgnustep-base1.28) is not loaded")
	}
}

// rootClass is the superclass of the test classes: NSObject, or the GNU
// runtime's own root class Object when Foundation is not loaded.
func rootClass(t testing.TB) Class {
	t.Helper()
	needRuntime(t)
	if c := GetClass("NSObject"); c != 0 {
		return c
	}
	if c := GetClass("Object"); c != 0 {
		return c
	}
	testenv.SkipOrFail(t, "the runtime has neither NSObject nor Object")
	return 0
}

// newInstance returns an instance of cls, a subclass of rootClass, and a
// function that disposes of it.
func newInstance(t testing.TB, cls Class) (ID, func()) {
	t.Helper()
	if GetClass("NSObject") != 0 {
		obj := cls.New()
		if obj == 0 {
			t.Fatalf("[[%s alloc] init] returned nil", cls.Name())
		}
		return obj, obj.Release
	}
	// The GNU runtime's Object has no alloc: make the instance directly.
	create, err := purego.Dlsym(purego.RTLD_DEFAULT, "class_createInstance")
	if err != nil {
		t.Fatalf("class_createInstance: %v", err)
	}
	dispose, err := purego.Dlsym(purego.RTLD_DEFAULT, "object_dispose")
	if err != nil {
		t.Fatalf("object_dispose: %v", err)
	}
	r, _, _ := purego.SyscallN(create, uintptr(cls), 0)
	if r == 0 {
		t.Fatalf("class_createInstance(%s) returned nil", cls.Name())
	}
	return ID(r), func() { purego.SyscallN(dispose, r) }
}

// digest is FNV-1a over whole words, as testdata/abi.c computes it.
func digest(ws []uint64) uint64 {
	h := uint64(14695981039346656037)
	for _, w := range ws {
		h ^= w
		h *= 1099511628211
	}
	return h
}

// flatten lists the words of a send's arguments in source order.
func flatten(args []Arg) []uint64 {
	var ws []uint64
	for _, a := range args {
		for _, w := range a.w[:a.kind.Size()/8] {
			ws = append(ws, uint64(w))
		}
	}
	return ws
}

// randomWord returns a random non-zero word that uses all 64 bits often.
func randomWord(r *rand.Rand) uintptr {
	for {
		if w := uintptr(r.Uint64()); w != 0 {
			return w
		}
	}
}

// cLib is testdata/abi.c compiled for the test's architecture (by
// internal/clang, which builds for the running process, also under qemu)
// and loaded.
var cLib struct {
	once   sync.Once
	handle uintptr
	err    error
}

// loadCLib compiles and loads testdata/abi.c once per process, or skips
// (fails in strict mode) when clang is missing.
func loadCLib(t testing.TB) uintptr {
	t.Helper()
	cLib.once.Do(func() {
		src, err := os.ReadFile(filepath.Join("testdata", "abi.c"))
		if err != nil {
			cLib.err = err
			return
		}
		cLib.handle, cLib.err = clang.LoadC(string(src), "")
	})
	if errors.Is(cLib.err, clang.ErrNoCompiler) {
		testenv.SkipOrFail(t, "the C methods of testdata/abi.c are compiled at test time: "+cLib.err.Error())
	}
	if cLib.err != nil {
		t.Fatal(cLib.err)
	}
	return cLib.handle
}

// cSymbol returns the address of a function or variable of testdata/abi.c.
func cSymbol(t testing.TB, name string) uintptr {
	t.Helper()
	p, err := purego.Dlsym(loadCLib(t), name)
	if err != nil || p == 0 {
		t.Fatalf("testdata/abi.c has no %s: %v", name, err)
	}
	return p
}

// cSeen returns the words the last C method received.
func cSeen(t testing.TB) []uint64 {
	t.Helper()
	seen := (*[64]uint64)(cptr(cSymbol(t, "pm_seen")))
	n := *(*uint64)(cptr(cSymbol(t, "pm_nseen")))
	return append([]uint64(nil), seen[:min(n, 64)]...)
}

// onceClass is a test class registered the first time a test asks for it.
type onceClass struct {
	sync.Mutex
	cls Class
}

// get returns the class, registering it as a subclass of super with the
// methods of methods on the first call.
func (c *onceClass) get(t testing.TB, name string, super Class, methods func() []Method) Class {
	t.Helper()
	c.Lock()
	defer c.Unlock()
	if c.cls == 0 {
		cls, err := RegisterClass(name, super, methods())
		if err != nil {
			t.Fatal(err)
		}
		c.cls = cls
	}
	return c.cls
}

// goSeen holds the words the last Go method received.
var goSeen struct {
	sync.Mutex
	w []uint64
}

func goRecord(self ID, sel SEL, ws ...uint64) uint64 {
	all := append([]uint64{uint64(self), uint64(sel)}, ws...)
	goSeen.Lock()
	goSeen.w = all
	goSeen.Unlock()
	return digest(all)
}

func goLastSeen() []uint64 {
	goSeen.Lock()
	defer goSeen.Unlock()
	return append([]uint64(nil), goSeen.w...)
}

// sameWords reports the first difference between the words a method
// received and the words it was sent.
func sameWords(t testing.TB, what string, got, want []uint64) bool {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s received %d words, want %d:\n got %#x\nwant %#x", what, len(got), len(want), got, want)
		return false
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%s word %d (0 = receiver, 1 = selector) = %#x, want %#x:\n got %#x\nwant %#x", what, i, got[i], want[i], got, want)
			return false
		}
	}
	return true
}
