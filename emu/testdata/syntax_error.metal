#include <metal_stdlib>
using namespace metal;

// a comment
/* a block
   comment */
kernel void broken(device float* out [[buffer(0)]],
                   uint i [[thread_position_in_grid]]) {
    out[i] = 1.0 +;
}
