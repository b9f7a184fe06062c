// Gated DeltaNet packed decode kernels: decode, seq and capture in the
// packed layout of gdn_packed_common.metal (8 rows per SIMD-group, 4 lanes
// per row), for D_k = 64 (NSG = 2) and 128 (NSG = 4), D_v a multiple of 32.
// Each threadgroup finds its sequence's state slot, first token and token
// count (gdn_sequence: state pools, packed sequences) and skips padding.
//
// All three load the lane's cells of S once before the token loop, run the
// same per-token arithmetic (gdn_packed_token) and store the cells once
// after it, so their outputs and final states are bit-identical for each
// activation type A and state type S. decode rebuilds every index from the
// parameters each token; seq advances pointers once per token; capture
// (indices rebuilt) also writes the cells after every token to
// capture[..., t, s].

// One token on the cells a lane holds: loads the lane's cells of k, v of
// its row and the gate inputs, applies the fused gate and beta, runs
// gdn_packed_step (which reads q) and returns the scaled output.
template <typename A, int NSG>
inline float gdn_packed_token(constant gdn_params &p, gdn_gate_consts gc, thread float *s,
                              device const A *qp, device const A *kp, device const A *vp,
                              device const A *gp, device const A *bp, float scale, uint u) {
    float kr[8 * NSG];
    const gdn_device_vec<A> k = {kp, u};
    const gdn_device_vec<A> q = {qp, u};
    gdn_packed_load<2 * NSG>(kr, k);
    const float g = gdn_gate(p, gc, load_elem(gp));
    const float beta = gdn_beta(p, load_elem(bp));
    const bool l2norm = (p.fused & GDN_FUSED_L2NORM) != 0u;
    return scale * gdn_packed_step<2 * NSG>(s, kr, q, load_elem(vp), g, beta, l2norm);
}

// The decode kernel with indices rebuilt from the parameters every token;
// with CAPTURE, S is also written to capture[..., t, s] after every token.
template <typename A, typename S, int NSG, bool CAPTURE>
inline void gdn_packed_indexed(device const A *q, device const A *k, device const A *v,
                               device const A *g, device const A *beta,
                               device const S *state_in, device A *output,
                               device S *state_out, constant gdn_params &p,
                               device S *capture, device const float *a_log,
                               device const float *dt_bias, device const int *slots,
                               device const int *cu_seqlens, uint3 tg, uint3 tid) {
    const uint DK = 32 * NSG;
    const gdn_packed_lane l = gdn_packed_position(tg, tid);
    const uint h = tg.y;
    const gdn_head hd = gdn_head_of(p, slots, cu_seqlens, a_log, dt_bias, h, tg.z);
    if (hd.sq.skip) {
        return;  // the whole threadgroup: one sequence
    }

    const ulong row = ((hd.sq.state * p.n_v_heads + h) * p.d_v + l.row) * DK;
    float s[8 * NSG];
    gdn_packed_load_row<S, 2 * NSG>(s, state_in + row, l.u);

    for (uint t = 0; t < hd.sq.n_tokens; ++t) {
        const uint tok = hd.sq.tok0 + t;
        const uint qk = (tok * p.n_k_heads + hd.kh) * DK;
        const uint vh = tok * p.n_v_heads + h;
        const float o = gdn_packed_token<A, NSG>(p, hd.gc, s, q + qk, k + qk, v + vh * p.d_v + l.row,
                                                 g + vh, beta + vh, hd.scale, l.u);
        if (l.u == 0) {
            store_elem(output + vh * p.d_v + l.row, o);
        }
        if (CAPTURE) {
            gdn_packed_store<S, 2 * NSG>(capture + (vh * p.d_v + l.row) * DK, s, l.u);
        }
    }

    gdn_packed_store<S, 2 * NSG>(state_out + row, s, l.u);
}

// n_tokens == 1: indices rebuilt each token.
GDN_INDEXED_KERNEL(gated_delta_net_decode_packed, gdn_packed_indexed)

// Speculative decoding: S after every token t to capture[..., t, s].
template <typename A, typename S, int NSG>
kernel void gated_delta_net_decode_packed_capture(
    GDN_STEP_BUFFERS,
    device S           *capture   [[buffer(9)]],
    GDN_SEQ_BUFFERS,
    uint3 tg  [[threadgroup_position_in_grid]],
    uint3 tid [[thread_position_in_threadgroup]]) {
    gdn_packed_indexed<A, S, NSG, true>(GDN_STEP_ARGS, capture, GDN_SEQ_ARGS, tg, tid);
}

// n_tokens >= 2: pointers advanced once per token.
template <typename A, typename S, int NSG>
kernel void gated_delta_net_decode_packed_seq(
    GDN_STEP_BUFFERS,
    GDN_SEQ_BUFFERS,
    uint3 tg  [[threadgroup_position_in_grid]],
    uint3 tid [[thread_position_in_threadgroup]]) {
    const uint DK = 32 * NSG;
    const gdn_packed_lane l = gdn_packed_position(tg, tid);
    const uint h = tg.y;
    const gdn_head hd = gdn_head_of(p, slots, cu_seqlens, a_log, dt_bias, h, tg.z);
    if (hd.sq.skip) {
        return;  // the whole threadgroup: one sequence
    }

    const ulong row = ((hd.sq.state * p.n_v_heads + h) * p.d_v + l.row) * DK;
    float s[8 * NSG];
    gdn_packed_load_row<S, 2 * NSG>(s, state_in + row, l.u);

    gdn_token_ptrs<A> tp = gdn_token_pointers<A>(p, q, k, v, output, g, beta, hd.sq.tok0, hd.kh, h, DK, 0u, l.row);
    for (uint t = 0; t < hd.sq.n_tokens; ++t) {
        const float o = gdn_packed_token<A, NSG>(p, hd.gc, s, tp.q, tp.k, tp.v, tp.g, tp.beta, hd.scale, l.u);
        if (l.u == 0) {
            store_elem(tp.o, o);
        }
        tp.next();
    }

    gdn_packed_store<S, 2 * NSG>(state_out + row, s, l.u);
}

// Instantiations: every activation and state type, NSG 2 and 4.
instantiate_gdn_types(instantiate_gdn_packed, "gated_delta_net_decode_packed", gated_delta_net_decode_packed)
instantiate_gdn_types(instantiate_gdn_packed, "gated_delta_net_decode_packed_seq", gated_delta_net_decode_packed_seq)
instantiate_gdn_types(instantiate_gdn_packed, "gated_delta_net_decode_packed_capture", gated_delta_net_decode_packed_capture)
