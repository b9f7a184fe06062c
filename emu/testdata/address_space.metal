#include <metal_stdlib>
using namespace metal;

kernel void mix_spaces(device float* out [[buffer(0)]],
                       uint tid [[thread_index_in_threadgroup]]) {
    threadgroup float tile[32];
    tile[tid] = 1.0;
    device float* p = tile;
    out[tid] = p[0];
}
