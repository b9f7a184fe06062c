// Gated DeltaNet: declarations shared by every kernel family.
//
// This prelude is placed in front of each kernel source before it is
// compiled, so the decode, seq, legacy and capture kernels run literally the
// same per-token arithmetic (gdn_lane_step) and stay bit-identical.
//
// Layouts, innermost dimension first (all f32):
//   q, k                [D_k, n_k_heads, n_tokens, n_seqs]
//   v, output           [D_v, n_v_heads, n_tokens, n_seqs]
//   g, beta             [n_v_heads, n_tokens, n_seqs]
//   state_in, state_out [D_k, D_v, n_v_heads, n_seqs]  (row i of S: D_k floats)
//   capture             [D_k, D_v, n_v_heads, n_tokens, n_seqs]

#include <metal_stdlib>
using namespace metal;

// instantiate_gdn_kernel(name, nsg) makes the kernel template name<nsg> an
// entry point called "name_nsg": one line per variant.
#define instantiate_gdn_kernel(name, nsg) \
    template [[host_name(#name "_" #nsg)]] kernel decltype(name<nsg>) name<nsg>;

// The nine words bound with setBytes at buffer index 8.
struct gdn_params {
    uint  d_k;
    uint  d_v;
    uint  n_k_heads;
    uint  n_v_heads;
    uint  n_tokens;
    uint  n_seqs;
    uint  head_map;  // 0: block (k_head = h / r), 1: tiled (k_head = h % n_k_heads)
    uint  reserved;
    float q_scale;   // 0: q is already scaled, the output scale is 1
};

// The key head that value head h reads q and k from.
inline uint gdn_key_head(constant gdn_params &p, uint h) {
    if (p.head_map == 1u) {
        return h % p.n_k_heads;
    }
    return h / (p.n_v_heads / p.n_k_heads);
}

// The factor applied to every output at write-back.
inline float gdn_out_scale(constant gdn_params &p) {
    return p.q_scale == 0.0f ? 1.0f : p.q_scale;
}

// One token of the recurrence on the NSG cells of one row of S that a lane
// holds (the other 31 lanes of the SIMD group hold the rest of the row):
//
//   S       = alpha * S                  alpha = exp(-g), decay first
//   delta   = beta * (v - S k)           from the decayed state
//   S       = S + delta k^T
//   returns   S q                        (unscaled)
//
// Every lane of the SIMD group must call it: it reduces with simd_sum.
template <int NSG>
inline float gdn_lane_step(thread float *s, thread const float *kr,
                           thread const float *qr, float v, float g,
                           float beta) {
    const float alpha = metal::exp(-g);
    float sk = 0.0f;
    for (int c = 0; c < NSG; ++c) {
        s[c] = alpha * s[c];
        sk += s[c] * kr[c];
    }
    const float delta = beta * (v - simd_sum(sk));
    float sq = 0.0f;
    for (int c = 0; c < NSG; ++c) {
        s[c] = s[c] + delta * kr[c];
        sq += s[c] * qr[c];
    }
    return simd_sum(sq);
}

// The decode kernel with indices rebuilt from the parameters every token.
// Threadgroup (32, NSG, 1), grid (D_v / NSG, n_v_heads, n_seqs); D_k must be
// 32 * NSG. Lane x of SIMD group y in threadgroup X owns the cells
// j = x*NSG .. x*NSG + NSG-1 of row i = X*NSG + y. The state is read once
// before the token loop and written once after it; with CAPTURE, S is also
// written to capture[..., t, s] after every token.
template <int NSG, bool CAPTURE>
inline void gdn_decode_indexed(device const float *q, device const float *k,
                               device const float *v, device const float *g,
                               device const float *beta,
                               device const float *state_in,
                               device float *output, device float *state_out,
                               constant gdn_params &p, device float *capture,
                               uint3 tg, uint3 tid) {
    const uint lane = tid.x;
    const uint row = tg.x * NSG + tid.y;
    const uint h = tg.y;
    const uint seq = tg.z;
    const uint kh = gdn_key_head(p, h);
    const float scale = gdn_out_scale(p);

    const uint cell = ((seq * p.n_v_heads + h) * p.d_v + row) * p.d_k + lane * NSG;
    float s[NSG];
    for (int c = 0; c < NSG; ++c) {
        s[c] = state_in[cell + c];
    }

    for (uint t = 0; t < p.n_tokens; ++t) {
        const uint tok = seq * p.n_tokens + t;
        const uint qk = (tok * p.n_k_heads + kh) * p.d_k + lane * NSG;
        const uint vh = tok * p.n_v_heads + h;
        float kr[NSG];
        float qr[NSG];
        for (int c = 0; c < NSG; ++c) {
            kr[c] = k[qk + c];
            qr[c] = q[qk + c];
        }
        const float o = gdn_lane_step<NSG>(s, kr, qr, v[vh * p.d_v + row], g[vh], beta[vh]);
        if (lane == 0) {
            output[vh * p.d_v + row] = scale * o;
        }
        if (CAPTURE) {
            const uint cap = (vh * p.d_v + row) * p.d_k + lane * NSG;
            for (int c = 0; c < NSG; ++c) {
                capture[cap + c] = s[c];
            }
        }
    }

    for (int c = 0; c < NSG; ++c) {
        state_out[cell + c] = s[c];
    }
}
