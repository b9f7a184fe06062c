//go:build !darwin && !linux

package objc

import (
	"fmt"
	"runtime"
)

func load() error {
	return fmt.Errorf("objc: no Objective-C runtime binding for %s", runtime.GOOS)
}

func lookup(ID, SEL) uintptr                             { return 0 }
func lookupStret(ID, SEL) uintptr                        { return 0 }
func lookupSuper(*objcSuper, SEL) (fn, receiver uintptr) { return 0, 0 }

func objectClass(ID) Class { return 0 }
