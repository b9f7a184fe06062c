// Package mtl is a thin, faithful binding of the compute subset of Apple's
// Metal API, called through the Objective-C runtime without cgo.
//
// Each object type wraps one Metal protocol (MTLDevice, MTLBuffer,
// MTLLibrary, MTLFunction, MTLComputePipelineState, MTLCommandQueue,
// MTLCommandBuffer, MTLComputeCommandEncoder, MTLBlitCommandEncoder) and each
// method sends one Metal selector, named after it; CompileOptions and
// FunctionConstantValues are Go values, sent as MTLCompileOptions and
// MTLFunctionConstantValues when a library or a function is made. Nothing is
// hidden: a command buffer runs what was encoded, when it is committed.
//
// # Ownership
//
// Objects returned by New*, Create*, CommandBuffer, ComputeCommandEncoder
// and BlitCommandEncoder are owned by the caller and released with Release. Release is idempotent:
// a second call does nothing. Objects that Metal returns autoreleased (a
// command buffer, an encoder, an NSError) are retained inside a private
// autorelease pool, so the caller needs no pool of its own and nothing
// outlives its Go value. A command buffer retains the buffers and pipelines
// it uses until it is done with them, so their Go values may be released
// once they are encoded.
//
// There are no finalizers: an object never released leaks its Metal
// object, and the tests count live objects to catch that. An object keeps
// the device that made it alive (Metal objects retain their device), so
// buffers, libraries, pipelines and queues keep working after the
// Device's Release, until each of them is released too.
//
// # Concurrency
//
// A Device and a CommandQueue are safe for concurrent use by several
// goroutines, as Metal's MTLDevice and MTLCommandQueue are: goroutines may
// make buffers and pipelines and run command buffers on one queue at once.
// A CommandBuffer and its encoders belong to one goroutine at a time, as in
// Metal. Buffer contents are memory shared with the GPU: the caller orders
// CPU writes before the commit that reads them and CPU reads after the
// wait, as Metal requires.
//
// # Autorelease pools
//
// Metal may autorelease objects in any method, and a Go program's threads
// have no autorelease pool unless one is opened: what is autoreleased with
// none open is never released. Every method of this package sends its
// messages inside a pool of its own, on a locked OS thread, except the
// encoders' methods (SetBuffer, DispatchThreadgroups, CopyFromBuffer and
// the others), which run once per dispatch and would pay for a pool each
// time. [CommandQueue.Run] opens one pool for a whole command buffer.
// Encoding through [CommandQueue.CommandBuffer] instead, open one around
// each command buffer, from making it to releasing it:
//
//	objc.WithAutoreleasePool(func() {
//		cb, err := q.CommandBuffer()
//		...
//		enc, err := cb.ComputeCommandEncoder()
//		... // enc.SetComputePipelineState, enc.DispatchThreads
//		err = enc.EndEncoding()
//		cb.Commit()
//		cb.WaitUntilCompleted()
//		cb.Release()
//	})
//
// On a Mac, OBJC_DEBUG_MISSING_POOLS=YES makes the Objective-C runtime
// report each object autoreleased with no pool open; on Linux the emulated
// device autoreleases in its methods (all but the encoders') as Metal may,
// and GNUstep prints "autorelease called without pool" for each.
//
// # Handlers, events and command buffers in flight
//
// [CommandBuffer.AddCompletedHandler] and [CommandBuffer.AddScheduledHandler]
// take Go funcs; Metal runs them on a thread of its own, never the one
// that committed, in the order they were added, and they must not block.
// One block per kind serves every command buffer, and a handler's
// references are dropped once it has run, so committing without end
// leaks nothing. [CommandQueue.Submit] commits without waiting and
// returns a [Pending] to wait on with a context; [InFlight] keeps up to N
// command buffers of a queue in flight and holds back the next while N
// are. A [SharedEvent] orders command buffers of different queues
// (EncodeSignalEvent, EncodeWaitForEvent) and is waited for on the CPU
// through a [SharedEventListener]'s notifications.
//
// # Archives and capture
//
// A [BinaryArchive] keeps compiled pipelines across processes
// (Serialize, then NewBinaryArchive with the file, and pipelines made
// with [Device.NewComputePipelineStateWithDescriptor]). [CaptureManager]
// captures a device's, a queue's or a [CaptureScope]'s command buffers to
// a .gputrace document.
//
// # Errors
//
// Every argument the package refuses before sending it to Metal (an
// encoder's refusal, a buffer length out of range, a nil object, a buffer
// or a pipeline of another device than the encoder's) is an error
// wrapping [ErrInvalidArgument], its message naming the argument and the
// numbers. A method of a released object, or a released object passed as
// an argument, is an error wrapping [ErrReleased] that says so. A command
// buffer that fails is a [*CommandBufferError]: errors.As gives its NSError
// domain and its code, one of the CommandBufferError* constants, and its
// message names the code (MTLCommandBufferErrorPageFault). A name
// [Library.NewFunction] does not find wraps [ErrNoFunction].
//
// # Arguments from Go values
//
// [NewBufferFromSlice] makes a buffer from a slice of any pointer-free
// element type (float32, half.BFloat16, a struct); [Slice] reads a buffer
// as one ([Elements] too, with an error where Slice returns nil: a
// released or private buffer). [SetValue] passes a scalar or a struct as a
// kernel's constant argument, without encoding its bytes by hand and
// without allocating; its Go type is the one the kernel reads, so convert
// untyped constants (float32(2.0), not 2.0).
// [Size] is in ints; [Sz] makes one.
//
// # Devices
//
// On macOS, [CreateSystemDefaultDevice] returns the system's GPU: the
// default device, or the first of all devices where there is no default
// (ssh sessions, daemons); [Device.Source] says which. Elsewhere
// it returns an error wrapping [ErrNoDevice]; the emulated device in package
// github.com/puremetal/puremetal/emu, which runs Metal Shading Language
// kernels on the CPU, plugs in through [DeviceFromObject] and answers the
// same selectors, so code written against this package runs unchanged.
package mtl
