package mtl

// SystemDevice is systemDevice, for testing the fallback to
// MTLCopyAllDevices with stand-ins for the two functions.
var SystemDevice = systemDevice

// Unmapped returns how many no-copy buffers' memory the deallocator block
// has unmapped.
func Unmapped() int64 { return unmapped.Load() }
