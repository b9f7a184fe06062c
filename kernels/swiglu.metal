// SwiGLU, the activation of the gated MLP and of each expert:
//
//     out[r][i] = silu(gate[r][i]) * up[r][i],  silu(g) = g / (1 + exp(-g))
//
// in float, rounded once to T.
//
// Layouts: out [rows][width]; row r of gate starts at r * gate_stride and
// row r of up at r * up_stride: width for separate gate and up
// projections, 2 * width for the two halves of one fused [gate | up]
// projection (the host binds that buffer twice, up at an offset of width).
//
// Buffers: 0 gate, 1 up, 2 out, 3 swiglu_params.
//
// Geometry: one thread per output element: grid (ceil(width / 256), rows)
// threadgroups of 256 threads, consecutive lanes on consecutive elements.

struct swiglu_params {
    uint width;
    uint gate_stride;
    uint up_stride;
};

template <typename T>
kernel void swiglu(
    device const T *gate    [[buffer(0)]],
    device const T *up      [[buffer(1)]],
    device T       *out     [[buffer(2)]],
    constant swiglu_params &p [[buffer(3)]],
    uint2 gid [[thread_position_in_grid]]) {
    const uint i = gid.x, r = gid.y;
    if (i >= p.width) {
        return;
    }
    const float g = load_elem(gate + ulong(r) * p.gate_stride + i);
    const float u = load_elem(up + ulong(r) * p.up_stride + i);
    store_elem(out + ulong(r) * p.width + i, g / (1.0f + metal::exp(-g)) * u);
}

#define instantiate_swiglu(tn, T) \
    template [[host_name("swiglu_" #tn)]] kernel void swiglu<T>( \
        device const T *, device const T *, device T *, constant swiglu_params &, uint2);

instantiate_swiglu(f32, float)
instantiate_swiglu(f16, half)
instantiate_swiglu(bf16, bf16_t)
