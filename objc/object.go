package objc

// Selectors of NSObject and Foundation used by this package, registered
// once.
var sels struct {
	alloc, init, retain, release, autorelease SEL
	respondsToSelector, drain, retainCount    SEL
	initWithCStringEncoding, utf8String       SEL
	lengthOfBytes                             SEL
	domain, code, localizedDescription        SEL
}

// selectorNames lists every selector the package sends, with the field it
// fills.
var selectorTable = NewSelectorTable(
	SelectorEntry{Name: "alloc", Dst: &sels.alloc},
	SelectorEntry{Name: "init", Dst: &sels.init},
	SelectorEntry{Name: "retain", Dst: &sels.retain},
	SelectorEntry{Name: "release", Dst: &sels.release},
	SelectorEntry{Name: "autorelease", Dst: &sels.autorelease},
	SelectorEntry{Name: "respondsToSelector:", Dst: &sels.respondsToSelector},
	SelectorEntry{Name: "drain", Dst: &sels.drain},
	SelectorEntry{Name: "retainCount", Dst: &sels.retainCount},
	SelectorEntry{Name: "initWithCString:encoding:", Dst: &sels.initWithCStringEncoding},
	SelectorEntry{Name: "UTF8String", Dst: &sels.utf8String},
	SelectorEntry{Name: "lengthOfBytesUsingEncoding:", Dst: &sels.lengthOfBytes},
	SelectorEntry{Name: "domain", Dst: &sels.domain},
	SelectorEntry{Name: "code", Dst: &sels.code},
	SelectorEntry{Name: "localizedDescription", Dst: &sels.localizedDescription},
)

// SelectorNames returns the name of every selector the package itself
// sends, for checking against Apple's headers.
func SelectorNames() []string { return selectorTable.Names() }

func loadSels() { selectorTable.Register() }

// Retain increments the object's reference count ([obj retain]) and returns
// the object.
func (id ID) Retain() ID {
	if id == 0 {
		return 0
	}
	loadSels()
	return Send(id, sels.retain)
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
	return Send(id, sels.autorelease)
}

// RetainCount returns [obj retainCount]; for tests and diagnostics only.
func (id ID) RetainCount() uint {
	loadSels()
	return uint(SendWord(id, sels.retainCount))
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
	return Send(obj, sels.init)
}
