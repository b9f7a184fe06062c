/* puremetal MSL runtime: runs a compute dispatch of a kernel library on the
 * CPU. Each threadgroup's threads are fibers on one OS thread, switched by
 * __pm_switch; threadgroups are spread over worker threads. Kernel code is
 * compiled with -fsanitize-coverage=trace-loads,trace-stores, so every
 * memory access calls one of the __sanitizer_cov_* hooks below, which count
 * bytes per buffer binding and stop the dispatch before an access outside
 * the bound buffers, outside its threadgroup memory allocation or into
 * another thread's stack happens, or one racing with another thread's
 * access to the same threadgroup memory; they also enforce the dispatch's
 * time limit. The handlers of clang's integer division and array bounds
 * checks (-fsanitize=...) stop the faulting thread the same way.
 *
 * Built once into libpuremetal_msl_rt.so and loaded RTLD_GLOBAL, so kernel
 * libraries resolve the hooks and the pm_* / __pm_* functions against it. */
#define _GNU_SOURCE
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "pm_abi.h"
#include "pm_op_names.h" /* written by package msl from its list of names */

#define EXPORT __attribute__((visibility("default")))

/* ---------------------------------------------------------------------------
 * Fibers start here. __pm_switch (pm_abi.h) switches between them; a new
 * fiber starts in pm_fiber_trampoline, which calls pm_fiber_main for the
 * running fiber (set_cur). */
void pm_fiber_trampoline(void);

#if defined(__x86_64__)
__asm__(
	".text\n"
	".globl pm_fiber_trampoline\n"
	".hidden pm_fiber_trampoline\n"
	".type pm_fiber_trampoline,@function\n"
	"pm_fiber_trampoline:\n"
	"	andq $-16, %rsp\n"
	"	call pm_fiber_main\n"
	"	ud2\n"
	".size pm_fiber_trampoline,.-pm_fiber_trampoline\n");
/* the words __pm_switch pops: where to continue, then the frame pointer */
static void *__pm_fiber_init(char *top) {
	uintptr_t *sp = (uintptr_t *)(((uintptr_t)top & ~(uintptr_t)15) - 16);
	sp[0] = (uintptr_t)pm_fiber_trampoline;
	sp[1] = 0;
	return sp;
}
#elif defined(__aarch64__)
__asm__(
	".text\n"
	".globl pm_fiber_trampoline\n"
	".hidden pm_fiber_trampoline\n"
	".type pm_fiber_trampoline,%function\n"
	"pm_fiber_trampoline:\n"
	"	mov x29, #0\n"
	"	mov x30, #0\n"
	"	bl pm_fiber_main\n"
	"	brk #0\n"
	".size pm_fiber_trampoline,.-pm_fiber_trampoline\n");
/* the words __pm_switch loads: the frame pointer, then where to continue */
static void *__pm_fiber_init(char *top) {
	uintptr_t *sp = (uintptr_t *)(((uintptr_t)top & ~(uintptr_t)15) - 16);
	sp[0] = 0;
	sp[1] = (uintptr_t)pm_fiber_trampoline;
	return sp;
}
#else
#error "puremetal MSL runtime: unsupported architecture (x86-64 and aarch64 only)"
#endif

/* ---------------------------------------------------------------------------
 * Workers and fibers. */
enum { F_READY = 1, F_RUNNING, F_AT_SIMD, F_AT_BARRIER, F_DONE, F_FAULTED };

/* Worker arenas (fiber stacks, threadgroup memory and its shadow) are
 * shared by every dispatch of the process: at most __PM_MAX_ARENAS exist at
 * once, so that many queues or CPUs never run out of address space or
 * memory mappings; a dispatch waits for one when all are busy. */
#define __PM_MAX_ARENAS 64

/* How often the watchdog empties the access state of a dispatch's
 * workers again once the dispatch must stop (see halt). */
#define __PM_HALT_REPEAT_NS 1000000

/* Shadow of one byte of threadgroup memory: the last store, and the loads
 * since (the first loading thread; whether others loaded it too, and from
 * other SIMD-groups), with the barrier epochs they happened in. SIMD-group
 * epochs are kept modulo 2^16, which with sg_epoch_window is enough to
 * tell "a SIMD-group function since" from "none". The program counters of the last store and
 * the first load, for messages, are kept apart (pm_shadow_pc). */
typedef struct pm_shadow {
	uint32_t st_ep; /* threadgroup barrier epoch, 0 for none */
	uint16_t st_tid, st_sgep;
	uint32_t ld_ep;
	uint16_t ld_tid; /* | __PM_LD_MULTI | __PM_LD_MIXED */
	uint16_t ld_sgep; /* of the latest load, unless __PM_LD_MIXED */
} pm_shadow;

typedef struct pm_shadow_pc {
	uint64_t st, ld;
} pm_shadow_pc;

#define __PM_LD_MULTI 0x8000 /* another thread loaded the byte too */
#define __PM_LD_MIXED 0x4000 /* threads of different SIMD-groups loaded it */
#define __PM_LD_TID 0x3fff

/* A threadgroup memory allocation: one set by the encoder (binding >= 0) or
 * a threadgroup variable of the kernel (binding < 0). */
typedef struct pm_tg_alloc {
	uint32_t off, len;
	int binding;
} pm_tg_alloc;

#define __PM_MAX_TG_ALLOCS (__PM_MAX_BINDINGS + 64)
/* The threadgroup zone of an arena: __PM_TG_BEFORE bytes before threadgroup
 * memory and __PM_TG_AFTER bytes from its start (its shadow lies there too).
 * Every access in the zone is a threadgroup memory access, refused unless
 * it lies inside an allocation, so a threadgroup pointer moved that far
 * either way is reported with its threadgroup offset; nothing a kernel may
 * touch otherwise (its stack, the built-ins) lies in the zone. */
#define __PM_TG_BEFORE ((uint64_t)2 << 20)
#define __PM_TG_AFTER ((uint64_t)4 << 20)

/* Fiber stacks lie __PM_STACK_STRIDE bytes apart: __PM_STACK_SIZE each and a
 * gap that gives their tops, where threads spend their time, different
 * cache sets (with 64 KiB between them, every thread's frames would
 * compete for the same few lines of each cache level). */
#define __PM_STACK_COLOR 1088
#define __PM_STACK_STRIDE (__PM_STACK_SIZE + __PM_STACK_COLOR)

/* The access hooks' cache of pages known to be inside one binding
 * (__pm_access_state.pages). */
#define __PM_PAGE ((uint64_t)1 << __PM_PAGE_SHIFT)

/* What the scheduler and the SIMD-group functions read and write of a
 * thread fills its first cache line; its built-ins, which its launcher
 * reads once, follow. */
typedef struct pm_fiber {
	__pm_fiber_head h; /* where it resumes; whether it then computes a SIMD-group function */
	char *stack_top;
	const char *file;
	uint32_t op, line, col;
	uint8_t state, lane, sg;
	uint16_t index;
	__pm_thread t __attribute__((aligned(64)));
	/* the variables of the kernel a shuffle may read from this thread
	 * while it is not active, that it declared (__pm_lane_declared): their
	 * distance below stack_top */
	uint32_t declared[8];
	uint32_t n_declared;
} pm_fiber;
_Static_assert(offsetof(pm_fiber, index) + sizeof(uint16_t) <= 64, "a thread's scheduling state fills one cache line");
_Static_assert(__PM_MAX_THREADS <= 65536 && __PM_MAX_THREADS / __PM_SIMD_WIDTH <= 256, "thread and SIMD-group indices fit");

/* A SIMD-group: its lanes still running, those waiting at a SIMD-group
 * function (at any site) and at a threadgroup barrier. at_simd has a bit
 * for each lane in state F_AT_SIMD; while mixed is 0 they all wait at one
 * site, op, line, col and file (then none of the lanes need be scanned). */
typedef struct pm_sg {
	uint32_t live, waiting, lanes, first, at_barrier;
	uint32_t at_simd, mixed;
	uint32_t op, line, col;
	const char *file;
} pm_sg;

typedef struct pm_run pm_run;

/* An open-addressing hash table of records of device memory (device
 * races), one per 4-byte word holding a record per byte, keyed by the
 * word's address in their first 8 bytes (0: an empty slot); used lists the slots taken, so that emptying it
 * costs what filling it did. */
typedef struct pm_dev_table {
	char *e;
	uint32_t *used;
	uint64_t cap, n, esz;
	int shift;
} pm_dev_table;

typedef struct pm_worker {
	struct pm_worker *next_free;
	size_t arena_size;
	pm_run *run;
	/* access checks */
	__pm_access_state acc; /* the hooks' fast path (pm_abi.h) */
	uint64_t stack_top; /* its end: the thread's frames lie below, down to its stack pointer */
	int nb, last, overlap;
	int bidx[__PM_MAX_BINDINGS];
	uint64_t blo[__PM_MAX_BINDINGS], blen[__PM_MAX_BINDINGS];
	uint64_t mod_lo, mod_len;         /* the kernel library's whole range */
	const uint64_t (*mod_seg)[2];     /* its readable segments (__pm_desc.module_seg) */
	uint64_t state_lo, state_len;   /* where the built-ins lie (of which a kernel reads its own) */
	uint64_t tg_lo, tg_len;         /* threadgroup memory and its shadow */
	uint64_t stacks_lo, stacks_len; /* every fiber stack */
	int in_simd;                    /* a lane computes a SIMD-group function */
	int builtins_cached;            /* the running thread's built-ins are in the page cache */
	int abandon;                    /* another worker faulted: stop */
	uint64_t atomic_addr;           /* the next access there is atomic */
	/* threadgroup memory allocations and race detection */
	uint32_t n_alloc, alloc_last;
	pm_tg_alloc alloc[__PM_MAX_TG_ALLOCS];
	uint32_t tg_ep;     /* barrier epoch: every threadgroup barrier starts one */
	uint32_t tg_mem_ep; /* the epoch the last barrier ordering memory started */
	uint32_t sg_ep[__PM_MAX_THREADS / __PM_SIMD_WIDTH];
	/* device memory race detection (section "Device memory races") */
	int dev_races;                      /* __pm_desc.device_races */
	uint8_t dev_skip[__PM_MAX_BINDINGS]; /* binding k only loaded: not recorded */
	uint32_t dev_ep, dev_mem_ep;        /* as tg_ep and tg_mem_ep, for mem_device */
	uint32_t sg_dep[__PM_MAX_THREADS / __PM_SIMD_WIDTH];
	pm_dev_table dev;                   /* the threadgroup's accesses (pm_dev_byte) */
	/* counters */
	uint64_t simd_ops, barriers;
	/* structural counters (section "Structural counters") */
	uint64_t simd_by_op[__PM_OP_COUNT];
	struct pm_seg_rec *seg_rec; /* __PM_SEG_CAP records per thread, or NULL: not counted */
	uint32_t *seg_n;            /* records per thread */
	struct pm_seg_tmp *seg_tmp; /* a SIMD-group's records while they are grouped */
	__pm_seg_counts seg[__PM_MAX_BINDINGS][2];
	uint64_t seg_untracked, tg_static;
	/* current threadgroup */
	__pm_fiber_head sched; /* the scheduler's stack, while a fiber runs */
	pm_fiber *cur;
	uint32_t n, live, done, at_barrier, first_barrier;
	uint32_t barrier_flags; /* the mem_flags every thread waiting at the barrier gave */
	uint32_t pos; /* position in order of the running fiber */
	uint32_t tg_linear;
	uint32_t tgpos[3];
	uint32_t tg_dyn, tg_used, n_static;
	/* the threadgroup shape the fibers' built-ins were last filled for
	 * (lay_n 0: none): those that depend only on it are kept */
	uint32_t lay_n, lay_act[3], lay_full[3];
	uint32_t static_id[64], static_off[64];
	/* fault */
	int fault;
	uint64_t fault_order;
	uint64_t fault_line, fault_pc;
	uint64_t fault_tg[3], fault_thread[3];
	uint64_t fault_pc2, fault_thread2[3];
	char fault_file[256];
	char fault_msg[768];
	/* arena pieces */
	pm_fiber *fibers;
	uint32_t *order;
	pm_sg *sg;
	__pm_simd_x *sgx;
	__pm_shared *shared;
	char *tg_mem;
	pm_shadow *shadow;
	pm_shadow_pc *shadow_pc;
	/* per 4-byte word: the epoch in which it is read by threads of
	 * several SIMD-groups and not stored, so a further load cannot race */
	uint32_t *shadow_ro;
	char *stacks;
} pm_worker;
_Static_assert(sizeof(((pm_worker *)0)->acc.pages[0]) == 64, "a page cache entry is 64 bytes (__pm_access_fast)");

struct pm_run {
	__pm_desc *d;
	uint64_t ntg;
	uint32_t *tg_order; /* shuffled order, or NULL */
	uint64_t next;      /* atomic */
	int stop;           /* atomic: a worker faulted */
	uint64_t deadline;  /* CLOCK_MONOTONIC ns, 0 for none */
	/* the watchdog's: the workers, whether the deadline passed (atomic),
	 * the next dispatch it watches */
	pm_worker **ws;
	uint64_t nws;
	int expired;
	struct pm_run *wd_next;
	/* device races: the bytes threadgroups stored and loaded (pm_dev_owner) */
	pthread_mutex_t dev_mu;
	pm_dev_table dev;
};

static __thread pm_worker *tls_w __attribute__((tls_model("initial-exec")));
/* What the kernels' access hooks read (prelude.h): &tls_w->acc, or
 * outside a worker a state whose fast path settles nothing (no stack, no
 * page), so that every access goes to __pm_access_miss, which ignores it.
 * The fast path never writes it. */
static __pm_access_state no_access = {.pages = {[0 ... __PM_PAGES - 1] = __PM_EMPTY_PAGE}};
EXPORT __thread __pm_access_state *__pm_tls_access __attribute__((tls_model("initial-exec"))) = &no_access;

static int page_outside_bindings(const pm_worker *w, uint64_t page);
static void cache_page(pm_worker *w, uint64_t page, uint64_t lo, uint64_t len, uint64_t k);

static void seg_record(pm_worker *w, int binding, uint64_t a, uint64_t size, int store, void *pc);
static void seg_flush(pm_worker *w, uint32_t sg);
static void seg_flush_all(pm_worker *w);

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_cv = PTHREAD_COND_INITIALIZER;
static pm_worker *pool; /* idle arenas */
static int pool_idle, pool_arenas;

static size_t align_up(size_t x, size_t a) { return (x + a - 1) & ~(a - 1); }

