package emu

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"

	"github.com/ebitengine/purego"
	"github.com/puremetal/puremetal/objc"
)

//go:embed csrc/imps.c
var supportSource string

// support holds the C method implementations of support.c, compiled once
// per source version into the user cache directory and loaded with purego.
var support struct {
	once sync.Once
	err  error

	impDouble, impSize, impSizeSize, impPtrPtrRange, impRange objc.IMP
}

// cacheDir returns the folder where compiled code is kept between runs.
func cacheDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "puremetal")
	}
	return filepath.Join(os.TempDir(), "puremetal-cache")
}

// compiler returns the C compiler: $CC, else clang, else cc.
func compiler() (string, error) {
	if cc := os.Getenv("CC"); cc != "" {
		return cc, nil
	}
	for _, cc := range []string{"clang", "cc"} {
		if p, err := exec.LookPath(cc); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("emu: no C compiler found: install clang (apt-get install clang)")
}

func loadSupport() error {
	support.once.Do(func() { support.err = buildSupport() })
	return support.err
}

func buildSupport() error {
	sum := sha256.Sum256([]byte(supportSource))
	dir := filepath.Join(cacheDir(), "emu")
	lib := filepath.Join(dir, "support-"+hex.EncodeToString(sum[:8])+".so")
	if _, err := os.Stat(lib); err != nil {
		cc, err := compiler()
		if err != nil {
			return err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("emu: cache folder: %w", err)
		}
		// Build under names of this process's own, then rename: tests of
		// several packages may build at the same time.
		tmp := fmt.Sprintf("%s.%d.tmp", lib, os.Getpid())
		src := tmp + ".c"
		if err := os.WriteFile(src, []byte(supportSource), 0o644); err != nil {
			return fmt.Errorf("emu: %w", err)
		}
		defer os.Remove(src)
		out, err := exec.Command(cc, "-O2", "-fPIC", "-shared", "-o", tmp, src).CombinedOutput()
		if err != nil {
			return fmt.Errorf("emu: compiling imps.c with %s: %v\n%s", cc, err, out)
		}
		if err := os.Rename(tmp, lib); err != nil {
			return fmt.Errorf("emu: %w", err)
		}
	}
	h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return fmt.Errorf("emu: loading %s: %w", lib, err)
	}
	sym := func(name string) (uintptr, error) {
		p, err := purego.Dlsym(h, name)
		if err != nil {
			return 0, fmt.Errorf("emu: %s has no %s: %w", lib, name, err)
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
