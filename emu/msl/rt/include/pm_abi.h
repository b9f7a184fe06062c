/* Binary interface between the kernel libraries and the puremetal MSL
 * runtime. Shared by C (runtime.c) and C++ (prelude.h); the Go side mirrors
 * pm_desc in run.go. Every field of pm_desc is 8 bytes wide or a char array
 * so that both layouts agree without padding rules. */
#ifndef PM_ABI_H
#define PM_ABI_H

#include <stdint.h>

#define PM_MAX_BINDINGS 31
#define PM_MAX_THREADS 1024
#define PM_SIMD_WIDTH 32
#define PM_TG_MEMORY_MAX 32768
/* Stack of one GPU thread (fiber); a kernel's frames may use
 * MaxPrivateBytes of it (see frames.go), the rest is kept for the runtime
 * and the C library functions the kernel calls. */
#define PM_STACK_SIZE (64 * 1024)
#define PM_MODULE_SEGS 8

/* SIMD-group operation codes, used to tell call sites apart. */
enum {
	PM_OP_SIMDGROUP_BARRIER = 1,
	PM_OP_SUM, PM_OP_PROD, PM_OP_MIN, PM_OP_MAX, PM_OP_AND, PM_OP_OR, PM_OP_XOR,
	PM_OP_PREFIX_INCLUSIVE_SUM, PM_OP_PREFIX_EXCLUSIVE_SUM,
	PM_OP_PREFIX_INCLUSIVE_PRODUCT, PM_OP_PREFIX_EXCLUSIVE_PRODUCT,
	PM_OP_SHUFFLE, PM_OP_SHUFFLE_XOR, PM_OP_SHUFFLE_UP, PM_OP_SHUFFLE_DOWN,
	PM_OP_SHUFFLE_ROTATE_UP, PM_OP_SHUFFLE_ROTATE_DOWN,
	PM_OP_BROADCAST, PM_OP_BROADCAST_FIRST, PM_OP_ALL, PM_OP_ANY, PM_OP_IS_FIRST,
	PM_OP_BALLOT, PM_OP_ACTIVE_THREADS_MASK,
	PM_OP_SIMDGROUP_LOAD, PM_OP_SIMDGROUP_STORE, PM_OP_SIMDGROUP_MULTIPLY,
	PM_OP_SIMDGROUP_MULTIPLY_ACCUMULATE,
	PM_OP_SHUFFLE_AND_FILL_UP, PM_OP_SHUFFLE_AND_FILL_DOWN,
	PM_OP_COUNT
};

/* Fault kinds reported in pm_desc.fault_kind. */
enum {
	PM_FAULT_NONE = 0,
	PM_FAULT_OUT_OF_BOUNDS,
	PM_FAULT_BARRIER_DIVERGENCE,
	PM_FAULT_BARRIER_EARLY_RETURN,
	PM_FAULT_SIMD_DIVERGENCE,
	PM_FAULT_DEADLOCK,
	PM_FAULT_THREADGROUP_MEMORY,
	PM_FAULT_RESOURCES,
	PM_FAULT_INTEGER_DIVISION,   /* by zero, or INT_MIN / -1 */
	PM_FAULT_THREADGROUP_BOUNDS, /* threadgroup memory outside its allocation */
	PM_FAULT_ARRAY_BOUNDS,       /* index outside an array of known size */
	PM_FAULT_STACK,              /* access to another thread's stack */
	PM_FAULT_TIMEOUT,            /* the dispatch ran past its time limit */
	PM_FAULT_RACE                /* unsynchronised threadgroup memory accesses */
};

/* What every thread of a dispatch shares: bound buffers and the current
 * threadgroup's memory. Lives in the worker arena. */
typedef struct pm_shared {
	void *buf[PM_MAX_BINDINGS];
	void *tg[PM_MAX_BINDINGS];
	uint32_t threadgroups_per_grid[3];
	uint32_t threads_per_grid[3];
	uint32_t dispatch_threads_per_threadgroup[3];
	uint32_t pad;
} pm_shared;

/* Built-in values of one thread, passed to the kernel entry point. */
typedef struct pm_thread {
	const pm_shared *s;
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
} pm_thread;

typedef void (*pm_entry_fn)(const pm_thread *);

/* Exchange record of one SIMD-group operation: the lane that completes the
 * group computes every participating lane's result. Each lane stores its
 * operand and result addresses when it reaches a SIMD-group function, so
 * those of a lane outside mask are stale: only lanes in mask are read. */
