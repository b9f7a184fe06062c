package tests

import (
	"testing"

	"github.com/puremetal/puremetal/internal/testdevice"
)

// TestMetalAsync runs the handler, event and in-flight suite
// (testdevice.AsyncSuite, which package mtl runs too) as part of the
// real-Metal suite, so that TestMetalValidationLayer and
// TestMetalNoMissingPools check handlers on Metal's threads, shared
// events and Submit on a Mac's GPU. It skips elsewhere.
func TestMetalAsync(t *testing.T) { testdevice.AsyncSuite(t, testdevice.NewMetal(t)) }

// TestMetalArchives runs testdevice.ArchiveSuite the same way.
func TestMetalArchives(t *testing.T) { testdevice.ArchiveSuite(t, testdevice.NewMetal(t)) }
