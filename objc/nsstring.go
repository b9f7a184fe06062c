package objc

import (
	"fmt"
	"runtime"
	"strings"
	"unicode/utf8"
)

// NSUTF8StringEncoding is Foundation's identifier of the UTF-8 encoding.
const NSUTF8StringEncoding = 4

// NewNSString returns a new NSString holding s, owned by the caller. The
// string must be valid UTF-8 without NUL bytes: NSString is built from a
// NUL-terminated C string, so an embedded NUL would silently cut it.
func NewNSString(s string) (ID, error) {
	if i := strings.IndexByte(s, 0); i >= 0 {
		return 0, fmt.Errorf("objc: string of %d bytes has a NUL byte at offset %d; an NSString cannot be made from it", len(s), i)
	}
	if !utf8.ValidString(s) {
		return 0, fmt.Errorf("objc: string of %d bytes is not valid UTF-8", len(s))
	}
	if err := Load(); err != nil {
		return 0, err
	}
	loadSels()
	cls := GetClass("NSString")
	if cls == 0 {
		return 0, fmt.Errorf("objc: the runtime has no NSString class (is Foundation loaded?)")
	}
	b := cstring(s)
	obj := cls.Send(sels.alloc).Send(sels.initWithCStringEncoding, Pointer(&b[0]), NSUTF8StringEncoding)
	runtime.KeepAlive(b)
	if obj == 0 {
		return 0, fmt.Errorf("objc: NSString initWithCString:encoding: returned nil for %d bytes", len(s))
	}
	return obj, nil
}

// GoString copies the NSString str into a Go string (UTF-8). nil gives "".
// The UTF-8 bytes NSString hands out live in the innermost autorelease
// pool, so GoString reads them inside a pool of its own and can be called
// with or without a pool open.
func GoString(str ID) string {
	if str == 0 {
		return ""
	}
	loadSels()
	var s string
	WithAutoreleasePool(func() {
		p := SendWord(str, sels.utf8String)
		n := int(SendWord(str, sels.lengthOfBytes, NSUTF8StringEncoding))
		s = string(gobytes(p, n))
	})
	return s
}
