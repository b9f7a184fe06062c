package objc

import "sync"

// Selectors of NSObject used by this package, registered once.
var sels struct {
	once                                               sync.Once
	alloc, init, retain, release, autorelease, new     SEL
	respondsToSelector, drain, retainCount             SEL
	initWithCStringEncoding, utf8String, lengthOfBytes SEL
	domain, code, localizedDescription                 SEL
}

func loadSels() {
	sels.once.Do(func() {
		sels.alloc = RegisterName("alloc")
		sels.init = RegisterName("init")
		sels.new = RegisterName("new")
		sels.retain = RegisterName("retain")
		sels.release = RegisterName("release")
		sels.autorelease = RegisterName("autorelease")
		sels.respondsToSelector = RegisterName("respondsToSelector:")
		sels.drain = RegisterName("drain")
		sels.retainCount = RegisterName("retainCount")
		sels.initWithCStringEncoding = RegisterName("initWithCString:encoding:")
		sels.utf8String = RegisterName("UTF8String")
		sels.lengthOfBytes = RegisterName("lengthOfBytesUsingEncoding:")
		sels.domain = RegisterName("domain")
		sels.code = RegisterName("code")
		sels.localizedDescription = RegisterName("localizedDescription")
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
