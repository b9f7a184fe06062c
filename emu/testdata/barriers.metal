#include <metal_stdlib>
using namespace metal;

// A missing barrier: each thread reads its neighbour's slot right after
// writing its own.
kernel void shift(device const float* in [[buffer(0)]],
                  device float* out [[buffer(1)]],
                  uint gid [[thread_position_in_grid]],
                  uint tid [[thread_index_in_threadgroup]],
                  uint n [[threads_per_threadgroup]]) {
    threadgroup float tile[64];
    tile[tid] = in[gid];
    // missing: threadgroup_barrier(mem_flags::mem_threadgroup);
    out[gid] = tile[(tid + 1) % n];
}

// A barrier after half the threadgroup returned.
kernel void early(device float* out [[buffer(0)]],
                  uint tid [[thread_index_in_threadgroup]]) {
    threadgroup float tile[32];
    if (tid >= 16) {
        return;
    }
    tile[tid] = 1.0;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    out[tid] = tile[31 - tid];
}

// Every thread adds to one float without atomics: the GPU loses updates.
kernel void count_racy(device float* total [[buffer(0)]]) {
    total[0] += 1.0;
}