/* Maps a new arena: one mapping, with a guard page below the stacks. */
static pm_worker *arena_new(void) {
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t off = align_up(sizeof(pm_worker), 64);
	size_t o_order = off;
	off = align_up(off + sizeof(uint32_t) * __PM_MAX_THREADS, 64);
	size_t o_sg = off;
	off = align_up(off + sizeof(pm_sg) * (__PM_MAX_THREADS / __PM_SIMD_WIDTH), 64);
	/* what kernel code may read: SIMD-group exchange records, built-ins
	 * and shared values */
	size_t o_sgx = off;
	off = align_up(off + sizeof(__pm_simd_x) * (__PM_MAX_THREADS / __PM_SIMD_WIDTH), 64);
	size_t o_fibers = off;
	off = align_up(off + sizeof(pm_fiber) * __PM_MAX_THREADS, 64);
	size_t o_shared = off;
	off = align_up(off + sizeof(__pm_shared), 64);
	/* the threadgroup zone (__PM_TG_BEFORE, __PM_TG_AFTER) */
	off = align_up(off, page);
	size_t o_tg_lo = off;
	off += __PM_TG_BEFORE;
	size_t o_tg = off;
	off = align_up(off + __PM_TG_MEMORY_MAX, 64);
	size_t o_shadow = off;
	off = align_up(off + sizeof(pm_shadow) * __PM_TG_MEMORY_MAX, 64);
	size_t o_shadow_pc = off;
	off = align_up(off + sizeof(pm_shadow_pc) * __PM_TG_MEMORY_MAX, 64);
	size_t o_shadow_ro = off;
	off = align_up(off + sizeof(uint32_t) * (__PM_TG_MEMORY_MAX / 4), page);
	_Static_assert(__PM_TG_MEMORY_MAX * (1 + sizeof(pm_shadow) + sizeof(pm_shadow_pc) + 1) < __PM_TG_AFTER,
	               "the threadgroup zone holds threadgroup memory and its shadow");
	off = o_tg + __PM_TG_AFTER;
	off = align_up(off + page, __PM_STACK_SIZE);
	/* the stacks, above a spare one that catches an overflow of the lowest
	 * (a hook sees the access there) and the guard page */
	size_t o_stacks = off, o_guard = o_stacks - page;
	size_t size = off + (size_t)__PM_STACK_STRIDE * (__PM_MAX_THREADS + 1);

	char *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (base == MAP_FAILED) return NULL;
	if (mprotect(base + o_guard, page, PROT_NONE) != 0) {
		munmap(base, size);
		return NULL;
	}
	pm_worker *w = (pm_worker *)base;
	w->arena_size = size;
	w->fibers = (pm_fiber *)(base + o_fibers);
	w->order = (uint32_t *)(base + o_order);
	w->sg = (pm_sg *)(base + o_sg);
	w->sgx = (__pm_simd_x *)(base + o_sgx);
	w->shared = (__pm_shared *)(base + o_shared);
	w->tg_mem = base + o_tg;
	w->shadow = (pm_shadow *)(base + o_shadow);
	w->shadow_pc = (pm_shadow_pc *)(base + o_shadow_pc);
	w->shadow_ro = (uint32_t *)(base + o_shadow_ro);
	w->stacks = base + o_stacks;
	w->state_lo = (uint64_t)(uintptr_t)(base + o_sgx);
	w->state_len = o_tg_lo - o_sgx;
	w->tg_lo = (uint64_t)(uintptr_t)(base + o_tg_lo);
	w->tg_len = o_guard - o_tg_lo;
	w->stacks_lo = (uint64_t)(uintptr_t)(base + o_stacks);
	w->stacks_len = (uint64_t)__PM_STACK_STRIDE * (__PM_MAX_THREADS + 1);
	w->tg_ep = 0;
	w->tg_mem_ep = 0;
	for (int i = 0; i < __PM_MAX_THREADS; i++) {
		w->fibers[i].stack_top = w->stacks + (size_t)(i + 2) * __PM_STACK_STRIDE;
	}
	return w;
}

/* Idle arenas kept for the next dispatches; more are unmapped. */
static int arena_keep(void) {
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	if (n < 2) n = 2;
	return n > __PM_MAX_ARENAS ? __PM_MAX_ARENAS : (int)n;
}

/* Returns an arena: an idle one, a new one while fewer than __PM_MAX_ARENAS
 * exist, or (wait) the next one another dispatch returns. NULL if none is
 * free and !wait, or if mapping a new one failed. */
static pm_worker *arena_get(int wait) {
	pthread_mutex_lock(&pool_mu);
	for (;;) {
		pm_worker *w = pool;
		if (w) {
			pool = w->next_free;
			pool_idle--;
			pthread_mutex_unlock(&pool_mu);
			return w;
		}
		if (pool_arenas < __PM_MAX_ARENAS) {
			pool_arenas++;
			pthread_mutex_unlock(&pool_mu);
			w = arena_new();
			if (!w) {
				pthread_mutex_lock(&pool_mu);
				pool_arenas--;
				pthread_cond_signal(&pool_cv);
				pthread_mutex_unlock(&pool_mu);
			}
			return w;
		}
		if (!wait) {
			pthread_mutex_unlock(&pool_mu);
			return NULL;
		}
		pthread_cond_wait(&pool_cv, &pool_mu);
	}
}

static void arena_put(pm_worker *w) {
	pthread_mutex_lock(&pool_mu);
	if (pool_idle >= arena_keep()) {
		pool_arenas--;
		pthread_cond_signal(&pool_cv);
		pthread_mutex_unlock(&pool_mu);
		munmap(w, w->arena_size);
		return;
	}
	w->next_free = pool;
	pool = w;
	pool_idle++;
	pthread_cond_signal(&pool_cv);
	pthread_mutex_unlock(&pool_mu);
}

/* Counts the arenas that exist and the idle ones, for tests. */
EXPORT void pm_arena_stats(uint64_t *arenas, uint64_t *idle) {
	pthread_mutex_lock(&pool_mu);
	*arenas = (uint64_t)pool_arenas;
	*idle = (uint64_t)pool_idle;
	pthread_mutex_unlock(&pool_mu);
}

static const char *op_name(uint32_t op) {
	_Static_assert(sizeof pm_op_names / sizeof pm_op_names[0] == __PM_OP_COUNT, "a name for every __PM_OP_ code");
	return op < __PM_OP_COUNT ? pm_op_names[op] : "?";
}

/* Records a fault of the current threadgroup. */
static void record_fault(pm_worker *w, pm_fiber *f, int kind, uint32_t line, const char *file,
                         uint64_t pc, const char *fmt, ...) {
	if (w->fault) return;
	w->fault = kind;
	w->fault_line = line;
	w->fault_pc = pc;
	w->fault_pc2 = 0;
	snprintf(w->fault_file, sizeof w->fault_file, "%s", file ? file : "");
	for (int k = 0; k < 3; k++) {
		w->fault_tg[k] = w->tgpos[k];
		w->fault_thread[k] = f ? f->t.thread_position_in_threadgroup[k] : 0;
	}
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(w->fault_msg, sizeof w->fault_msg, fmt, ap);
	va_end(ap);
}

/* Adds the bytes counted in page entry i to its binding's count. */
static inline void flush_page(__pm_access_state *s, uint64_t i) {
	struct __pm_page *c = &s->pages[i];
	s->count[0][c->k] += c->n[0];
	s->count[1][c->k] += c->n[1];
	c->n[0] = c->n[1] = 0;
}

/* Empties page entry i, its counts kept. */
static inline void empty_page(__pm_access_state *s, uint64_t i) {
	flush_page(s, i);
	s->pages[i].lo[0] = s->pages[i].lo[1] = __PM_NO_PAGE;
	s->pages[i].len = __PM_PAGE_MIN;
}

/* Drops the access hooks' cache of the running thread's built-ins (see
 * state_access), which other threads may not read. */
static inline void forget_builtins(pm_worker *w) {
	if (!w->cur || !w->builtins_cached) return;
	w->builtins_cached = 0;
	uint64_t lo = (uint64_t)(uintptr_t)&w->cur->t;
	for (uint64_t page = lo >> __PM_PAGE_SHIFT; page <= (lo + sizeof(__pm_thread) - 1) >> __PM_PAGE_SHIFT; page++)
		if (w->acc.pages[page % __PM_PAGES].lo[0] >> __PM_PAGE_SHIFT == page && w->acc.pages[page % __PM_PAGES].k == __PM_UNCOUNTED)
			empty_page(&w->acc, page % __PM_PAGES);
}

static inline void set_cur(pm_worker *w, pm_fiber *f) {
	forget_builtins(w);
	w->cur = f;
	w->acc.stack_lo = (uint64_t)(uintptr_t)(f->stack_top - __PM_STACK_SIZE);
	w->stack_top = (uint64_t)(uintptr_t)f->stack_top;
}

/* Leaves the current fiber for good after a fault. */
__attribute__((noreturn)) static void fiber_abort(pm_worker *w) {
	pm_fiber *f = w->cur;
	f->state = F_FAULTED;
	__pm_switch(&f->h, w->sched.sp);
	__builtin_trap();
}

/* The frames a thread returns through when it runs again lie just above
 * its saved stack pointer (below the top of its stack, for one that has
 * not run yet); every thread's have left the cache by then (each thread
 * of the threadgroup ran in between). Fetching those of the thread likely
 * to run next while this one runs hides that, and so does fetching the
 * scheduling state of the one after it. */
#define __PM_PREFETCH_LINES 4
static inline void prefetch_next(pm_worker *w, uint32_t k) {
	if (k >= w->n) return;
	const pm_fiber *h = &w->fibers[w->order[k]];
	const char *lo = (const char *)h->h.sp + __PM_SWITCH_GAP, *top = h->stack_top;
	__builtin_prefetch(h->h.sp, 1, 3);
	if (top - lo < 64 * __PM_PREFETCH_LINES) lo = top - 64 * __PM_PREFETCH_LINES;
#pragma unroll
	for (int i = 0; i < __PM_PREFETCH_LINES; i++) __builtin_prefetch(lo + 64 * i, 1, 3);
	if (k + 1 < w->n) __builtin_prefetch(&w->fibers[w->order[k + 1]], 1, 3);
}

/* The stack to switch to when the current fiber stops (blocked or done):
 * the next runnable fiber of this pass, which becomes the running one, or
 * the scheduler's at the end of the pass. */
static inline __attribute__((always_inline)) void *pm_next(pm_worker *w) {
	for (uint32_t k = w->pos + 1; k < w->n; k++) {
		pm_fiber *g = &w->fibers[w->order[k]];
		if (g->state == F_READY) {
			w->pos = k;
			g->state = F_RUNNING;
			set_cur(w, g);
			prefetch_next(w, k + 1);
			return g->h.sp;
		}
	}
	w->pos = w->n;
	return w->sched.sp;
}

/* Leaves the current fiber f for pm_next's; returns when f runs again. */
static inline __attribute__((always_inline)) void pm_yield(pm_worker *w, pm_fiber *f) {
	__pm_switch(&f->h, pm_next(w));
}

/* Starts a new threadgroup barrier epoch. Every barrier is an execution
 * barrier: the loads before it are ordered before the stores after it (a
 * load has returned its value before its thread waits, so a later store
 * cannot change it). A barrier ordering memory (memory true) also orders
 * the stores before it before every later access; one that only waits
 * (mem_none, mem_device alone) does not: stores since the last barrier that
 * orders memory still race with other threads' loads and stores. */
static void next_epoch(pm_worker *w, int memory) {
	if (++w->tg_ep == 0) {
		memset(w->shadow, 0, sizeof(pm_shadow) * __PM_TG_MEMORY_MAX);
		memset(w->shadow_ro, 0, sizeof(uint32_t) * (__PM_TG_MEMORY_MAX / 4));
		w->tg_ep = 1;
		memory = 1;
	}
	if (memory) w->tg_mem_ep = w->tg_ep;
}

/* mem_flags::mem_threadgroup: a barrier with it orders threadgroup memory
 * accesses; without it (mem_none, mem_device alone) it only waits. */
#define __PM_MEM_THREADGROUP 2u
/* mem_flags::mem_device: the same for device memory. */
#define __PM_MEM_DEVICE 1u

static void release_barrier(pm_worker *w) {
	if (w->seg_rec) seg_flush_all(w);
	for (uint32_t i = 0; i < w->n; i++) {
		if (w->fibers[i].state == F_AT_BARRIER) w->fibers[i].state = F_READY;
	}
	for (uint32_t g = 0; g * __PM_SIMD_WIDTH < w->n; g++) w->sg[g].at_barrier = 0;
	w->at_barrier = 0;
	w->barriers++;
	next_epoch(w, (w->barrier_flags & __PM_MEM_THREADGROUP) != 0);
	if (++w->dev_ep == 0) w->dev_ep = 1; /* more than 2^32 barriers: a race may be missed, none made up */
	if (w->barrier_flags & __PM_MEM_DEVICE) w->dev_mem_ep = w->dev_ep;
}

static uint64_t now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Called where the running thread sees its worker halted (the access
 * slow path, barriers, SIMD-group functions): a kernel past the
 * dispatch's time limit is stopped there (threads cannot be preempted, so
 * this is where an endless loop is caught), and so is one whose dispatch
 * another worker stopped with a fault. */
__attribute__((noinline)) static void halt(pm_worker *w, uint32_t line, const char *file, void *pc) {
	if (__atomic_load_n(&w->run->stop, __ATOMIC_RELAXED)) {
		w->abandon = 1;
		fiber_abort(w);
	}
	if (!__atomic_load_n(&w->run->expired, __ATOMIC_RELAXED)) return;
	double limit = (double)w->run->d->timeout_ns / 1e9;
	record_fault(w, w->cur, __PM_FAULT_TIMEOUT, line, file, (uint64_t)(uintptr_t)pc,
	             "the dispatch ran longer than its time limit of %g s (Dispatch.Timeout) and was "
	             "stopped while this thread ran here: an endless loop?",
	             limit);
	fiber_abort(w);
}

static inline void check_halt(pm_worker *w, uint32_t line, const char *file, void *pc) {
	if (__builtin_expect(__atomic_load_n(&w->acc.halt, __ATOMIC_RELAXED), 0)) halt(w, line, file, pc);
}

/* Whether [a, a+size) lies in the running thread's own frames
 * (__pm_in_frames), from the fiber's stack itself rather than the hooks'
 * copy, which the watchdog may have emptied. */
static inline __attribute__((always_inline)) int own_frames(const pm_worker *w, uint64_t a, uint64_t size) {
	return __pm_in_frames(w->stack_top - __PM_STACK_SIZE, a, size);
}

static inline pm_fiber *simd_blocked(pm_worker *w, pm_fiber *f, pm_sg *g);

/* Bytes between pm_fiber_main's frame and the kernel's: what a thread does
 * once its kernel returned (simd_blocked, pm_yield) stays in them, so that
 * the kernel's last frame, which __pm_lane_var reads, is left as it was. */
#define __PM_EXIT_GAP 1024

/* Runs the thread's entry point below __PM_EXIT_GAP unused bytes. */
__attribute__((noinline)) static void run_entry(pm_worker *w, pm_fiber *f) {
	char *gap = __builtin_alloca(__PM_EXIT_GAP);
	__asm__ volatile("" : : "r"(gap) : "memory");
	((__pm_entry_fn)(uintptr_t)w->run->d->entry)(&f->t);
}

__attribute__((used)) void pm_fiber_main(void) {
	pm_worker *w = tls_w;
	pm_fiber *f = w->cur;
	run_entry(w, f);
	f->state = F_DONE;
	w->done++;
	w->live--;
	pm_sg *g = &w->sg[f->sg];
	g->live--;
	if (w->at_barrier > 0) {
		pm_fiber *b = &w->fibers[w->first_barrier];
		record_fault(w, f, __PM_FAULT_BARRIER_EARLY_RETURN, b->line, b->file, 0,
		             "threadgroup_barrier at line %u can never complete: thread %u returned "
		             "while %u threads wait at it (barrier after an early return)",
		             b->line, f->index, w->at_barrier);
		fiber_abort(w);
	}
	simd_blocked(w, f, g);
	pm_yield(w, f);
	__builtin_trap();
}

