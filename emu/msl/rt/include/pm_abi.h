/* Binary interface between the kernel libraries and the puremetal MSL
 * runtime. Shared by C (runtime.c) and C++ (prelude.h); the Go side mirrors
 * __pm_desc in run.go. Every field of __pm_desc is 8 bytes wide or a char array
 * so that both layouts agree without padding rules. */
#ifndef __PM_ABI_H
#define __PM_ABI_H

#include <stdint.h>

#define __PM_MAX_BINDINGS 31
#define __PM_MAX_THREADS 1024
#define __PM_SIMD_WIDTH 32
#define __PM_TG_MEMORY_MAX 32768
/* Stack of one GPU thread (fiber); a kernel's frames may use
 * MaxPrivateBytes of it (see frames.go), the rest is kept for the runtime
 * and the C library functions the kernel calls. */
#define __PM_STACK_SIZE (64 * 1024)
#define __PM_MODULE_SEGS 8

/* SIMD-group operation codes, used to tell call sites apart. */
enum {
	__PM_OP_SIMDGROUP_BARRIER = 1,
	__PM_OP_SUM, __PM_OP_PROD, __PM_OP_MIN, __PM_OP_MAX, __PM_OP_AND, __PM_OP_OR, __PM_OP_XOR,
	__PM_OP_PREFIX_INCLUSIVE_SUM, __PM_OP_PREFIX_EXCLUSIVE_SUM,
	__PM_OP_PREFIX_INCLUSIVE_PRODUCT, __PM_OP_PREFIX_EXCLUSIVE_PRODUCT,
	__PM_OP_SHUFFLE, __PM_OP_SHUFFLE_XOR, __PM_OP_SHUFFLE_UP, __PM_OP_SHUFFLE_DOWN,
	__PM_OP_SHUFFLE_ROTATE_UP, __PM_OP_SHUFFLE_ROTATE_DOWN,
	__PM_OP_BROADCAST, __PM_OP_BROADCAST_FIRST, __PM_OP_ALL, __PM_OP_ANY, __PM_OP_IS_FIRST,
	__PM_OP_BALLOT, __PM_OP_ACTIVE_THREADS_MASK,
	__PM_OP_SIMDGROUP_LOAD, __PM_OP_SIMDGROUP_STORE, __PM_OP_SIMDGROUP_MULTIPLY,
	__PM_OP_SIMDGROUP_MULTIPLY_ACCUMULATE,
	__PM_OP_SHUFFLE_AND_FILL_UP, __PM_OP_SHUFFLE_AND_FILL_DOWN,
	__PM_OP_COUNT
};

/* Fault kinds reported in __pm_desc.fault_kind. */
enum {
	__PM_FAULT_NONE = 0,
	__PM_FAULT_OUT_OF_BOUNDS,
	__PM_FAULT_BARRIER_DIVERGENCE,
	__PM_FAULT_BARRIER_EARLY_RETURN,
	__PM_FAULT_SIMD_DIVERGENCE,
	__PM_FAULT_DEADLOCK,
	__PM_FAULT_THREADGROUP_MEMORY,
	__PM_FAULT_RESOURCES,
	__PM_FAULT_INTEGER_DIVISION,   /* by zero, or INT_MIN / -1 */
	__PM_FAULT_THREADGROUP_BOUNDS, /* threadgroup memory outside its allocation */
	__PM_FAULT_ARRAY_BOUNDS,       /* index outside an array of known size */
	__PM_FAULT_STACK,              /* access to another thread's stack */
	__PM_FAULT_TIMEOUT,            /* the dispatch ran past its time limit */
	__PM_FAULT_RACE                /* unsynchronised threadgroup memory accesses */
};

/* What every thread of a dispatch shares: bound buffers and the current
 * threadgroup's memory. Lives in the worker arena. */
typedef struct __pm_shared {
	void *buf[__PM_MAX_BINDINGS];
	void *tg[__PM_MAX_BINDINGS];
	uint32_t threadgroups_per_grid[3];
	uint32_t threads_per_grid[3];
	uint32_t dispatch_threads_per_threadgroup[3];
	uint32_t pad;
} __pm_shared;

