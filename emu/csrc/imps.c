// Method implementations of the emulated Metal device whose arguments or
// results a Go callback cannot take or give directly (double results, and
// structs passed or returned by value), and the compute encoders'
// recording (below). Each is named after the method it
// implements and forwards to a Go callback, set through the pointer named
// after it with a _go suffix, with plain words and pointers; the C
// compiler applies the platform's calling convention, so the Objective-C
// runtime may call these exactly as it calls Apple's methods.

#include <stdint.h>
#include <stdlib.h>
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

// MTLBuffer - (void)didModifyRange:(NSRange)range
void (*puremetal_emu_didModifyRange_go)(void *self, void *sel, uint64_t location, uint64_t length);
void puremetal_emu_didModifyRange(void *self, void *sel, pm_range r) {
	puremetal_emu_didModifyRange_go(self, sel, r.location, r.length);
}

// The recordings of open compute encoders. The encoders' per-dispatch
// messages (setComputePipelineState:, setBuffer:offset:atIndex:,
// setBuffers:offsets:withRange:, setBytes:length:atIndex:,
// setThreadgroupMemoryLength:atIndex:, the dispatches and
// memoryBarrierWithScope:) append to the recording of their encoder here,
// with no call into Go; the encoder's endEncoding (in Go) reads the
// recording in order, checks each message as the Go methods do, and hands
// the slot back with its storage kept for the next encoder, so that a
// steady stream of command buffers records with no allocation. An encoder
// with no slot (more than PM_SLOTS open at once), or whose slot was handed
// back (messages after endEncoding), is answered by the Go methods.

#define PM_SLOTS 64

typedef struct { uint64_t op, v[6]; } pm_msg;

enum {
	PM_PIPELINE = 1,    // v0 = pipeline (retained)
	PM_BUFFER,          // v0 = buffer (retained, or 0), v1 = offset, v2 = index
	PM_BUFFERS_RANGE,   // v0 = location, v1 = length: a range outside the table
	PM_BYTES,           // v0 = offset in bytes (or ~0: not copied), v1 = length, v2 = index, v3 = the caller's pointer
	PM_TG_MEMORY,       // v0 = length, v1 = index
	PM_DISPATCH_GROUPS, // v0..2 = threadgroups per grid, v3..5 = threads per threadgroup
	PM_DISPATCH_THREADS,// v0..2 = threads per grid, v3..5 = threads per threadgroup
	PM_BARRIER,         // v0 = scope
};

typedef struct {
	void *self;                     // the encoder recording here, 0 if free (atomic)
	pm_msg *msgs;                   // messages, n of cap
	uint64_t n, cap;
	uint8_t *bytes;                 // setBytes copies, nbytes of bcap
	uint64_t nbytes, bcap;
	uint64_t failed;                // storage could not grow: the encoder is refused
} pm_recording;

pm_recording puremetal_emu_recordings[PM_SLOTS];

// Set by Go: the runtime's objc_msg_lookup and the retain selector (the
// recorded objects are retained as Metal retains them at the message),
// and mtl.MaxBytesLength and mtl.MaxBufferBindings.
void *(*(*puremetal_emu_msg_lookup)(void *, void *))(void *, void *);
void *puremetal_emu_sel_retain;
uint64_t puremetal_emu_max_bytes, puremetal_emu_max_bindings;

static pm_recording *recording_of(void *self) {
	for (int i = 0; i < PM_SLOTS; i++) {
		if (__atomic_load_n(&puremetal_emu_recordings[i].self, __ATOMIC_ACQUIRE) == self) {
			return &puremetal_emu_recordings[i];
		}
	}
	return 0;
}

static pm_msg *push(pm_recording *r, uint64_t op) {
	if (r->n == r->cap) {
		uint64_t c = r->cap ? 2 * r->cap : 1024;
		pm_msg *m = realloc(r->msgs, c * sizeof *m);
		if (!m) {
			r->failed = 1;
			return 0;
		}
		r->msgs = m;
		r->cap = c;
	}
	pm_msg *m = &r->msgs[r->n++];
	memset(m, 0, sizeof *m);
	m->op = op;
	return m;
}

