package mtl

// SystemDevice is systemDevice, for testing the fallback to
// MTLCopyAllDevices with stand-ins for the two functions.
var SystemDevice = systemDevice
