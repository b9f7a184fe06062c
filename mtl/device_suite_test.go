package mtl_test

import (
	"testing"

	"github.com/puremetal/puremetal/internal/testdevice"
)

// TestEmulatedDeviceSuite runs testdevice.DeviceSuite, the binding's
// checks on any device, on the emulated device.
func TestEmulatedDeviceSuite(t *testing.T) { testdevice.DeviceSuite(t, newGPU(t).GPU) }

// TestMetalDeviceSuite runs testdevice.DeviceSuite on the system's GPU (a
// Mac; it skips elsewhere): go test ./mtl -run Metal -v
func TestMetalDeviceSuite(t *testing.T) { testdevice.DeviceSuite(t, testdevice.NewMetal(t)) }