/* Where a fiber waits: a barrier (op 0) or a SIMD-group function, and its
 * call site. at_site says whether h waits at that site, set_site records
 * f's. */
static inline int at_site(const pm_fiber *h, uint32_t op, uint32_t line, uint32_t col, const char *file) {
	return h->op == op && h->line == line && h->col == col && h->file == file;
}

static inline void set_site(pm_fiber *f, uint32_t op, uint32_t line, uint32_t col, const char *file) {
	f->op = op;
	f->line = line;
	f->col = col;
	f->file = file;
}

/* ---------------------------------------------------------------------------
 * Functions called by kernel code. */

EXPORT void __pm_barrier(uint32_t flags, uint32_t line, uint32_t col, const char *file) {
	pm_worker *w = tls_w;
	pm_fiber *f = w->cur;
	check_halt(w, line, file, NULL);
	if (w->done > 0) {
		record_fault(w, f, __PM_FAULT_BARRIER_EARLY_RETURN, line, file, 0,
		             "threadgroup_barrier at line %u can never complete: %u of %u threads of the "
		             "threadgroup returned before reaching it (barrier after an early return)",
		             line, w->done, w->n);
		fiber_abort(w);
	}
	if (w->at_barrier > 0) {
		pm_fiber *b = &w->fibers[w->first_barrier];
		if (!at_site(b, 0, line, col, file)) {
			record_fault(w, f, __PM_FAULT_BARRIER_DIVERGENCE, b->line, b->file, 0,
			             "threads wait at different barriers: thread %u at line %u, thread %u at line %u",
			             b->index, b->line, f->index, line);
			fiber_abort(w);
		}
		w->barrier_flags &= flags;
	} else {
		w->first_barrier = f->index;
		w->barrier_flags = flags;
	}
	set_site(f, 0, line, col, file);
	w->at_barrier++;
	if (w->at_barrier == w->n) {
		release_barrier(w);
		f->state = F_RUNNING;
		return;
	}
	f->state = F_AT_BARRIER;
	pm_sg *g = &w->sg[f->sg];
	g->at_barrier++;
	simd_blocked(w, f, g);
	pm_yield(w, f);
}

/* The simdgroup_matrix operations need every lane of the SIMD-group. */
static inline int simd_needs_all(uint32_t op) {
	return op == __PM_OP_SIMDGROUP_LOAD || op == __PM_OP_SIMDGROUP_STORE || op == __PM_OP_SIMDGROUP_MULTIPLY ||
	       op == __PM_OP_SIMDGROUP_MULTIPLY_ACCUMULATE;
}

/* The lanes that call a SIMD-group function at one site together are its
 * active lanes, as on the GPU, where the lanes of a divergent branch run
 * it apart from the others. A lane at a SIMD-group function waits until
 * no lane of its SIMD-group can run on (every live lane waits at a
 * SIMD-group function or at a threadgroup barrier); then the lanes at the
 * site that comes first in the source (line, then column) run it. A
 * branch's call, above its reconvergence point, so runs before the
 * lanes that skipped the branch join the others at a later call. */
static __pm_simd_x *simd_exchange(pm_worker *w, pm_fiber *f) {
	pm_sg *g = &w->sg[f->sg];
	__pm_simd_x *x = &w->sgx[f->sg];
	uint32_t base = f->sg * __PM_SIMD_WIDTH;
	x->lanes = g->lanes;
	/* the lanes waiting at f's site, f's own included */
	uint32_t mask = 1u << f->lane;
	if (!g->mixed) {
		/* every lane at a SIMD-group function waits at f's site */
		mask |= g->at_simd;
	} else {
		for (uint32_t l = 0; l < g->lanes; l++) {
			const pm_fiber *h = &w->fibers[base + l];
			if (h->state == F_AT_SIMD && at_site(h, f->op, f->line, f->col, f->file)) mask |= 1u << l;
		}
	}
	x->mask = mask;
	g->at_simd &= ~(1u << f->lane);
	f->state = F_RUNNING;
	w->in_simd = 1;
	return x;
}

/* Called when lane f of SIMD-group g stops (at a SIMD-group function, a
 * barrier, or its end). When no lane of g can run on, it picks the lanes
 * to run a SIMD-group function: it returns f if f is to compute it, or
 * makes the lane that is runnable and returns NULL. A simdgroup_matrix
 * operation that not every live lane reaches is a fault. */
static pm_fiber *simd_blocked_sites(pm_worker *w, pm_fiber *f, pm_sg *g);

static inline __attribute__((always_inline)) pm_fiber *simd_blocked(pm_worker *w, pm_fiber *f, pm_sg *g) {
	if (g->live == 0 || g->waiting == 0 || g->waiting + g->at_barrier < g->live) return NULL;
	if (g->at_simd == 0) return NULL;
	if (!g->mixed && (!simd_needs_all(g->op) || (uint32_t)__builtin_popcount(g->at_simd) == g->live)) {
		/* one site: its lowest lane computes (the scan in
		 * simd_blocked_sites would pick it); no fault is possible */
		uint32_t base = (uint32_t)(g - w->sg) * __PM_SIMD_WIDTH;
		pm_fiber *c = &w->fibers[base + (uint32_t)__builtin_ctz(g->at_simd)];
		if (c == f) return f;
		c->h.compute = 1;
		c->state = F_READY;
		g->at_simd &= ~(1u << c->lane);
		return NULL;
	}
	return simd_blocked_sites(w, f, g);
}

/* simd_blocked when lanes wait at several sites, or at a simdgroup_matrix
 * operation that not every live lane reached. */
__attribute__((noinline)) static pm_fiber *simd_blocked_sites(pm_worker *w, pm_fiber *f, pm_sg *g) {
	uint32_t base = (uint32_t)(g - w->sg) * __PM_SIMD_WIDTH;
	pm_fiber *c = NULL;
	for (uint32_t l = 0; l < g->lanes; l++) {
		pm_fiber *h = &w->fibers[base + l];
		if (h->state != F_AT_SIMD && h != f) continue;
		if (h == f && h->state != F_AT_SIMD) continue;
		if (!c || h->line < c->line || (h->line == c->line && h->col < c->col)) c = h;
	}
	if (!c) return NULL;
	uint32_t n = 0;
	pm_fiber *other = NULL, *bar = NULL;
	for (uint32_t l = 0; l < g->lanes; l++) {
		pm_fiber *h = &w->fibers[base + l];
		if (h->state == F_AT_SIMD && at_site(h, c->op, c->line, c->col, c->file))
			n++;
		else if (h->state == F_AT_SIMD && !other)
			other = h;
		else if (h->state == F_AT_BARRIER && !bar)
			bar = h;
	}
	if (n < g->live && (simd_needs_all(c->op) || (other && simd_needs_all(other->op)))) {
		if (other) {
			pm_fiber *a = c->lane < other->lane ? c : other, *b = a == c ? other : c;
			record_fault(w, f, __PM_FAULT_SIMD_DIVERGENCE, a->line, a->file, 0,
			             "SIMD-group functions called at different sites in SIMD-group %u: "
			             "%s at line %u (lane %u) and %s at line %u (lane %u); simdgroup_matrix "
			             "functions need every lane of the SIMD-group",
			             c->sg, op_name(a->op), a->line, a->lane, op_name(b->op), b->line, b->lane);
		} else {
			record_fault(w, f, __PM_FAULT_DEADLOCK, c->line, c->file, 0,
			             "deadlock: %s at line %u (thread %u) waits for lanes of its SIMD-group "
			             "while thread %u waits at threadgroup_barrier at line %u (simdgroup_matrix "
			             "functions need every lane of the SIMD-group)",
			             op_name(c->op), c->line, c->index, bar ? bar->index : 0, bar ? bar->line : 0);
		}
		fiber_abort(w);
	}
	if (c == f) return f;
	c->h.compute = 1;
	c->state = F_READY;
	g->at_simd &= ~(1u << c->lane);
	return NULL;
}

/* Called by a lane at a SIMD-group function, which, as the kernel's
 * __pm_simd_wait does, then switches to the stack it is given, if any; once
 * it runs again its result is in out, unless it is to compute the function
 * (f->compute): then __pm_simd_exchange gives it the exchange record. The
 * switch is the kernel's own, inlined where it calls the function, so that
 * a lane resumed there returns through the same frames as the lane it
 * resumes from, which the processor predicts. */
EXPORT __pm_simd_next __pm_simd(uint32_t op, const void *in, void *out, uint32_t line, uint32_t col,
                              const char *file) {
	pm_worker *w = tls_w;
	pm_fiber *f = w->cur;
	pm_sg *g = &w->sg[f->sg];
	check_halt(w, line, file, NULL);
	set_site(f, op, line, col, file);
	/* the lane's operand and result, where the lane that computes the
	 * function reads and writes them */
	__pm_simd_x *x = &w->sgx[f->sg];
	x->in[f->lane] = in;
	x->out[f->lane] = out;
	g->waiting++;
	f->state = F_AT_SIMD;
	if (g->at_simd == 0) {
		g->mixed = 0;
		g->op = op;
		g->line = line;
		g->col = col;
		g->file = file;
	} else if (!(g->op == op && g->line == line && g->col == col && g->file == file)) {
		g->mixed = 1;
	}
	g->at_simd |= 1u << f->lane;
	if (simd_blocked(w, f, g) == f) {
		f->h.compute = 1;
		return (__pm_simd_next){&f->h, NULL};
	}
	return (__pm_simd_next){&f->h, pm_next(w)};
}

/* Where lane to keeps the variable that lane from of the running lane's
 * SIMD-group has at var, for a shuffle reading an inactive lane (one
 * waiting at another SIMD-group function or a barrier, or returned): the
 * same place in its stack, since every thread enters its kernel at the
 * same depth of its own stack and var is in the kernel's frame (the
 * translator passes variables of the kernel function only). NULL when var
 * is not in lane from's stack or that place is not in lane to's frames:
 * the caller then keeps its own value. A returned lane's frames are left
 * as they were (__PM_EXIT_GAP). */
EXPORT const void *__pm_lane_var(const void *var, uint32_t from, uint32_t to, uint32_t local) {
	pm_worker *w = tls_w;
	const pm_fiber *cur = w->cur;
	uint32_t base = cur->sg * __PM_SIMD_WIDTH;
	const pm_fiber *a = &w->fibers[base + from], *b = &w->fibers[base + to];
	uint64_t p = (uint64_t)(uintptr_t)var, top = (uint64_t)(uintptr_t)a->stack_top;
	if (p >= top || top - p > __PM_STACK_SIZE) return NULL;
	if (local) {
		/* a local: only once lane to declared it */
		uint32_t i = 0;
		while (i < b->n_declared && b->declared[i] != (uint32_t)(top - p)) i++;
		if (i == b->n_declared) return NULL;
	}
	uint64_t q = (uint64_t)(uintptr_t)b->stack_top - (top - p);
	switch (b->state) {
	case F_AT_SIMD:
	case F_AT_BARRIER:
		if (q < (uint64_t)(uintptr_t)b->h.sp) return NULL;
		break;
	case F_DONE:
		break;
	default:
		return NULL;
	}
	return (const void *)(uintptr_t)q;
}

/* Records that the running thread declared the kernel's variable at var
 * (the translator calls it after the declaration of a local variable that
 * a shuffle reads): __pm_lane_var reads another lane's only once it did,
 * so that a lane that returned before the declaration gives no value. */
EXPORT void __pm_lane_declared(const void *var) {
	pm_fiber *f = tls_w->cur;
	uint64_t p = (uint64_t)(uintptr_t)var, top = (uint64_t)(uintptr_t)f->stack_top;
	if (p >= top || top - p > __PM_STACK_SIZE) return;
	for (uint32_t i = 0; i < f->n_declared; i++)
		if (f->declared[i] == (uint32_t)(top - p)) return;
	if (f->n_declared < sizeof f->declared / sizeof f->declared[0]) f->declared[f->n_declared++] = (uint32_t)(top - p);
}

/* Called by the lane __pm_simd picked to compute the function, once it
 * runs: the exchange record of the lanes that wait with it (then
 * __pm_simd_done). */
EXPORT __pm_simd_x *__pm_simd_exchange(void) {
	pm_worker *w = tls_w;
	pm_fiber *f = w->cur;
	f->h.compute = 0;
	return simd_exchange(w, f);
}

/* SIMD-group epochs are kept in the shadow modulo 2^16. So that an old
 * epoch is never taken for the current one, every 2^15 SIMD-group
 * functions of a SIMD-group the epochs its accesses of the current barrier
 * epoch recorded become the one before: the shadow then only holds epochs
 * of the last 2^15 and that one, none of which the next 2^15 reach. */
#define __PM_SGEP_WINDOW 0x7fffu
__attribute__((noinline)) static void sg_epoch_window(pm_worker *w, uint32_t sg) {
	const uint32_t ep = w->tg_ep, mep = w->tg_mem_ep;
	const uint16_t before = (uint16_t)(w->sg_ep[sg] - 1);
	for (uint32_t i = 0; i < w->tg_used; i++) {
		pm_shadow *sh = &w->shadow[i];
		if (sh->st_ep >= mep && sh->st_tid / __PM_SIMD_WIDTH == sg) sh->st_sgep = before;
		if (sh->ld_ep == ep && (sh->ld_tid & __PM_LD_TID) / __PM_SIMD_WIDTH == sg) sh->ld_sgep = before;
	}
}

/* Completes a SIMD-group function after the computing lane wrote every
 * result: the other lanes become runnable. */
EXPORT void __pm_simd_done(__pm_simd_x *x) {
	pm_worker *w = tls_w;
	pm_fiber *f = w->cur;
	pm_sg *g = &w->sg[f->sg];
	uint32_t base = f->sg * __PM_SIMD_WIDTH;
	for (uint32_t m = x->mask & ~(1u << f->lane); m; m &= m - 1) w->fibers[base + (uint32_t)__builtin_ctz(m)].state = F_READY;
	g->at_simd &= ~x->mask;
	g->waiting -= (uint32_t)__builtin_popcount(x->mask);
	w->simd_ops++;
	if (f->op < __PM_OP_COUNT) w->simd_by_op[f->op]++;
	if (w->seg_rec) seg_flush(w, f->sg);
	/* the lanes synchronised here, and ordered their threadgroup memory
	 * accesses, but at a simdgroup_barrier without mem_threadgroup */
	if (f->op != __PM_OP_SIMDGROUP_BARRIER || (*(const uint32_t *)x->in[f->lane] & __PM_MEM_THREADGROUP))
		if ((++w->sg_ep[f->sg] & __PM_SGEP_WINDOW) == 0) sg_epoch_window(w, f->sg);
	if (f->op != __PM_OP_SIMDGROUP_BARRIER || (*(const uint32_t *)x->in[f->lane] & __PM_MEM_DEVICE)) w->sg_dep[f->sg]++;
	w->in_simd = 0;
}