typedef struct pm_simd_x {
	uint32_t mask;  /* lanes taking part (live lanes of the SIMD-group) */
	uint32_t lanes; /* lanes in the SIMD-group (32 except at a partial edge) */
	const void *in[PM_SIMD_WIDTH];
	void *out[PM_SIMD_WIDTH];
} pm_simd_x;

/* The start of a thread's scheduling state in the runtime, which a kernel
 * reads and writes where the thread waits at a SIMD-group function
 * (metal_stdlib, __pm_simd_wait): where the thread resumes (pm_switch),
 * and whether, once it runs again, it computes the function for the lanes
 * that wait with it. */
typedef struct pm_fiber_head {
	void *sp;
	uint32_t compute;
} pm_fiber_head;

/* What __pm_simd tells the lane that reached a SIMD-group function: switch
 * from thread f to the stack sp, or (sp NULL) go on as f, which then
 * computes the function. */
typedef struct pm_simd_next {
	pm_fiber_head *f;
	void *sp;
} pm_simd_next;

/* What the access hooks' fast path reads and writes, which the kernel
 * libraries inline at every load and store (prelude.h) and the runtime's
 * slow path fills (runtime.c, pm_access): the running thread's stack, the
 * bytes counted per binding and a cache of pages known to lie inside one
 * binding. To stop a dispatch (its time limit passed, or another worker
 * faulted) the runtime's watchdog sets halt and empties the stack and the
 * cache, so that the worker's next access takes the slow path, which
 * stops there. */
#define PM_PAGE_SHIFT 12
#define PM_PAGES 64
#define PM_UNCOUNTED PM_MAX_BINDINGS
/* One page of the access hooks' cache (pm_access_state.pages): the len
 * bytes from lo[0] lie inside the page and inside the binding counted in
 * count[.][k] (or in memory that is not counted); loads there may go
 * ahead, and stores from lo[1], which is PM_NO_PAGE where stores may not
 * reach (the library's constants). n counts the bytes loaded ([0]) and
 * stored ([1]) there since the page was cached, which the runtime adds to
 * count when it replaces the entry and at the end of a dispatch. An empty
 * entry (PM_EMPTY_PAGE) has lo PM_NO_PAGE. */
struct __attribute__((aligned(64))) pm_page {
	uint64_t lo[2], n[2];
	uint32_t len, k;
};
/* An address above every user address: a - PM_NO_PAGE exceeds any len. */
#define PM_NO_PAGE ((uint64_t)1 << 63)
/* The fewest bytes of a page an entry holds: the largest access, so that
 * len - size never wraps. */
#define PM_PAGE_MIN 16
/* An entry that holds no page, counted nowhere. */
#define PM_EMPTY_PAGE {.lo = {PM_NO_PAGE, PM_NO_PAGE}, .len = PM_PAGE_MIN, .k = PM_UNCOUNTED}
typedef struct pm_access_state {
	uint32_t halt;     /* set by the watchdog: the dispatch stops */
	uint64_t stack_lo; /* the running fiber's stack, PM_STACK_SIZE bytes (0: none) */
	/* bytes loaded ([0]) and stored ([1]) per binding index, but for
	 * those still in pages[].n; the extra slot takes accesses that are not
	 * counted */
	uint64_t count[2][PM_MAX_BINDINGS + 1];
	/* per page (1 << PM_PAGE_SHIFT bytes), of which it holds one of those
	 * at the same index modulo PM_PAGES */
	struct pm_page pages[PM_PAGES];
} pm_access_state;

/* Context switch between threads (fibers), used by the runtime and inlined
 * by the kernels where a thread waits at a SIMD-group function
 * (metal_stdlib, __pm_simd_wait). pm_switch stores on the current stack
 * where the thread resumes, its frame pointer and from, stores the stack
 * pointer in from->sp and jumps to where the stack new_sp says (stored by
 * pm_switch itself, or by the runtime's pm_fiber_init for a thread that
 * has not run). Once the thread runs again it returns from->compute. It is
 * inline assembly that clobbers every other register, so the compiler
 * saves only those it keeps live, and it neither calls nor returns, so the
 * processor's prediction of returns stays in step with the threads. On
 * x86-64 it first steps over the red zone below the stack pointer. */
