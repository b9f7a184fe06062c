package objc

import (
	"errors"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unicode/utf16"

	"github.com/ebitengine/purego"
)

// Classes for SendSuper: PMTestBase answers value and scaled:, and
// PMTestDerived overrides both, calling the base implementation.
var superClasses struct {
	sync.Mutex
	base, derived Class
}

func superTestClasses(t *testing.T) (base, derived Class) {
	t.Helper()
	root := rootClass(t)
	superClasses.Lock()
	defer superClasses.Unlock()
	if superClasses.derived == 0 {
		b, err := RegisterClass("PMTestBase", root, []Method{
			{Sel: "value", Types: "Q@:", Fn: func(self ID, sel SEL) uintptr { return 7 }},
			{Sel: "scaled:plus:", Types: "Q@:QQ", Fn: func(self ID, sel SEL, a, b uintptr) uintptr { return a*3 + b }},
		})
		if err != nil {
			t.Fatal(err)
		}
		d, err := RegisterClass("PMTestDerived", b, []Method{
			{Sel: "value", Types: "Q@:", Fn: func(self ID, sel SEL) uintptr {
				return 1000 + uintptr(SendSuper(self, superClasses.base, sel))
			}},
			{Sel: "scaled:plus:", Types: "Q@:QQ", Fn: func(self ID, sel SEL, a, b uintptr) uintptr {
				return uintptr(SendSuper(self, superClasses.base, sel, a, b)) ^ 0xff
			}},
		})
		if err != nil {
			t.Fatal(err)
		}
		superClasses.base, superClasses.derived = b, d
	}
	return superClasses.base, superClasses.derived
}

// TestSendSuper checks that SendSuper runs the superclass's implementation
// with the caller's receiver and arguments.
func TestSendSuper(t *testing.T) {
	base, derived := superTestClasses(t)
	if derived.Superclass() != base {
		t.Fatalf("superclass of %s is %s, want %s", derived.Name(), derived.Superclass().Name(), base.Name())
	}
	if got := derived.Name(); got != "PMTestDerived" {
		t.Errorf("class name %q, want PMTestDerived", got)
	}
	for _, sel := range []string{"value", "scaled:plus:"} {
		if !derived.InstancesRespondToSelector(RegisterName(sel)) {
			t.Errorf("%s instances do not respond to %s", derived.Name(), sel)
		}
	}
	if derived.InstancesRespondToSelector(RegisterName("noSuchSelectorPM:")) {
		t.Errorf("%s instances respond to noSuchSelectorPM:", derived.Name())
	}
	obj, dispose := newInstance(t, derived)
	defer dispose()
	if got := obj.SendWord(RegisterName("value")); got != 1007 {
		t.Errorf("[derived value] = %d, want 1007 (1000 + the base's 7)", got)
	}
	r := rand.New(rand.NewPCG(9, 10))
	for range 4 {
		a, b := randomWord(r), randomWord(r)
		want := (a*3 + b) ^ 0xff
		if got := obj.SendWord(RegisterName("scaled:plus:"), a, b); got != want {
			t.Errorf("[derived scaled:%#x plus:%#x] = %#x, want %#x", a, b, got, want)
		}
	}
	// Sent to the base's implementation directly, the receiver is kept.
	if got := SendSuper(obj, base, RegisterName("value")); got != 7 {
		t.Errorf("SendSuper(obj, %s, value) = %d, want 7", base.Name(), got)
	}
}

// deallocs counts the deallocations of PMTestCounted instances.
var deallocs atomic.Int64

var counted onceClass

// countedClass is an NSObject subclass whose dealloc counts in deallocs and
// then calls NSObject's dealloc.
func countedClass(t *testing.T) Class {
	t.Helper()
	needFoundation(t)
	nsobject := GetClass("NSObject")
	return counted.get(t, "PMTestCounted", nsobject, func() []Method {
		return []Method{{Sel: "dealloc", Types: "v@:", Fn: func(self ID, sel SEL) {
			deallocs.Add(1)
			SendSuper(self, nsobject, sel)
		}}}
	})
}