static void *retain(void *obj) {
	if (obj) {
		puremetal_emu_msg_lookup(obj, puremetal_emu_sel_retain)(obj, puremetal_emu_sel_retain);
	}
	return obj;
}

// MTLComputeCommandEncoder - (void)setComputePipelineState:(id)state
void (*puremetal_emu_setComputePipelineState_go)(void *self, void *sel, void *p);
void puremetal_emu_setComputePipelineState(void *self, void *sel, void *p) {
	pm_recording *r = recording_of(self);
	pm_msg *m;
	if (!r) {
		puremetal_emu_setComputePipelineState_go(self, sel, p);
	} else if ((m = push(r, PM_PIPELINE))) {
		m->v[0] = (uint64_t)retain(p);
	}
}

static void record_buffer(pm_recording *r, void *buf, uint64_t offset, uint64_t index) {
	pm_msg *m = push(r, PM_BUFFER);
	if (m) {
		m->v[0] = (uint64_t)retain(buf);
		m->v[1] = offset;
		m->v[2] = index;
	}
}

// MTLComputeCommandEncoder - (void)setBuffer:(id)buffer offset:(NSUInteger)offset atIndex:(NSUInteger)index
void (*puremetal_emu_setBuffer_offset_atIndex_go)(void *self, void *sel, void *buf, uint64_t offset, uint64_t index);
void puremetal_emu_setBuffer_offset_atIndex(void *self, void *sel, void *buf, uint64_t offset, uint64_t index) {
	pm_recording *r = recording_of(self);
	if (!r) {
		puremetal_emu_setBuffer_offset_atIndex_go(self, sel, buf, offset, index);
		return;
	}
	record_buffer(r, buf, offset, index);
}

// MTLComputeCommandEncoder - (void)setBuffers:(const id *)buffers
//                           offsets:(const NSUInteger *)offsets withRange:(NSRange)range
void (*puremetal_emu_setBuffers_offsets_withRange_go)(void *self, void *sel, const void *a, const void *b, uint64_t location, uint64_t length);
void puremetal_emu_setBuffers_offsets_withRange(void *self, void *sel, const void *a, const void *b, pm_range r) {
	pm_recording *rec = recording_of(self);
	if (!rec) {
		puremetal_emu_setBuffers_offsets_withRange_go(self, sel, a, b, r.location, r.length);
		return;
	}
	if (r.location > puremetal_emu_max_bindings || r.length > puremetal_emu_max_bindings - r.location) {
		pm_msg *m = push(rec, PM_BUFFERS_RANGE);
		if (m) {
			m->v[0] = r.location;
			m->v[1] = r.length;
		}
		return;
	}
	void *const *bufs = a;
	const uint64_t *offsets = b;
	for (uint64_t i = 0; i < r.length; i++) {
		record_buffer(rec, bufs[i], offsets[i], r.location + i);
	}
}

// MTLComputeCommandEncoder - (void)setBytes:(const void *)bytes length:(NSUInteger)length atIndex:(NSUInteger)index
void (*puremetal_emu_setBytes_length_atIndex_go)(void *self, void *sel, const void *bytes, uint64_t length, uint64_t index);
void puremetal_emu_setBytes_length_atIndex(void *self, void *sel, const void *bytes, uint64_t length, uint64_t index) {
	pm_recording *r = recording_of(self);
	if (!r) {
		puremetal_emu_setBytes_length_atIndex_go(self, sel, bytes, length, index);
		return;
	}
	pm_msg *m = push(r, PM_BYTES);
	if (!m) {
		return;
	}
	m->v[0] = ~(uint64_t)0;
	m->v[1] = length;
	m->v[2] = index;
	m->v[3] = (uint64_t)bytes;
	if (!bytes || length == 0 || length > puremetal_emu_max_bytes) {
		return; // refused when read
	}
	if (r->nbytes + length > r->bcap) {
		uint64_t c = r->bcap ? r->bcap : 16384;
		while (c < r->nbytes + length) {
			c *= 2;
		}
		uint8_t *p = realloc(r->bytes, c);
		if (!p) {
			r->failed = 1;
			return;
		}
		r->bytes = p;
		r->bcap = c;
	}
	memcpy(r->bytes + r->nbytes, bytes, length);
	m->v[0] = r->nbytes;
	r->nbytes += length;
}

