//go:build !linux && !darwin

package testdevice

// ThreadID returns 0: the tests that compare threads run on Linux and
// macOS.
func ThreadID() uint64 { return 0 }
