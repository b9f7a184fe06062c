package objc

import "runtime"

// WithAutoreleasePool runs f inside a new autorelease pool and drains the
// pool when f returns, releasing the objects autoreleased inside it. The
// goroutine stays on one OS thread while the pool is open, because
// autorelease pools belong to a thread.
func WithAutoreleasePool(f func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	pool := NewAutoreleasePool()
	defer pool.Drain()
	f()
}

// AutoreleasePool is an open NSAutoreleasePool.
type AutoreleasePool struct{ id ID }

// NewAutoreleasePool opens an autorelease pool on the current thread. The
// caller must keep the goroutine on this OS thread (runtime.LockOSThread)
// until it calls Drain.
func NewAutoreleasePool() AutoreleasePool {
	mustLoad()
	loadSels()
	return AutoreleasePool{GetClass("NSAutoreleasePool").New()}
}

// Drain releases the objects autoreleased since the pool was opened and
// closes the pool.
func (p AutoreleasePool) Drain() {
	if p.id != 0 {
		Send(p.id, sels.drain)
	}
}
