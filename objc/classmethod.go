package objc

import (
	"fmt"

	"github.com/ebitengine/purego"
)

// AddClassMethods adds class methods (such as +sharedCaptureManager) to a
// class built with [RegisterClass]: methods of its metaclass, which a
// message sent to the class itself finds. Each method is made as
// RegisterClass makes one; like RegisterClass, it is meant to run once per
// class, and a selector the metaclass already has is left as it is.
func AddClassMethods(cls Class, methods []Method) error {
	if err := Load(); err != nil {
		return err
	}
	if cls == 0 {
		return fmt.Errorf("objc: AddClassMethods was given nil")
	}
	meta := objectClass(ID(cls))
	if meta == 0 {
		return fmt.Errorf("objc: class %s has no metaclass", cls.Name())
	}
	classes.Lock()
	defer classes.Unlock()
	for _, m := range methods {
		if m.Types == "" {
			return fmt.Errorf("objc: class method %q of class %q has no type encoding (Types)", m.Sel, cls.Name())
		}
		sel := RegisterName(m.Sel)
		if meta.InstancesRespondToSelector(sel) {
			continue
		}
		imp := m.IMP
		if imp == 0 {
			var err error
			if imp, err = newCallback(cls.Name(), m); err != nil {
				return err
			}
		}
		types := cstring(m.Types)
		classes.keep = append(classes.keep, types)
		if ok, _, _ := purego.SyscallN(rt.classAddMethod, uintptr(meta), uintptr(sel), uintptr(imp), uintptr(ptr(types))); byte(ok) == 0 {
			return fmt.Errorf("objc: class_addMethod(%q, +%q) failed", cls.Name(), m.Sel)
		}
	}
	return nil
}