/* Storage of a threadgroup-scope variable declared in a kernel body: the
 * same address for every thread of the threadgroup, poisoned with 0xFF. */
EXPORT void *__pm_tg_static(uint32_t id, uint64_t size, uint64_t align) {
	pm_worker *w = tls_w;
	for (uint32_t i = 0; i < w->n_static; i++) {
		if (w->static_id[i] == id) return w->tg_mem + w->static_off[i];
	}
	if (align < 16) align = 16;
	uint64_t off = align_up(w->tg_used, align);
	if (w->n_static >= 64) {
		record_fault(w, w->cur, __PM_FAULT_THREADGROUP_MEMORY, 0, "", 0,
		             "more than 64 threadgroup variables in a kernel is not supported by the "
		             "emulated device");
		fiber_abort(w);
	}
	if (off + size > __PM_TG_MEMORY_MAX) {
		record_fault(w, w->cur, __PM_FAULT_THREADGROUP_MEMORY, 0, "", 0,
		             "threadgroup memory exceeds %u bytes: %llu bytes set by the encoder plus "
		             "threadgroup variables needing %llu more",
		             __PM_TG_MEMORY_MAX, (unsigned long long)w->tg_dyn,
		             (unsigned long long)(off + size - w->tg_dyn));
		fiber_abort(w);
	}
	memset(w->tg_mem + off, 0xFF, size);
	pm_tg_alloc *al = &w->alloc[w->n_alloc++];
	al->off = (uint32_t)off;
	al->len = (uint32_t)size;
	al->binding = -1 - (int)w->n_static;
	w->static_id[w->n_static] = id;
	w->static_off[w->n_static] = (uint32_t)off;
	w->n_static++;
	w->tg_used = (uint32_t)(off + size);
	return w->tg_mem + off;
}

/* ---------------------------------------------------------------------------
 * Memory access hooks. */

/* Reports an access outside every memory the kernel may touch; note, if
 * not NULL, says where it lands. */
__attribute__((noinline)) static void access_fault(pm_worker *w, uint64_t a, uint64_t size, int store,
                                                   void *pc, const char *note) {
	char where[256];
	int best = -1;
	uint64_t dist = 0;
	int before = 0;
	for (int k = 0; k < w->nb; k++) {
		uint64_t lo = w->blo[k], hi = w->blo[k] + w->blen[k], d;
		int b;
		if (a < lo) {
			d = lo - a;
			b = 1;
		} else if (a + size > hi) {
			d = a >= hi ? a - hi : 0;
			b = 0;
		} else {
			continue;
		}
		if (best < 0 || d < dist) {
			best = k;
			dist = d;
			before = b;
		}
	}
	if (best < 0) {
		snprintf(where, sizeof where, "outside every bound buffer");
	} else if (before) {
		snprintf(where, sizeof where, "%llu bytes before the start of buffer(%d) (length %llu)",
		         (unsigned long long)dist, w->bidx[best], (unsigned long long)w->blen[best]);
	} else {
		snprintf(where, sizeof where, "%llu bytes past the end of buffer(%d) (length %llu)",
		         (unsigned long long)dist, w->bidx[best], (unsigned long long)w->blen[best]);
	}
	record_fault(w, w->cur, __PM_FAULT_OUT_OF_BOUNDS, 0, "", (uint64_t)(uintptr_t)pc,
	             "out-of-bounds device memory access: %s of %llu bytes at 0x%llx, %s%s%s",
	             store ? "store" : "load", (unsigned long long)size, (unsigned long long)a, where,
	             note ? ", " : "", note ? note : "");
	fiber_abort(w);
}

static void thread_pos(pm_worker *w, uint32_t tid, uint64_t out[3]) {
	for (int k = 0; k < 3; k++) out[k] = w->fibers[tid].t.thread_position_in_threadgroup[k];
}

/* Names a threadgroup memory allocation in messages. */
static void alloc_name(const pm_tg_alloc *al, char *buf, size_t n) {
	if (al->binding >= 0)
		snprintf(buf, n, "threadgroup(%d) (length %u)", al->binding, al->len);
	else
		snprintf(buf, n, "a threadgroup variable of %u bytes", al->len);
}

__attribute__((noinline)) static void tg_bounds_fault(pm_worker *w, int64_t off, uint64_t size, int store,
                                                      void *pc) {
	char where[160], name[96];
	int best = -1, before = 0;
	uint64_t dist = 0;
	for (uint32_t j = 0; j < w->n_alloc; j++) {
		const pm_tg_alloc *al = &w->alloc[j];
		int64_t lo = al->off, hi = (int64_t)al->off + al->len;
		uint64_t d;
		int b;
		if (off < lo) {
			d = (uint64_t)(lo - off);
			b = 1;
		} else {
			d = off >= hi ? (uint64_t)(off - hi) : 0;
			b = 0;
		}
		if (best < 0 || d < dist) {
			best = (int)j;
			dist = d;
			before = b;
		}
	}
	if (best < 0) {
		snprintf(where, sizeof where, "and the threadgroup has no threadgroup memory");
	} else {
		alloc_name(&w->alloc[best], name, sizeof name);
		snprintf(where, sizeof where, "%llu bytes %s %s", (unsigned long long)dist,
		         before ? "before the start of" : "past the end of", name);
	}
	record_fault(w, w->cur, __PM_FAULT_THREADGROUP_BOUNDS, 0, "", (uint64_t)(uintptr_t)pc,
	             "out-of-bounds threadgroup memory access: %s of %llu bytes at threadgroup offset %lld, %s",
	             store ? "store" : "load", (unsigned long long)size, (long long)off, where);
	fiber_abort(w);
}

/* Reports a race of this thread's access of size bytes at where (in
 * memory, "threadgroup memory" or "device memory") with another thread's
 * of the threadgroup (other, or -1 when only "some other thread" is known)
 * at program counter opc; barrier names the barrier that would order
 * them. */
__attribute__((noinline)) static void race_fault(pm_worker *w, const char *memory, const char *where, uint64_t size,
                                                 int store, int other, int other_store, uint64_t opc,
                                                 const char *barrier, void *pc) {
	char by[64] = "by another thread";
	uint64_t pos[3] = {0, 0, 0};
	if (other >= 0) {
		thread_pos(w, (uint32_t)other, pos);
		snprintf(by, sizeof by, "by thread (%llu, %llu, %llu)", (unsigned long long)pos[0],
		         (unsigned long long)pos[1], (unsigned long long)pos[2]);
	} else {
		opc = 0;
	}
	record_fault(w, w->cur, __PM_FAULT_RACE, 0, "", (uint64_t)(uintptr_t)pc,
	             "%s race: this thread's %s of %llu bytes at %s and a %s of the same bytes %s, with no %s "
	             "between them",
	             memory, store ? "store" : "load", (unsigned long long)size, where, other_store ? "store" : "load",
	             by, barrier);
	w->fault_pc2 = opc;
	for (int k = 0; k < 3; k++) w->fault_thread2[k] = pos[k];
	fiber_abort(w);
}

/* A race on threadgroup memory at offset off (race_fault). */
__attribute__((noinline)) static void tg_race_fault(pm_worker *w, uint32_t off, uint64_t size, int store, int other,
                                                    int other_store, uint64_t opc, void *pc) {
	char name[96], where[128];
	const pm_tg_alloc *al = &w->alloc[w->alloc_last];
	alloc_name(al, name, sizeof name);
	snprintf(where, sizeof where, "offset %u of %s", off - al->off, name);
	race_fault(w, "threadgroup memory", where, size, store, other, other_store, opc, "barrier", pc);
}

/* Whether the loads of a byte since the last barrier, by the threads
 * ld_tid tells (the first, | __PM_LD_MULTI | __PM_LD_MIXED), are ordered
 * before a store by thread tid: they are its own, or its SIMD-group's
 * with a SIMD-group function since the latest (synced). */
static inline int loads_ordered(uint16_t ld_tid, int synced, uint32_t tid) {
	uint32_t first = ld_tid & __PM_LD_TID, sg = tid / __PM_SIMD_WIDTH;
	if (!(ld_tid & __PM_LD_MULTI)) return first == tid || (first / __PM_SIMD_WIDTH == sg && synced);
	return !(ld_tid & __PM_LD_MIXED) && first / __PM_SIMD_WIDTH == sg && synced;
}

/* An access to threadgroup memory: it must lie inside one allocation, and
 * (unless atomic) must not race with another thread's access since the
 * last barrier. An earlier access is ordered before one by thread tid now
 * if a threadgroup barrier lies between them, if they are the same
 * thread's, or if they are lanes of one SIMD-group and a SIMD-group
 * function (or simdgroup_barrier) of that SIMD-group lies between them. */
static inline __attribute__((always_inline)) void tg_access(pm_worker *w, uint64_t a, uint64_t size, int store,
                                                            int atomic, void *pc) {
	int64_t off = (int64_t)(a - (uint64_t)(uintptr_t)w->tg_mem);
	const pm_tg_alloc *al = &w->alloc[w->alloc_last];
	if (!(w->alloc_last < w->n_alloc && off >= al->off && off + (int64_t)size <= (int64_t)al->off + al->len)) {
		uint32_t j;
		for (j = 0; j < w->n_alloc; j++) {
			al = &w->alloc[j];
			if (off >= al->off && off + (int64_t)size <= (int64_t)al->off + al->len) break;
		}
		if (j == w->n_alloc) tg_bounds_fault(w, off, size, store, pc);
		w->alloc_last = j;
	}
	if (atomic || a == w->atomic_addr) {
		w->atomic_addr = 0;
		return;
	}
	const uint32_t ep = w->tg_ep, mep = w->tg_mem_ep;
	const int word = ((off ^ (off + (int64_t)size - 1)) >> 2) == 0; /* inside one 4-byte word */
	if (!store && word && w->shadow_ro[off >> 2] == ep) return;
	const uint32_t tid = w->cur->index, sg = tid / __PM_SIMD_WIDTH;
	const uint16_t sgep = (uint16_t)w->sg_ep[sg];
	if (store && word) w->shadow_ro[off >> 2] = 0;
	int ro = !store && size == 4 && word;
	for (uint64_t i = 0; i < size; i++) {
		pm_shadow *sh = &w->shadow[off + i];
		if (sh->st_ep >= mep && sh->st_tid != tid && !(sh->st_tid / __PM_SIMD_WIDTH == sg && sh->st_sgep != sgep))
			tg_race_fault(w, (uint32_t)off, size, store, sh->st_tid, 1, w->shadow_pc[off + i].st, pc);
		if (store) {
			if (sh->ld_ep == ep) {
				uint32_t first = sh->ld_tid & __PM_LD_TID;
				if (!loads_ordered(sh->ld_tid, sh->ld_sgep != sgep, tid))
					tg_race_fault(w, (uint32_t)off, size, store, first != tid ? (int)first : -1, 0,
					           w->shadow_pc[off + i].ld, pc);
				sh->ld_ep = 0;
			}
			sh->st_ep = ep;
			sh->st_tid = (uint16_t)tid;
			sh->st_sgep = sgep;
			w->shadow_pc[off + i].st = (uint64_t)(uintptr_t)pc;
		} else if (sh->ld_ep != ep) {
			sh->ld_ep = ep;
			sh->ld_tid = (uint16_t)tid;
			sh->ld_sgep = sgep;
			w->shadow_pc[off + i].ld = (uint64_t)(uintptr_t)pc;
			ro = 0;
		} else if (!(sh->ld_tid & __PM_LD_MIXED)) {
			uint32_t first = sh->ld_tid & __PM_LD_TID;
			if (first != tid) {
				sh->ld_tid |= __PM_LD_MULTI;
				if (first / __PM_SIMD_WIDTH != sg) sh->ld_tid |= __PM_LD_MIXED;
			}
			sh->ld_sgep = sgep;
			ro = ro && (sh->ld_tid & __PM_LD_MIXED) && sh->st_ep < mep;
		} else {
			ro = ro && sh->st_ep < mep;
		}
	}
	if (ro) w->shadow_ro[off >> 2] = ep;
}

/* ---------------------------------------------------------------------------
 * Device memory races (__pm_desc.device_races). Two accesses to the same
 * byte of device memory by different threads of a dispatch, at least one a
 * store, neither atomic, race unless ordered. Within a threadgroup they
 * are checked as threadgroup memory is, with the barriers giving
 * mem_flags::mem_device as the epochs that order stores (dev_ep,
 * dev_mem_ep) and, for lanes of one SIMD-group, the SIMD-group functions
 * (sg_dep): each byte the threadgroup touches has a record (pm_dev_byte)
 * in its worker's table. Nothing orders threadgroups: when one ends, its
 * records are merged into the dispatch's table (pm_dev_owner), and a byte
 * stored by one threadgroup and loaded or stored by another is a race
 * whichever ran first. Loads through a binding the kernel cannot store to
 * (a const or constant buffer) that overlaps no binding it can are not
 * recorded, nor checked: nobody can store to those bytes, and the
 * weights of a model, read by every threadgroup, cost nothing more. */

typedef struct pm_dev_byte {
	uint32_t st_ep, ld_ep;     /* as pm_shadow's, with dev_ep */
	uint32_t st_sgep, ld_sgep; /* sg_dep of the SIMD-group when it accessed the byte */
	uint16_t st_tid, ld_tid;   /* ld_tid | __PM_LD_MULTI | __PM_LD_MIXED */
	uint16_t tg_ld_tid;        /* the first thread of the threadgroup that loaded it */
	uint16_t tg_flags;         /* __PM_DEV_STORED, __PM_DEV_LOADED: by the threadgroup */
	uint64_t st_pc, ld_pc, tg_ld_pc;
} pm_dev_byte;

typedef struct pm_dev_owner {
	uint32_t st_tg, ld_tg[2]; /* linear threadgroup + 1, 0 for none: the first storing, two loading */
	uint16_t st_tid, ld_tid[2];
	uint64_t st_pc, ld_pc[2];
} pm_dev_owner;

/* The records of one 4-byte word (the table's entries). */
typedef struct pm_dev_word {
	uint64_t a;
	pm_dev_byte b[4];
} pm_dev_word;

typedef struct pm_dev_owners {
	uint64_t a;
	pm_dev_owner b[4];
} pm_dev_owners;

#define __PM_DEV_STORED 1u
#define __PM_DEV_LOADED 2u

/* Doubles the table (or makes its first 1024 slots); 0 without memory. */
static int dev_grow(pm_dev_table *t) {
	uint64_t cap = t->cap ? t->cap * 2 : 1024;
	char *e = calloc(cap, t->esz);
	uint32_t *used = malloc(sizeof(uint32_t) * (cap / 2));
	if (!e || !used || cap > ((uint64_t)1 << 32)) {
		free(e);
		free(used);
		return 0;
	}
	pm_dev_table n = {.e = e, .used = used, .cap = cap, .esz = t->esz, .shift = 64 - __builtin_ctzll(cap)};
	for (uint64_t j = 0; j < t->n; j++) {
		const char *old = t->e + (uint64_t)t->used[j] * t->esz;
		uint64_t i = (*(const uint64_t *)old * 0x9E3779B97F4A7C15ull) >> n.shift;
		while (*(uint64_t *)(n.e + i * n.esz)) i = (i + 1) & (cap - 1);
		memcpy(n.e + i * n.esz, old, n.esz);
		n.used[n.n++] = (uint32_t)i;
	}
	free(t->e);
	free(t->used);
	*t = n;
	return 1;
}

