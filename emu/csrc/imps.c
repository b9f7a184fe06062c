// Method implementations of the emulated Metal device whose arguments or
// results a Go callback cannot take or give directly: double results, and
// structs passed or returned by value. Each forwards to a Go callback with
// plain words and pointers; the C compiler applies the platform's calling
// convention, so the Objective-C runtime may call these exactly as it calls
// Apple's methods.

#include <stdint.h>
#include <string.h>

typedef struct { uint64_t width, height, depth; } pm_size;   // MTLSize
typedef struct { uint64_t location, length; } pm_range;        // NSRange

static uint64_t (*double_bits)(void *self, void *sel);
static void (*size_result)(void *self, void *sel, pm_size *out);
static void (*two_sizes)(void *self, void *sel, const pm_size *a, const pm_size *b);
static void (*two_pointers_range)(void *self, void *sel, const void *a, const void *b, uint64_t location, uint64_t length);
static void (*one_range)(void *self, void *sel, uint64_t location, uint64_t length);

void puremetal_emu_set_callbacks(void *d, void *s, void *ss, void *ppr, void *r) {
	double_bits = d;
	size_result = s;
	two_sizes = ss;
	two_pointers_range = ppr;
	one_range = r;
}

// - (double)sel  (CFTimeInterval GPUStartTime, GPUEndTime)
double puremetal_emu_imp_double(void *self, void *sel) {
	uint64_t bits = double_bits(self, sel);
	double d;
	memcpy(&d, &bits, sizeof d);
	return d;
}

// - (MTLSize)sel  (maxThreadsPerThreadgroup)
pm_size puremetal_emu_imp_size(void *self, void *sel) {
	pm_size s = {0, 0, 0};
	size_result(self, sel, &s);
	return s;
}

// - (void)sel:(MTLSize)a :(MTLSize)b  (dispatchThreadgroups:threadsPerThreadgroup:)
void puremetal_emu_imp_size_size(void *self, void *sel, pm_size a, pm_size b) {
	two_sizes(self, sel, &a, &b);
}

// - (void)sel:(const void*)a :(const void*)b :(NSRange)r  (setBuffers:offsets:withRange:)
void puremetal_emu_imp_ptr_ptr_range(void *self, void *sel, const void *a, const void *b, pm_range r) {
	two_pointers_range(self, sel, a, b, r.location, r.length);
}

// - (void)sel:(NSRange)r  (didModifyRange:)
void puremetal_emu_imp_range(void *self, void *sel, pm_range r) {
	one_range(self, sel, r.location, r.length);
}
