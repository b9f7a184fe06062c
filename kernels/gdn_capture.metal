// Gated DeltaNet decode with per-token state capture, for speculative
// decoding: after every token t the lane writes its cells of S to
// capture[..., t, s], so a draft can be rolled back to any accepted token.
// The arithmetic is the decode kernel's (gdn_decode_indexed), so outputs and
// final states are bit-identical to decode, seq and legacy, and the slot of
// the last token is byte-identical to state_out.

template <int NSG>
kernel void gated_delta_net_decode_capture_f32(
    device const float *q         [[buffer(0)]],
    device const float *k         [[buffer(1)]],
    device const float *v         [[buffer(2)]],
    device const float *g         [[buffer(3)]],
    device const float *beta      [[buffer(4)]],
    device const float *state_in  [[buffer(5)]],
    device float       *output    [[buffer(6)]],
    device float       *state_out [[buffer(7)]],
    constant gdn_params &p        [[buffer(8)]],
    device float       *capture   [[buffer(9)]],
    uint3 tg  [[threadgroup_position_in_grid]],
    uint3 tid [[thread_position_in_threadgroup]]) {
    gdn_decode_indexed<NSG, true>(q, k, v, g, beta, state_in, output, state_out,
                                  p, capture, tg, tid);
}

instantiate_gdn_kernel(gated_delta_net_decode_capture_f32, 1)
instantiate_gdn_kernel(gated_delta_net_decode_capture_f32, 2)
instantiate_gdn_kernel(gated_delta_net_decode_capture_f32, 4)
