package objc

import (
	"strings"
	"testing"
)

func disableFoundation() { libs.foundation = "" }

// TestLoadErrors checks that a missing library is an error that names the
// file and says how to install it.
func TestLoadErrors(t *testing.T) {
	needRuntime(t)
	saved := libs
	defer func() { libs = saved }()
	for _, c := range []struct {
		name   string
		change func()
		file   string
	}{
		{"runtime", func() { libs.objc = "libobjc-puremetal-missing.so.4" }, "libobjc-puremetal-missing.so.4"},
		{"foundation", func() { libs.foundation = "libgnustep-base-puremetal-missing.so.1.28" }, "libgnustep-base-puremetal-missing.so.1.28"},
	} {
		libs = saved
		c.change()
		err := load()
		if err == nil {
			t.Errorf("%s: load with %s missing returned nil", c.name, c.file)
			continue
		}
		msg := err.Error()
		for _, want := range []string{c.file, "apt-get install libobjc4 libgnustep-base1.28"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: load error %q does not mention %q", c.name, msg, want)
			}
		}
	}
}