// wantDeallocs checks that want PMTestCounted instances were deallocated
// since the count was before; when says at what point.
func wantDeallocs(t *testing.T, before, want int64, when string) {
	t.Helper()
	if d := deallocs.Load() - before; d != want {
		t.Errorf("%d deallocations %s, want %d", d, when, want)
	}
}

// TestRetainRelease checks the reference count and that the last release
// deallocates.
func TestRetainRelease(t *testing.T) {
	cls := countedClass(t)
	before := deallocs.Load()
	obj := cls.New()
	if obj == 0 {
		t.Fatal("[[PMTestCounted alloc] init] returned nil")
	}
	if n := obj.RetainCount(); n != 1 {
		t.Errorf("retain count of a new object = %d, want 1", n)
	}
	if got := obj.Retain(); got != obj {
		t.Errorf("Retain returned %#x, want the object %#x", got, obj)
	}
	if n := obj.RetainCount(); n != 2 {
		t.Errorf("retain count after Retain = %d, want 2", n)
	}
	obj.Release()
	wantDeallocs(t, before, 0, "after releasing one of two references")
	obj.Release()
	wantDeallocs(t, before, 1, "after the last release")
	ID(0).Release() // harmless
	if ID(0).Retain() != 0 || ID(0).Autorelease() != 0 {
		t.Error("Retain or Autorelease of nil returned non-nil")
	}
}

// TestAutoreleasePoolDrain checks that draining a pool releases exactly
// the objects autoreleased in it, and that pools nest.
func TestAutoreleasePoolDrain(t *testing.T) {
	cls := countedClass(t)
	before := deallocs.Load()
	const n = 16
	WithAutoreleasePool(func() {
		for range n {
			if obj := cls.New().Autorelease(); obj == 0 {
				t.Fatal("autorelease returned nil")
			}
		}
		wantDeallocs(t, before, 0, "before the pool drained")
	})
	wantDeallocs(t, before, n, "after the pool drained")

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before = deallocs.Load()
	outer := NewAutoreleasePool()
	cls.New().Autorelease()
	inner := NewAutoreleasePool()
	for range 3 {
		cls.New().Autorelease()
	}
	inner.Drain()
	wantDeallocs(t, before, 3, "after the inner pool drained")
	outer.Drain()
	wantDeallocs(t, before, 4, "after the outer pool drained")
}

// TestRespondsToSelector asks an object about a selector it has and one it
// has not.
func TestRespondsToSelector(t *testing.T) {
	cls := countedClass(t)
	obj := cls.New()
	defer obj.Release()
	if !obj.RespondsToSelector(RegisterName("retain")) {
		t.Error("an NSObject does not respond to retain")
	}
	if obj.RespondsToSelector(RegisterName("noSuchSelectorPM:")) {
		t.Error("an NSObject responds to noSuchSelectorPM:")
	}
	if ID(0).RespondsToSelector(RegisterName("retain")) {
		t.Error("nil responds to retain")
	}
}

// randomText returns n random runes from several scripts, including ones
// outside the Basic Multilingual Plane (two UTF-16 units each).
func randomText(r *rand.Rand, n int) string {
	ranges := [][2]rune{{0x20, 0x7e}, {0xc0, 0x17f}, {0x400, 0x4ff}, {0x4e00, 0x9fff}, {0x1f300, 0x1f5ff}, {0x1d100, 0x1d1ff}}
	var b strings.Builder
	for range n {
		rg := ranges[r.IntN(len(ranges))]
		b.WriteRune(rg[0] + rune(r.IntN(int(rg[1]-rg[0]+1))))
	}
	return b.String()
}

