// Gated DeltaNet prefill: any number of tokens, D_k <= 128, D_v <= 128.
//
// Threadgroup (D_v, 1, 1), grid (n_v_heads, n_seqs, 1). Thread i owns row i
// of S in private memory for the whole token loop. Each token's k and q
// (shared by every row) and v are staged in threadgroup memory at index 0,
// laid out k[D_k] | q[D_k] | v[D_v], inside the (2*D_k + 2*D_v) floats the
// dispatcher reserves.

#define GDN_MAX_DK 128

kernel void gated_delta_net_f32(
    device const float *q         [[buffer(0)]],
    device const float *k         [[buffer(1)]],
    device const float *v         [[buffer(2)]],
    device const float *g         [[buffer(3)]],
    device const float *beta      [[buffer(4)]],
    device const float *state_in  [[buffer(5)]],
    device float       *output    [[buffer(6)]],
    device float       *state_out [[buffer(7)]],
    constant gdn_params &p        [[buffer(8)]],
    threadgroup float  *stage     [[threadgroup(0)]],
    uint3 tg  [[threadgroup_position_in_grid]],
    uint3 tid [[thread_position_in_threadgroup]]) {
    const uint d_k = p.d_k;
    const uint d_v = p.d_v;
    const uint i = tid.x;
    const uint h = tg.x;
    const uint seq = tg.y;
    const uint kh = gdn_key_head(p, h);
    const float scale = gdn_out_scale(p);

    threadgroup float *ks = stage;
    threadgroup float *qs = stage + d_k;
    threadgroup float *vs = stage + 2 * d_k;

    const uint row = ((seq * p.n_v_heads + h) * d_v + i) * d_k;
    float s[GDN_MAX_DK];
    for (uint j = 0; j < d_k; ++j) {
        s[j] = state_in[row + j];
    }

    for (uint t = 0; t < p.n_tokens; ++t) {
        const uint tok = seq * p.n_tokens + t;
        const uint qk = (tok * p.n_k_heads + kh) * d_k;
        const uint vh = tok * p.n_v_heads + h;

        for (uint j = i; j < d_k; j += d_v) {
            ks[j] = k[qk + j];
            qs[j] = q[qk + j];
        }
        vs[i] = v[vh * d_v + i];
        threadgroup_barrier(mem_flags::mem_threadgroup);

        // Decay first, then delta from the decayed state.
        const float alpha = metal::exp(-g[vh]);
        float sk = 0.0f;
        for (uint j = 0; j < d_k; ++j) {
            s[j] = alpha * s[j];
            sk += s[j] * ks[j];
        }
        const float delta = beta[vh] * (vs[i] - sk);
        float sq = 0.0f;
        for (uint j = 0; j < d_k; ++j) {
            s[j] = s[j] + delta * ks[j];
            sq += s[j] * qs[j];
        }
        output[vh * d_v + i] = scale * sq;

        // Nobody overwrites the staged token before every row is done with it.
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }

    for (uint j = 0; j < d_k; ++j) {
        state_out[row + j] = s[j];
    }
}
