// Gated DeltaNet layer core (SPEC section 13): what the kernels that run
// the short convolution and the gated RMSNorm share. Placed after
// gdn_common.metal (and gdn_packed_common.metal where the kernel is packed)
// in front of gdn_core.metal and gdn_chunked.metal.
//
// Buffers of the core, after the 14 every kernel binds: 14 mixed_qkv
// [conv_dim, n_tokens, n_seqs], 15 conv weight [K, conv_dim] (K fastest),
// 16 conv_state_in, 17 conv_state_out ([conv_dim, K-1, states], oldest
// input first; states as for the recurrent state), 18 z (as the output),
// 19 norm_w [D_v], all of the activation type, and 20 the core parameters.

#define GDN_CONV_K 4

// The core's buffers 14-20, declared once for an entry point templated on
// A, with the core parameters named cp; GDN_CORE_ARGS passes them on.
#define GDN_CORE_BUFFERS \
    device const A     *mixed      [[buffer(14)]], \
    device const A     *conv_w     [[buffer(15)]], \
    device const A     *conv_in    [[buffer(16)]], \
    device A           *conv_out   [[buffer(17)]], \
    device const A     *z          [[buffer(18)]], \
    device const A     *norm_w     [[buffer(19)]], \
    constant gdn_core_params &cp   [[buffer(20)]]
#define GDN_CORE_ARGS mixed, conv_w, conv_in, conv_out, z, norm_w, &cp
// What an entry point without the core passes in their place: buffers it
// binds (never read, as the core's flags are off) and no core parameters.
#define GDN_NO_CORE_ARGS q, q, q, output, q, q, (constant gdn_core_params *)nullptr


// Bits of gdn_core_params::flags.
#define GDN_CORE_CONV    1u  // mixed_qkv and the conv state replace q, k and v
#define GDN_CORE_NORM    2u  // the gated RMSNorm of the output
#define GDN_CORE_SIGMOID 4u  // the norm's gate is sigmoid(z), not silu(z)
#define GDN_CORE_CAPTURE 8u  // S after every token to capture[..., t, s] (buffer 9)
#define GDN_CORE_GROUPED 16u // one threadgroup per key head and its value heads

// The two entry points of a prefill kernel whose work is
// head<A, S, CORE>(GDN_STEP_ARGS, GDN_SEQ_ARGS, stage, the core's buffers,
// tg, tid) with threadgroup memory stage: name without the layer core and
// core_name with it (buffers 14-20).
#define GDN_PREFILL_KERNELS(name, core_name, head) \
    template <typename A, typename S> \
    kernel void name( \
        GDN_STEP_BUFFERS, \
        GDN_SEQ_BUFFERS, \
        threadgroup float *stage [[threadgroup(0)]], \
        uint3 tg  [[threadgroup_position_in_grid]], \
        uint3 tid [[thread_position_in_threadgroup]]) { \
        head<A, S, false>(GDN_STEP_ARGS, GDN_SEQ_ARGS, stage, GDN_NO_CORE_ARGS, tg, tid); \
    } \
    template <typename A, typename S> \
    kernel void core_name( \
        GDN_STEP_BUFFERS, \
        GDN_SEQ_BUFFERS, \
        GDN_CORE_BUFFERS, \
        threadgroup float *stage [[threadgroup(0)]], \
        uint3 tg  [[threadgroup_position_in_grid]], \
        uint3 tid [[thread_position_in_threadgroup]]) { \
        head<A, S, true>(GDN_STEP_ARGS, GDN_SEQ_ARGS, stage, GDN_CORE_ARGS, tg, tid); \
    }

// The parameters of a GDN_PREFILL_KERNELS head, in the order its entry
// points pass them (without the layer core, GDN_NO_CORE_ARGS stand in for
// the core's buffers).
#define GDN_PREFILL_HEAD_PARAMS \
    device const A *q, device const A *k, device const A *v, device const A *g, \
    device const A *beta, device const S *state_in, device A *output, \
    device S *state_out, constant gdn_params &p, device const float *a_log, \
    device const float *dt_bias, device const int *slots, \
    device const int *cu_seqlens, threadgroup float *stage, \
    device const A *mixed, device const A *conv_w, device const A *conv_in, \
    device A *conv_out, device const A *z, device const A *norm_w, \
    constant gdn_core_params *cp, uint3 tg, uint3 tid

// The core parameters, bound with setBytes at buffer index 20.
struct gdn_core_params {
    uint  flags;
    float eps;       // the norm's epsilon
    uint  conv_dim;  // 2 n_k_heads D_k + n_v_heads D_v
    uint  reserved;
};

// The channel of mixed_qkv behind entry ch of one value head's channel
// list: q of key head kh (D_k), k of kh (D_k), v of value head h (D_v).
inline uint gdn_head_channel(constant gdn_params &p, uint kh, uint h, uint ch) {
    const uint DK = p.d_k;
    if (ch < DK) {
        return kh * DK + ch;
    }
    if (ch < 2u * DK) {
        return p.n_k_heads * DK + kh * DK + (ch - DK);
    }
    return 2u * p.n_k_heads * DK + h * p.d_v + (ch - 2u * DK);
}

// Whether value head h is the first to read its key head, the one whose
// threadgroup writes the key head's q and k conv state.
inline bool gdn_core_owns_key_head(constant gdn_params &p, uint h) {
    if (p.head_map == 1u) {
        return h < p.n_k_heads;
    }
    return h % (p.n_v_heads / p.n_k_heads) == 0u;
}

