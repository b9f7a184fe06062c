package objc

import (
	"sync"
	"sync/atomic"

	"github.com/ebitengine/purego"
)

// The GNU runtime (GCC's libobjc): objc_msg_lookup returns the method's
// implementation and the caller calls it with the receiver, the selector and
// the arguments. GNUstep Base provides NSObject, NSString, NSError and
// NSAutoreleasePool.

const installHint = ": install Debian's libobjc4 and libgnustep-base1.28 (apt-get install libobjc4 libgnustep-base1.28)"

// libs names the shared libraries load opens. Tests change them to check
// the loading errors, and the arm64 test run, whose machine has no arm64
// GNUstep Base, sets foundation to "" to load the runtime alone.
var libs = struct {
	objc       string // the GNU Objective-C runtime
	foundation string // GNUstep Base; "" leaves Foundation unloaded
}{"libobjc.so.4", "libgnustep-base.so.1.28"}

func load() error {
	lib := libs.objc
	h, err := dlopen(lib, installHint)
	if err != nil {
		return err
	}
	err = resolve(h, lib, runtimeSymbols(
		symbol{"objc_msg_lookup", &rt.msgLookup},
		symbol{"objc_msg_lookup_super", &rt.msgLookupSuper},
	))
	if err != nil {
		return err
	}
	// GNUstep Base registers NSObject, NSString and the other Foundation
	// classes with the runtime when it is loaded.
	if libs.foundation != "" {
		if _, err := dlopen(libs.foundation, installHint); err != nil {
			return err
		}
	}
	return nil
}

// lookup returns the implementation of sel for id. objc_msg_lookup is
// asked once per (class, selector) pair; the answer is cached, as the
// runtime itself caches it, so that a send costs one call, not two. The
// first send to a class still goes through objc_msg_lookup, which runs the
// class's +initialize.
func lookup(id ID, sel SEL) uintptr {
	if id == 0 {
		r, _, _ := purego.SyscallN(rt.msgLookup, 0, uintptr(sel))
		return r
	}
	k := impKey{objectClass(id), sel}
	if imp, ok := (*impCache.Load())[k]; ok {
		return imp
	}
	r, _, _ := purego.SyscallN(rt.msgLookup, uintptr(id), uintptr(sel))
	impCacheMu.Lock()
	old := *impCache.Load()
	m := make(map[impKey]uintptr, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[k] = r
	impCache.Store(&m)
	impCacheMu.Unlock()
	return r
}

type impKey struct {
	cls Class
	sel SEL
}

// impCache maps (class, selector) to the IMP objc_msg_lookup returned. It
// is copied on write: sends read it without a lock.
var (
	impCache   atomic.Pointer[map[impKey]uintptr]
	impCacheMu sync.Mutex
)

func init() { impCache.Store(&map[impKey]uintptr{}) }

// lookupStret is lookup: the GNU runtime has no separate struct-return entry.
func lookupStret(id ID, sel SEL) uintptr { return lookup(id, sel) }

// lookupSuper returns the superclass's implementation of sel and the
// receiver to call it with.
func lookupSuper(sup *objcSuper, sel SEL) (fn, receiver uintptr) {
	r, _, _ := purego.SyscallN(rt.msgLookupSuper, Pointer(sup), uintptr(sel))
	return r, uintptr(sup.receiver)
}

// objectClass reads the object's class pointer, its first word: in the GNU
// runtime object_getClass is an inline function of the headers, not a
// symbol of the library.
func objectClass(id ID) Class {
	return *(*Class)(cptr(uintptr(id)))
}
