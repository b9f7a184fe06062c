// Gated DeltaNet decode with per-token state capture, for speculative
// decoding: after every token t the lane writes its cells of S to
// capture[..., t, s], so a draft can be rolled back to any accepted token.
// The arithmetic is the decode kernel's (gdn_decode_indexed), so outputs and
// final states are bit-identical to decode, seq and legacy for the same
// types, and the slot of the last token is byte-identical to state_out.

template <typename A, typename S, int NSG>
kernel void gated_delta_net_decode_capture(
    device const A     *q         [[buffer(0)]],
    device const A     *k         [[buffer(1)]],
    device const A     *v         [[buffer(2)]],
    device const A     *g         [[buffer(3)]],
    device const A     *beta      [[buffer(4)]],
    device const S     *state_in  [[buffer(5)]],
    device A           *output    [[buffer(6)]],
    device S           *state_out [[buffer(7)]],
    constant gdn_params &p        [[buffer(8)]],
    device S           *capture   [[buffer(9)]],
    device const float *a_log     [[buffer(10)]],
    device const float *dt_bias   [[buffer(11)]],
    device const int   *slots      [[buffer(12)]],
    device const int   *cu_seqlens [[buffer(13)]],
    uint3 tg  [[threadgroup_position_in_grid]],
    uint3 tid [[thread_position_in_threadgroup]]) {
    gdn_decode_indexed<A, S, NSG, true>(q, k, v, g, beta, state_in, output, state_out,
                                        p, capture, a_log, dt_bias, slots, cu_seqlens, tg, tid);
}

// Every combination of activation and state type (gdn_common.metal).
instantiate_gdn_types(instantiate_gdn_nsg, "gated_delta_net_decode_capture", gated_delta_net_decode_capture)
