// Package msl runs Metal Shading Language compute kernels on the CPU, so
// that the exact .metal sources of a project execute on Linux (in CI, for
// example) without a Mac. It is the engine of puremetal's emulated Metal
// device; it can also be used on its own.
//
// # Compiling
//
// Compile first runs clang's preprocessor over the source, as Apple's
// compiler does, with Apple's predefined macros (__METAL_VERSION__ from the
// language version, __METAL__, __METAL_MACOS__, __HAVE_BFLOAT__ from MSL
// 3.1) and CompileOptions.PreprocessorMacros, so macros, #if and kernels or
// instantiations declared through macros (MLX's instantiate_kernel) work.
// Below MSL 3.1 bfloat does not exist, as with Apple's compiler: a program
// naming bfloat (or bfloat2, 3, 4) gets "unknown type name 'bfloat'" at
// each use.
// CompileFile compiles a file and the files it includes (#include "..."
// beside the including file, then CompileOptions.IncludeDirs, as xcrun
// metal -I does; #pragma once and include guards work), naming each
// file's lines in diagnostics and faults.
// It then translates the result to C++ and builds it with clang++ (Debian
// and Ubuntu: apt-get install clang) into a shared object loaded with
// purego; no cgo is involved. A force-included prelude and a shim
// <metal_stdlib> supply MSL's scalar and vector types (ext_vector_type
// vectors, so swizzles work and sizeof(float3) == 16; bfloat), matrix
// types, the threadgroup address space, namespace metal (math, geometric, relational
// and integer functions, with fast:: and precise::; type traits;
// numeric_limits; as_type), barriers, the SIMD-group functions,
// simdgroup_matrix and atomics, and <metal_logging>'s os_log (its log calls
// print nothing, as in a library compiled without
// MTLCompileOptions.enableLogging). Headers shared with the host may
// include <simd/simd.h> (the simd_, vector_ and matrix_ type names) and
// <TargetConditionals.h> (a Mac's TARGET_OS_ macros). The math functions are declared in
// namespace metal (and fast::, precise::) by name, so a program may add
// overloads there (MLX's bf16_math.h adds bfloat16_t's) and still reach
// them as metal::exp; the __metal_* builtins of Apple's compiler that such
// headers call (__metal_exp(x, __METAL_MAYBE_FAST_MATH__),
// __metal_simd_sum) are the same functions. The translator, written in Go, reads every
// kernel (kernel or [[kernel]]) and every template [[host_name("...")]]
// instantiation, records their parameters (buffer and threadgroup indices,
// built-ins, read-only buffers) and emits a launcher per entry point. It
// follows the preprocessor's line markers and its few rewrites keep every
// line in place, so compiler diagnostics and kernel faults name the
// original .metal line. Pragmas asking for a loop to be unrolled (#pragma
// unroll, #pragma clang loop unroll(full)) are hints the emulated device
// leaves to its optimizer: unrolled copies of a loop body, each with its
// access checks, cost compile time and gain nothing on the CPU. Function
// constants (constant T name [[function_constant(i)]]) have no value in a library
// from Compile; Library.Specialize compiles the source again with values,
// as newFunctionWithName:constantValues:error: does, and
// Library.SpecializeFunctions builds several functions with the same values
// at once (as a host gives a kernel family's constants to each of its
// kernels).
// Compiled libraries are cached in the user cache directory
// (os.UserCacheDir()/puremetal/msl, or CompileOptions.CacheDir) by a hash of
// the source, the runtime, the options, the compiler version and the
// target: a second run only loads them. The cache is pruned after builds,
// least recently used first, to 80% of a cap (DefaultCacheMax, 4 GiB, or
// PUREMETAL_EMU_CACHE_MAX), keeping files used in the last ten minutes.
// A library of more than 64 entry points is built in parts of 64
// consecutive ones, each translated with those alone, by as many compiler
// runs at once as GOMAXPROCS allows; the whole library is checked first by
// the compiler's front end alone (once: a marker in the cache records that
// it passed), so that a compile error anywhere in it is reported in
// seconds, before any part is built. CompileOptions.Lazy builds each
// function only when it is first fetched, which makes large libraries
// (thousands of instantiations) cheap when a program uses a few of their
// kernels. Kernels and the runtime are built for the architecture of the
// running process, also when clang++ is another architecture's (an arm64 process under qemu-user runs the host's
// x86-64 clang++: it then builds with --target=aarch64-linux-gnu and lld,
// against the cross C library, Debian's libc6-dev-arm64-cross and
// libgcc-12-dev-arm64-cross). MSL's char is signed on every target.
//
// # Running
//
// Function.Run executes one dispatch, given the buffer bindings, the
// threadgroup memory lengths and the grid (dispatchThreadgroups or
// dispatchThreads with partial edge threadgroups). As in Metal, a buffer
// the function does not use may be left unbound; its pointer is null, and
// an access through it is an out-of-bounds fault naming the unbound
// buffers. The threads of a
// threadgroup run as fibers on one OS thread, with a hand-written context
// switch (x86-64 and arm64); threadgroups are shared out among worker
// threads (Dispatch.Workers, at most 64; the dispatches running at once
// share 64 workers' memory, and one waits when all are busy). SIMD-groups
// have 32 lanes, and SIMD-group functions reduce over the lanes that call
// them together (below). Threadgroup memory is filled with 0xFF bytes (NaN) before each
// threadgroup. An initializer of a threadgroup variable (threadgroup float
// a[32] = {0};) is accepted and not applied, as with Apple's compiler,
// which leaves such memory uninitialized: it holds the fill until stored. The scheduling Order (forward, reverse, shuffled) changes
// which thread runs first between barriers.
//
// Every memory access of a kernel is checked (clang's sanitizer-coverage
// load and store hooks, for accesses of 1, 2, 4, 8 and 16 bytes). The
// copies of structs the compiler makes with memcpy, memmove and memset,
// and the loads and stores of other sizes (whole 32-byte vectors: long4,
// ulong3), are checked too: AddressSanitizer, with neither its stack nor
// its globals on, turns them into calls that check and count the ranges
// in pieces of 16 bytes. A load or store outside the bound buffers, or
// outside the threadgroup memory allocation it aims at, stops the dispatch
// before it happens. Run reports such faults as a *KernelError naming the
// kernel, the source line and the thread: an out-of-bounds device or
// threadgroup memory access, an index outside an array declared in the
// kernel (thread or threadgroup, -fsanitize=array-bounds), a race on
// threadgroup memory (naming both accesses), with Dispatch.DeviceRaces a
// race on device memory (below), a barrier that some threads
// cannot reach (a barrier after an early return), threads waiting at
// different barriers, simdgroup_matrix functions called at different sites
// by the lanes of one SIMD-group, a deadlock, an integer division by zero or
// INT_MIN / -1, threadgroup memory beyond 32 KiB, a dispatch running past
// its time limit (Dispatch.Timeout), or a thread's stack overflowing. The
// same hooks count the bytes loaded and stored through each buffer binding
// (Counters), which is how tests measure a kernel's memory traffic. With
// Dispatch.CountSegments they also group the lanes' accesses into
// SIMD-group accesses (the same instruction, the same occurrence since the
// SIMD-group last synchronised) and count the 32- and 128-byte segments
// each touches against the fewest its distinct bytes need: how well the
// accesses coalesce. SIMD-group functions are counted by kind, and
// Counters.ShuffleSteps weighs them by the lane-exchange steps they take
// (5 for a reduction over 32 lanes, 1 for a shuffle).
//
// The hooks settle the common accesses in a few comparisons: those to the
// thread's own frames, and those inside the part of a 4 KiB page that an
// earlier access found to belong to one binding (and to no binding of a
// lower index) or to the library's constants; every other access takes
// the full check. That fast path is compiled into the
// kernel library at each access (the library is optimised a second time
// once the hooks' calls are in place), so that an access it settles costs
// no call. Counting segments sends every access to a binding through the
// full check, so a dispatch with Dispatch.CountSegments runs slower. The
// launcher reads the thread's built-ins and the bindings' addresses
// unchecked (the emulator's own memory) and calls the kernel, which is
// checked, through a function of its own.
//
// # Known differences from Apple's compiler and GPUs
//
//   - Fast math: Metal compiles with fast math unless told otherwise;
//     CompileOptions.FastMath is false by default here (set it to match
//     MTLCompileOptions). Without it every float operation is an IEEE-754
//     single-precision operation in program order, with no fused
//     multiply-add unless fma() is called; Apple's compiler fuses and
//     reassociates. Math functions come from the C library (glibc),
//     not Apple's GPU implementations, so results can differ in the last
//     bits (within the ULP bounds of the specification's tables, which
//     the tests check); fast:: and precise:: are the same functions.
//     sinpi, cospi and tanpi reduce their argument exactly and are exact
//     at integers and half-integers. The standard library's families
//     (common, integer, relational, math, geometric, atomic, SIMD-group
//     and quad-group functions, pack and unpack functions, numeric_limits,
//     metal::array) are there function by function; the pack and unpack
//     functions put the first component in the least significant bits
//     (unorm565 and unorm10a2 too, whose layout the specification does
//     not draw); the integer and three-operand functions are
//     templates, so that a program's own function of the same name and
//     parameter types is chosen over them rather than being ambiguous.
//     assert does nothing and does not evaluate its condition, as Metal's
//     library defines it.
//   - Floating-point literals without a suffix are float, as in MSL (the
//     translator adds the f suffix); 1.5h literals are half. double is
//     rejected with a compile error.
//   - half arithmetic rounds every operation to half precision, as on the
//     GPU; half math functions (exp, sqrt, ...) compute in float and round.
//   - Address spaces: threadgroup is a distinct address space, so mixing
//     threadgroup with device or thread pointers is a compile error as on
//     Apple's compiler. device and constant are the generic address space
//     (constant adds const): assigning a constant pointer to a device
//     pointer is rejected (const), but a device pointer to a constant one,
//     or the address of a local variable to a device pointer, compiles here
//     and not on Apple's compiler. A struct stored in threadgroup memory
//     is in the generic address space, so that it is copied as a whole,
//     unless the program declares a threadgroup reference to a template
//     parameter or typedef (threadgroup T& x, as functions overloaded by
//     address space take): then it cannot be copied as a whole (copy its
//     fields). In the generic address space, such a struct's address does
//     not convert to a threadgroup S* parameter that names the struct; one
//     whose type is a template parameter named by another parameter too,
//     or a class template's specialization whose template parameters
//     other parameters name (threadgroup indexed<T> shared[N] beside
//     device const T *src), follows the argument, as does a reference to
//     an array, const threadgroup Vec (&q)[N], whose Vec another parameter
//     names; so does a cast, (threadgroup S *) p or
//     reinterpret_cast<threadgroup S *>(p). bfloat (a class here)
//     declared in threadgroup memory in a function body, by name or
//     through a typedef or template parameter, is in the generic address
//     space, so that it is assigned as a whole, and so is the pointer a
//     cast (threadgroup bfloat *) p (bfloat2, 3, 4 too) gives; its
//     accesses are checked and counted as threadgroup memory all the same.
//     A function template
//     whose parameters threadgroup T* (or T&) alone name its type parameter
//     T takes such bfloat (or matrix) arrays too: it is repeated with
//     those parameters generic, for those types only (MLX's quantized
//     gemm_loop_aligned(threadgroup T* As, threadgroup T* Bs, ...)).
//   - Vectors: boolN are int vectors, and comparing vectors yields int
//     vectors (0 or -1 per component); all, any and select accept them.
//     Vector constructors such as float4(a.xy, 0, 1) and direct
//     initialisation with several values (float4 v(1, 2, 3, 4);) work,
//     also qualified (metal::float2 a(x, y)) and through vec<T, N> or an
//     alias template of a vector type (vec4<T>(a, b, c, d), vec<float,
//     4>(h)); static_cast<float4>(h) to a vector type or such an alias
//     converts the components, also through a template parameter or
//     typedef T naming a vector type (static_cast<T>(h)).
//     Casts in cast notation that name the vector type, (float4)h, convert
//     as in MSL, and so do casts through a template type parameter or a
//     typedef or alias name T ((T)h, and T(h) with one argument in an
//     expression). A comparison of vectors that is the whole operand of
//     such a conversion (float4(a > b), (float4)(a > b), T(x > 0)) gives 1
//     for true, as in MSL; a bool vector held in a variable and converted
//     later gives -1, since boolN are int vectors. A brace list
//     passed as a function argument (f({a, b, c})) converts to the
//     parameter's type, vectors included. A function template deduces T
//     from a parameter vec<T, N>, or an alias template naming one, for
//     every element type (bfloat too) when no other parameter names T;
//     T then moves behind new template parameters, so such a function is
//     left as written when the program gives its name template arguments
//     (f<float>(v)), and T is not deduced there.
//   - Not supported, each failing with "... is not supported by the
//     emulated device", a diagnostic in Apple's form (file:line:col:
//     error: ...) at the program's own use, naming nothing of the
//     translation: textures, samplers, imageblocks, visible and
//     intersection function tables, ray tracing, indirect command buffers,
//     raster order groups, vertex and fragment functions, simdgroup_matrix
//     shapes other than 8x8, a threadgroup bfloat pointer parameter, a
//     kernel needing more private memory than MaxPrivateBytes, and, in
//     Compile without CompileOptions.IncludeDirs (as in Metal's
//     newLibraryWithSource), #include of files other than Metal's own
//     headers: CompileFile with IncludeDirs builds a program of several
//     files, as Apple's offline compiler (metal -I) does. A vector
//     function constant compiles, but Library.Specialize refuses a value
//     for it; more than 64 threadgroup variables declared in a kernel's
//     body are a fault when the kernel runs.
//   - Quad-group functions (quad_sum, quad_shuffle_xor, quad_ballot, ...)
//     combine the active lanes of each group of four lanes in ascending
//     lane order, and are SIMD-group exchanges of the SIMD-group's lanes
//     calling them at the same site (counted as the SIMD-group function of
//     the same kind); quad_vote holds the quad's lanes in its low four
//     bits.
//   - simdgroup_matrix a * b is a SIMD-group operation at the operator's
//     own site (so lanes calling it from different lines are not told
//     apart), a + b each lane's own. metal::remove_addrspace_t removes
//     threadgroup, the only distinct address space here.
//   - uniform<T> is T. Class template partial specializations that only
//     the address space of a pointer tells apart (S<thread T*> and
//     S<device T*>) are one here: the later ones are left out.
//   - max_total_threads_per_threadgroup may be any constant expression,
//     of a kernel template's parameters too; it is evaluated for each
//     instantiation. A kernel parameter declared as an array (constant
//     int64_t strides[2]) is a buffer, as a pointer would be.
//   - A device or constant buffer, or a threadgroup pointer or reference,
//     without an index attribute takes the lowest index of its kind no
//     attributed parameter uses, in parameter order (llama.cpp's kernels
//     number them 0, 1, 2, ... this way; naga declares its workgroup
//     variables as threadgroup references). A kernel's threadgroup S&
//     parameter of a struct S is in the generic address space, so that
//     it is assigned as a whole.
//   - bfloat is a class (clang has no bfloat arithmetic on x86-64):
//     conversion from float rounds to nearest even, arithmetic computes in
//     float and rounds each result to bfloat, and an operation with a float
//     or half operand yields float. It converts implicitly to float and
//     half, and to integer types by a cast (int(b)) or where it
//     initializes or is assigned to an integer variable (uint8_t q = b;
//     q = b; q += b, the value written __pm_int(b) in a program naming
//     bfloat), not as a function's argument or result, so that
//     c ? b : 0 is a bfloat as in MSL; c ? b : f with f a float or half
//     is a float, as in MSL. To make it so, in a program that names
//     bfloat, each operand of a conditional expression (unless one is a
//     number or it is a template argument) is the right side of a comma
//     expression whose left side names both operands' types, converting a
//     bfloat beside a float or half to float and passing every other
//     operand as it is (an lvalue stays one, a void operand void). An
//     assignment of a bfloat to an integer compiles only in a branch whose
//     condition is a bool template parameter (if (P), if (!P)), which is
//     written if constexpr, so that the branch an instantiation never
//     takes is not compiled (MLX's sort).
//     bfloat2/3/4 have the components x, y, z, w and [i] but no
//     multi-component swizzles.
//   - Matrix types (float4x4, half2x3, matrix<T, C, R> with T float,
//     half or bfloat): column-major, laid out as Metal lays them out
//     (columns are vectors: float3x3 is 48 bytes, 16-byte aligned), with
//     Metal's constructors, operators (+, -, * by a scalar, a vector or a
//     matrix, +=, -=, *=) and transpose and determinant. Arithmetic is in
//     the element type, one rounding per operation, in a fixed order: a
//     matrix times a vector sums the weighted columns in column order, a
//     vector times a matrix each dot product in row order, and determinant
//     expands along the first column (the GPU's order is unspecified).
//     A matrix in threadgroup memory is in the generic address space
//     (threadgroup float4x4 *, a threadgroup array of matrices, or a cast
//     (threadgroup M *) p or declaration in a function body whose type M
//     names a matrix), so such pointers mix with device ones here; a
//     function parameter threadgroup M * whose template parameter M is a
//     matrix does not compile.
//   - simdgroup_matrix: each lane holds its two elements in Apple's layout;
//     simdgroup_load and simdgroup_store are each lane's own accesses, and
//     every load, store and product is a SIMD-group operation (an exchange
//     between the lanes, counted in Counters.SIMDGroupOps). Products
//     compute in float, in k order, one rounding per operation (the GPU's
//     order and precision are unspecified). simdgroup_matrix<T, 8, 8>(d)
//     makes Metal's diagonal matrix (d on the diagonal, zero elsewhere),
//     a SIMD-group operation counted as a simdgroup_load. Every lane must
//     take part; a lane that has returned contributes zeros.
//   - Function constants: a specialization compiles the source again,
//     with the other kernels' bodies and instantiations left out (cached).
//     The constants a function requires are those named in the
//     declarations its kernel reaches by name (over-approximated: a
//     constant named in any function of the same name counts).
//   - Member functions overloaded by address space
//     (complex64_t() threadgroup, operator float() const device): one
//     overload is kept (the thread or unqualified one, else device,
//     constant, threadgroup), callable on objects of every address space
//     but threadgroup; overloads whose results differ in their address
//     space too (thread T& operator[](size_t) thread beside device T&
//     operator[](size_t) device, as SPIRV-Cross's spvUnsafeArray) are one
//     such set. Of functions overloaded by the thread and device
//     qualifiers of their parameters or result (operator+=(thread T&, T)
//     and operator+=(device T&, T)), the first without device is kept; a
//     threadgroup or constant overload stays a function of its own.
//   - SIMD-group functions: reductions and prefix operations combine the
//     lanes in ascending lane order (the GPU's order is unspecified);
//     threads_per_simdgroup is always 32. Called from divergent control
//     flow (if (lane < 16) x = simd_sum(x);), a SIMD-group function runs
//     with the lanes that call it at the same site, its active lanes, as
//     on the GPU: reductions, prefix operations, simd_ballot,
//     simd_active_threads_mask, simd_is_first and the quad-group
//     functions cover those lanes only. A lane waits at a SIMD-group
//     function until every live lane of its SIMD-group waits at one or at
//     a threadgroup barrier; then the lanes at the site that comes first
//     in the source (line, then column) run it, so a call inside a branch
//     runs before the lanes that skipped the branch join the others at a
//     later call. Lanes reaching one site in different loop iterations
//     are taken for one call. A shuffle or broadcast (simd_ and quad_) from
//     a lane of the SIMD-group that is not active at the call (it
//     diverged, or returned) returns that lane's current value of the
//     operand when the operand is a variable the kernel function declares
//     (a parameter or local value of a scalar or vector type, not a
//     reference or pointer declarator, not threadgroup), as on Apple GPUs, where the inactive lane's
//     register still holds it: a Hillis-Steele scan, if (lane >= d) x +=
//     simd_shuffle_up(x, d), gives the prefix sums. The value is read from
//     the same place in that lane's frame of the kernel, as it stands when
//     the lanes at the call run it (a lane that ran on to a later
//     SIMD-group function or barrier, or returned, has its value from
//     there). A lane that has not declared the variable (it returned before the
//     declaration; for a variable declared in a for or if statement's
//     parentheses, any lane), an operand that is an expression (x * 2),
//     a variable of another function or of a program's own type, and a
//     source lane outside a partial SIMD-group give the caller's own value: the GPU's is undefined there (an
//     inactive lane never computed the expression). A SIMD-group function
//     orders the threadgroup memory accesses of its whole SIMD-group
//     (race detection), also when only some lanes call it. The
//     simdgroup_matrix functions need every lane: lanes calling them at
//     different sites, or some at a barrier, are reported as an error.
//   - Barriers must be reached by every thread of the threadgroup; one
//     reached after some threads returned is an error (undefined behaviour
//     on the GPU, which may hang).
//   - Counters count the loads and stores the compiled code performs: a
//     value kept in a register is loaded once, and a struct copy compiled to
//     a memcpy call counts both of its ranges, whole, as the copy reads and
//     writes them. When bindings overlap, an access is charged to the
//     lowest binding index.
//   - Accesses are checked against the bound ranges (Binding.Ptr to
//     Ptr+Len), so reading before the offset of a binding is reported even
//     though it lies inside the MTLBuffer.
//   - What a kernel may touch is told by address: the bound ranges, the
//     threadgroup allocations, its thread's own frames (its stack, above
//     its stack pointer), its built-ins (which the launcher reads once)
//     and, for loads only, the library's constant data (its readable
//     segments). Any other access,
//     load or store, is a fault reported before it happens, never a crash
//     of the process and never a write into the emulator's own memory; up
//     to 2 MiB before and 4 MiB past the start of threadgroup memory it is
//     reported as a threadgroup access with its offset. A pointer moved so
//     far that it lands inside another bound buffer, or in the thread's
//     own frames, is taken for an access there (the hooks see addresses,
//     not the address space a pointer was made in).
//   - Atomics are sequentially consistent (stronger than
//     memory_order_relaxed); atomic_float is supported.
//   - Integer division by zero and signed division overflow (INT_MIN / -1,
//     INT_MIN % -1) are reported as faults (the GPU returns an unspecified
//     value). Other signed integer overflow wraps, as on the GPU (-fwrapv).
//   - Indexing an array whose size the compiler knows (declared in the
//     kernel, thread or threadgroup) outside its bounds is a fault, even
//     where the memory belongs to the kernel; through a pointer, only the
//     buffer or threadgroup allocation bounds are checked.
//   - Time limit: a dispatch running longer than Dispatch.Timeout (default
//     60 s, or the duration in PUREMETAL_EMU_TIMEOUT, "0" for none; any
//     other value fails the dispatch with an error naming the variable,
//     which CheckEnvironment and emu.NewDevice report before it) is
//     stopped with a fault (KernelError.Timeout), as the GPU kills a
//     command buffer that runs too long. Threads cannot be preempted: at
//     the limit (and when a fault on one worker stops the others) a
//     watchdog thread halts the dispatch's workers, and each stops at its
//     next memory access, barrier or SIMD-group function, so a loop that
//     touches no memory and calls no barrier or SIMD-group function (all
//     in registers) is not stopped and hangs its dispatch. The stopped threads are abandoned; the library
//     and the device stay usable.
//   - Private memory: each thread runs on a 64 KiB stack, of which its
//     kernel may use 48 KiB (MaxPrivateBytes), counted at compile time from
//     the compiler's frame sizes along the deepest call chain
//     (Function.PrivateBytes). A kernel needing more is a compile error;
//     Apple's compiler spills large private arrays to device memory
//     instead. A thread whose stack overflows all the same (recursion,
//     which Metal does not allow, counts once) is stopped with a fault at
//     its first access past the stack, which the hooks see; code that
//     writes past it without a load or store the compiler instruments (a
//     call's return address) is not caught before that.
//   - Races on threadgroup memory: two threads of a threadgroup accessing
//     the same bytes, at least one storing, with no
//     threadgroup_barrier(mem_flags::mem_threadgroup) between them is a
//     fault naming both accesses, even when two threads store the same
//     value. A barrier without mem_threadgroup, such as mem_none or
//     mem_device alone, is an execution barrier only, as Metal defines
//     it: it orders the loads before it before the stores after it (a
//     load has returned its value when its thread waits), but a store
//     before it still races with another thread's load or store after it. Lanes
//     of one SIMD-group are also ordered by the SIMD-group functions and
//     simdgroup_barrier(mem_flags::mem_threadgroup) calls they make
//     together (simdgroup_barrier without mem_threadgroup only waits), since the emulator
//     switches between the lanes there, as they step together on the GPU;
//     without one, lanes exchanging values through threadgroup memory race
//     here (the GPU's lockstep is not guaranteed by Metal). Atomic
//     operations are not races, and are not checked against other
//     accesses. Each byte remembers its last store and the first load
//     since, so a race with one of several loading threads names the
//     first of them. Threads of a threadgroup only interleave at barriers
//     and SIMD-group functions, so a race that no detector reports gives
//     the result of one schedule (1,024 threads adding 1 to one float
//     without atomics give 1,024), not the GPU's lost updates.
//   - Races on device memory are reported with Dispatch.DeviceRaces (or
//     PUREMETAL_EMU_RACES=1; off by default, for its cost): two threads of
//     a dispatch accessing the same byte of a buffer, at least one
//     storing, neither atomic, with nothing ordering them, are a fault
//     naming both accesses, the buffer binding and the offset. Within a
//     threadgroup the rules are those of threadgroup memory, with
//     mem_flags::mem_device in place of mem_threadgroup (a barrier
//     without it only waits; lanes of one SIMD-group are also ordered by
//     SIMD-group functions and simdgroup_barrier(mem_flags::mem_device)).
//     Between threadgroups nothing orders accesses (Metal gives no order
//     between the threadgroups of a dispatch): a byte one threadgroup
//     stores and another loads or stores is a race whichever ran first,
//     checked as each threadgroup ends. Bytes are told apart (threads
//     storing adjacent bytes of one word do not race), and a thread's
//     own accesses never race. Loads through a buffer the kernel cannot
//     store to (device const, constant) that overlaps no buffer it can
//     are not recorded, which keeps a model's weights cheap; every other
//     access to a buffer takes the hooks' slow path and is recorded in a
//     hash table of the bytes its threadgroup touched, and those of the
//     whole dispatch are kept until it ends.
package msl
