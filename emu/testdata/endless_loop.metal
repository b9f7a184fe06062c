#include <metal_stdlib>
using namespace metal;

// Thread 1 loops until out[out[1]] is set, which nothing does while
// out[3] points its increments elsewhere (the indirection keeps the
// compiler from proving the loop endless and dropping it).
kernel void spin(device uint* out [[buffer(0)]],
                 uint tid [[thread_index_in_threadgroup]]) {
    if (tid == 1) {
        while (out[out[1]] == 0) {
            out[4 + out[3]] += 1;
        }
    }
    out[2] = tid;
}