/* The records of the word at a (a multiple of 4), made (zeroed but for
 * its address) if there are none; NULL without memory. */
static inline void *dev_find(pm_dev_table *t, uint64_t a) {
	if ((t->n + 1) * 2 > t->cap && !dev_grow(t)) return NULL;
	for (uint64_t i = (a * 0x9E3779B97F4A7C15ull) >> t->shift;; i = (i + 1) & (t->cap - 1)) {
		uint64_t *k = (uint64_t *)(t->e + i * t->esz);
		if (*k == a) return k;
		if (!*k) {
			memset(k, 0, t->esz);
			*k = a;
			t->used[t->n++] = (uint32_t)i;
			return k;
		}
	}
}

/* Empties the table, keeping its memory. */
static void dev_clear(pm_dev_table *t) {
	for (uint64_t j = 0; j < t->n; j++) *(uint64_t *)(t->e + (uint64_t)t->used[j] * t->esz) = 0;
	t->n = 0;
}

static void dev_free(pm_dev_table *t) {
	free(t->e);
	free(t->used);
	t->e = NULL;
	t->used = NULL;
	t->cap = t->n = 0;
}

/* Names the byte at a in messages: its offset in the lowest binding
 * holding it. */
static void dev_where(const pm_worker *w, uint64_t a, char *buf, size_t n) {
	for (int k = 0; k < w->nb; k++)
		if (a - w->blo[k] < w->blen[k]) {
			snprintf(buf, n, "offset %llu of buffer(%d)", (unsigned long long)(a - w->blo[k]), w->bidx[k]);
			return;
		}
	snprintf(buf, n, "0x%llx", (unsigned long long)a);
}

__attribute__((noinline)) static void dev_nomem(pm_worker *w, pm_fiber *f) {
	record_fault(w, f, __PM_FAULT_RESOURCES, 0, "", 0,
	             "cannot allocate the record of device memory accesses (device race detection)");
}

/* A race on device memory at a within the threadgroup (race_fault). */
__attribute__((noinline)) static void dev_race_fault(pm_worker *w, uint64_t a, uint64_t size, int store, int other,
                                                     int other_store, uint64_t opc, void *pc) {
	char where[96];
	dev_where(w, a, where, sizeof where);
	race_fault(w, "device memory", where, size, store, other, other_store, opc,
	           "barrier ordering device memory (mem_flags::mem_device)", pc);
}

/* Records a device memory access of the running thread (not atomic) and
 * reports a race with an earlier access of another thread of the
 * threadgroup that nothing orders before it (tg_access's rules). */
static void dev_access(pm_worker *w, uint64_t a, uint64_t size, int store, void *pc) {
	const uint32_t ep = w->dev_ep, mep = w->dev_mem_ep;
	const uint32_t tid = w->cur->index, sg = tid / __PM_SIMD_WIDTH, sgep = w->sg_dep[sg];
	pm_dev_word *word = NULL;
	for (uint64_t i = 0; i < size; i++) {
		if (!word || ((a + i) & 3) == 0) {
			word = dev_find(&w->dev, (a + i) & ~(uint64_t)3);
			if (!word) {
				dev_nomem(w, w->cur);
				fiber_abort(w);
			}
		}
		pm_dev_byte *b = &word->b[(a + i) & 3];
		if (b->st_ep >= mep && b->st_tid != tid && !(b->st_tid / __PM_SIMD_WIDTH == sg && b->st_sgep != sgep))
			dev_race_fault(w, a, size, store, b->st_tid, 1, b->st_pc, pc);
		if (store) {
			if (b->ld_ep == ep) {
				uint32_t first = b->ld_tid & __PM_LD_TID;
				if (!loads_ordered(b->ld_tid, b->ld_sgep != sgep, tid)) dev_race_fault(w, a, size, store, first != tid ? (int)first : -1, 0, b->ld_pc, pc);
				b->ld_ep = 0;
			}
			b->st_ep = ep;
			b->st_tid = (uint16_t)tid;
			b->st_sgep = sgep;
			b->st_pc = (uint64_t)(uintptr_t)pc;
			b->tg_flags |= __PM_DEV_STORED;
			continue;
		}
		if (!(b->tg_flags & __PM_DEV_LOADED)) {
			b->tg_flags |= __PM_DEV_LOADED;
			b->tg_ld_tid = (uint16_t)tid;
			b->tg_ld_pc = (uint64_t)(uintptr_t)pc;
		}
		if (b->ld_ep != ep) {
			b->ld_ep = ep;
			b->ld_tid = (uint16_t)tid;
			b->ld_pc = (uint64_t)(uintptr_t)pc;
		} else if (!(b->ld_tid & __PM_LD_MIXED) && (b->ld_tid & __PM_LD_TID) != tid) {
			b->ld_tid |= __PM_LD_MULTI;
			if ((b->ld_tid & __PM_LD_TID) / __PM_SIMD_WIDTH != sg) b->ld_tid |= __PM_LD_MIXED;
		}
		b->ld_sgep = sgep;
	}
}

/* The grid position of threadgroup linear and the size of its part of
 * the grid (act: smaller than full at the grid's edges). */
static void tg_shape(const __pm_desc *d, uint64_t linear, uint32_t tg[3], uint32_t full[3], uint32_t act[3]) {
	uint64_t gx = d->threadgroups[0], gy = d->threadgroups[1];
	tg[0] = (uint32_t)(linear % gx);
	tg[1] = (uint32_t)((linear / gx) % gy);
	tg[2] = (uint32_t)(linear / (gx * gy));
	for (int k = 0; k < 3; k++) {
		full[k] = (uint32_t)d->threads_per_threadgroup[k];
		uint64_t left = d->threads_per_grid[k] - (uint64_t)tg[k] * full[k];
		act[k] = left < full[k] ? (uint32_t)left : full[k];
	}
}

/* Reports a race between this threadgroup's access to the byte at a, a
 * store or else a load by thread tid at pc, and another threadgroup's. */
static void dev_cross_fault(pm_worker *w, uint64_t a, int store, uint32_t tid, uint64_t pc, int other_store,
                            uint32_t other_tg, uint32_t other_tid, uint64_t opc) {
	uint32_t tg[3], full[3], act[3];
	tg_shape(w->run->d, other_tg, tg, full, act);
	uint64_t pos[3] = {other_tid % act[0], (other_tid / act[0]) % act[1], other_tid / (act[0] * act[1])};
	char where[96];
	dev_where(w, a, where, sizeof where);
	record_fault(w, &w->fibers[tid], __PM_FAULT_RACE, 0, "", pc,
	             "device memory race between threadgroups: this thread's %s of the byte at %s and a %s of it "
	             "by thread (%llu, %llu, %llu) of threadgroup (%u, %u, %u); nothing orders the threadgroups "
	             "of a dispatch",
	             store ? "store" : "load", where, other_store ? "store" : "load", (unsigned long long)pos[0],
	             (unsigned long long)pos[1], (unsigned long long)pos[2], tg[0], tg[1], tg[2]);
	w->fault_pc2 = opc;
	for (int k = 0; k < 3; k++) w->fault_thread2[k] = pos[k];
}

/* Merges the records of the threadgroup that ended into the dispatch's,
 * reporting a byte it stored that another threadgroup touched, or one it
 * loaded that another stored. */
static void dev_merge(pm_worker *w) {
	pm_run *r = w->run;
	const uint32_t me = w->tg_linear + 1;
	pthread_mutex_lock(&r->dev_mu);
	for (uint64_t j = 0; j < w->dev.n && !w->fault; j++) {
		const pm_dev_word *word = (const pm_dev_word *)(w->dev.e + (uint64_t)w->dev.used[j] * w->dev.esz);
		pm_dev_owners *ow = dev_find(&r->dev, word->a);
		if (!ow) {
			dev_nomem(w, NULL);
			break;
		}
		for (int k = 0; k < 4 && !w->fault; k++) {
			const pm_dev_byte *b = &word->b[k];
			pm_dev_owner *o = &ow->b[k];
			const uint64_t at = word->a + (uint64_t)k;
			if (b->tg_flags & __PM_DEV_STORED) {
				if (o->st_tg && o->st_tg != me)
					dev_cross_fault(w, at, 1, b->st_tid, b->st_pc, 1, o->st_tg - 1, o->st_tid, o->st_pc);
				for (int i = 0; i < 2 && !w->fault; i++)
					if (o->ld_tg[i] && o->ld_tg[i] != me)
						dev_cross_fault(w, at, 1, b->st_tid, b->st_pc, 0, o->ld_tg[i] - 1, o->ld_tid[i], o->ld_pc[i]);
				if (!o->st_tg) {
					o->st_tg = me;
					o->st_tid = b->st_tid;
					o->st_pc = b->st_pc;
				}
			}
			if (b->tg_flags & __PM_DEV_LOADED) {
				if (o->st_tg && o->st_tg != me && !w->fault)
					dev_cross_fault(w, at, 0, b->tg_ld_tid, b->tg_ld_pc, 1, o->st_tg - 1, o->st_tid, o->st_pc);
				int i = !o->ld_tg[0] ? 0 : o->ld_tg[0] != me && !o->ld_tg[1] ? 1 : -1;
				if (i >= 0) {
					o->ld_tg[i] = me;
					o->ld_tid[i] = b->tg_ld_tid;
					o->ld_pc[i] = b->tg_ld_pc;
				}
			}
		}
	}
	pthread_mutex_unlock(&r->dev_mu);
}

/* An access outside the bound buffers, threadgroup memory, the built-ins
 * and the library: the thread's own frames (an atomic access, or one after
 * the time limit check), another thread's stack, or a fault. */
__attribute__((noinline)) static void other_access(pm_worker *w, uint64_t a, uint64_t size, int store, void *pc) {
	if (a - w->stacks_lo < w->stacks_len) {
		if (w->in_simd) return; /* a SIMD-group function reads its lanes' operands */
		const uint64_t lo = w->stack_top - __PM_STACK_SIZE; /* the running thread's stack */
		if (a - lo < __PM_STACK_SIZE) {
			if (own_frames(w, a, size)) return;
			if (__pm_stack_pointer() >= lo) {
				record_fault(w, w->cur, __PM_FAULT_OUT_OF_BOUNDS, 0, "", (uint64_t)(uintptr_t)pc,
				             "out-of-bounds access: %s of %llu bytes at 0x%llx, in this thread's stack below "
				             "its frames (%llu bytes below its stack pointer): a pointer outside the memory "
				             "it was made for",
				             store ? "store" : "load", (unsigned long long)size, (unsigned long long)a,
				             (unsigned long long)(__pm_stack_pointer() - a));
				fiber_abort(w);
			}
		}
		/* the stack holding a, or the gap below it */
		uint64_t rel = a - w->stacks_lo;
		uint64_t slot = rel < __PM_STACK_COLOR ? 0 : (rel - __PM_STACK_COLOR) / __PM_STACK_STRIDE;
		char where[64];
		if (slot == 0)
			snprintf(where, sizeof where, "below the lowest thread's stack");
		else
			snprintf(where, sizeof where, "in the stack of thread %llu", (unsigned long long)(slot - 1));
		if (__pm_stack_pointer() >= lo) {
			/* the thread's own stack has not overflowed: a stray pointer */
			record_fault(w, w->cur, __PM_FAULT_OUT_OF_BOUNDS, 0, "", (uint64_t)(uintptr_t)pc,
			             "out-of-bounds access: %s of %llu bytes at 0x%llx, %s: a pointer outside the "
			             "memory it was made for",
			             store ? "store" : "load", (unsigned long long)size, (unsigned long long)a, where);
			fiber_abort(w);
		}
		record_fault(w, w->cur, __PM_FAULT_STACK, 0, "", (uint64_t)(uintptr_t)pc,
		             "%s of %llu bytes %s: this thread's %u-byte stack overflowed (recursion, or "
		             "private arrays too large?)",
		             store ? "store" : "load", (unsigned long long)size, where, __PM_STACK_SIZE);
		fiber_abort(w);
	}
	access_fault(w, a, size, store, pc, NULL);
}

/* An access to the arena's built-ins region: a load of the thread's own
 * built-in values or of the shared ones (the kernel's launcher reads them),
 * or of its SIMD-group's exchange record inside a SIMD-group function. */
__attribute__((noinline)) static void state_access(pm_worker *w, uint64_t a, uint64_t size, int store, void *pc) {
	uint64_t t = (uint64_t)(uintptr_t)&w->cur->t, s = (uint64_t)(uintptr_t)w->shared;
	uint64_t x = (uint64_t)(uintptr_t)&w->sgx[w->cur->sg];
	uint64_t page = a >> __PM_PAGE_SHIFT;
	if (!store && a - t < sizeof(__pm_thread) && a + size <= t + sizeof(__pm_thread)) {
		/* cached for loads until the thread stops running (set_cur) */
		if (page_outside_bindings(w, page)) {
			cache_page(w, page, t, sizeof(__pm_thread), __PM_UNCOUNTED);
			w->builtins_cached = 1;
		}
		return;
	}
	if (!store && a - s < sizeof(__pm_shared) && a + size <= s + sizeof(__pm_shared)) {
		if (page_outside_bindings(w, page)) cache_page(w, page, s, sizeof(__pm_shared), __PM_UNCOUNTED);
		return;
	}
	if (!store && w->in_simd && a - x < sizeof(__pm_simd_x) && a + size <= x + sizeof(__pm_simd_x)) return;
	access_fault(w, a, size, store, pc, "in the emulated device's own memory (its threads' state)");
}

/* Whether no binding holds any byte of the page. */
static int page_outside_bindings(const pm_worker *w, uint64_t page) {
	uint64_t lo = page << __PM_PAGE_SHIFT;
	for (int k = 0; k < w->nb; k++)
		if (w->blo[k] < lo + __PM_PAGE && lo < w->blo[k] + w->blen[k]) return 0;
	return 1;
}

/* Caches the part of the page inside [lo, lo+len). */
static void cache_page(pm_worker *w, uint64_t page, uint64_t lo, uint64_t len, uint64_t k) {
	uint64_t plo = page << __PM_PAGE_SHIFT, hi = lo + len;
	if (lo < plo) lo = plo;
	if (hi > plo + __PM_PAGE) hi = plo + __PM_PAGE;
	if (hi - lo < __PM_PAGE_MIN) return;
	struct __pm_page *c = &w->acc.pages[page % __PM_PAGES];
	flush_page(&w->acc, page % __PM_PAGES);
	c->lo[0] = lo;
	c->lo[1] = k == __PM_UNCOUNTED ? __PM_NO_PAGE : lo;
	c->len = (uint32_t)(hi - lo);
	c->k = (uint32_t)k;
}

/* Caches the part of a's page that binding k (the lowest holding an
 * access at a) holds and no lower binding touches: every access inside it
 * is charged to k. When a lower binding holds the byte at a itself, or
 * segments are counted, nothing is cached. */
