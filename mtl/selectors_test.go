package mtl_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/internal/appleapi"
	"github.com/puremetal/puremetal/internal/testenv"
	"github.com/puremetal/puremetal/mtl"
)

// notInMetalCpp lists selectors the binding may send that Apple's metal-cpp
// headers do not wrap, each with the Apple documentation page that defines
// it. It is empty: every selector objc and mtl send today is in
// selectors.txt. Add an entry only with its page, for example
//
//	"new": "https://developer.apple.com/documentation/objectivec/nsobject/1571948-new",
var notInMetalCpp = map[string]string{}

// TestSelectorsAreApples checks every selector that objc and mtl send
// against the selectors and signatures of Apple's headers, and every send
// against the selector's type encoding: a misspelt selector raises an
// exception on a Mac, and a send through the wrong function (an integer
// read for a double, a struct passed as words) reads or passes the wrong
// registers there; the emulated device, written from the same tables,
// would notice neither.
func TestSelectorsAreApples(t *testing.T) {
	api := appleapi.Load(t)
	root := testenv.RepoRoot(t)
	objcSels := appleapi.CheckTable(t, api, filepath.Join(root, "objc"), "sels", nil, true, notInMetalCpp)
	mtlSels := appleapi.CheckTable(t, api, filepath.Join(root, "mtl"), "sel", map[string]string{"send": "Send"}, true, notInMetalCpp)
	mtlSels = append(mtlSels, appleapi.CheckTable(t, api, filepath.Join(root, "mtl"), "asel", map[string]string{"send": "Send"}, true, notInMetalCpp)...)
	if len(objcSels) < 10 || len(mtlSels) < 40 {
		t.Fatalf("found %d selectors in objc and %d in mtl; the scan is broken", len(objcSels), len(mtlSels))
	}
}

func TestNoDeviceOffMac(t *testing.T) {
	d, err := mtl.CreateSystemDefaultDevice()
	if err == nil {
		d.Release()
		t.Skip("a Metal device exists here")
	}
	if !strings.Contains(err.Error(), "emu") {
		t.Errorf("error %q does not say where the emulated device is", err)
	}
	if !errors.Is(err, mtl.ErrNoDevice) {
		t.Errorf("error %q does not wrap mtl.ErrNoDevice", err)
	}
}
