#include <metal_stdlib>
using namespace metal;

// out = a + b over the first n elements; threads past n do nothing.
kernel void vector_add(device const float* a [[buffer(0)]],
                       device const float* b [[buffer(1)]],
                       device float* out [[buffer(2)]],
                       constant uint& n [[buffer(3)]],
                       uint i [[thread_position_in_grid]]) {
    if (i < n) {
        out[i] = a[i] + b[i];
    }
}

// x = x * s, for a second dispatch in the same command buffer.
kernel void scale(device float* x [[buffer(0)]],
                  constant float& s [[buffer(1)]],
                  uint i [[thread_position_in_grid]]) {
    x[i] = x[i] * s;
}
