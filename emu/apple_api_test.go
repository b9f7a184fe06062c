package emu_test

import (
	"slices"
	"testing"

	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/internal/appleapi"
)

// protocols maps each emulated class (its name in classDefs) to the
// metal-cpp classes whose selectors it may answer.
var protocols = map[string][]string{
	"PuremetalEmulatedDevice":                {"MTL::Device"},
	"PuremetalEmulatedBuffer":                {"MTL::Buffer", "MTL::Resource"},
	"PuremetalEmulatedLibrary":               {"MTL::Library"},
	"PuremetalEmulatedFunction":              {"MTL::Function"},
	"PuremetalEmulatedComputePipelineState":  {"MTL::ComputePipelineState"},
	"PuremetalEmulatedCommandQueue":          {"MTL::CommandQueue"},
	"PuremetalEmulatedCommandBuffer":         {"MTL::CommandBuffer"},
	"PuremetalEmulatedComputeCommandEncoder": {"MTL::ComputeCommandEncoder", "MTL::CommandEncoder"},
	"PuremetalEmulatedBlitCommandEncoder":    {"MTL::BlitCommandEncoder", "MTL::CommandEncoder"},
	"MTLCompileOptions":                      {"MTL::CompileOptions"},
	"MTLFunctionConstantValues":              {"MTL::FunctionConstantValues"},
	"PuremetalEmulatedSharedEvent":           {"MTL::SharedEvent", "MTL::Event"},
	"MTLSharedEventListener":                 {"MTL::SharedEventListener"},
	"PuremetalEmulatedBinaryArchive":         {"MTL::BinaryArchive"},
	"MTLBinaryArchiveDescriptor":             {"MTL::BinaryArchiveDescriptor"},
	"MTLComputePipelineDescriptor":           {"MTL::ComputePipelineDescriptor"},
	"MTLCaptureManager":                      {"MTL::CaptureManager"},
	"MTLCaptureDescriptor":                   {"MTL::CaptureDescriptor"},
	"PuremetalEmulatedCaptureScope":          {"MTL::CaptureScope"},
}

// notInMetalCpp lists the selectors the emulated objects send that Apple's
// metal-cpp headers do not wrap, each with the Apple documentation page
// that defines it.
var notInMetalCpp = map[string]string{
	// GNUstep's NSURL has no fileSystemRepresentation; its path is
	// Foundation's too.
	"path": "https://developer.apple.com/documentation/foundation/nsurl/path",
}

// nsObjectMethods are NSObject's, overridden by the emulated classes.
var nsObjectMethods = map[string]bool{"dealloc": true, "init": true}

// TestMethodsMatchApplesSignatures checks every method the emulated
// classes implement against Apple's metal-cpp signatures: the selector is
// one that the class's protocol has, and the Objective-C type encoding
// given to the runtime has Apple's return type and parameter types. The
// emulated device is written by us, so this is what keeps it faithful.
func TestMethodsMatchApplesSignatures(t *testing.T) {
	api := appleapi.Load(t)
	methods := emu.EmulatedMethods()
	if len(methods) < 40 {
		t.Fatalf("found %d methods in classDefs; the table is broken", len(methods))
	}
	for _, m := range methods {
		if _, ok := protocols[m.Class]; !ok {
			t.Errorf("class %s has no entry in protocols", m.Class)
		}
		if nsObjectMethods[m.Sel] {
			continue
		}
		var found *appleapi.Signature
		for _, s := range api.Signatures[m.Sel] {
			if slices.Contains(protocols[m.Class], s.Class) {
				found = &s
				break
			}
		}
		if found == nil {
			// signatures.txt lacks the selectors whose metal-cpp wrapper
			// could not be matched; selectors.txt still has their names.
			if api.Selectors[m.Sel] {
				t.Logf("%s: %q is Apple's, but has no signature to check its types against", m.Class, m.Sel)
				continue
			}
			t.Errorf("%s answers %q, which %v does not have in %s", m.Class, m.Sel, protocols[m.Class], api.SignaturesPath)
			continue
		}
		if err := found.Check(m.Types); err != nil {
			t.Errorf("%s: %v", m.Class, err)
		}
	}
}

// TestSelectorsAreApples checks the selectors the emulated objects send to
// Foundation objects and compile options, and those their methods compare
// with, against Apple's headers, and each send against its encoding.
func TestSelectorsAreApples(t *testing.T) {
	api := appleapi.Load(t)
	if n := len(appleapi.CheckTable(t, api, ".", "fsel", nil, false, notInMetalCpp)); n < 5 {
		t.Fatalf("found %d selectors in fsel; the scan is broken", n)
	}
}
