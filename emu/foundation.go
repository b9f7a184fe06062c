package emu

import (
	"sync"

	"github.com/ebitengine/purego"
	"github.com/puremetal/puremetal/objc"
)

// autoreleasedString returns an autoreleased NSString, as getters do.
func autoreleasedString(s string) objc.ID {
	str, err := objc.NewNSString(s)
	if err != nil {
		return 0
	}
	return str.Autorelease()
}

// newNSError returns an autoreleased NSError with the given domain, code
// and localized description.
func newNSError(domain string, code int, description string) objc.ID {
	d, _ := objc.NewNSString(domain)
	desc, _ := objc.NewNSString(description)
	key := localizedDescriptionKey()
	info := objc.GetClass("NSDictionary").Send(fsel.dictionaryWithObjectForKey, uintptr(desc), uintptr(key))
	e := objc.GetClass("NSError").Send(fsel.alloc).Send(fsel.initWithDomainCodeUserInfo, uintptr(d), uintptr(code), uintptr(info))
	d.Release()
	desc.Release()
	return e.Autorelease()
}

// localizedDescriptionKey returns Foundation's NSLocalizedDescriptionKey
// constant, whose value differs between Apple's Foundation and GNUstep.
func localizedDescriptionKey() objc.ID {
	keyOnce.Do(func() {
		for _, lib := range []string{"libgnustep-base.so.1.28", "/System/Library/Frameworks/Foundation.framework/Foundation"} {
			h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_GLOBAL)
			if err != nil {
				continue
			}
			if p, err := purego.Dlsym(h, "NSLocalizedDescriptionKey"); err == nil && p != 0 {
				key = *(*objc.ID)(cptr(p))
				return
			}
		}
	})
	return key
}

var (
	keyOnce sync.Once
	key     objc.ID
)

// storeOut writes an object to an NSError** out-parameter, if given.
func storeOut(out uintptr, obj objc.ID) {
	if out != 0 {
		*(*objc.ID)(cptr(out)) = obj
	}
}
