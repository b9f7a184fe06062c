// Method implementations of the emulated Metal device whose arguments or
// results a Go callback cannot take or give directly: double results, and
// structs passed or returned by value. Each is named after the method it
// implements and forwards to a Go callback, set through the pointer named
// after it with a _go suffix, with plain words and pointers; the C
// compiler applies the platform's calling convention, so the Objective-C
// runtime may call these exactly as it calls Apple's methods.

#include <stdint.h>
#include <string.h>

typedef struct { uint64_t width, height, depth; } pm_size;   // MTLSize
typedef struct { uint64_t location, length; } pm_range;        // NSRange

static double from_bits(uint64_t bits) {
	double d;
	memcpy(&d, &bits, sizeof d);
	return d;
}

// MTLCommandBuffer - (CFTimeInterval)GPUStartTime, as float64 bits
uint64_t (*puremetal_emu_GPUStartTime_go)(void *self, void *sel);
double puremetal_emu_GPUStartTime(void *self, void *sel) {
	return from_bits(puremetal_emu_GPUStartTime_go(self, sel));
}

// MTLCommandBuffer - (CFTimeInterval)GPUEndTime, as float64 bits
uint64_t (*puremetal_emu_GPUEndTime_go)(void *self, void *sel);
double puremetal_emu_GPUEndTime(void *self, void *sel) {
	return from_bits(puremetal_emu_GPUEndTime_go(self, sel));
}

// MTLDevice - (MTLSize)maxThreadsPerThreadgroup
void (*puremetal_emu_maxThreadsPerThreadgroup_go)(void *self, void *sel, pm_size *out);
pm_size puremetal_emu_maxThreadsPerThreadgroup(void *self, void *sel) {
	pm_size s = {0, 0, 0};
	puremetal_emu_maxThreadsPerThreadgroup_go(self, sel, &s);
	return s;
}

// MTLComputeCommandEncoder - (void)dispatchThreadgroups:(MTLSize)threadgroupsPerGrid
//                           threadsPerThreadgroup:(MTLSize)threadsPerThreadgroup
void (*puremetal_emu_dispatchThreadgroups_threadsPerThreadgroup_go)(void *self, void *sel, const pm_size *a, const pm_size *b);
void puremetal_emu_dispatchThreadgroups_threadsPerThreadgroup(void *self, void *sel, pm_size a, pm_size b) {
	puremetal_emu_dispatchThreadgroups_threadsPerThreadgroup_go(self, sel, &a, &b);
}

// MTLComputeCommandEncoder - (void)dispatchThreads:(MTLSize)threadsPerGrid
//                           threadsPerThreadgroup:(MTLSize)threadsPerThreadgroup
void (*puremetal_emu_dispatchThreads_threadsPerThreadgroup_go)(void *self, void *sel, const pm_size *a, const pm_size *b);
void puremetal_emu_dispatchThreads_threadsPerThreadgroup(void *self, void *sel, pm_size a, pm_size b) {
	puremetal_emu_dispatchThreads_threadsPerThreadgroup_go(self, sel, &a, &b);
}

// MTLComputeCommandEncoder - (void)setBuffers:(const id *)buffers
//                           offsets:(const NSUInteger *)offsets withRange:(NSRange)range
void (*puremetal_emu_setBuffers_offsets_withRange_go)(void *self, void *sel, const void *a, const void *b, uint64_t location, uint64_t length);
void puremetal_emu_setBuffers_offsets_withRange(void *self, void *sel, const void *a, const void *b, pm_range r) {
	puremetal_emu_setBuffers_offsets_withRange_go(self, sel, a, b, r.location, r.length);
}

// MTLBuffer - (void)didModifyRange:(NSRange)range
void (*puremetal_emu_didModifyRange_go)(void *self, void *sel, uint64_t location, uint64_t length);
void puremetal_emu_didModifyRange(void *self, void *sel, pm_range r) {
	puremetal_emu_didModifyRange_go(self, sel, r.location, r.length);
}