static void cache_binding_page(pm_worker *w, int k, uint64_t a) {
	if (w->seg_rec) return; /* counting segments: the slow path records every access to a binding */
	if (w->dev_races && !w->dev_skip[k]) return; /* the slow path records every access (device races) */
	uint64_t page = a >> __PM_PAGE_SHIFT, plo = page << __PM_PAGE_SHIFT;
	uint64_t lo = w->blo[k] > plo ? w->blo[k] : plo;
	uint64_t hi = w->blo[k] + w->blen[k] < plo + __PM_PAGE ? w->blo[k] + w->blen[k] : plo + __PM_PAGE;
	if (w->overlap) {
		for (int j = 0; j < k; j++) {
			uint64_t jl = w->blo[j], jh = w->blo[j] + w->blen[j];
			if (jh <= lo || jl >= hi) continue;
			if (jh <= a)
				lo = jh;
			else if (jl > a)
				hi = jl;
			else
				return;
		}
	}
	cache_page(w, page, lo, hi - lo, (uint64_t)w->bidx[k]);
}

/* Every access the fast path does not settle: the time limit check, the
 * search of the bindings, threadgroup memory, and faults. */
__attribute__((noinline)) static void access_slower(pm_worker *w, uint64_t a, uint64_t size, int store, int atomic,
                                                    void *pc) {
	check_halt(w, 0, "", pc);
	if (!atomic && own_frames(w, a, size)) return;
	if (a - w->tg_lo < w->tg_len) {
		tg_access(w, a, size, store, atomic, pc);
		return;
	}
	/* the binding hit last time, unless bindings overlap (then the lowest
	 * index holding the access is charged) */
	int k = w->last;
	uint64_t off = a - w->blo[k];
	if (w->overlap || !(off < w->blen[k] && off + size <= w->blen[k])) {
		for (k = 0; k < w->nb; k++) {
			off = a - w->blo[k];
			if (off < w->blen[k] && off + size <= w->blen[k]) break;
		}
		if (k == w->nb) {
			uint64_t page = a >> __PM_PAGE_SHIFT;
			if (a - w->state_lo < w->state_len) {
				/* built-ins: a thread reads its own and the shared
				 * ones (once, in the kernel's launcher), nothing else */
				state_access(w, a, size, store, pc);
			} else if (a - w->mod_lo < w->mod_len) {
				/* the library's constants, read-only, in its readable
				 * segments (between them may lie unmapped pages) */
				if (store) access_fault(w, a, size, store, pc, "in the kernel library's constant memory, which is read-only");
				int s;
				for (s = 0; s < __PM_MODULE_SEGS && w->mod_seg[s][1]; s++)
					if (a >= w->mod_seg[s][0] && a + size <= w->mod_seg[s][1]) break;
				if (s == __PM_MODULE_SEGS || !w->mod_seg[s][1])
					access_fault(w, a, size, store, pc, "in the kernel library, outside its segments");
				if (page_outside_bindings(w, page))
					cache_page(w, page, w->mod_seg[s][0], w->mod_seg[s][1] - w->mod_seg[s][0], __PM_UNCOUNTED);
			} else {
				other_access(w, a, size, store, pc);
			}
			return;
		}
		w->last = k;
	}
	cache_binding_page(w, k, a);
	w->acc.count[store][w->bidx[k]] += size;
	if (w->seg_rec) seg_record(w, w->bidx[k], a, size, store, pc);
	if (w->dev_races && !w->dev_skip[k]) {
		if (atomic || a == w->atomic_addr)
			w->atomic_addr = 0;
		else
			dev_access(w, a, size, store, pc);
	}
}

/* The next fast path, for accesses the hooks' misses: a load of a word of
 * threadgroup memory that threads of several SIMD-groups read since the
 * last barrier and none stored. */
__attribute__((noinline)) static void access_slow(pm_worker *w, uint64_t a, uint64_t size, int store, int atomic,
                                                  void *pc) {
	int64_t off = (int64_t)(a - (uint64_t)(uintptr_t)w->tg_mem);
	const pm_tg_alloc *al = &w->alloc[w->alloc_last];
	if (!store && !atomic && !__atomic_load_n(&w->acc.halt, __ATOMIC_RELAXED) && a - w->tg_lo < w->tg_len && ((off ^ (off + (int64_t)size - 1)) >> 2) == 0 &&
	    off >= al->off && off + (int64_t)size <= (int64_t)al->off + al->len && w->shadow_ro[off >> 2] == w->tg_ep &&
	    a != w->atomic_addr)
		return;
	access_slower(w, a, size, store, atomic, pc);
}

/* An access the runtime checks: the hooks' fast path (pm_abi.h), which
 * atomic accesses skip, then the slow path. */
static inline __attribute__((always_inline)) void pm_access(uint64_t a, uint64_t size, int store, int atomic,
                                                           void *pc) {
	pm_worker *w = tls_w;
	if (__builtin_expect(w == NULL, 0)) return;
	if (__builtin_expect(!atomic, 1) && __pm_access_fast(&w->acc, a, size, store)) return;
	access_slow(w, a, size, store, atomic, pc);
}

/* The rest of an access hook, after its fast path missed (prelude.h):
 * sizestore is the access's size, plus 256 for a store. The return
 * address is in the kernel's code, at the access. */
EXPORT __attribute__((noinline)) void __pm_access_miss(void *addr, uint64_t sizestore) {
	pm_worker *w = tls_w;
	if (__builtin_expect(w == NULL, 0)) return;
	access_slow(w, (uint64_t)(uintptr_t)addr, sizestore & 255, sizestore >> 8, 0, __builtin_return_address(0));
}

/* Copies of aggregates: the compiler's memcpy, memmove and memset
 * intrinsics, which AddressSanitizer turns into these calls (its only
 * instrumentation, see package msl's compile flags). Each range is checked
 * and counted as the accesses of at most 16 bytes the hooks see, the
 * source first, then the copy is made. */
static void access_range(uint64_t a, uint64_t n, int store, void *pc) {
	for (uint64_t off = 0; off < n; off += 16) pm_access(a + off, n - off < 16 ? n - off : 16, store, 0, pc);
}

/* memcpy and memmove alike: a copy between overlapping ranges, which a
 * kernel's memcpy may make too, is never undefined here */
static void *copy_range(void *dst, const void *src, size_t n, void *pc) {
	access_range((uint64_t)(uintptr_t)src, n, 0, pc);
	access_range((uint64_t)(uintptr_t)dst, n, 1, pc);
	return memmove(dst, src, n);
}

EXPORT void *__asan_memcpy(void *dst, const void *src, size_t n) {
	return copy_range(dst, src, n, __builtin_return_address(0));
}

EXPORT void *__asan_memmove(void *dst, const void *src, size_t n) {
	return copy_range(dst, src, n, __builtin_return_address(0));
}

EXPORT void *__asan_memset(void *dst, int c, size_t n) {
	access_range((uint64_t)(uintptr_t)dst, n, 1, __builtin_return_address(0));
	return memset(dst, c, n);
}

/* Accesses of sizes the access hooks do not cover (whole 32-byte vectors,
 * the copy of a by-value argument), as AddressSanitizer's __asan_loadN and
 * __asan_storeN (prelude.h) pass them on. */
EXPORT __attribute__((noinline)) void __pm_access_n(void *addr, uint64_t n, uint32_t store) {
	access_range((uint64_t)(uintptr_t)addr, n, store != 0, __builtin_return_address(0));
}

/* AddressSanitizer's module constructor calls these; with no shadow
 * memory there is nothing to set up. */
EXPORT void __asan_init(void) {}
EXPORT void __asan_version_mismatch_check_v8(void) {}
EXPORT void __asan_handle_no_return(void) {}
/* The x86-64 back end adds shadow-memory check routines to every module
 * built with AddressSanitizer, which nothing calls when it instruments no
 * access; their report functions are never reached. */
#define __PM_ASAN_REPORT(kind, n) \
	EXPORT void __asan_report_##kind##n(void *addr) { (void)addr; abort(); }
__PM_ASAN_REPORT(load, 1)
__PM_ASAN_REPORT(load, 2)
__PM_ASAN_REPORT(load, 4)
__PM_ASAN_REPORT(load, 8)
__PM_ASAN_REPORT(load, 16)
__PM_ASAN_REPORT(store, 1)
__PM_ASAN_REPORT(store, 2)
__PM_ASAN_REPORT(store, 4)
__PM_ASAN_REPORT(store, 8)
__PM_ASAN_REPORT(store, 16)
#undef __PM_ASAN_REPORT

/* Explicit check of an atomic operation, which the compiler does not
 * instrument (exchanges, compare-and-swap) or instruments as a plain load
 * or store (atomic loads and stores, the load opening a read-modify-write
 * loop): with load == 0 that instrumented access follows, and is marked
 * atomic here so that it is not taken for a race. */
EXPORT void __pm_access(const void *addr, uint64_t size, uint32_t load, uint32_t store) {
	void *pc = __builtin_return_address(0);
	uint64_t a = (uint64_t)(uintptr_t)addr;
	if (load) pm_access(a, size, 0, 1, pc);
	if (store) pm_access(a, size, 1, 1, pc);
	pm_worker *w = tls_w;
	if (w && !load) w->atomic_addr = a;
}

/* Integer faults would trap on the CPU: kernels are compiled with
 * -fsanitize=integer-divide-by-zero,signed-integer-overflow and -fwrapv
 * (signed addition, subtraction and multiplication wrap, as on the GPU, so
 * only division is checked). The check calls these handlers before the
 * operation, which then never runs. */
struct pm_ubsan_location {
	const char *file;
	uint32_t line, col;
};

struct pm_ubsan_type {
	uint16_t kind, info; /* kind 0: integer; info: log2(bits) << 1 | signed */
	char name[];
};

struct pm_ubsan_overflow {
	struct pm_ubsan_location loc;
	const struct pm_ubsan_type *type;
};

struct pm_ubsan_oob {
	struct pm_ubsan_location loc;
	const struct pm_ubsan_type *array, *index;
};

/* The value of an integer operand passed inline (64 bits or fewer). */
static long long ubsan_int(const struct pm_ubsan_type *t, uintptr_t v, int *is_signed) {
	unsigned bits = 1u << (t->info >> 1);
	*is_signed = t->info & 1;
	if (*is_signed && bits < 64) {
		uint64_t m = 1ull << (bits - 1);
		return (long long)(((uint64_t)v ^ m) - m);
	}
	return (long long)v;
}

/* The type name of a descriptor, without quotes and typedefs. */
static void ubsan_type_name(const struct pm_ubsan_type *t, char *buf, size_t n) {
	static const char as3[] = "__attribute__((address_space(3))) ";
	const char *s = t->name, *aka = strstr(s, "(aka '");
	if (aka) s = aka + 5;
	if (*s == '\'') s++;
	size_t i = 0;
	while (*s && *s != '\'' && i + 1 < n) {
		if (strncmp(s, as3, sizeof as3 - 1) == 0) {
			s += sizeof as3 - 1;
			int k = snprintf(buf + i, n - i, "threadgroup ");
			i = k < 0 || (size_t)k >= n - i ? n - 1 : i + (size_t)k;
			continue;
		}
		buf[i++] = *s++;
	}
	buf[i] = 0;
}

static pm_worker *ubsan_worker(void) {
	pm_worker *w = tls_w;
	if (!w || !w->cur) abort();
	return w;
}

EXPORT void __ubsan_handle_divrem_overflow_abort(struct pm_ubsan_overflow *d, uintptr_t lhs, uintptr_t rhs) {
	pm_worker *w = ubsan_worker();
	int sl, sr;
	long long l = ubsan_int(d->type, lhs, &sl), r = ubsan_int(d->type, rhs, &sr);
	char type[64];
	ubsan_type_name(d->type, type, sizeof type);
	if (r == 0) {
		record_fault(w, w->cur, __PM_FAULT_INTEGER_DIVISION, d->loc.line, d->loc.file, 0,
		             "integer division or remainder by zero at line %u", d->loc.line);
	} else {
		record_fault(w, w->cur, __PM_FAULT_INTEGER_DIVISION, d->loc.line, d->loc.file, 0,
		             "integer division or remainder overflows at line %u: %lld / %lld does not fit in %s",
		             d->loc.line, l, r, type);
	}
	fiber_abort(w);
}

/* Indexing an array whose size is known (a thread or threadgroup array
 * declared in the kernel) outside its bounds: kernels are compiled with
 * -fsanitize=array-bounds. */
EXPORT void __ubsan_handle_out_of_bounds_abort(struct pm_ubsan_oob *d, uintptr_t index) {
	pm_worker *w = ubsan_worker();
	int is_signed;
	long long i = ubsan_int(d->index, index, &is_signed);
	char type[64];
	ubsan_type_name(d->array, type, sizeof type);
	if (is_signed)
		record_fault(w, w->cur, __PM_FAULT_ARRAY_BOUNDS, d->loc.line, d->loc.file, 0,
		             "index %lld is out of bounds of the array %s at line %u", i, type, d->loc.line);
	else
		record_fault(w, w->cur, __PM_FAULT_ARRAY_BOUNDS, d->loc.line, d->loc.file, 0,
		             "index %llu is out of bounds of the array %s at line %u", (unsigned long long)i, type,
		             d->loc.line);
	fiber_abort(w);
}

/* ---------------------------------------------------------------------------
 * Half-precision conversions used by clang for __fp16 arithmetic. */
static uint16_t f2h(float f) {
	uint32_t x;
	memcpy(&x, &f, 4);
	uint32_t sign = (x >> 16) & 0x8000, e = (x >> 23) & 0xff, m = x & 0x7fffff;
	if (e == 0xff) return (uint16_t)(sign | 0x7c00 | (m ? 0x200 | (m >> 13) : 0));
	int32_t he = (int32_t)e - 127 + 15;
	if (he >= 31) return (uint16_t)(sign | 0x7c00);
	if (he <= 0) {
		if (he < -10) return (uint16_t)sign;
		m |= 0x800000;
		uint32_t shift = (uint32_t)(14 - he);
		uint32_t hm = m >> shift, rem = m & ((1u << shift) - 1), halfway = 1u << (shift - 1);
		if (rem > halfway || (rem == halfway && (hm & 1))) hm++;
		return (uint16_t)(sign | hm);
	}
	uint32_t r = sign | ((uint32_t)he << 10) | (m >> 13), rem = m & 0x1fff;
	if (rem > 0x1000 || (rem == 0x1000 && (r & 1))) r++;
	return (uint16_t)r;
}

static float h2f(uint16_t h) {
	uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, x;
	if (e == 0) {
		if (m == 0) {
			x = sign;
		} else {
			e = 113;
			while (!(m & 0x400)) {
				m <<= 1;
				e--;
			}
			x = sign | (e << 23) | ((m & 0x3ff) << 13);
		}
	} else if (e == 31) {
		x = sign | 0x7f800000 | (m << 13);
	} else {
		x = sign | ((e + 112) << 23) | (m << 13);
	}
	float f;
	memcpy(&f, &x, 4);
	return f;
}

EXPORT float __gnu_h2f_ieee(uint16_t h) { return h2f(h); }
EXPORT uint16_t __gnu_f2h_ieee(float f) { return f2h(f); }
EXPORT float __extendhfsf2(uint16_t h) { return h2f(h); }
EXPORT uint16_t __truncsfhf2(float f) { return f2h(f); }

/* ---------------------------------------------------------------------------
 * Dispatch. */