// MTLComputeCommandEncoder - (void)setThreadgroupMemoryLength:(NSUInteger)length atIndex:(NSUInteger)index
void (*puremetal_emu_setThreadgroupMemoryLength_atIndex_go)(void *self, void *sel, uint64_t length, uint64_t index);
void puremetal_emu_setThreadgroupMemoryLength_atIndex(void *self, void *sel, uint64_t length, uint64_t index) {
	pm_recording *r = recording_of(self);
	pm_msg *m;
	if (!r) {
		puremetal_emu_setThreadgroupMemoryLength_atIndex_go(self, sel, length, index);
	} else if ((m = push(r, PM_TG_MEMORY))) {
		m->v[0] = length;
		m->v[1] = index;
	}
}

static void record_dispatch(pm_recording *r, uint64_t op, const pm_size *a, const pm_size *b) {
	pm_msg *m = push(r, op);
	if (m) {
		m->v[0] = a->width, m->v[1] = a->height, m->v[2] = a->depth;
		m->v[3] = b->width, m->v[4] = b->height, m->v[5] = b->depth;
	}
}

// MTLComputeCommandEncoder - (void)dispatchThreadgroups:(MTLSize)threadgroupsPerGrid
//                           threadsPerThreadgroup:(MTLSize)threadsPerThreadgroup
void (*puremetal_emu_dispatchThreadgroups_threadsPerThreadgroup_go)(void *self, void *sel, const pm_size *a, const pm_size *b);
void puremetal_emu_dispatchThreadgroups_threadsPerThreadgroup(void *self, void *sel, pm_size a, pm_size b) {
	pm_recording *r = recording_of(self);
	if (!r) {
		puremetal_emu_dispatchThreadgroups_threadsPerThreadgroup_go(self, sel, &a, &b);
		return;
	}
	record_dispatch(r, PM_DISPATCH_GROUPS, &a, &b);
}

// MTLComputeCommandEncoder - (void)dispatchThreads:(MTLSize)threadsPerGrid
//                           threadsPerThreadgroup:(MTLSize)threadsPerThreadgroup
void (*puremetal_emu_dispatchThreads_threadsPerThreadgroup_go)(void *self, void *sel, const pm_size *a, const pm_size *b);
void puremetal_emu_dispatchThreads_threadsPerThreadgroup(void *self, void *sel, pm_size a, pm_size b) {
	pm_recording *r = recording_of(self);
	if (!r) {
		puremetal_emu_dispatchThreads_threadsPerThreadgroup_go(self, sel, &a, &b);
		return;
	}
	record_dispatch(r, PM_DISPATCH_THREADS, &a, &b);
}

// MTLComputeCommandEncoder - (void)memoryBarrierWithScope:(MTLBarrierScope)scope
void (*puremetal_emu_memoryBarrierWithScope_go)(void *self, void *sel, uint64_t scope);
void puremetal_emu_memoryBarrierWithScope(void *self, void *sel, uint64_t scope) {
	pm_recording *r = recording_of(self);
	pm_msg *m;
	if (!r) {
		puremetal_emu_memoryBarrierWithScope_go(self, sel, scope);
	} else if ((m = push(r, PM_BARRIER))) {
		m->v[0] = scope;
	}
}