/* Built-in values of one thread, passed to the kernel entry point. */
typedef struct __pm_thread {
	const __pm_shared *s;
	uint32_t thread_position_in_grid[3];
	uint32_t thread_position_in_threadgroup[3];
	uint32_t threadgroup_position_in_grid[3];
	uint32_t threads_per_threadgroup[3];
	uint32_t thread_index_in_threadgroup;
	uint32_t thread_index_in_simdgroup;
	uint32_t simdgroup_index_in_threadgroup;
	uint32_t simdgroups_per_threadgroup;
	uint32_t dispatch_simdgroups_per_threadgroup;
	uint32_t pad;
} __pm_thread;

typedef void (*__pm_entry_fn)(const __pm_thread *);

/* Exchange record of one SIMD-group operation: the lane that completes the
 * group computes every participating lane's result. Each lane stores its
 * operand and result addresses when it reaches a SIMD-group function, so
 * those of a lane outside mask are stale: only lanes in mask are read. */
typedef struct __pm_simd_x {
	uint32_t mask;  /* lanes taking part (live lanes of the SIMD-group) */
	uint32_t lanes; /* lanes in the SIMD-group (32 except at a partial edge) */
	const void *in[__PM_SIMD_WIDTH];
	void *out[__PM_SIMD_WIDTH];
} __pm_simd_x;

/* The start of a thread's scheduling state in the runtime, which a kernel
 * reads and writes where the thread waits at a SIMD-group function
 * (metal_stdlib, __pm_simd_wait): where the thread resumes (__pm_switch),
 * and whether, once it runs again, it computes the function for the lanes
 * that wait with it. */
typedef struct __pm_fiber_head {
	void *sp;
	uint32_t compute;
} __pm_fiber_head;

/* What __pm_simd tells the lane that reached a SIMD-group function: switch
 * from thread f to the stack sp, or (sp NULL) go on as f, which then
 * computes the function. */
typedef struct __pm_simd_next {
	__pm_fiber_head *f;
	void *sp;
} __pm_simd_next;

/* What the access hooks' fast path reads and writes, which the kernel
 * libraries inline at every load and store (prelude.h) and the runtime's
 * slow path fills (runtime.c, pm_access): the running thread's stack, the
 * bytes counted per binding and a cache of pages known to lie inside one
 * binding. To stop a dispatch (its time limit passed, or another worker
 * faulted) the runtime's watchdog sets halt and empties the stack and the
 * cache, so that the worker's next access takes the slow path, which
 * stops there. */
#define __PM_PAGE_SHIFT 12
#define __PM_PAGES 64
#define __PM_UNCOUNTED __PM_MAX_BINDINGS
/* One page of the access hooks' cache (__pm_access_state.pages): the len
 * bytes from lo[0] lie inside the page and inside the binding counted in
 * count[.][k] (or in memory that is not counted); loads there may go
 * ahead, and stores from lo[1], which is __PM_NO_PAGE where stores may not
 * reach (the library's constants). n counts the bytes loaded ([0]) and
 * stored ([1]) there since the page was cached, which the runtime adds to
 * count when it replaces the entry and at the end of a dispatch. An empty
 * entry (__PM_EMPTY_PAGE) has lo __PM_NO_PAGE. */
struct __attribute__((aligned(64))) __pm_page {
	uint64_t lo[2], n[2];
	uint32_t len, k;
};
/* An address above every user address: a - __PM_NO_PAGE exceeds any len. */
#define __PM_NO_PAGE ((uint64_t)1 << 63)
/* The fewest bytes of a page an entry holds: the largest access, so that
 * len - size never wraps. */
#define __PM_PAGE_MIN 16
/* An entry that holds no page, counted nowhere. */
#define __PM_EMPTY_PAGE {.lo = {__PM_NO_PAGE, __PM_NO_PAGE}, .len = __PM_PAGE_MIN, .k = __PM_UNCOUNTED}
typedef struct __pm_access_state {
	uint32_t halt;     /* set by the watchdog: the dispatch stops */
	uint64_t stack_lo; /* the running fiber's stack, __PM_STACK_SIZE bytes (0: none) */
	/* bytes loaded ([0]) and stored ([1]) per binding index, but for
	 * those still in pages[].n; the extra slot takes accesses that are not
	 * counted */
	uint64_t count[2][__PM_MAX_BINDINGS + 1];
	/* per page (1 << __PM_PAGE_SHIFT bytes), of which it holds one of those
	 * at the same index modulo __PM_PAGES */
	struct __pm_page pages[__PM_PAGES];
} __pm_access_state;

