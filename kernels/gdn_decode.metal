// Gated DeltaNet decode kernels: decode, seq and legacy.
//
// All three keep the NSG cells a lane owns in registers for the whole token
// loop, perform the same loads and run the same per-token arithmetic
// (gdn_lane_step), so their outputs and final states are bit-identical.
// decode and legacy rebuild every index from the parameters each token; seq
// advances per-lane pointers once per token with D_k = 32 * NSG known at
// compile time, which pays off from two tokens on.

// n_tokens == 1: indices rebuilt each token.
template <int NSG>
kernel void gated_delta_net_decode_f32(
    device const float *q         [[buffer(0)]],
    device const float *k         [[buffer(1)]],
    device const float *v         [[buffer(2)]],
    device const float *g         [[buffer(3)]],
    device const float *beta      [[buffer(4)]],
    device const float *state_in  [[buffer(5)]],
    device float       *output    [[buffer(6)]],
    device float       *state_out [[buffer(7)]],
    constant gdn_params &p        [[buffer(8)]],
    uint3 tg  [[threadgroup_position_in_grid]],
    uint3 tid [[thread_position_in_threadgroup]]) {
    gdn_decode_indexed<NSG, false>(q, k, v, g, beta, state_in, output, state_out,
                                   p, nullptr, tg, tid);
}

// The index kernel under another name, kept as the reference the other
// decode kernels are compared with in tests and benchmarks.
template <int NSG>
kernel void gated_delta_net_decode_legacy_f32(
    device const float *q         [[buffer(0)]],
    device const float *k         [[buffer(1)]],
    device const float *v         [[buffer(2)]],
    device const float *g         [[buffer(3)]],
    device const float *beta      [[buffer(4)]],
    device const float *state_in  [[buffer(5)]],
    device float       *output    [[buffer(6)]],
    device float       *state_out [[buffer(7)]],
    constant gdn_params &p        [[buffer(8)]],
    uint3 tg  [[threadgroup_position_in_grid]],
    uint3 tid [[thread_position_in_threadgroup]]) {
    gdn_decode_indexed<NSG, false>(q, k, v, g, beta, state_in, output, state_out,
                                   p, nullptr, tg, tid);
}

// n_tokens >= 2: per-lane pointers advanced once per token.
template <int NSG>
kernel void gated_delta_net_decode_seq_f32(
    device const float *q         [[buffer(0)]],
    device const float *k         [[buffer(1)]],
    device const float *v         [[buffer(2)]],
    device const float *g         [[buffer(3)]],
    device const float *beta      [[buffer(4)]],
    device const float *state_in  [[buffer(5)]],
    device float       *output    [[buffer(6)]],
    device float       *state_out [[buffer(7)]],
    constant gdn_params &p        [[buffer(8)]],
    uint3 tg  [[threadgroup_position_in_grid]],
    uint3 tid [[thread_position_in_threadgroup]]) {
    const uint DK = 32 * NSG;
    const uint lane = tid.x;
    const uint row = tg.x * NSG + tid.y;
    const uint h = tg.y;
    const uint seq = tg.z;
    const uint kh = gdn_key_head(p, h);
    const float scale = gdn_out_scale(p);

    const uint cell = ((seq * p.n_v_heads + h) * p.d_v + row) * DK + lane * NSG;
    float s[NSG];
    for (int c = 0; c < NSG; ++c) {
        s[c] = state_in[cell + c];
    }

    const uint tok0 = seq * p.n_tokens;
    const uint qk_step = p.n_k_heads * DK;
    const uint v_step = p.n_v_heads * p.d_v;
    const uint gb_step = p.n_v_heads;
    device const float *qp = q + (tok0 * p.n_k_heads + kh) * DK + lane * NSG;
    device const float *kp = k + (tok0 * p.n_k_heads + kh) * DK + lane * NSG;
    device const float *vp = v + (tok0 * p.n_v_heads + h) * p.d_v + row;
    device float       *op = output + (tok0 * p.n_v_heads + h) * p.d_v + row;
    device const float *gp = g + tok0 * p.n_v_heads + h;
    device const float *bp = beta + tok0 * p.n_v_heads + h;

    for (uint t = 0; t < p.n_tokens; ++t) {
        float kr[NSG];
        float qr[NSG];
        for (int c = 0; c < NSG; ++c) {
            kr[c] = kp[c];
            qr[c] = qp[c];
        }
        const float o = gdn_lane_step<NSG>(s, kr, qr, *vp, *gp, *bp);
        if (lane == 0) {
            *op = scale * o;
        }
        qp += qk_step;
        kp += qk_step;
        vp += v_step;
        op += v_step;
        gp += gb_step;
        bp += gb_step;
    }

    for (int c = 0; c < NSG; ++c) {
        state_out[cell + c] = s[c];
    }
}

instantiate_gdn_kernel(gated_delta_net_decode_f32, 1)
instantiate_gdn_kernel(gated_delta_net_decode_f32, 2)
instantiate_gdn_kernel(gated_delta_net_decode_f32, 4)

instantiate_gdn_kernel(gated_delta_net_decode_seq_f32, 1)
instantiate_gdn_kernel(gated_delta_net_decode_seq_f32, 2)
instantiate_gdn_kernel(gated_delta_net_decode_seq_f32, 4)

instantiate_gdn_kernel(gated_delta_net_decode_legacy_f32, 1)
instantiate_gdn_kernel(gated_delta_net_decode_legacy_f32, 2)
instantiate_gdn_kernel(gated_delta_net_decode_legacy_f32, 4)
