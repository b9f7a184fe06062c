package testdevice

import "golang.org/x/sys/unix"

// ThreadID returns the calling OS thread's identifier.
func ThreadID() uint64 { return uint64(unix.Gettid()) }
