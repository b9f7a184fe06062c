// Package emu is an emulated Metal device: it runs Metal compute kernels
// on the CPU behind the same API as a GPU, so that code written against
// package mtl, and the exact .metal sources it compiles, run on Linux
// (in CI, say) without a Mac.
//
// NewDevice and NewDeviceWithOptions return an *mtl.Device. Behind it are
// Objective-C classes, registered in the GNU Objective-C runtime through
// package objc, that answer the Metal selectors package mtl sends, with
// Apple's argument types and ownership rules: MTLDevice, MTLBuffer,
// MTLLibrary, MTLFunction, MTLComputePipelineState, MTLCommandQueue,
// MTLCommandBuffer, MTLComputeCommandEncoder, MTLBlitCommandEncoder and,
// where the system has none, MTLCompileOptions and
// MTLFunctionConstantValues. Every method but the
// encoders' autoreleases an object first, as Metal's implementations may,
// so that a program sending them with no autorelease pool open gets
// GNUstep's "autorelease called without pool" warning on stderr (and the
// leak it would have on a Mac). A compute encoder's per-dispatch messages
// (the pipeline, buffers, bytes, threadgroup memory, dispatches and
// barriers) are recorded by C methods with no call into Go, and checked
// and applied in order at endEncoding; a steady stream of command buffers
// reuses its queue's recording storage, so encoding a dispatch allocates
// nothing on the Go heap, as on Metal. A managed buffer has a CPU copy and
// a GPU copy, as on a Mac whose GPU has memory of its own: didModifyRange: and a
// blit encoder's synchronizeResource: move bytes between them. A no-copy
// buffer's deallocator block runs when the buffer is deallocated. Libraries
// are compiled from source by package msl (clang++, cached in the user
// cache directory by a hash of the source);
// a compilation failure is an *mtl.CompileError whose log names the
// original line, as Apple's compiler's does (program_source:LINE:COL).
// As with Metal, newLibraryWithSource includes no file but Metal's own
// headers; NewLibraryWithFile builds a library from a source file and the
// files it includes through include directories, as Apple's offline
// compiler (xcrun metal -I) builds one for newLibraryWithURL.
//
// A command queue runs its committed command buffers in commit order on
// its own goroutine, and keeps each alive, with the buffers and pipelines
// it uses, until it has run. A kernel fault stops the command buffer with
// status Error and an NSError in MTLCommandBufferErrorDomain whose
// description names the kernel, the source line and the thread:
// MTLCommandBufferErrorPageFault for an out-of-bounds access,
// MTLCommandBufferErrorTimeout for a dispatch that runs past its time
// limit (Options.Timeout), MTLCommandBufferErrorInternal for the faults a
// GPU would hang or give undefined results on (a race on threadgroup
// memory, a barrier that some threads cannot reach, threads at different
// barriers, simdgroup_matrix functions called at different sites, deadlock,
// integer division by zero, missing or excess threadgroup memory).
// GPUStartTime and GPUEndTime are times of the host's clock.
//
// A queue runs its command buffers' scheduled and completed handlers on a
// goroutine locked to an OS thread of its own, in order, after the
// command buffer's status is final (completed handlers), as Metal runs
// them on a dispatch queue; a shared event listener runs its
// notifications on a thread of its own too. encodeWaitForEvent:value:
// holds its queue until another queue's command buffer, or the CPU,
// signals the value (or the device's timeout passes: the command buffer
// fails with MTLCommandBufferErrorTimeout). A binary archive holds the
// shared objects of the device's compile cache; loading one installs them
// there, so that making the same library again skips clang (see
// archive.go for the file, which is checked when loaded). A GPU capture
// records the command buffers it covers and writes them, with each
// dispatch's kernel, grid and arguments, as text into the .gputrace
// bundle (capture.txt).
//
// Options.Order sets the order in which threadgroups and their threads
// run. A race on threadgroup memory (a missing barrier) is a fault in any
// order; what the emulator does not detect, such as threadgroups racing
// on device memory, gives different results in different orders, and
// threadgroup memory starts as NaN bytes, so a read of what no thread
// wrote shows. DispatchCounters returns the bytes each dispatch loaded and
// stored through each buffer binding, its SIMD-group operations and its
// barriers; LiveObjects counts the emulated objects alive, so that tests
// can check that everything was released.
//
// Where the emulator knowingly differs from Apple's compiler and GPUs
// (fast-math defaults, address spaces, SIMD-group reduction order,
// unsupported features such as textures and simdgroup_matrix shapes other
// than 8x8) is listed in the documentation of package msl.
package emu
