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
    uint3 tg  [[threadgroup_position_in_grid]],
    uint3 tid [[thread_position_in_threadgroup]]) {
    gdn_decode_indexed<A, S, NSG, true>(q, k, v, g, beta, state_in, output, state_out,
                                        p, capture, a_log, dt_bias, tg, tid);
}

// Instantiations: activation type, state type, NSG. f32/f32 keeps the
// names gated_delta_net_decode_capture_f32_{NSG}.
template [[host_name("gated_delta_net_decode_capture_f32_1")]] kernel decltype(gated_delta_net_decode_capture<float, float, 1>) gated_delta_net_decode_capture<float, float, 1>;
template [[host_name("gated_delta_net_decode_capture_f32_2")]] kernel decltype(gated_delta_net_decode_capture<float, float, 2>) gated_delta_net_decode_capture<float, float, 2>;
template [[host_name("gated_delta_net_decode_capture_f32_4")]] kernel decltype(gated_delta_net_decode_capture<float, float, 4>) gated_delta_net_decode_capture<float, float, 4>;
template [[host_name("gated_delta_net_decode_capture_f32_f16_1")]] kernel decltype(gated_delta_net_decode_capture<float, half, 1>) gated_delta_net_decode_capture<float, half, 1>;
template [[host_name("gated_delta_net_decode_capture_f32_f16_2")]] kernel decltype(gated_delta_net_decode_capture<float, half, 2>) gated_delta_net_decode_capture<float, half, 2>;
template [[host_name("gated_delta_net_decode_capture_f32_f16_4")]] kernel decltype(gated_delta_net_decode_capture<float, half, 4>) gated_delta_net_decode_capture<float, half, 4>;
template [[host_name("gated_delta_net_decode_capture_f32_bf16_1")]] kernel decltype(gated_delta_net_decode_capture<float, gdn_bf16, 1>) gated_delta_net_decode_capture<float, gdn_bf16, 1>;
template [[host_name("gated_delta_net_decode_capture_f32_bf16_2")]] kernel decltype(gated_delta_net_decode_capture<float, gdn_bf16, 2>) gated_delta_net_decode_capture<float, gdn_bf16, 2>;
template [[host_name("gated_delta_net_decode_capture_f32_bf16_4")]] kernel decltype(gated_delta_net_decode_capture<float, gdn_bf16, 4>) gated_delta_net_decode_capture<float, gdn_bf16, 4>;
template [[host_name("gated_delta_net_decode_capture_f16_f32_1")]] kernel decltype(gated_delta_net_decode_capture<half, float, 1>) gated_delta_net_decode_capture<half, float, 1>;
template [[host_name("gated_delta_net_decode_capture_f16_f32_2")]] kernel decltype(gated_delta_net_decode_capture<half, float, 2>) gated_delta_net_decode_capture<half, float, 2>;
template [[host_name("gated_delta_net_decode_capture_f16_f32_4")]] kernel decltype(gated_delta_net_decode_capture<half, float, 4>) gated_delta_net_decode_capture<half, float, 4>;
template [[host_name("gated_delta_net_decode_capture_f16_f16_1")]] kernel decltype(gated_delta_net_decode_capture<half, half, 1>) gated_delta_net_decode_capture<half, half, 1>;
template [[host_name("gated_delta_net_decode_capture_f16_f16_2")]] kernel decltype(gated_delta_net_decode_capture<half, half, 2>) gated_delta_net_decode_capture<half, half, 2>;
template [[host_name("gated_delta_net_decode_capture_f16_f16_4")]] kernel decltype(gated_delta_net_decode_capture<half, half, 4>) gated_delta_net_decode_capture<half, half, 4>;
template [[host_name("gated_delta_net_decode_capture_f16_bf16_1")]] kernel decltype(gated_delta_net_decode_capture<half, gdn_bf16, 1>) gated_delta_net_decode_capture<half, gdn_bf16, 1>;
template [[host_name("gated_delta_net_decode_capture_f16_bf16_2")]] kernel decltype(gated_delta_net_decode_capture<half, gdn_bf16, 2>) gated_delta_net_decode_capture<half, gdn_bf16, 2>;
template [[host_name("gated_delta_net_decode_capture_f16_bf16_4")]] kernel decltype(gated_delta_net_decode_capture<half, gdn_bf16, 4>) gated_delta_net_decode_capture<half, gdn_bf16, 4>;
template [[host_name("gated_delta_net_decode_capture_bf16_f32_1")]] kernel decltype(gated_delta_net_decode_capture<gdn_bf16, float, 1>) gated_delta_net_decode_capture<gdn_bf16, float, 1>;
template [[host_name("gated_delta_net_decode_capture_bf16_f32_2")]] kernel decltype(gated_delta_net_decode_capture<gdn_bf16, float, 2>) gated_delta_net_decode_capture<gdn_bf16, float, 2>;
template [[host_name("gated_delta_net_decode_capture_bf16_f32_4")]] kernel decltype(gated_delta_net_decode_capture<gdn_bf16, float, 4>) gated_delta_net_decode_capture<gdn_bf16, float, 4>;
template [[host_name("gated_delta_net_decode_capture_bf16_f16_1")]] kernel decltype(gated_delta_net_decode_capture<gdn_bf16, half, 1>) gated_delta_net_decode_capture<gdn_bf16, half, 1>;
template [[host_name("gated_delta_net_decode_capture_bf16_f16_2")]] kernel decltype(gated_delta_net_decode_capture<gdn_bf16, half, 2>) gated_delta_net_decode_capture<gdn_bf16, half, 2>;
template [[host_name("gated_delta_net_decode_capture_bf16_f16_4")]] kernel decltype(gated_delta_net_decode_capture<gdn_bf16, half, 4>) gated_delta_net_decode_capture<gdn_bf16, half, 4>;
template [[host_name("gated_delta_net_decode_capture_bf16_bf16_1")]] kernel decltype(gated_delta_net_decode_capture<gdn_bf16, gdn_bf16, 1>) gated_delta_net_decode_capture<gdn_bf16, gdn_bf16, 1>;
template [[host_name("gated_delta_net_decode_capture_bf16_bf16_2")]] kernel decltype(gated_delta_net_decode_capture<gdn_bf16, gdn_bf16, 2>) gated_delta_net_decode_capture<gdn_bf16, gdn_bf16, 2>;
template [[host_name("gated_delta_net_decode_capture_bf16_bf16_4")]] kernel decltype(gated_delta_net_decode_capture<gdn_bf16, gdn_bf16, 4>) gated_delta_net_decode_capture<gdn_bf16, gdn_bf16, 4>;