/* ---------------------------------------------------------------------------
 * Structural counters: SIMD-group functions by kind, and how many distinct
 * 32- and 128-byte segments of device memory each SIMD-group access
 * touches (how well the lanes' accesses coalesce).
 *
 * The lanes of a SIMD-group run one after another between its
 * synchronisation points (SIMD-group functions, threadgroup barriers, the
 * end of the threadgroup), so each lane's device accesses are recorded
 * there (code address, address, size) and grouped when the SIMD-group
 * synchronises: the n-th execution of one instruction by each lane is one
 * SIMD-group access. Lanes that skip an instruction (divergent branches)
 * simply do not take part in it. */

#define __PM_SEG_CAP 1024 /* records per thread between synchronisation points */

typedef struct pm_seg_rec {
	uint64_t pc, addr;
	uint32_t size;
	uint16_t binding, store;
} pm_seg_rec;

typedef struct pm_seg_tmp {
	uint64_t pc;
	uint32_t occ, lane, pos; /* pos: the record's place among its lane's */
	const pm_seg_rec *r;
} pm_seg_tmp;

static void seg_begin(pm_worker *w, const __pm_desc *d) {
	memset(w->simd_by_op, 0, sizeof w->simd_by_op);
	memset(w->seg, 0, sizeof w->seg);
	w->seg_untracked = w->tg_static = 0;
	w->seg_rec = NULL;
	if (!d->track_segments) return;
	uint64_t n = d->threads_per_threadgroup[0] * d->threads_per_threadgroup[1] * d->threads_per_threadgroup[2];
	w->seg_rec = malloc(sizeof(pm_seg_rec) * __PM_SEG_CAP * n);
	w->seg_n = calloc(n, sizeof(uint32_t));
	w->seg_tmp = malloc(sizeof(pm_seg_tmp) * __PM_SEG_CAP * __PM_SIMD_WIDTH);
	if (!w->seg_rec || !w->seg_n || !w->seg_tmp) {
		free(w->seg_rec);
		free(w->seg_n);
		free(w->seg_tmp);
		w->seg_rec = NULL; /* not counted: Counters say so (no accesses at all) */
	}
}

static void seg_end(pm_worker *w) {
	if (!w->seg_rec) return;
	free(w->seg_rec);
	free(w->seg_n);
	free(w->seg_tmp);
	w->seg_rec = NULL;
}

static void seg_record(pm_worker *w, int binding, uint64_t a, uint64_t size, int store, void *pc) {
	uint32_t t = w->cur->index;
	uint32_t n = w->seg_n[t];
	if (n == __PM_SEG_CAP) {
		w->seg_untracked++;
		return;
	}
	pm_seg_rec *r = &w->seg_rec[(size_t)t * __PM_SEG_CAP + n];
	r->pc = (uint64_t)(uintptr_t)pc;
	r->addr = a;
	r->size = (uint32_t)size;
	r->binding = (uint16_t)binding;
	r->store = (uint16_t)store;
	w->seg_n[t] = n + 1;
}

static int seg_cmp(const void *x, const void *y) {
	const pm_seg_tmp *a = x, *b = y;
	if (a->pc != b->pc) return a->pc < b->pc ? -1 : 1;
	if (a->occ != b->occ) return a->occ < b->occ ? -1 : 1;
	if (a->lane != b->lane) return a->lane < b->lane ? -1 : 1;
	return a->pos < b->pos ? -1 : a->pos > b->pos;
}

static int u64_cmp(const void *x, const void *y) {
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
	return a < b ? -1 : a > b;
}

static int range_cmp(const void *x, const void *y) {
	const uint64_t *a = x, *b = y;
	return a[0] < b[0] ? -1 : a[0] > b[0];
}

/* Distinct bytes the accesses g[0..n) touch: lanes reading the same
 * address (a broadcast) need it once. */
static uint64_t seg_unique_bytes(const pm_seg_tmp *g, uint32_t n) {
	uint64_t r[__PM_SIMD_WIDTH][2];
	uint32_t m = n < __PM_SIMD_WIDTH ? n : __PM_SIMD_WIDTH;
	for (uint32_t i = 0; i < m; i++) {
		r[i][0] = g[i].r->addr;
		r[i][1] = g[i].r->addr + g[i].r->size;
	}
	qsort(r, m, sizeof r[0], range_cmp);
	uint64_t bytes = 0, lo = 0, hi = 0;
	for (uint32_t i = 0; i < m; i++) {
		if (i == 0 || r[i][0] > hi) {
			bytes += hi - lo;
			lo = r[i][0];
			hi = r[i][1];
		} else if (r[i][1] > hi) {
			hi = r[i][1];
		}
	}
	return bytes + (hi - lo);
}

/* Distinct segments of 2^shift bytes the accesses g[0..n) touch. */
static uint64_t seg_distinct(const pm_seg_tmp *g, uint32_t n, int shift) {
	uint64_t ids[4 * __PM_SIMD_WIDTH];
	uint32_t m = 0;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t lo = g[i].r->addr >> shift, hi = (g[i].r->addr + g[i].r->size - 1) >> shift;
		for (uint64_t s = lo; s <= hi && m < 4 * __PM_SIMD_WIDTH; s++) ids[m++] = s;
	}
	qsort(ids, m, sizeof ids[0], u64_cmp);
	uint64_t distinct = 0;
	for (uint32_t i = 0; i < m; i++)
		if (i == 0 || ids[i] != ids[i - 1]) distinct++;
	return distinct;
}

/* Groups the records of SIMD-group sg into SIMD-group accesses, adds them
 * up and clears them. */
static void seg_flush(pm_worker *w, uint32_t sg) {
	uint32_t base = sg * __PM_SIMD_WIDTH, lanes = w->sg[sg].lanes, m = 0;
	pm_seg_tmp *tmp = w->seg_tmp;
	for (uint32_t l = 0; l < lanes; l++) {
		uint32_t t = base + l, n = w->seg_n[t];
		const pm_seg_rec *r = &w->seg_rec[(size_t)t * __PM_SEG_CAP];
		for (uint32_t i = 0; i < n; i++) {
			tmp[m].pc = r[i].pc;
			tmp[m].lane = l;
			tmp[m].pos = i;
			tmp[m].r = &r[i];
			tmp[m].occ = 0;
			m++;
		}
	}
	if (m == 0) return;
	/* the occurrence of each record's instruction within its lane: sort by
	 * (pc, lane, position), which keeps each lane's records in order */
	qsort(tmp, m, sizeof tmp[0], seg_cmp);
	for (uint32_t i = 1; i < m; i++) {
		if (tmp[i].pc == tmp[i - 1].pc && tmp[i].lane == tmp[i - 1].lane) tmp[i].occ = tmp[i - 1].occ + 1;
	}
	qsort(tmp, m, sizeof tmp[0], seg_cmp);
	for (uint32_t i = 0; i < m;) {
		uint32_t j = i + 1;
		while (j < m && tmp[j].pc == tmp[i].pc && tmp[j].occ == tmp[i].occ) j++;
		__pm_seg_counts *c = &w->seg[tmp[i].r->binding][tmp[i].r->store ? 1 : 0];
		uint64_t bytes = 0;
		for (uint32_t k = i; k < j; k++) bytes += tmp[k].r->size;
		c->accesses++;
		c->lane_accesses += j - i;
		c->bytes += bytes;
		c->seg32 += seg_distinct(&tmp[i], j - i, 5);
		c->seg128 += seg_distinct(&tmp[i], j - i, 7);
		uint64_t unique = seg_unique_bytes(&tmp[i], j - i);
		c->unique_bytes += unique;
		c->min32 += (unique + 31) / 32;
		c->min128 += (unique + 127) / 128;
		i = j;
	}
	for (uint32_t l = 0; l < lanes; l++) w->seg_n[base + l] = 0;
}

static void seg_flush_all(pm_worker *w) {
	for (uint32_t g = 0; g * __PM_SIMD_WIDTH < w->n; g++) seg_flush(w, g);
}

static void seg_merge(__pm_desc *d, pm_worker *w) {
	for (int i = 0; i < __PM_OP_COUNT; i++) d->simd_by_op[i] += w->simd_by_op[i];
	for (int b = 0; b < __PM_MAX_BINDINGS; b++) {
		for (int k = 0; k < 2; k++) {
			__pm_seg_counts *x = &d->seg[b][k];
			const __pm_seg_counts *y = &w->seg[b][k];
			x->accesses += y->accesses;
			x->lane_accesses += y->lane_accesses;
			x->bytes += y->bytes;
			x->unique_bytes += y->unique_bytes;
			x->seg32 += y->seg32;
			x->seg128 += y->seg128;
			x->min32 += y->min32;
			x->min128 += y->min128;
		}
	}
	d->seg_untracked += w->seg_untracked;
	if (w->tg_static > d->tg_static) d->tg_static = w->tg_static;
	seg_end(w);
}

static uint64_t splitmix(uint64_t *s) {
	uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static void run_threadgroup(pm_worker *w, uint64_t linear) {
	__pm_desc *d = w->run->d;
	uint32_t tg[3], full[3], act[3];
	tg_shape(d, linear, tg, full, act);
	for (int k = 0; k < 3; k++) w->tgpos[k] = tg[k];
	uint32_t n = act[0] * act[1] * act[2];
	w->n = n;
	w->live = n;
	w->done = 0;
	w->at_barrier = 0;
	w->tg_linear = (uint32_t)linear;

	/* threadgroup memory: encoder-set lengths first, poisoned */
	__pm_shared *s = w->shared;
	uint32_t off = 0;
	w->n_alloc = 0;
	w->alloc_last = 0;
	for (int i = 0; i < __PM_MAX_BINDINGS; i++) {
		if (d->tg_len[i]) {
			s->tg[i] = w->tg_mem + off;
			pm_tg_alloc *al = &w->alloc[w->n_alloc++];
			al->off = off;
			al->len = (uint32_t)d->tg_len[i];
			al->binding = i;
			off += (uint32_t)align_up(d->tg_len[i], 16);
		} else {
			s->tg[i] = NULL;
		}
	}
	memset(w->tg_mem, 0xFF, off);
	w->tg_dyn = off;
	w->tg_used = off;
	w->n_static = 0;
	next_epoch(w, 1);
	w->atomic_addr = 0;
	w->in_simd = 0;

	uint32_t nsg = (n + __PM_SIMD_WIDTH - 1) / __PM_SIMD_WIDTH;
	uint32_t nsg_full = (full[0] * full[1] * full[2] + __PM_SIMD_WIDTH - 1) / __PM_SIMD_WIDTH;
	for (uint32_t g = 0; g < nsg; g++) {
		uint32_t lanes = n - g * __PM_SIMD_WIDTH;
		if (lanes > __PM_SIMD_WIDTH) lanes = __PM_SIMD_WIDTH;
		w->sg[g].live = lanes;
		w->sg[g].lanes = lanes;
		w->sg[g].waiting = 0;
		w->sg[g].first = 0;
		w->sg[g].at_barrier = 0;
		w->sg[g].at_simd = 0;
		w->sg[g].mixed = 0;
		w->sg_dep[g] = 0;
	}
	if (w->dev_races) {
		dev_clear(&w->dev);
		w->dev_ep = w->dev_mem_ep = 1;
	}
	int same_shape = w->lay_n == n;
	for (int k = 0; k < 3; k++) same_shape = same_shape && w->lay_act[k] == act[k] && w->lay_full[k] == full[k];
	for (uint32_t i = 0; i < n; i++) {
		pm_fiber *f = &w->fibers[i];
		if (same_shape) {
			/* only the threadgroup's position changed */
			for (int k = 0; k < 3; k++) {
				f->t.threadgroup_position_in_grid[k] = tg[k];
				f->t.thread_position_in_grid[k] = tg[k] * full[k] + f->t.thread_position_in_threadgroup[k];
			}
		} else {
			uint32_t pos[3] = {i % act[0], (i / act[0]) % act[1], i / (act[0] * act[1])};
			f->t.s = s;
			for (int k = 0; k < 3; k++) {
				f->t.thread_position_in_threadgroup[k] = pos[k];
				f->t.threadgroup_position_in_grid[k] = tg[k];
				f->t.thread_position_in_grid[k] = tg[k] * full[k] + pos[k];
				f->t.threads_per_threadgroup[k] = act[k];
			}
			f->t.thread_index_in_threadgroup = i;
			f->t.thread_index_in_simdgroup = i % __PM_SIMD_WIDTH;
			f->t.simdgroup_index_in_threadgroup = i / __PM_SIMD_WIDTH;
			f->t.simdgroups_per_threadgroup = nsg;
			f->t.dispatch_simdgroups_per_threadgroup = nsg_full;
			f->index = (uint16_t)i;
			f->lane = (uint8_t)(i % __PM_SIMD_WIDTH);
			f->sg = (uint8_t)(i / __PM_SIMD_WIDTH);
		}
		f->state = F_READY;
		f->h.compute = 0;
		f->n_declared = 0;
		f->op = 0;
		f->line = 0;
		f->file = NULL;
		f->h.sp = __pm_fiber_init(f->stack_top);
	}
	w->lay_n = n;
	for (int k = 0; k < 3; k++) {
		w->lay_act[k] = act[k];
		w->lay_full[k] = full[k];
	}
	/* order in which runnable threads get the CPU */
	for (uint32_t i = 0; i < n; i++) w->order[i] = d->order == 1 ? n - 1 - i : i;
	if (d->order == 2) {
		uint64_t st = d->seed ^ (linear * 0xD1B54A32D192ED03ull) ^ 0x5EED;
		for (uint32_t i = n - 1; i > 0; i--) {
			uint32_t j = (uint32_t)(splitmix(&st) % (i + 1));
			uint32_t t = w->order[i];
			w->order[i] = w->order[j];
			w->order[j] = t;
		}
	}

	for (;;) {
		uint32_t ran = 0;
		for (w->pos = 0; w->pos < n; w->pos++) {
			pm_fiber *f = &w->fibers[w->order[w->pos]];
			if (f->state != F_READY) continue;
			f->state = F_RUNNING;
			set_cur(w, f);
			prefetch_next(w, w->pos + 1);
			/* runs f and the runnable fibers after it, until the end of
			 * the pass (pm_yield) or a fault */
			__pm_switch(&w->sched, f->h.sp);
			forget_builtins(w);
			w->cur = NULL;
			if (w->fault || w->abandon) return;
			ran++;
		}
		if (w->done == n) {
			if (w->dev_races) dev_merge(w);
			if (w->seg_rec) {
				seg_flush_all(w);
				if (w->tg_used - w->tg_dyn > w->tg_static) w->tg_static = w->tg_used - w->tg_dyn;
			}
			return;
		}
		if (ran) continue;
		/* nothing can run: explain the deadlock */
		pm_fiber *simd = NULL, *bar = NULL;
		for (uint32_t i = 0; i < n; i++) {
			pm_fiber *f = &w->fibers[i];
			if (f->state == F_AT_SIMD && !simd) simd = f;
			if (f->state == F_AT_BARRIER && !bar) bar = f;
		}
		if (simd && bar) {
			record_fault(w, simd, __PM_FAULT_DEADLOCK, simd->line, simd->file, 0,
			             "deadlock: %s at line %u (thread %u) waits for lanes of its SIMD-group "
			             "while thread %u waits at threadgroup_barrier at line %u",
			             op_name(simd->op), simd->line, simd->index, bar->index, bar->line);
		} else {
			pm_fiber *f = simd ? simd : bar;
			record_fault(w, f, __PM_FAULT_DEADLOCK, f ? f->line : 0, f ? f->file : "", 0,
			             "deadlock: no thread of the threadgroup can make progress");
		}
		return;
	}
}

static uint64_t tg_at(pm_run *r, uint64_t i) {
	if (r->tg_order) return r->tg_order[i];
	if (r->d->order == 1) return r->ntg - 1 - i;
	return i;
}

/* ---------------------------------------------------------------------------
 * The watchdog: one thread of the process, which stops the dispatches that
 * must stop, those past their time limit and those another worker of which
 * faulted. Threads cannot be preempted, and the access hooks' fast path
 * checks nothing but the access (no countdown, no flag), so the watchdog
 * halts a dispatch's workers from outside (halt_worker): it sets their
 * halt flag and empties their hooks' state, the stack and the page cache,
 * so that the next access takes the slow path, which sees the flag. A
 * worker that refills the state before it sees the flag (a new thread's
 * stack, a page) is halted again __PM_HALT_REPEAT_NS later, until the
 * dispatch ends. Barriers and SIMD-group functions check the flag too. */
static pthread_mutex_t wd_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wd_cv;
static pthread_once_t wd_once = PTHREAD_ONCE_INIT;
static int wd_ok;
static pm_run *wd_runs; /* the dispatches it watches, under wd_mu */

static void halt_worker(pm_worker *w) {
	__atomic_store_n(&w->acc.halt, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&w->acc.stack_lo, 0, __ATOMIC_RELAXED);
	for (int i = 0; i < __PM_PAGES; i++) {
		__atomic_store_n(&w->acc.pages[i].lo[0], __PM_NO_PAGE, __ATOMIC_RELAXED);
		__atomic_store_n(&w->acc.pages[i].lo[1], __PM_NO_PAGE, __ATOMIC_RELAXED);
	}
}

static void *watchdog_main(void *arg) {
	(void)arg;
	pthread_mutex_lock(&wd_mu);
	for (;;) {
		uint64_t now = now_ns(), wake = UINT64_MAX;
		for (pm_run *r = wd_runs; r; r = r->wd_next) {
			if (r->deadline && now >= r->deadline) __atomic_store_n(&r->expired, 1, __ATOMIC_RELAXED);
			if (__atomic_load_n(&r->stop, __ATOMIC_RELAXED) || r->expired) {
				for (uint64_t i = 0; i < r->nws; i++) halt_worker(r->ws[i]);
				if (now + __PM_HALT_REPEAT_NS < wake) wake = now + __PM_HALT_REPEAT_NS;
			} else if (r->deadline && r->deadline < wake) {
				wake = r->deadline;
			}
		}
		if (wake == UINT64_MAX) {
			pthread_cond_wait(&wd_cv, &wd_mu);
		} else {
			struct timespec ts = {(time_t)(wake / 1000000000ull), (long)(wake % 1000000000ull)};
			pthread_cond_timedwait(&wd_cv, &wd_mu, &ts);
		}
	}
	return NULL;
}

static void watchdog_start(void) {
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&wd_cv, &ca);
	pthread_condattr_destroy(&ca);
	/* it blocks every signal, as the workers do */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&at, 1 << 16);
	pthread_t th;
	wd_ok = pthread_create(&th, &at, watchdog_main, NULL) == 0;
	pthread_attr_destroy(&at);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* Whether the watchdog runs, started by the first call. */
