package msl

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/puremetal/puremetal/internal/clang"
)

// MaxBindings is the number of buffer and threadgroup-memory argument slots
// of a compute function (indices 0 to 30), as on Apple GPUs.
const MaxBindings = 31

// MaxThreadsPerThreadgroup is the largest threadgroup the emulator runs, as
// on Apple GPUs.
const MaxThreadsPerThreadgroup = 1024

// ThreadExecutionWidth is the number of lanes of a SIMD-group.
const ThreadExecutionWidth = 32

// MaxThreadgroupMemoryLength is the threadgroup memory available to one
// threadgroup, in bytes: lengths set by the encoder plus threadgroup
// variables declared in the kernel.
const MaxThreadgroupMemoryLength = 32768

// DefaultFileName is the file name given to a source that has none, as in
// the logs of Apple's compiler.
const DefaultFileName = "program_source"

// CompileOptions control Compile.
type CompileOptions struct {
	// FastMath compiles with clang's -ffast-math (Metal's default is fast
	// math on; the zero value here is off, so set it to match
	// MTLCompileOptions.fastMathEnabled).
	FastMath bool
	// LanguageVersion is an MTLLanguageVersion value ((major << 16) | minor);
	// it sets __METAL_VERSION__. Zero means 3.1.
	LanguageVersion uint32
	// PreprocessorMacros are defined for the source, as
	// MTLCompileOptions.preprocessorMacros: name to replacement text.
	// __METAL_VERSION__, __METAL__ and __METAL_MACOS__ are always defined.
	PreprocessorMacros map[string]string
	// CacheDir holds translated sources, compiled libraries and the runtime.
	// Empty means DefaultCacheDir().
	CacheDir string
	// FileName names the source in diagnostics and kernel errors. Empty
	// means DefaultFileName.
	FileName string
	// IncludeDirs are searched for the files of #include "..." and
	// #include <...> that are not Metal's own headers, in order, as the
	// -I options of Apple's offline compiler (xcrun metal -I dir). They
	// are used by CompileFile (a source given to Compile has no directory
	// of its own, and with no IncludeDirs, as in Metal's
	// newLibraryWithSource:options:error:, including other files is an
	// error). #pragma once and include guards work as in C++.
	IncludeDirs []string
	// Lazy builds each function when Library.Function first asks for it,
	// from a translation holding that entry point alone (as Specialize
	// does), instead of the whole library at once: a library of thousands
	// of instantiations (MLX's binary.metal) then costs only the kernels a
	// program uses. Compile still reads and checks every kernel's
	// declaration; errors in a body show when its function is built.
	Lazy bool
}

// CompileError is a failed compilation. Log is the compiler's log, whose
// locations name the original .metal file and line.
type CompileError struct {
	Log string
	// File and Line locate the first error in the source (Line 0 if the log
	// names none).
	File string
	Line int
}

func (e *CompileError) Error() string {
	first := e.Log
	if loc := diagLine.FindStringIndex(first); loc != nil {
		first = first[loc[0]:] // the first error, past "In file included from" lines
	}
	if i := strings.Index(first, "\n"); i >= 0 {
		first = first[:i]
	}
	if e.Line > 0 {
		return fmt.Sprintf("msl: compilation failed at %s:%d: %s", e.File, e.Line, strings.TrimSpace(first))
	}
	return "msl: compilation failed: " + strings.TrimSpace(first)
}

var diagLine = regexp.MustCompile(`(?m)^(.*?):(\d+):(\d+): (?:fatal )?error: `)

// newCompileError builds a CompileError whose Line is the first error
// located in file, or else in a header of the program (a file named by a
// path, from CompileOptions.IncludeDirs), which File then names.
func newCompileError(log, file string) *CompileError {
	e := &CompileError{Log: log, File: file}
	ms := diagLine.FindAllStringSubmatch(log, -1)
	for _, m := range ms {
		if m[1] == file || strings.HasSuffix(m[1], "/"+file) {
			e.Line, _ = strconv.Atoi(m[2])
			return e
		}
	}
	for _, m := range ms {
		if strings.ContainsRune(m[1], '/') && !strings.HasPrefix(m[1], "<") {
			e.File = m[1]
			e.Line, _ = strconv.Atoi(m[2])
			return e
		}
	}
	return e
}

// ParamKind tells what a kernel parameter is bound to.
type ParamKind int

const (
	// Buffer is a device or constant buffer, [[buffer(n)]].
	Buffer ParamKind = iota
	// ThreadgroupMemory is threadgroup memory whose length the encoder
	// sets, [[threadgroup(n)]].
	ThreadgroupMemory
	// BuiltIn is a value the GPU supplies, such as
	// [[thread_position_in_grid]].
	BuiltIn
)

