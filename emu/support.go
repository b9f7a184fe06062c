package emu

import (
	_ "embed"
	"fmt"
	"sync"

	"github.com/ebitengine/purego"
	"github.com/puremetal/puremetal/internal/clang"
	"github.com/puremetal/puremetal/objc"
)

//go:embed csrc/imps.c
var supportSource string

// support holds the C method implementations of csrc/imps.c, compiled
// once per source version into the user cache directory (clang.LoadC) and
// loaded.
var support struct {
	once sync.Once
	err  error

	impDouble, impSize, impSizeSize, impPtrPtrRange, impRange objc.IMP
}

func loadSupport() error {
	support.once.Do(func() { support.err = buildSupport() })
	return support.err
}

func buildSupport() error {
	h, err := clang.LoadC(supportSource, "")
	if err != nil {
		return fmt.Errorf("emu: method shims: %w", err)
	}
	sym := func(name string) (uintptr, error) {
		p, err := purego.Dlsym(h, name)
		if err != nil {
			return 0, fmt.Errorf("emu: the method shims have no %s: %w", name, err)
		}
		return p, nil
	}
	for _, s := range []struct {
		name string
		dst  *objc.IMP
	}{
		{"puremetal_emu_imp_double", &support.impDouble},
		{"puremetal_emu_imp_size", &support.impSize},
		{"puremetal_emu_imp_size_size", &support.impSizeSize},
		{"puremetal_emu_imp_ptr_ptr_range", &support.impPtrPtrRange},
		{"puremetal_emu_imp_range", &support.impRange},
	} {
		p, err := sym(s.name)
		if err != nil {
			return err
		}
		*s.dst = objc.IMP(p)
	}
	set, err := sym("puremetal_emu_set_callbacks")
	if err != nil {
		return err
	}
	purego.SyscallN(set,
		purego.NewCallback(doubleResult),
		purego.NewCallback(sizeResult),
		purego.NewCallback(twoSizes),
		purego.NewCallback(twoPointersRange),
		purego.NewCallback(oneRange))
	return nil
}
