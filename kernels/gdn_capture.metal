// Gated DeltaNet decode with per-token state capture, for speculative
// decoding: after every token t the lane writes its cells of S to
// capture[..., t, s], so a draft can be rolled back to any accepted token.
// The arithmetic is the decode kernel's (gdn_decode_indexed), so outputs and
// final states are bit-identical to decode, seq and legacy for the same
// types, and the slot of the last token is byte-identical to state_out.

template <typename A, typename S, int NSG>
kernel void gated_delta_net_decode_capture(
    GDN_STEP_BUFFERS,
    device S           *capture   [[buffer(9)]],
    GDN_SEQ_BUFFERS,
    uint3 tg  [[threadgroup_position_in_grid]],
    uint3 tid [[thread_position_in_threadgroup]]) {
    gdn_decode_indexed<A, S, NSG, true>(GDN_STEP_ARGS, capture, GDN_SEQ_ARGS, tg, tid);
}

// Every combination of activation and state type (gdn_common.metal).
instantiate_gdn_types(instantiate_gdn_nsg, "gated_delta_net_decode_capture", gated_delta_net_decode_capture)
