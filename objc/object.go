package objc

// sels holds the selectors of NSObject and Foundation that the package
// sends, registered once.
var sels struct {
	alloc                   SEL `sel:"alloc" types:"@@:"`
	init                    SEL `sel:"init" types:"@@:"`
	retain                  SEL `sel:"retain" types:"@@:"`
	release                 SEL `sel:"release" types:"v@:"`
	autorelease             SEL `sel:"autorelease" types:"@@:"`
	respondsToSelector      SEL `sel:"respondsToSelector:" types:"c@::"`
	drain                   SEL `sel:"drain" types:"v@:"`
	retainCount             SEL `sel:"retainCount" types:"Q@:"`
	initWithCStringEncoding SEL `sel:"initWithCString:encoding:" types:"@@:r*Q"`
	utf8String              SEL `sel:"UTF8String" types:"r*@:"`
	lengthOfBytes           SEL `sel:"lengthOfBytesUsingEncoding:" types:"Q@:Q"`
	domain                  SEL `sel:"domain" types:"@@:"`
	code                    SEL `sel:"code" types:"q@:"`
	localizedDescription    SEL `sel:"localizedDescription" types:"@@:"`
}

var selectorTable = NewSelectorTable(&sels)

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