static int watchdog_ready(void) {
	pthread_once(&wd_once, watchdog_start);
	return wd_ok;
}

/* Makes the watchdog (watchdog_ready) watch r until unwatch. */
static void watch(pm_run *r) {
	pthread_mutex_lock(&wd_mu);
	r->wd_next = wd_runs;
	wd_runs = r;
	pthread_cond_signal(&wd_cv);
	pthread_mutex_unlock(&wd_mu);
}

/* Ends the watch of r: the watchdog touches neither r nor its workers
 * after this returns. */
static void unwatch(pm_run *r) {
	pthread_mutex_lock(&wd_mu);
	for (pm_run **p = &wd_runs; *p; p = &(*p)->wd_next)
		if (*p == r) {
			*p = r->wd_next;
			break;
		}
	pthread_mutex_unlock(&wd_mu);
}

/* Tells the watchdog that a dispatch stopped (a worker faulted). */
static void watchdog_wake(void) {
	pthread_mutex_lock(&wd_mu);
	pthread_cond_signal(&wd_cv);
	pthread_mutex_unlock(&wd_mu);
}

/* Runs threadgroups of the dispatch w->run until none is left or one
 * faults. */
static void *worker_main(void *arg) {
	pm_worker *w = arg;
	pm_run *r = w->run;
	__pm_desc *d = r->d;
	w->fault = 0;
	w->abandon = 0;
	w->nb = 0;
	w->last = 0;
	for (int i = 0; i < __PM_MAX_BINDINGS; i++) {
		w->shared->buf[i] = (void *)(uintptr_t)d->buf_ptr[i];
		w->acc.count[0][i] = w->acc.count[1][i] = 0;
		if (d->buf_ptr[i] && d->buf_len[i]) {
			w->bidx[w->nb] = i;
			w->blo[w->nb] = d->buf_ptr[i];
			w->blen[w->nb] = d->buf_len[i];
			w->nb++;
		}
	}
	w->acc.count[0][__PM_UNCOUNTED] = w->acc.count[1][__PM_UNCOUNTED] = 0;
	for (int i = 0; i < __PM_PAGES; i++) w->acc.pages[i] = (struct __pm_page)__PM_EMPTY_PAGE;
	w->overlap = 0;
	for (int k = w->nb; k < __PM_MAX_BINDINGS; k++) w->blo[k] = w->blen[k] = 0;
	for (int a = 0; a < w->nb; a++)
		for (int b = a + 1; b < w->nb; b++)
			if (w->blo[a] < w->blo[b] + w->blen[b] && w->blo[b] < w->blo[a] + w->blen[a]) w->overlap = 1;
	/* device races: a binding the kernel cannot store to, overlapping
	 * none it can, is only loaded */
	w->dev_races = d->device_races != 0;
	if (w->dev.esz != sizeof(pm_dev_word)) w->dev = (pm_dev_table){.esz = sizeof(pm_dev_word)};
	for (int a = 0; a < w->nb; a++) {
		w->dev_skip[a] = (d->read_only >> w->bidx[a]) & 1;
		for (int b = 0; b < w->nb; b++)
			if (!((d->read_only >> w->bidx[b]) & 1) && w->blo[a] < w->blo[b] + w->blen[b] &&
			    w->blo[b] < w->blo[a] + w->blen[a])
				w->dev_skip[a] = 0;
	}
	for (int k = 0; k < 3; k++) {
		w->shared->threadgroups_per_grid[k] = (uint32_t)d->threadgroups[k];
		w->shared->threads_per_grid[k] = (uint32_t)d->threads_per_grid[k];
		w->shared->dispatch_threads_per_threadgroup[k] = (uint32_t)d->threads_per_threadgroup[k];
	}
	w->mod_lo = d->module_lo;
	w->mod_len = d->module_hi - d->module_lo;
	w->mod_seg = (const uint64_t (*)[2])d->module_seg;
	w->simd_ops = w->barriers = 0;
	seg_begin(w, d);
	w->cur = NULL;
	w->builtins_cached = 0;
	w->acc.stack_lo = 0;
	w->stack_top = 0;
	tls_w = w;
	__pm_tls_access = &w->acc;
	for (;;) {
		if (__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) break;
		uint64_t i = __atomic_fetch_add(&r->next, 1, __ATOMIC_ACQ_REL);
		if (i >= r->ntg) break;
		run_threadgroup(w, tg_at(r, i));
		if (w->fault) {
			w->fault_order = i;
			__atomic_store_n(&r->stop, 1, __ATOMIC_RELEASE);
			watchdog_wake();
			break;
		}
		if (w->abandon) break;
	}
	tls_w = NULL;
	__pm_tls_access = &no_access;
	return w;
}

static void merge(__pm_desc *d, pm_worker *w, int *have_fault, uint64_t *fault_order) {
	for (int i = 0; i < __PM_PAGES; i++) flush_page(&w->acc, (uint64_t)i);
	for (int i = 0; i < __PM_MAX_BINDINGS; i++) {
		d->loaded[i] += w->acc.count[0][i];
		d->stored[i] += w->acc.count[1][i];
	}
	d->simd_ops += w->simd_ops;
	d->barriers += w->barriers;
	seg_merge(d, w);
	if (w->fault && (!*have_fault || w->fault_order < *fault_order)) {
		*have_fault = 1;
		*fault_order = w->fault_order;
		d->fault_kind = (uint64_t)w->fault;
		d->fault_line = w->fault_line;
		d->fault_pc = w->fault_pc;
		d->fault_pc2 = w->fault_pc2;
		for (int k = 0; k < 3; k++) {
			d->fault_threadgroup[k] = w->fault_tg[k];
			d->fault_thread[k] = w->fault_thread[k];
			d->fault_thread2[k] = w->fault_thread2[k];
		}
		memcpy(d->fault_file, w->fault_file, sizeof d->fault_file);
		memcpy(d->fault_msg, w->fault_msg, sizeof d->fault_msg);
	}
}

/* Runs one dispatch described by d. Returns 0, or -1 if the runtime could not
 * get memory or threads (then d->fault_kind is __PM_FAULT_RESOURCES). Kernel
 * faults are reported in d->fault_*. */
EXPORT int64_t pm_dispatch(__pm_desc *d) {
	pm_run r;
	memset(&r, 0, sizeof r);
	r.d = d;
	r.ntg = d->threadgroups[0] * d->threadgroups[1] * d->threadgroups[2];
	r.dev.esz = sizeof(pm_dev_owners);
	pthread_mutex_init(&r.dev_mu, NULL);
	memset(d->loaded, 0, sizeof d->loaded);
	memset(d->stored, 0, sizeof d->stored);
	d->simd_ops = d->barriers = 0;
	memset(d->simd_by_op, 0, sizeof d->simd_by_op);
	memset(d->seg, 0, sizeof d->seg);
	d->seg_untracked = d->tg_static = 0;
	d->fault_kind = 0;
	if (d->order == 2 && r.ntg > 1) {
		r.tg_order = malloc(sizeof(uint32_t) * r.ntg);
		if (!r.tg_order) goto nomem;
		for (uint64_t i = 0; i < r.ntg; i++) r.tg_order[i] = (uint32_t)i;
		uint64_t st = d->seed;
		for (uint64_t i = r.ntg - 1; i > 0; i--) {
			uint64_t j = splitmix(&st) % (i + 1);
			uint32_t t = r.tg_order[i];
			r.tg_order[i] = r.tg_order[j];
			r.tg_order[j] = t;
		}
	}
	uint64_t nw = d->workers;
	if (nw == 0) nw = (uint64_t)sysconf(_SC_NPROCESSORS_ONLN);
	if (nw < 1) nw = 1;
	if (nw > r.ntg) nw = r.ntg;
	if (nw > __PM_MAX_ARENAS) nw = __PM_MAX_ARENAS;
	if ((d->timeout_ns || nw > 1) && !watchdog_ready()) {
		free(r.tg_order);
		d->fault_kind = __PM_FAULT_RESOURCES;
		snprintf(d->fault_msg, sizeof d->fault_msg, "cannot start the watchdog thread (the time limit's)");
		return -1;
	}
	/* the calling thread waits for an arena if every one is busy; more
	 * workers run only on arenas free now */
	pm_worker *ws[__PM_MAX_ARENAS];
	ws[0] = arena_get(1);
	if (!ws[0]) {
		free(r.tg_order);
		goto nomem;
	}
	uint64_t got = 1;
	while (got < nw && (ws[got] = arena_get(0)) != NULL) got++;
	if (d->timeout_ns) r.deadline = now_ns() + d->timeout_ns;
	for (uint64_t i = 0; i < got; i++) {
		ws[i]->run = &r;
		ws[i]->acc.halt = 0;
	}
	pthread_t th[__PM_MAX_ARENAS];
	uint64_t started = 0;
	/* worker threads block every signal, so that none is delivered on a
	 * fiber stack of a thread the Go runtime does not know */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (uint64_t i = 1; i < got; i++) {
		pthread_attr_t at;
		pthread_attr_init(&at);
		pthread_attr_setstacksize(&at, 1 << 20);
		int ok = pthread_create(&th[i], &at, worker_main, ws[i]) == 0;
		pthread_attr_destroy(&at);
		if (!ok) break;
		started = i;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	/* arenas without a thread go back at once */
	for (uint64_t i = started + 1; i < got; i++) arena_put(ws[i]);
	r.ws = ws;
	r.nws = started + 1;
	int watched = r.deadline || r.nws > 1;
	if (watched) watch(&r);
	worker_main(ws[0]);
	int have_fault = 0;
	uint64_t fault_order = 0;
	merge(d, ws[0], &have_fault, &fault_order);
	for (uint64_t i = 1; i <= started; i++) {
		pthread_join(th[i], NULL);
		merge(d, ws[i], &have_fault, &fault_order);
	}
	if (watched) unwatch(&r);
	for (uint64_t i = 1; i <= started; i++) arena_put(ws[i]);
	arena_put(ws[0]);
	free(r.tg_order);
	dev_free(&r.dev);
	pthread_mutex_destroy(&r.dev_mu);
	return 0;
nomem:
	pthread_mutex_destroy(&r.dev_mu);
	d->fault_kind = __PM_FAULT_RESOURCES;
	snprintf(d->fault_msg, sizeof d->fault_msg, "cannot allocate fiber stacks or worker threads");
	return -1;
}

struct range_query {
	uintptr_t addr, lo, hi, base;
	int found;
};

static int range_cb(struct dl_phdr_info *info, size_t size, void *data) {
	(void)size;
	struct range_query *q = data;
	uintptr_t lo = UINTPTR_MAX, hi = 0;
	int hit = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];
		if (p->p_type != PT_LOAD) continue;
		uintptr_t s = info->dlpi_addr + p->p_vaddr, e = s + p->p_memsz;
		if (s < lo) lo = s;
		if (e > hi) hi = e;
		if (q->addr >= s && q->addr < e) hit = 1;
	}
	if (!hit) return 0;
	q->lo = lo;
	q->hi = hi;
	q->base = info->dlpi_addr;
	q->found = 1;
	return 1;
}

/* Address range of the loaded module holding addr, and its load base. */
EXPORT int64_t pm_module_range(uint64_t addr, uint64_t *lo, uint64_t *hi, uint64_t *base) {
	struct range_query q = {(uintptr_t)addr, 0, 0, 0, 0};
	dl_iterate_phdr(range_cb, &q);
	if (!q.found) return -1;
	*lo = q.lo;
	*hi = q.hi;
	*base = q.base;
	return 0;
}

/* Size of __pm_desc, checked by the Go side against its mirror. */
EXPORT uint64_t pm_desc_size(void) { return sizeof(__pm_desc); }

