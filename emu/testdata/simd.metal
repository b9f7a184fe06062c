#include <metal_stdlib>
using namespace metal;

// Every SIMD-group function, each written to its own slice of the outputs
// (n elements apart). When drop is set, the threads with gid % 7 == 3
// return before the first one, so the functions work over the lanes still
// running.
kernel void simd_fns(device const float* x [[buffer(0)]],
                     device const uint* u [[buffer(1)]],
                     device float* fo [[buffer(2)]],
                     device uint* uo [[buffer(3)]],
                     constant uint& drop [[buffer(4)]],
                     uint gid [[thread_position_in_grid]],
                     ushort lane [[thread_index_in_simdgroup]],
                     uint n [[threads_per_grid]]) {
    if (drop != 0 && gid % 7 == 3) {
        return;
    }
    const float v = x[gid];
    const uint w = u[gid];
    uint k = 0;
    fo[k++ * n + gid] = simd_sum(v);
    fo[k++ * n + gid] = simd_product(v);
    fo[k++ * n + gid] = simd_min(v);
    fo[k++ * n + gid] = simd_max(v);
    fo[k++ * n + gid] = simd_prefix_inclusive_sum(v);
    fo[k++ * n + gid] = simd_prefix_exclusive_sum(v);
    fo[k++ * n + gid] = simd_prefix_inclusive_product(v);
    fo[k++ * n + gid] = simd_prefix_exclusive_product(v);
    fo[k++ * n + gid] = simd_shuffle(v, (lane * 7 + 3) % 32);
    fo[k++ * n + gid] = simd_shuffle_xor(v, 5);
    fo[k++ * n + gid] = simd_shuffle_up(v, 3);
    fo[k++ * n + gid] = simd_shuffle_down(v, 3);
    fo[k++ * n + gid] = simd_shuffle_rotate_up(v, 3);
    fo[k++ * n + gid] = simd_shuffle_rotate_down(v, 5);
    fo[k++ * n + gid] = simd_broadcast(v, 9);
    fo[k++ * n + gid] = simd_broadcast_first(v);
    float4 s4 = simd_sum(float4(v, 2.0 * v, -v, v * v));
    fo[k++ * n + gid] = s4.x;
    fo[k++ * n + gid] = s4.y;
    fo[k++ * n + gid] = s4.z;
    fo[k++ * n + gid] = s4.w;
    fo[k++ * n + gid] = float(simd_sum(half(v)));
    k = 0;
    uo[k++ * n + gid] = simd_and(w);
    uo[k++ * n + gid] = simd_or(w);
    uo[k++ * n + gid] = simd_xor(w);
    uo[k++ * n + gid] = simd_sum(w);
    uo[k++ * n + gid] = simd_min(w);
    uo[k++ * n + gid] = simd_max(w);
    uo[k++ * n + gid] = simd_prefix_exclusive_sum(w);
    uo[k++ * n + gid] = simd_shuffle(w, 31 - lane);
    uo[k++ * n + gid] = simd_all(v > -2.0) ? 1 : 0;
    uo[k++ * n + gid] = simd_any(v > 2.0) ? 1 : 0;
    uo[k++ * n + gid] = simd_is_first() ? 1 : 0;
    uo[k++ * n + gid] = uint(ulong(simd_ballot(v > 0.0)));
    uo[k++ * n + gid] = uint(ulong(simd_active_threads_mask()));
}
