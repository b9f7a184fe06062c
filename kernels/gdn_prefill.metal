// Gated DeltaNet prefill: any number of tokens, D_k <= 128, D_v <= 128.
//
// Threadgroup (D_v, 1, 1), grid (n_v_heads, n_seqs, 1). Thread i owns row i
// of S in private memory (widened to float once) for the whole token loop.
// Each token's k and q (shared by every row) and v are widened and staged in
// threadgroup memory at index 0, laid out k[D_k] | q[D_k] | v[D_v], inside
// the (2*D_k + 2*D_v) floats the dispatcher reserves.
//
// With the fused L2 norm the staged q and k stay raw: with
// r_k = 1 / sqrt(sum_j k_j^2 + eps) (r_q likewise), S k^ = r_k (S k),
// delta k^ = (r_k delta) k and S q^ = r_q (S q), so the norm costs three
// multiplies per row. The sums of squares are taken once per token while
// staging: each thread adds the squares it staged, simd_sum adds up each
// SIMD group (32 threads), and with more than one SIMD group lane 0 of each
// leaves its pair of sums after v in threadgroup memory, which every thread
// adds in SIMD-group order after the barrier.

#define GDN_MAX_DK 128

template <typename A, typename S>
kernel void gated_delta_net(
    device const A     *q         [[buffer(0)]],
    device const A     *k         [[buffer(1)]],
    device const A     *v         [[buffer(2)]],
    device const A     *g         [[buffer(3)]],
    device const A     *beta      [[buffer(4)]],
    device const S     *state_in  [[buffer(5)]],
    device A           *output    [[buffer(6)]],
    device S           *state_out [[buffer(7)]],
    constant gdn_params &p        [[buffer(8)]],
    device const float *a_log     [[buffer(10)]],
    device const float *dt_bias   [[buffer(11)]],
    device const int   *slots      [[buffer(12)]],
    device const int   *cu_seqlens [[buffer(13)]],
    threadgroup float  *stage     [[threadgroup(0)]],
    uint3 tg  [[threadgroup_position_in_grid]],
    uint3 tid [[thread_position_in_threadgroup]]) {
    const uint d_k = p.d_k;
    const uint d_v = p.d_v;
    const uint i = tid.x;
    const uint h = tg.x;
    const gdn_seq sq = gdn_sequence(p, slots, cu_seqlens, tg.y);
    if (sq.skip) {
        return;  // the whole threadgroup: one sequence
    }
    const uint kh = gdn_key_head(p, h);
    const float scale = gdn_out_scale(p);
    const gdn_gate_consts gc = gdn_gate_constants(p, a_log, dt_bias, h);
    const bool l2norm = (p.fused & GDN_FUSED_L2NORM) != 0u;

    threadgroup float *ks = stage;
    threadgroup float *qs = stage + d_k;
    threadgroup float *vs = stage + 2 * d_k;
    // The per-SIMD-group sums of squares, k then q: 2 * groups floats, fewer
    // than the D_v floats reserved after v when there is more than one group.
    threadgroup float *sums = stage + 2 * d_k + d_v;
    const uint groups = (d_v + 31) / 32;
    const uint lane = i % 32;
    const uint group = i / 32;

    const ulong row = ((sq.state * p.n_v_heads + h) * d_v + i) * d_k;
    float s[GDN_MAX_DK];
    for (uint j = 0; j < d_k; ++j) {
        s[j] = gdn_load(state_in + row + j);
    }

    for (uint t = 0; t < sq.n_tokens; ++t) {
        const uint tok = sq.tok0 + t;
        const uint qk = (tok * p.n_k_heads + kh) * d_k;
        const uint vh = tok * p.n_v_heads + h;

        float ssk = 0.0f;
        float ssq = 0.0f;
        for (uint j = i; j < d_k; j += d_v) {
            const float kj = gdn_load(k + qk + j);
            const float qj = gdn_load(q + qk + j);
            ks[j] = kj;
            qs[j] = qj;
            ssk += kj * kj;
            ssq += qj * qj;
        }
        vs[i] = gdn_load(v + vh * d_v + i);
        if (l2norm) {
            ssk = simd_sum(ssk);
            ssq = simd_sum(ssq);
            if (groups > 1 && lane == 0) {
                sums[2 * group] = ssk;
                sums[2 * group + 1] = ssq;
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);

        float rk = 1.0f;
        float rq = 1.0f;
        if (l2norm) {
            if (groups > 1) {
                ssk = 0.0f;
                ssq = 0.0f;
                for (uint sg = 0; sg < groups; ++sg) {
                    ssk += sums[2 * sg];
                    ssq += sums[2 * sg + 1];
                }
            }
            rk = gdn_inv_norm(ssk);
            rq = gdn_inv_norm(ssq);
        }
        const float gt = gdn_gate(p, gc, gdn_load(g + vh));
        const float bt = gdn_beta(p, gdn_load(beta + vh));

        // Decay first, then delta from the decayed state.
        const float alpha = metal::exp(-gt);
        float sk = 0.0f;
        for (uint j = 0; j < d_k; ++j) {
            s[j] = alpha * s[j];
            sk += s[j] * ks[j];
        }
        float delta = bt * (vs[i] - rk * sk);
        if (l2norm) {
            delta = delta * rk;
        }
        float sq = 0.0f;
        for (uint j = 0; j < d_k; ++j) {
            s[j] = s[j] + delta * ks[j];
            sq += s[j] * qs[j];
        }
        gdn_store(output + vh * d_v + i, scale * (rq * sq));

        // Nobody overwrites the staged token before every row is done with it.
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }

    for (uint j = 0; j < d_k; ++j) {
        gdn_store(state_out + row + j, s[j]);
    }
}

// Every combination of activation and state type (gdn_common.metal).
instantiate_gdn_types(instantiate_gdn, "gated_delta_net", gated_delta_net)
