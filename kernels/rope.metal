// Rotary position embedding, rotate-half (NeoX) form, in place:
//
//     a = float(pos[t]) * inv_freq[i]            (a float32 product, as HF)
//     x[i]        = x[i] * cos(a) - x[i + h] * sin(a)
//     x[i + h]    = x[i + h] * cos(a) + x[i] * sin(a)        i < h = rotary_dim / 2
//
// on the first rotary_dim elements of every head; the rest of a head is
// neither read nor written (partial rotary factor).
//
// Layouts: x [tokens][heads][head_stride]: head j of token t starts at
// (t * heads + j) * head_stride (head_stride = head_dim for k, 2 * head_dim
// for the query half of a [query | gate] q_proj output); pos [tokens] int32,
// each token's position in its sequence, so that a batch of sequences at
// different positions is one dispatch; inv_freq [rotary_dim / 2] float32,
// as HF computes it (ops.RoPEInvFreq).
//
// Buffers: 0 x, 1 pos, 2 inv_freq, 3 rope_params.
//
// Geometry: one thread per pair (i, i + h) of one head of one token: grid
// (ceil(h / 32), heads, tokens) threadgroups of 32 threads, so that the 32
// lanes of a SIMD-group read 32 consecutive elements of each half.

struct rope_params {
    uint heads;
    uint head_stride;  // elements between the starts of two heads
    uint half_rot;     // rotary_dim / 2
};

template <typename T>
kernel void rope(
    device T           *x        [[buffer(0)]],
    device const int   *pos      [[buffer(1)]],
    device const float *inv_freq [[buffer(2)]],
    constant rope_params &p      [[buffer(3)]],
    uint3 gid [[thread_position_in_grid]]) {
    const uint i = gid.x;
    if (i >= p.half_rot) {
        return;
    }
    device T *head = x + (ulong(gid.z) * p.heads + gid.y) * p.head_stride;
    const float a = float(pos[gid.z]) * inv_freq[i];
    const float c = cos(a), s = sin(a);
    const float x0 = load_elem(head + i), x1 = load_elem(head + i + p.half_rot);
    store_elem(head + i, x0 * c - x1 * s);
    store_elem(head + i + p.half_rot, x1 * c + x0 * s);
}

#define instantiate_rope(tn, T) \
    template [[host_name("rope_" #tn)]] kernel void rope<T>( \
        device T *, device const int *, device const float *, constant rope_params &, uint3);

instantiate_rope(f32, float)
instantiate_rope(f16, half)
instantiate_rope(bf16, bf16_t)
