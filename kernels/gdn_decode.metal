// Gated DeltaNet decode kernels: decode, seq and legacy.
//
// All three keep the NSG cells a lane owns in registers for the whole token
// loop, perform the same loads and run the same per-token arithmetic
// (gdn_token), so their outputs and final states are bit-identical for each
// activation type A and state type S. decode and legacy rebuild every index
// from the parameters each token; seq advances per-lane pointers once per
// token with D_k = 32 * NSG known at compile time, which pays off from two
// tokens on.

// n_tokens == 1: indices rebuilt each token.
GDN_INDEXED_KERNEL(gated_delta_net_decode, gdn_decode_indexed)

// The index kernel under another name, kept as the reference the other
// decode kernels are compared with in tests and benchmarks.
GDN_INDEXED_KERNEL(gated_delta_net_decode_legacy, gdn_decode_indexed)

// n_tokens >= 2: per-lane pointers advanced once per token.
template <typename A, typename S, int NSG>
kernel void gated_delta_net_decode_seq(
    GDN_STEP_BUFFERS,
    GDN_SEQ_BUFFERS,
    uint3 tg  [[threadgroup_position_in_grid]],
    uint3 tid [[thread_position_in_threadgroup]]) {
    const uint DK = 32 * NSG;
    const uint lane = tid.x;
    const uint row = tg.x * NSG + tid.y;
    const uint h = tg.y;
    const gdn_head hd = gdn_head_of(p, slots, cu_seqlens, a_log, dt_bias, h, tg.z);
    if (hd.sq.skip) {
        return;  // the whole threadgroup: one sequence
    }

    const ulong cell = ((hd.sq.state * p.n_v_heads + h) * p.d_v + row) * DK + lane * NSG;
    float s[NSG];
    for (int c = 0; c < NSG; ++c) {
        s[c] = load_elem(state_in + cell + c);
    }

    gdn_token_ptrs<A> tp = gdn_token_pointers<A>(p, q, k, v, output, g, beta, hd.sq.tok0, hd.kh, h, DK, lane * NSG, row);
    for (uint t = 0; t < hd.sq.n_tokens; ++t) {
        const float o = gdn_token<A, NSG>(p, hd.gc, s, tp.q, tp.k, tp.v, tp.g, tp.beta, hd.scale);
        if (lane == 0) {
            store_elem(tp.o, o);
        }
        tp.next();
    }

    for (int c = 0; c < NSG; ++c) {
        store_elem(state_out + cell + c, s[c]);
    }
}

// Every combination of activation and state type (gdn_common.metal).
instantiate_gdn_types(instantiate_gdn_nsg, "gated_delta_net_decode", gated_delta_net_decode)
instantiate_gdn_types(instantiate_gdn_nsg, "gated_delta_net_decode_seq", gated_delta_net_decode_seq)
instantiate_gdn_types(instantiate_gdn_nsg, "gated_delta_net_decode_legacy", gated_delta_net_decode_legacy)
