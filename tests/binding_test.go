package tests

import (
	"testing"

	"github.com/puremetal/puremetal/internal/testdevice"
)

// TestMetalBinding runs the binding's device suite (testdevice.DeviceSuite,
// which package mtl runs too) as part of the real-Metal suite, so that the
// checkers of TestMetalValidationLayer and TestMetalNoMissingPools also
// see blits, managed, private and no-copy buffers, function constants and
// RunCommandBuffer on a Mac's GPU. It skips elsewhere.
func TestMetalBinding(t *testing.T) { testdevice.DeviceSuite(t, testdevice.NewMetal(t)) }