// The norm's gate.
inline float gdn_core_gate(constant gdn_core_params &c, float z) {
    const float s = 1.0f / (1.0f + metal::exp(-z));
    return (c.flags & GDN_CORE_SIGMOID) ? s : z * s;
}

// The convolution channels one thread holds in registers for a whole
// window of one head and sequence: entries i + e n_threads (e < NCH) of the
// head's channel list (gdn_head_channel), their K = 4 weights and their
// last K-1 inputs, read once from the conv state (begin) and written back
// once (end). step gives a channel's u at the next token, in f32:
//   c = ((w0 x(t-3) + w1 x(t-2)) + w2 x(t-1)) + w3 x(t),  u = c / (1 + exp(-c))
// (the core kernel's order), and shifts the channel's inputs. A sequence
// shorter than K-1 tokens thus writes the old state shifted, its tokens
// the newest. end writes the v channels always and the q and k channels
// only where owner is set, so that a key head's conv state is written
// once whatever number of value heads convolve it.
template <typename A, int NCH>
struct gdn_conv_lane {
    float w[NCH][GDN_CONV_K];
    float x[NCH][GDN_CONV_K - 1];
    uint  src[NCH];  // the channel of mixed_qkv, 0 where the entry is past the list
    uint  ch[NCH];   // the entry of the list
    uint  n_ch;      // entries in the list: 2 D_k + D_v

    inline void begin(constant gdn_params &p, constant gdn_core_params &c,
                      device const A *conv_w, device const A *conv_in, ulong base,
                      uint kh, uint h, uint thread_i, uint n_threads) {
        n_ch = 2u * p.d_k + p.d_v;
        for (int e = 0; e < NCH; ++e) {
            ch[e] = thread_i + uint(e) * n_threads;
            const bool on = ch[e] < n_ch;
            src[e] = on ? gdn_head_channel(p, kh, h, ch[e]) : 0u;
            for (int j = 0; j < GDN_CONV_K; ++j) {
                w[e][j] = on ? load_elem(conv_w + src[e] * GDN_CONV_K + uint(j)) : 0.0f;
            }
            for (int j = 0; j < GDN_CONV_K - 1; ++j) {
                x[e][j] = on ? load_elem(conv_in + base + ulong(j) * c.conv_dim + src[e]) : 0.0f;
            }
        }
    }

    inline bool has(int e) const { return ch[e] < n_ch; }

    inline float step(int e, float xt) {
        float acc = w[e][0] * x[e][0];
        acc = acc + w[e][1] * x[e][1];
        acc = acc + w[e][2] * x[e][2];
        acc = acc + w[e][3] * xt;
        x[e][0] = x[e][1];
        x[e][1] = x[e][2];
        x[e][2] = xt;
        return acc / (1.0f + metal::exp(-acc));
    }

    // Runs one token (xr: its row of mixed_qkv) through every entry this
    // thread owns and stages each u: a q channel at qs[ch], a k channel at
    // ks[ch - D_k], a v channel at vs[ch - 2 D_k].
    inline void stage(device const A *xr, uint d_k, threadgroup float *qs,
                      threadgroup float *ks, threadgroup float *vs) {
        for (int e = 0; e < NCH; ++e) {
            if (has(e)) {
                const float y = step(e, load_elem(xr + src[e]));
                if (ch[e] < d_k) {
                    qs[ch[e]] = y;
                } else if (ch[e] < 2u * d_k) {
                    ks[ch[e] - d_k] = y;
                } else {
                    vs[ch[e] - 2u * d_k] = y;
                }
            }
        }
    }

    inline void end(constant gdn_params &p, constant gdn_core_params &c,
                    device A *conv_out, ulong base, bool owner) const {
        for (int e = 0; e < NCH; ++e) {
            if (ch[e] < n_ch && (ch[e] >= 2u * p.d_k || owner)) {
                for (int j = 0; j < GDN_CONV_K - 1; ++j) {
                    store_elem(conv_out + base + ulong(j) * c.conv_dim + src[e], x[e][j]);
                }
            }
        }
    }
};

// The gated norm's sum of squares over the 8 rows of a SIMD-group whose 4
// lanes per row (lanes 4i .. 4i+3) hold the row's output in lane 4i at
// least: xor 4, 8 and 16, in the core kernel's order; lane 0 holds the sum.
inline float gdn_norm_rows_sum(float o) {
    float ss = o * o;
    ss += simd_shuffle_xor(ss, ushort(4));
    ss += simd_shuffle_xor(ss, ushort(8));
    ss += simd_shuffle_xor(ss, ushort(16));
    return ss;
}

// The norm's factor for a row set of d_v outputs whose squares sum to ss:
// 1 / sqrt(ss / D_v + eps).
inline float gdn_norm_rms(float ss, uint d_v, float eps) {
    return 1.0f / metal::sqrt(ss / float(d_v) + eps);
}

// The norm's factor from the n_groups partial sums of one token, added in
// order.
inline float gdn_norm_factor(threadgroup const float *part, uint n_groups, uint d_v, float eps) {
    float sum = 0.0f;
    for (uint i = 0; i < n_groups; ++i) {
        sum += part[i];
    }
    return gdn_norm_rms(sum, d_v, eps);
}

// y of one row: ((o r) norm_w) act(z), in f32, for the caller to round
// once.
inline float gdn_norm_apply(constant gdn_core_params &c, float o, float r, float nw, float z) {
    return ((o * r) * nw) * gdn_core_gate(c, z);
}
