package objc

import "sync"

// Selectors of NSObject and Foundation used by this package, registered
// once.
var sels struct {
	once                                      sync.Once
	alloc, init, retain, release, autorelease SEL
	respondsToSelector, drain, retainCount    SEL
	initWithCStringEncoding, utf8String       SEL
	lengthOfBytes                             SEL
	domain, code, localizedDescription        SEL
}

// selectorNames lists every selector the package sends, with the field it
// fills.
var selectorNames = []struct {
	name string
	dst  *SEL
}{
	{"alloc", &sels.alloc},
	{"init", &sels.init},
	{"retain", &sels.retain},
	{"release", &sels.release},
	{"autorelease", &sels.autorelease},
	{"respondsToSelector:", &sels.respondsToSelector},
	{"drain", &sels.drain},
	{"retainCount", &sels.retainCount},
	{"initWithCString:encoding:", &sels.initWithCStringEncoding},
	{"UTF8String", &sels.utf8String},
	{"lengthOfBytesUsingEncoding:", &sels.lengthOfBytes},
	{"domain", &sels.domain},
	{"code", &sels.code},
	{"localizedDescription", &sels.localizedDescription},
}

// SelectorNames returns the name of every selector the package itself
// sends, for checking against Apple's headers.
func SelectorNames() []string {
	names := make([]string, len(selectorNames))
	for i, s := range selectorNames {
		names[i] = s.name
	}
	return names
}

func loadSels() {
	sels.once.Do(func() {
		for _, s := range selectorNames {
			*s.dst = RegisterName(s.name)
		}
	})
}

// Retain increments the object's reference count ([obj retain]) and returns
// the object.
func (id ID) Retain() ID {
	if id == 0 {
		return 0
	}
	loadSels()
	return ID(Send(id, sels.retain))
}

// Release decrements the object's reference count ([obj release]); the
// object is deallocated when it reaches zero. Releasing nil does nothing.
func (id ID) Release() {
	if id == 0 {
		return
	}
	loadSels()
	Send(id, sels.release)
}

// Autorelease hands the caller's ownership to the innermost autorelease
// pool, which releases the object when it drains, and returns the object.
func (id ID) Autorelease() ID {
	if id == 0 {
		return 0
	}
	loadSels()
	return ID(Send(id, sels.autorelease))
}

// RetainCount returns [obj retainCount]; for tests and diagnostics only.
func (id ID) RetainCount() uint {
	loadSels()
	return uint(Send(id, sels.retainCount))
}

// RespondsToSelector reports whether the object answers sel
// ([obj respondsToSelector:sel]). Ask before sending a selector that only
// newer systems implement: an unrecognised selector raises an Objective-C
// exception, which ends a Go process.
func (id ID) RespondsToSelector(sel SEL) bool {
	if id == 0 {
		return false
	}
	loadSels()
	return SendBool(id, sels.respondsToSelector, uintptr(sel))
}

// New returns a new, initialised instance of the class that the caller
// owns: [[cls alloc] init].
func (c Class) New() ID {
	loadSels()
	obj := c.Send(sels.alloc)
	if obj == 0 {
		return 0
	}
	return ID(Send(obj, sels.init))
}
