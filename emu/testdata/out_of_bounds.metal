#include <metal_stdlib>
using namespace metal;

kernel void oob_load(device const float* in [[buffer(0)]],
                     device float* out [[buffer(1)]],
                     uint i [[thread_position_in_grid]]) {
    out[i] = in[i + 1];
}

kernel void oob_store(device const float* in [[buffer(0)]],
                      device float* out [[buffer(1)]],
                      uint i [[thread_position_in_grid]]) {
    float v = in[i];
    out[i * 2] = v;
}
