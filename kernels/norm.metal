// RMSNorm over rows, in float:
//
//     y = x / sqrt(mean(x^2) + eps) * (offset + w)
//
// with offset 0 (plain weights: Qwen3, the gated norm) or 1 (zero-centred
// weights: Qwen3-Next and Qwen3.5's input, post-attention, final, q and k
// norms). rms_norm_residual first adds the layer's output r to the residual
// stream h and writes h back in its own type, then normalises the rounded
// sum, as HF's decoder layer does (h = h + r; x = norm(h)).
//
// Layouts: row i of x (and of out) is dim elements starting at i * stride
// (stride >= dim; a per-head norm of the query half of a [query | gate]
// head has stride 2 * head_dim); w is [dim]; h and r of the residual kernel
// are [rows][dim]. x and out may be the same buffer: each thread reads its
// elements before the barrier and writes only the same ones after it.
//
// Buffers: 0 x (rms_norm) or h (rms_norm_residual), 1 w, 2 out, 3 r
// (rms_norm_residual), 4 norm_params.
//
// Geometry: one threadgroup per row, 32 * ceil(dim / (32 * NORM_PER))
// threads, at most 1024. Each thread keeps the elements tid + j * threads,
// j < NORM_PER, in registers between the sum of squares and the scaling,
// so that a row is read once and written once, as MLX's single-row
// rms_norm does; the sum is a simd_sum per SIMD-group and one more over
// the SIMD-groups' partial sums in threadgroup memory.

struct norm_params {
    uint dim;
    uint stride;  // elements between row starts of x and out
    float eps;
    float offset;  // 0 or 1: the weight is offset + w
};

#define NORM_PER 8

// x rounded to T's precision, as store_elem would store it.
template <typename T>
inline float round_to(float x) { return float(T(x)); }
#if __METAL_VERSION__ < 310
template <>
inline float round_to<ushort>(float x) { return bf16_float(bf16_bits(x)); }
#endif

