#include <metal_stdlib>
using namespace metal;

struct Pair {
    float3 a;
    float b;
};

// float3 has the size and alignment of float4; packed_float3 is three
// floats. Swizzles read and write components in any order.
kernel void swizzle(device const float3* in [[buffer(0)]],
                    device float4* out [[buffer(1)]],
                    device uint* sizes [[buffer(2)]],
                    device const packed_float3* packed [[buffer(3)]],
                    device float3* packed_out [[buffer(4)]],
                    uint i [[thread_position_in_grid]]) {
    float3 v = in[i];
    float4 w = float4(v.zyx, v.x + v.y);
    w.xz = w.zx * 2.0;
    out[2 * i] = w;
    out[2 * i + 1] = float4(v.yy, float2(1.0, v.z)).wzyx;
    packed_out[i] = float3(packed[i]) * 3.0;
    if (i == 0) {
        sizes[0] = sizeof(float3);
        sizes[1] = alignof(float3);
        sizes[2] = sizeof(packed_float3);
        sizes[3] = sizeof(Pair);
        sizes[4] = sizeof(half3);
        sizes[5] = sizeof(uchar3);
    }
}

// half arithmetic rounds every operation to half precision.
kernel void half_math(device const half* a [[buffer(0)]],
                      device const half* b [[buffer(1)]],
                      device const half* c [[buffer(2)]],
                      device half* out [[buffer(3)]],
                      device half4* out4 [[buffer(4)]],
                      device float* widened [[buffer(5)]],
                      uint i [[thread_position_in_grid]]) {
    half x = a[i] * b[i] + c[i];
    out[i] = x;
    half4 v = half4(a[i], b[i], c[i], 1.5h);
    out4[i] = v * v.wzyx - half4(0.25h);
    widened[i] = float(a[i]) * float(b[i]);
}