var paramKindNames = [...]string{Buffer: "buffer", ThreadgroupMemory: "threadgroup", BuiltIn: "built-in"}

func (k ParamKind) String() string { return enumName(paramKindNames[:], k, "ParamKind") }

// Param describes one parameter of a kernel function.
type Param struct {
	Name string
	Kind ParamKind
	// Index is the buffer or threadgroup-memory index (Kind Buffer or
	// ThreadgroupMemory).
	Index int
	// ReadOnly is true for a buffer the kernel cannot write: a constant
	// buffer, or a device pointer or reference to const data.
	ReadOnly bool
	// Size is, for a buffer parameter that is a reference (constant T&,
	// device T&), sizeof(T) in bytes: what the kernel reads of its
	// binding. It is 0 for a pointer and every other kind.
	Size int
	// BuiltIn names the attribute of a built-in parameter, e.g.
	// "thread_position_in_grid".
	BuiltIn string
}

// Grid is the extent of a dispatch, in (width, height, depth) order.
// Exactly one of Threadgroups (dispatchThreadgroups:threadsPerThreadgroup:)
// and Threads (dispatchThreads:threadsPerThreadgroup:, whose edge
// threadgroups may be partial) is non-zero.
type Grid struct {
	// Threadgroups is the number of threadgroups in each dimension.
	Threadgroups [3]int
	// Threads is the number of threads in each dimension.
	Threads [3]int
	// ThreadsPerThreadgroup is the size of a full threadgroup.
	ThreadsPerThreadgroup [3]int
}

// ThreadgroupsGrid is the grid of dispatchThreadgroups:threadsPerThreadgroup:.
func ThreadgroupsGrid(threadgroups, threadsPerThreadgroup [3]int) Grid {
	return Grid{Threadgroups: threadgroups, ThreadsPerThreadgroup: threadsPerThreadgroup}
}

// ThreadsGrid is the grid of dispatchThreads:threadsPerThreadgroup:; the
// threadgroups at the high edges hold only the threads inside the grid.
func ThreadsGrid(threads, threadsPerThreadgroup [3]int) Grid {
	return Grid{Threads: threads, ThreadsPerThreadgroup: threadsPerThreadgroup}
}

// Order is the order in which threadgroups, and the threads of a
// threadgroup, get the CPU. Correct kernels give the same results in every
// order. A race on threadgroup memory is a fault in any order; results
// that differ between orders show the races the emulator does not check,
// such as threadgroups sharing device memory.
type Order int

const (
	// Forward runs threadgroups and threads in increasing index order.
	Forward Order = iota
	// Reverse runs them in decreasing index order.
	Reverse
	// Shuffled runs them in a pseudo-random order drawn from Dispatch.Seed.
	Shuffled
)

var orderNames = [...]string{Forward: "forward", Reverse: "reverse", Shuffled: "shuffled"}

func (o Order) String() string { return enumName(orderNames[:], o, "Order") }