#if defined(__x86_64__)
#define PM_SWITCH_GAP 152 /* the red zone and the three saved words */
static inline __attribute__((always_inline)) uint32_t pm_switch(pm_fiber_head *from, void *new_sp) {
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
		: "i"(__builtin_offsetof(pm_fiber_head, compute))
		: "rbx", "rcx", "rdx", "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15", "xmm0", "xmm1",
		  "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13",
		  "xmm14", "xmm15", "memory", "cc");
	return compute;
}
#elif defined(__aarch64__)
#define PM_SWITCH_GAP 32 /* the three saved words, and a word that keeps the stack aligned */
static inline __attribute__((always_inline)) uint32_t pm_switch(pm_fiber_head *from, void *new_sp) {
	register pm_fiber_head *x0 __asm__("x0") = from;
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
		: "i"(__builtin_offsetof(pm_fiber_head, compute))
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
#define PM_INLINE static inline __attribute__((always_inline, nodebug, no_sanitize("address", "undefined", "coverage")))
PM_INLINE uint64_t pm_stack_pointer(void) {
	uint64_t sp;
#if defined(__x86_64__)
	__asm__("movq %%rsp, %0" : "=r"(sp));
#else
	__asm__("mov %0, sp" : "=r"(sp));
#endif
	return sp;
}

/* Whether [a, a+size) lies in the running thread's own frames: its stack
 * (PM_STACK_SIZE bytes from stack_lo), from the stack pointer (below
 * every frame of the kernel's) up. Below the stack pointer lie no frames
 * of the thread, and a pointer there points outside the memory it was
 * made for. */
PM_INLINE int pm_in_frames(uint64_t stack_lo, uint64_t a, uint64_t size) {
	return a - stack_lo <= PM_STACK_SIZE - size && a >= pm_stack_pointer();
}

/* The access hooks' fast path, for an access of size bytes at a: whether
 * it is settled, in a page the cache knows (then it is counted) or in the
 * running thread's own frames (its stack from the stack pointer up).
 * Anything else is the slow path's. One comparison tells an access inside
 * a cached page: another page at the same index lies at least PM_PAGES
 * pages away, farther than len. */
PM_INLINE int pm_access_fast(pm_access_state *s, uint64_t a, uint64_t size, int store) {
	/* &s->pages[(a >> PM_PAGE_SHIFT) % PM_PAGES], from a in two instructions */
	struct pm_page *c = (struct pm_page *)((char *)s->pages + ((a >> (PM_PAGE_SHIFT - 6)) & ((PM_PAGES - 1) << 6)));
	if (__builtin_expect(a - c->lo[store] <= c->len - size, 1)) {
		c->n[store] += size;
		return 1;
	}
	return pm_in_frames(s->stack_lo, a, size);
}

/* Segment counts of the accesses through one buffer binding, loads or
 * stores: a SIMD-group access is one memory instruction executed by the
 * lanes of a SIMD-group between two of its synchronisation points (the same
 * code address, the same occurrence in each lane). */
typedef struct pm_seg_counts {
	uint64_t accesses;      /* SIMD-group accesses */
	uint64_t lane_accesses; /* the lanes' accesses they are made of */
	uint64_t bytes;         /* bytes the lanes move */
	uint64_t unique_bytes;  /* distinct bytes each touches, summed (a broadcast counts once) */
	uint64_t seg32, seg128; /* distinct 32- and 128-byte segments each touches, summed */
	uint64_t min32, min128; /* the fewest each could touch: ceil(unique / 32), ceil(unique / 128) */
} pm_seg_counts;

/* One dispatch, filled by Go (inputs) and by the runtime (outputs). */
typedef struct pm_desc {
	uint64_t entry;
	uint64_t module_lo, module_hi;
	uint64_t buf_ptr[PM_MAX_BINDINGS];
	uint64_t buf_len[PM_MAX_BINDINGS];
	uint64_t tg_len[PM_MAX_BINDINGS];
	uint64_t threadgroups[3];
	uint64_t threads_per_threadgroup[3];
	uint64_t threads_per_grid[3];
	uint64_t order; /* 0 forward, 1 reverse, 2 shuffled */
	uint64_t seed;
	uint64_t workers;
	uint64_t timeout_ns; /* 0: no limit */
	/* outputs */
	uint64_t loaded[PM_MAX_BINDINGS];
	uint64_t stored[PM_MAX_BINDINGS];
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
	uint64_t simd_by_op[PM_OP_COUNT];       /* SIMD-group functions by operation code */
	pm_seg_counts seg[PM_MAX_BINDINGS][2]; /* by binding; [0] loads, [1] stores */
	uint64_t seg_untracked;                /* lane accesses past the record limit, not in seg */
	uint64_t tg_static;                    /* threadgroup variables' bytes, largest threadgroup */
	/* input: the kernel library's readable segments, [lo, hi) each (hi 0:
	 * none), where its constants lie; between them may lie unmapped pages */
	uint64_t module_seg[PM_MODULE_SEGS][2];
} pm_desc;

#endif
