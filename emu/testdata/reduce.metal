#include <metal_stdlib>
using namespace metal;

constant uint TG = 256;

// Two tree reductions per threadgroup: a sum in a threadgroup array
// declared in the kernel, a maximum in threadgroup memory whose length the
// encoder sets.
kernel void reduce(device const float* in [[buffer(0)]],
                   device float* sums [[buffer(1)]],
                   device float* maxes [[buffer(2)]],
                   threadgroup float* scratch [[threadgroup(0)]],
                   uint gid [[thread_position_in_grid]],
                   uint tid [[thread_index_in_threadgroup]],
                   uint group [[threadgroup_position_in_grid]]) {
    threadgroup float partial[TG];
    partial[tid] = in[gid];
    scratch[tid] = in[gid];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint stride = TG / 2; stride > 0; stride /= 2) {
        if (tid < stride) {
            partial[tid] += partial[tid + stride];
            scratch[tid] = max(scratch[tid], scratch[tid + stride]);
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    if (tid == 0) {
        sums[group] = partial[0];
        maxes[group] = scratch[0];
    }
}