/* Context switch between threads (fibers), used by the runtime and inlined
 * by the kernels where a thread waits at a SIMD-group function
 * (metal_stdlib, __pm_simd_wait). __pm_switch stores on the current stack
 * where the thread resumes, its frame pointer and from, stores the stack
 * pointer in from->sp and jumps to where the stack new_sp says (stored by
 * __pm_switch itself, or by the runtime's __pm_fiber_init for a thread that
 * has not run). Once the thread runs again it returns from->compute. It is
 * inline assembly that clobbers every other register, so the compiler
 * saves only those it keeps live, and it neither calls nor returns, so the
 * processor's prediction of returns stays in step with the threads. On
 * x86-64 it first steps over the red zone below the stack pointer. */
#if defined(__x86_64__)
#define __PM_SWITCH_GAP 152 /* the red zone and the three saved words */
static inline __attribute__((always_inline)) uint32_t __pm_switch(__pm_fiber_head *from, void *new_sp) {
	uint32_t compute;
	__asm__ volatile(
		"subq $128, %%rsp\n\t"
		"pushq %%rdi\n\t"
		"leaq 1f(%%rip), %%rax\n\t"
		"pushq %%rbp\n\t"
		"pushq %%rax\n\t"
		"movq %%rsp, (%%rdi)\n\t"
		"movq %%rsi, %%rsp\n\t"
		"popq %%rax\n\t"
		"popq %%rbp\n\t"
		"jmpq *%%rax\n"
		"1:\n\t"
		"popq %%rdi\n\t"
		"movl %c3(%%rdi), %%eax\n\t"
		"addq $128, %%rsp\n\t"
		: "=a"(compute), "+D"(from), "+S"(new_sp)
		: "i"(__builtin_offsetof(__pm_fiber_head, compute))
		: "rbx", "rcx", "rdx", "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15", "xmm0", "xmm1",
		  "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13",
		  "xmm14", "xmm15", "memory", "cc");
	return compute;
}
#elif defined(__aarch64__)
#define __PM_SWITCH_GAP 32 /* the three saved words, and a word that keeps the stack aligned */
static inline __attribute__((always_inline)) uint32_t __pm_switch(__pm_fiber_head *from, void *new_sp) {
	register __pm_fiber_head *x0 __asm__("x0") = from;
	register void *x1 __asm__("x1") = new_sp;
	register uint64_t x2 __asm__("x2");
	__asm__ volatile(
		"adr x9, 1f\n\t"
		"stp x0, xzr, [sp, #-16]!\n\t"
		"stp x29, x9, [sp, #-16]!\n\t"
		"mov x10, sp\n\t"
		"str x10, [x0]\n\t"
		"mov sp, x1\n\t"
		"ldp x29, x9, [sp], #16\n\t"
		"br x9\n"
		"1:\n\t"
		"ldr x0, [sp], #16\n\t"
		"ldr w2, [x0, %3]\n\t"
		: "+r"(x0), "+r"(x1), "=r"(x2)
		: "i"(__builtin_offsetof(__pm_fiber_head, compute))
		: "x3", "x4", "x5", "x6", "x7", "x8", "x9", "x10", "x11", "x12", "x13", "x14", "x15", "x16",
		  "x17", "x18", "x19", "x20", "x21", "x22", "x23", "x24", "x25", "x26", "x27", "x28", "x30", "v0", "v1",
		  "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10", "v11", "v12", "v13", "v14", "v15", "v16", "v17",
		  "v18", "v19", "v20", "v21", "v22", "v23", "v24", "v25", "v26", "v27", "v28", "v29", "v30", "v31",
		  "memory", "cc");
	return (uint32_t)x2;
}
#else
#error "puremetal MSL runtime: unsupported architecture (x86-64 and aarch64 only)"
#endif

/* The stack pointer: below it lie none of the running thread's frames. */
#define __PM_INLINE static inline __attribute__((always_inline, nodebug, no_sanitize("address", "undefined", "coverage")))
__PM_INLINE uint64_t __pm_stack_pointer(void) {
	uint64_t sp;
#if defined(__x86_64__)
	__asm__("movq %%rsp, %0" : "=r"(sp));
#else
	__asm__("mov %0, sp" : "=r"(sp));
#endif
	return sp;
}