// enumName returns the name of v from names, or typ(v) for a value
// without one.
func enumName[E ~int](names []string, v E, typ string) string {
	if v >= 0 && int(v) < len(names) {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", typ, int(v))
}

// Binding is memory bound to a buffer index. Use memory outside the Go heap
// (mmap'd or C-allocated, like an MTLBuffer's contents): kernels read and
// write it from threads the Go runtime does not know. Go memory that holds
// no Go pointers (the bytes of setBytes:length:atIndex:, say) also works if
// the caller keeps it alive until Run returns.
type Binding struct {
	Ptr uintptr
	Len int
}

// Dispatch is one compute dispatch: the encoder's bindings and the grid.
type Dispatch struct {
	// Buffers are the bindings of setBuffer:offset:atIndex: (Ptr already
	// includes the offset; Len counts the bytes from Ptr to the end).
	Buffers [MaxBindings]Binding
	// ThreadgroupMemoryLength are the lengths of
	// setThreadgroupMemoryLength:atIndex:, in bytes (multiples of 16).
	ThreadgroupMemoryLength [MaxBindings]int
	// Grid is the extent of the dispatch.
	Grid Grid
	// Order is the scheduling order of threadgroups and threads.
	Order Order
	// Seed draws the Shuffled order.
	Seed uint64
	// Workers is the number of OS threads running threadgroups, at most
	// 64; 0 means one per CPU (or PUREMETAL_EMU_WORKERS). Within a
	// threadgroup everything runs on one thread. Dispatches running at once
	// share 64 workers' memory: a dispatch waits when all are busy.
	Workers int
	// Timeout is the longest the dispatch may run, as the GPU kills a
	// command buffer that runs too long: a kernel still running then is
	// stopped with a *KernelError (KernelError.Timeout). 0 means
	// DefaultTimeout; negative means no limit.
	Timeout time.Duration
	// CountSegments makes the dispatch count the device-memory segments
	// each SIMD-group access touches (Counters.Loads, Counters.Stores),
	// which slows it down.
	CountSegments bool
	// DeviceRaces makes the dispatch report races on device memory: two
	// threads of the dispatch accessing the same byte of a buffer, at
	// least one storing, neither atomically, with nothing ordering them
	// (within a threadgroup a barrier with mem_flags::mem_device, or for
	// lanes of one SIMD-group a SIMD-group function; between threadgroups
	// nothing), as a *KernelError. Every access to a buffer the kernel
	// may store to then takes the runtime's slow path and is recorded,
	// which slows the dispatch down. PUREMETAL_EMU_RACES=1 turns it on
	// for every dispatch.
	DeviceRaces bool
}

// Counters are measured by a dispatch.
type Counters struct {
	// Loaded and Stored count the bytes read and written through each
	// buffer binding. An access is charged to the lowest binding index
	// whose range holds it (when bindings overlap).
	Loaded, Stored [MaxBindings]uint64
	// SIMDGroupOps counts SIMD-group functions (including
	// simdgroup_barrier), once per SIMD-group.
	SIMDGroupOps uint64
	// Barriers counts threadgroup_barrier calls, once per threadgroup.
	Barriers uint64
	// SIMDOps counts the SIMD-group functions of SIMDGroupOps by kind.
	SIMDOps [NumSIMDOps]uint64

	// Loads and Stores say how well the accesses through each buffer
	// binding coalesce; counted only when Dispatch.CountSegments is set.
	Loads, Stores [MaxBindings]Segments
	// Untracked counts the lanes' device accesses left out of Loads and
	// Stores: more than a thread can record (1024) between two
	// synchronisation points of its SIMD-group.
	Untracked uint64

	// Threadgroups and ThreadsPerThreadgroup are the dispatch's grid, in
	// threadgroups, and threadgroup size.
	Threadgroups, ThreadsPerThreadgroup [3]int
	// ThreadgroupMemory is the threadgroup memory of one threadgroup in
	// bytes: the lengths the encoder set, and (with CountSegments) the
	// kernel's threadgroup variables.
	ThreadgroupMemory int
	// PrivateBytes is the function's stack need per thread
	// (Function.PrivateBytes).
	PrivateBytes int
}

// KernelError is a fault of a running kernel: a barrier that some threads
// cannot reach, threads at different barriers, simdgroup_matrix functions
// called at different sites, a deadlock, an out-of-bounds device or threadgroup
// memory access, an array index out of bounds, an integer division by zero
// or overflowing, a race on threadgroup memory, a thread's stack overflowing,
// or a dispatch running past its time limit.
type KernelError struct {
	Kernel string
	// File and Line locate the fault in the source (Line 0 if unknown).
	File string
	Line int
	Msg  string
	// Threadgroup and Thread are the positions of the faulting thread
	// (threadgroup_position_in_grid, thread_position_in_threadgroup).
	Threadgroup, Thread [3]int

	kind uint64
}

// OutOfBounds reports whether the fault is an access outside the bound
// buffers (a GPU page fault), rather than a synchronisation fault.
func (e *KernelError) OutOfBounds() bool { return e.kind == faultOutOfBounds }

// Timeout reports whether the dispatch was stopped for running past its
// time limit (Dispatch.Timeout).
func (e *KernelError) Timeout() bool { return e.kind == faultTimeout }

func (e *KernelError) Error() string {
	loc := ""
	if e.Line > 0 {
		loc = fmt.Sprintf(" at %s:%d", e.File, e.Line)
	}
	return fmt.Sprintf("msl: kernel %s%s: %s (threadgroup %v, thread %v)", e.Kernel, loc, e.Msg, e.Threadgroup, e.Thread)
}

// DefaultCacheDir is where Compile keeps translated sources, compiled
// libraries and the runtime when Options.CacheDir is empty:
// os.UserCacheDir()/puremetal/msl (on Linux $XDG_CACHE_HOME/puremetal/msl
// or ~/.cache/puremetal/msl), or the temporary directory's puremetal/msl
// where there is no user cache directory.
func DefaultCacheDir() string { return clang.CacheRoot("") }