// TestNSStringRoundTrip makes NSStrings from Go strings and reads them
// back; NSString's own length (UTF-16 units) checks that it decoded the
// UTF-8.
func TestNSStringRoundTrip(t *testing.T) {
	needFoundation(t)
	r := rand.New(rand.NewPCG(11, 12))
	texts := []string{"", "Metal", "héllo wörld", "Привет, мир", "日本語のテキスト", "🚀 launch 𝄞", randomText(r, 64), randomText(r, 5000)}
	length := RegisterName("length")
	WithAutoreleasePool(func() {
		for _, s := range texts {
			str, err := NewNSString(s)
			if err != nil {
				t.Errorf("NewNSString(%q): %v", s, err)
				continue
			}
			if got := GoString(str); got != s {
				t.Errorf("round trip of %d bytes gave %d bytes:\n got %q\nwant %q", len(s), len(got), got, s)
			}
			if got, want := int(str.SendWord(length)), len(utf16.Encode([]rune(s))); got != want {
				t.Errorf("[NSString length] of %q = %d UTF-16 units, want %d", s, got, want)
			}
			str.Release()
		}
	})
	if GoString(0) != "" {
		t.Error("GoString(nil) is not empty")
	}
}

// TestNSStringRejects checks that strings an NSString cannot hold are
// errors naming the problem, and never reach the runtime.
func TestNSStringRejects(t *testing.T) {
	for _, c := range []struct {
		s    string
		want []string
	}{
		{"ab\x00cd", []string{"NUL", "offset 2", "5 bytes"}},
		{"\x00", []string{"NUL", "offset 0"}},
		{"ok\xff\xfe", []string{"UTF-8", "4 bytes"}},
		{"\xc3(", []string{"UTF-8"}},
		{"\xed\xa0\x80", []string{"UTF-8"}}, // a UTF-16 surrogate encoded in UTF-8
	} {
		str, err := NewNSString(c.s)
		if err == nil {
			t.Errorf("NewNSString(%q) returned %#x and no error", c.s, str)
			str.Release()
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("NewNSString(%q): error %q does not mention %q", c.s, err, w)
			}
		}
	}
}

// TestErrorFromNSError builds an NSError with a domain, a negative code and
// a localized description and copies it into Go.
func TestErrorFromNSError(t *testing.T) {
	needFoundation(t)
	if ErrorFromNSError(0) != nil {
		t.Error("ErrorFromNSError(nil) is not nil")
	}
	WithAutoreleasePool(func() {
		domain := mustNSString(t, "PMTestErrorDomain")
		defer domain.Release()
		text := mustNSString(t, "the kernel «gdn_decode» failed: ü")
		defer text.Release()
		// NSLocalizedDescriptionKey's text differs between Apple's
		// Foundation and GNUstep: read the constant itself.
		keyVar, err := purego.Dlsym(purego.RTLD_DEFAULT, "NSLocalizedDescriptionKey")
		if err != nil || keyVar == 0 {
			t.Fatalf("Foundation has no NSLocalizedDescriptionKey: %v", err)
		}
		key := *(*ID)(cptr(keyVar))
		info := GetClass("NSDictionary").Send(RegisterName("dictionaryWithObject:forKey:"), uintptr(text), uintptr(key))
		if info == 0 {
			t.Fatal("[NSDictionary dictionaryWithObject:forKey:] returned nil")
		}
		nserr := GetClass("NSError").Send(RegisterName("alloc")).Send(RegisterName("initWithDomain:code:userInfo:"), uintptr(domain), uintptr(^uintptr(41)), uintptr(info))
		if nserr == 0 {
			t.Fatal("[[NSError alloc] initWithDomain:code:userInfo:] returned nil")
		}
		defer nserr.Release()
		err = ErrorFromNSError(nserr)
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("ErrorFromNSError returned %T, want *objc.Error", err)
		}
		want := Error{Domain: "PMTestErrorDomain", Code: -42, Description: "the kernel «gdn_decode» failed: ü"}
		if *e != want {
			t.Errorf("ErrorFromNSError = %+v, want %+v", *e, want)
		}
		for _, w := range []string{want.Description, want.Domain, "-42"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error text %q does not mention %q", err, w)
			}
		}
	})
}

func mustNSString(t *testing.T, s string) ID {
	t.Helper()
	str, err := NewNSString(s)
	if err != nil {
		t.Fatal(err)
	}
	return str
}