/* Whether [a, a+size) lies in the running thread's own frames: its stack
 * (__PM_STACK_SIZE bytes from stack_lo), from the stack pointer (below
 * every frame of the kernel's) up. Below the stack pointer lie no frames
 * of the thread, and a pointer there points outside the memory it was
 * made for. */
__PM_INLINE int __pm_in_frames(uint64_t stack_lo, uint64_t a, uint64_t size) {
	return a - stack_lo <= __PM_STACK_SIZE - size && a >= __pm_stack_pointer();
}

/* The access hooks' fast path, for an access of size bytes at a: whether
 * it is settled, in a page the cache knows (then it is counted) or in the
 * running thread's own frames (its stack from the stack pointer up).
 * Anything else is the slow path's. One comparison tells an access inside
 * a cached page: another page at the same index lies at least __PM_PAGES
 * pages away, farther than len. */
__PM_INLINE int __pm_access_fast(__pm_access_state *s, uint64_t a, uint64_t size, int store) {
	/* &s->pages[(a >> __PM_PAGE_SHIFT) % __PM_PAGES], from a in two instructions */
	struct __pm_page *c = (struct __pm_page *)((char *)s->pages + ((a >> (__PM_PAGE_SHIFT - 6)) & ((__PM_PAGES - 1) << 6)));
	if (__builtin_expect(a - c->lo[store] <= c->len - size, 1)) {
		c->n[store] += size;
		return 1;
	}
	return __pm_in_frames(s->stack_lo, a, size);
}

/* Segment counts of the accesses through one buffer binding, loads or
 * stores: a SIMD-group access is one memory instruction executed by the
 * lanes of a SIMD-group between two of its synchronisation points (the same
 * code address, the same occurrence in each lane). */
typedef struct __pm_seg_counts {
	uint64_t accesses;      /* SIMD-group accesses */
	uint64_t lane_accesses; /* the lanes' accesses they are made of */
	uint64_t bytes;         /* bytes the lanes move */
	uint64_t unique_bytes;  /* distinct bytes each touches, summed (a broadcast counts once) */
	uint64_t seg32, seg128; /* distinct 32- and 128-byte segments each touches, summed */
	uint64_t min32, min128; /* the fewest each could touch: ceil(unique / 32), ceil(unique / 128) */
} __pm_seg_counts;

/* One dispatch, filled by Go (inputs) and by the runtime (outputs). */
typedef struct __pm_desc {
	uint64_t entry;
	uint64_t module_lo, module_hi;
	uint64_t buf_ptr[__PM_MAX_BINDINGS];
	uint64_t buf_len[__PM_MAX_BINDINGS];
	uint64_t tg_len[__PM_MAX_BINDINGS];
	uint64_t threadgroups[3];
	uint64_t threads_per_threadgroup[3];
	uint64_t threads_per_grid[3];
	uint64_t order; /* 0 forward, 1 reverse, 2 shuffled */
	uint64_t seed;
	uint64_t workers;
	uint64_t timeout_ns; /* 0: no limit */
	/* outputs */
	uint64_t loaded[__PM_MAX_BINDINGS];
	uint64_t stored[__PM_MAX_BINDINGS];
	uint64_t simd_ops;
	uint64_t barriers;
	uint64_t fault_kind;
	uint64_t fault_line;
	uint64_t fault_pc;
	uint64_t fault_threadgroup[3];
	uint64_t fault_thread[3];
	/* the other access of a race */
	uint64_t fault_pc2;
	uint64_t fault_thread2[3];
	char fault_file[256];
	char fault_msg[768];
	/* structural counters (runtime.c, section "Structural counters") */
	uint64_t track_segments;               /* input: 1 to count segments */
	uint64_t simd_by_op[__PM_OP_COUNT];       /* SIMD-group functions by operation code */
	__pm_seg_counts seg[__PM_MAX_BINDINGS][2]; /* by binding; [0] loads, [1] stores */
	uint64_t seg_untracked;                /* lane accesses past the record limit, not in seg */
	uint64_t tg_static;                    /* threadgroup variables' bytes, largest threadgroup */
	/* input: the kernel library's readable segments, [lo, hi) each (hi 0:
	 * none), where its constants lie; between them may lie unmapped pages */
	uint64_t module_seg[__PM_MODULE_SEGS][2];
	uint64_t device_races;                 /* input: 1 to report device memory races */
	uint64_t read_only;                    /* input: bit i set for a buffer(i) the kernel cannot store to */
} __pm_desc;

#endif