// The sum of x over the threadgroup, in every thread. partial holds one
// float per SIMD-group.
inline float norm_threadgroup_sum(float x, threadgroup float *partial,
                                  uint sg, uint lane, uint nsg) {
    x = simd_sum(x);
    if (lane == 0) {
        partial[sg] = x;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float s = lane < nsg ? partial[lane] : 0.0f;
    return simd_sum(s);
}

// Normalises, in place, one row whose elements this thread holds in v
// (NORM_PER of them, tid + j * threads; those past dim are 0).
template <typename W>
inline void norm_row(thread float (&v)[NORM_PER], device const W *w,
                     constant norm_params &p, threadgroup float *partial,
                     uint tid, uint threads, uint sg, uint lane, uint nsg) {
    float ss = 0.0f;
    for (uint j = 0; j < NORM_PER; j++) {
        ss += v[j] * v[j];
    }
    const float inv = rsqrt(norm_threadgroup_sum(ss, partial, sg, lane, nsg) / float(p.dim) + p.eps);
    for (uint j = 0; j < NORM_PER; j++) {
        const uint i = tid + j * threads;
        if (i < p.dim) {
            v[j] = v[j] * inv * (p.offset + load_elem(w + i));
        }
    }
}

// Stores the row this thread holds in v to out.
template <typename O>
inline void row_store(thread float (&v)[NORM_PER], device O *out, uint dim, uint tid, uint threads) {
    for (uint j = 0; j < NORM_PER; j++) {
        const uint i = tid + j * threads;
        if (i < dim) {
            store_elem(out + i, v[j]);
        }
    }
}

template <typename T, typename W>
kernel void rms_norm(
    device const T *x            [[buffer(0)]],
    device const W *w            [[buffer(1)]],
    device T       *out          [[buffer(2)]],
    constant norm_params &p      [[buffer(4)]],
    uint row     [[threadgroup_position_in_grid]],
    uint tid     [[thread_position_in_threadgroup]],
    uint threads [[threads_per_threadgroup]],
    uint sg      [[simdgroup_index_in_threadgroup]],
    uint lane    [[thread_index_in_simdgroup]],
    uint nsg     [[simdgroups_per_threadgroup]]) {
    x += ulong(row) * p.stride;
    out += ulong(row) * p.stride;
    threadgroup float partial[32];
    float v[NORM_PER];
    for (uint j = 0; j < NORM_PER; j++) {
        const uint i = tid + j * threads;
        v[j] = i < p.dim ? load_elem(x + i) : 0.0f;
    }
    norm_row(v, w, p, partial, tid, threads, sg, lane, nsg);
    row_store(v, out, p.dim, tid, threads);
}

template <typename H, typename T, typename W>
kernel void rms_norm_residual(
    device H       *h            [[buffer(0)]],
    device const W *w            [[buffer(1)]],
    device T       *out          [[buffer(2)]],
    device const T *r            [[buffer(3)]],
    constant norm_params &p      [[buffer(4)]],
    uint row     [[threadgroup_position_in_grid]],
    uint tid     [[thread_position_in_threadgroup]],
    uint threads [[threads_per_threadgroup]],
    uint sg      [[simdgroup_index_in_threadgroup]],
    uint lane    [[thread_index_in_simdgroup]],
    uint nsg     [[simdgroups_per_threadgroup]]) {
    h += ulong(row) * p.dim;
    r += ulong(row) * p.dim;
    out += ulong(row) * p.dim;
    threadgroup float partial[32];
    float v[NORM_PER];
    for (uint j = 0; j < NORM_PER; j++) {
        const uint i = tid + j * threads;
        v[j] = 0.0f;
        if (i < p.dim) {
            v[j] = round_to<H>(load_elem(h + i) + load_elem(r + i));
            store_elem(h + i, v[j]);
        }
    }
    norm_row(v, w, p, partial, tid, threads, sg, lane, nsg);
    row_store(v, out, p.dim, tid, threads);
}

// RMSNorm of each head, then RoPE on its first rotary_dim elements (as
// rope.metal computes it), in one dispatch and in place, for q_norm and
// k_norm: x is [tokens][heads][stride] as in rope.metal, a row is one
// head (dim = head_dim), and nothing is rounded between the two. The
// normalised rotary elements are exchanged through threadgroup memory
// (rotary_dim <= NORM_ROPE_MAX), since the pair (i, i + rotary_dim / 2)
// may live in two threads. Buffers: 0 x, 1 w, 4 norm_params, 5 pos,
// 6 inv_freq, 7 rope_params.
#define NORM_ROPE_MAX 512

struct norm_rope_params {
    uint heads;     // rows per token
    uint half_rot;  // rotary_dim / 2
};

template <typename T, typename W>
kernel void rms_norm_rope(
    device T           *x        [[buffer(0)]],
    device const W     *w        [[buffer(1)]],
    constant norm_params &p      [[buffer(4)]],
    device const int   *pos      [[buffer(5)]],
    device const float *inv_freq [[buffer(6)]],
    constant norm_rope_params &r [[buffer(7)]],
    uint row     [[threadgroup_position_in_grid]],
    uint tid     [[thread_position_in_threadgroup]],
    uint threads [[threads_per_threadgroup]],
    uint sg      [[simdgroup_index_in_threadgroup]],
    uint lane    [[thread_index_in_simdgroup]],
    uint nsg     [[simdgroups_per_threadgroup]]) {
    threadgroup float partial[32];
    threadgroup float rot[NORM_ROPE_MAX];
    x += ulong(row) * p.stride;
    float v[NORM_PER];
    for (uint j = 0; j < NORM_PER; j++) {
        const uint i = tid + j * threads;
        v[j] = i < p.dim ? load_elem(x + i) : 0.0f;
    }
    norm_row(v, w, p, partial, tid, threads, sg, lane, nsg);
    const uint h = r.half_rot;
    for (uint j = 0; j < NORM_PER; j++) {
        const uint i = tid + j * threads;
        if (i < 2 * h) {
            rot[i] = v[j];
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    const float fpos = float(pos[row / r.heads]);
    for (uint j = 0; j < NORM_PER; j++) {
        const uint i = tid + j * threads;
        if (i < 2 * h) {
            const float a = fpos * inv_freq[i % h];
            const float c = cos(a), s = sin(a);
            v[j] = i < h ? v[j] * c - rot[i + h] * s : v[j] * c + rot[i - h] * s;
        }
    }
    row_store(v, x, p.dim, tid, threads);
}

#define instantiate_rms_norm(tn, T, wn, W)                                           \
    template [[host_name("rms_norm_" #tn "_" #wn)]] kernel void rms_norm<T, W>(      \
        device const T *, device const W *, device T *, constant norm_params &,      \
        uint, uint, uint, uint, uint, uint);                                         \
    template [[host_name("rms_norm_rope_" #tn "_" #wn)]] kernel void                 \
    rms_norm_rope<T, W>(device T *, device const W *, constant norm_params &,         \
                        device const int *, device const float *,                    \
                        constant norm_rope_params &, uint, uint, uint, uint, uint, uint);

#define instantiate_rms_norm_residual(hn, H, tn, T, wn, W)                           \
    template [[host_name("rms_norm_residual_" #hn "_" #tn "_" #wn)]] kernel void     \
    rms_norm_residual<H, T, W>(device H *, device const W *, device T *,             \
                               device const T *, constant norm_params &,             \
                               uint, uint, uint, uint, uint, uint);

#define instantiate_rms_norm_w(tn, T)            \
    instantiate_rms_norm(tn, T, f32, float)      \
    instantiate_rms_norm(tn, T, f16, half)       \
    instantiate_rms_norm(tn, T, bf16, bf16_t)

#define instantiate_rms_norm_residual_w(hn, H, tn, T)          \
    instantiate_rms_norm_residual(hn, H, tn, T, f32, float)    \
    instantiate_rms_norm_residual(hn, H, tn, T, f16, half)     \
    instantiate_rms_norm_residual(hn, H, tn, T, bf16, bf16_t)

#define instantiate_rms_norm_residual_tw(hn, H)           \
    instantiate_rms_norm_residual_w(hn, H, f32, float)    \
    instantiate_rms_norm_residual_w(hn, H, f16, half)     \
    instantiate_rms_norm_residual_w(hn, H, bf16, bf16_t)

instantiate_rms_norm_w(f32, float)
instantiate_rms_norm_w(f16, half)
instantiate_rms_norm_w(bf16, bf16_t)

instantiate_rms_norm_residual_tw(f32, float)
instantiate_rms_norm_residual_tw(f16, half)
instantiate_rms_norm_residual_tw(bf16, bf16_t)
