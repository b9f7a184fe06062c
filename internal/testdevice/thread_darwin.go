package testdevice

import (
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

var pthreadThreadIDNP struct {
	once sync.Once
	fn   uintptr
}

// ThreadID returns the calling OS thread's identifier
// (pthread_threadid_np).
func ThreadID() uint64 {
	pthreadThreadIDNP.once.Do(func() {
		pthreadThreadIDNP.fn, _ = purego.Dlsym(purego.RTLD_DEFAULT, "pthread_threadid_np")
	})
	var id uint64
	if pthreadThreadIDNP.fn != 0 {
		purego.SyscallN(pthreadThreadIDNP.fn, 0, uintptr(unsafe.Pointer(&id)))
	}
	return id
}
