// Gated DeltaNet: declarations shared by every kernel family.
//
// This prelude is placed in front of each kernel source before it is
// compiled, so the decode, seq, legacy and capture kernels run literally the
// same per-token arithmetic (gdn_token, gdn_lane_step) and stay
// bit-identical within each combination of element types.
//
// Layouts, innermost dimension first:
//   q, k                [D_k, n_k_heads, n_tokens, n_seqs]       activation type A
//   v, output           [D_v, n_v_heads, n_tokens, n_seqs]       A
//   g, beta             [n_v_heads, n_tokens, n_seqs]            A (or a and b, fused)
//   state_in, state_out [D_k, D_v, n_v_heads, n_seqs]            state type S
//                       (row i of S: D_k elements)
//   capture             [D_k, D_v, n_v_heads, n_tokens, n_seqs]  S
//   a_log, dt_bias      [n_v_heads]                              float (fused gate)
//
// State pools and packed sequences (SPEC section 11): with n_slots > 0,
// state_in and state_out hold n_slots states and slots[n_seqs] (int32,
// buffer 12) names the state of each sequence; with varlen, the tokens of
// all sequences are packed along one axis (n_tokens in all, capture
// likewise) and cu_seqlens[n_seqs+1] (int32, buffer 13) gives each
// sequence its tokens. gdn_sequence finds both.
//
// Buffer indices: 0 q, 1 k, 2 v, 3 g (or a), 4 beta (or b), 5 state_in,
// 6 output, 7 state_out, 8 parameters, 9 capture, 10 a_log, 11 dt_bias,
// 12 slots, 13 cu_seqlens.
//
// The buffers every entry point binds, declared once: GDN_STEP_BUFFERS
// (0-8, the step and its parameters) and GDN_SEQ_BUFFERS (10-13, the fused
// gate's constants, the state slots and the sequence bounds), for an entry
// point templated on A and S. Buffer 9 (capture) is declared by the
// kernels that write it; GDN_STEP_ARGS and GDN_SEQ_ARGS pass the same
// buffers on, in order.
#define GDN_STEP_BUFFERS \
    device const A     *q          [[buffer(0)]], \
    device const A     *k          [[buffer(1)]], \
    device const A     *v          [[buffer(2)]], \
    device const A     *g          [[buffer(3)]], \
    device const A     *beta       [[buffer(4)]], \
    device const S     *state_in   [[buffer(5)]], \
    device A           *output     [[buffer(6)]], \
    device S           *state_out  [[buffer(7)]], \
    constant gdn_params &p         [[buffer(8)]]
#define GDN_SEQ_BUFFERS \
    device const float *a_log      [[buffer(10)]], \
    device const float *dt_bias    [[buffer(11)]], \
    device const int   *slots      [[buffer(12)]], \
    device const int   *cu_seqlens [[buffer(13)]]
#define GDN_STEP_ARGS q, k, v, g, beta, state_in, output, state_out, p
#define GDN_SEQ_ARGS a_log, dt_bias, slots, cu_seqlens

// Element types are template parameters: float, half, or bf16_t (elem.metal). Every
// load widens to float exactly, the recurrence runs in float, and every
// store rounds once to nearest even.

// Instantiation, one line per kernel family (MLX style).
// instantiate_gdn(host, fn, A, S) makes fn<A, S> the entry point host;
// instantiate_gdn_nsg(host, fn, A, S) makes fn<A, S, NSG> the entry points
// host_1, host_2 and host_4. instantiate_gdn_types(inst, base, fn) applies
// one of them to the nine combinations of activation and state type, named
// base_{A}_{S}, and base_f32 for f32/f32 (the names package kernels builds).
#define instantiate_gdn(host, fn, A, S) \
    template [[host_name(host)]] kernel decltype(fn<A, S>) fn<A, S>;
#define instantiate_gdn_nsg(host, fn, A, S) \
    template [[host_name(host "_1")]] kernel decltype(fn<A, S, 1>) fn<A, S, 1>; \
    template [[host_name(host "_2")]] kernel decltype(fn<A, S, 2>) fn<A, S, 2>; \
    template [[host_name(host "_4")]] kernel decltype(fn<A, S, 4>) fn<A, S, 4>;
#define instantiate_gdn_types(inst, base, fn) \
    inst(base "_f32", fn, float, float) \
    inst(base "_f32_f16", fn, float, half) \
    inst(base "_f32_bf16", fn, float, bf16_t) \
    inst(base "_f16_f32", fn, half, float) \
    inst(base "_f16_f16", fn, half, half) \
    inst(base "_f16_bf16", fn, half, bf16_t) \
    inst(base "_bf16_f32", fn, bf16_t, float) \
    inst(base "_bf16_f16", fn, bf16_t, half) \
    inst(base "_bf16_bf16", fn, bf16_t, bf16_t)

// The parameter block bound with setBytes at buffer index 8.
struct gdn_params {
    uint  d_k;
    uint  d_v;
    uint  n_k_heads;
    uint  n_v_heads;
    uint  n_tokens;
    uint  n_seqs;
    uint  head_map;  // 0: block (k_head = h / r), 1: tiled (k_head = h % n_k_heads)
    uint  fused;     // GDN_FUSED_* bits: what the kernel computes itself
    float q_scale;   // 0: q is already scaled, the output scale is 1
    uint  n_slots;   // states in the state pool; 0: one per sequence, no slot index
    uint  varlen;    // 1: tokens packed, cu_seqlens says which each sequence owns
    uint  reserved2;
};

// Where one sequence of a dispatch lives (SPEC section 11): the index of
// its state in state_in and state_out (64 bits: a pool may pass 2^32
// elements), its first token along the token axis and its token count.
// skip is set for padding (a negative slot), for a slot not below
// n_slots, for an empty sequence and for a cu_seqlens range that is
// decreasing or passes n_tokens: such a sequence reads and writes nothing,
// so no index the host did not check is ever dereferenced.
struct gdn_seq {
    ulong state;
    uint  tok0;
    uint  n_tokens;
    bool  skip;
};

inline gdn_seq gdn_sequence(constant gdn_params &p, device const int *slots,
                            device const int *cu_seqlens, uint seq) {
    gdn_seq sq = {seq, seq * p.n_tokens, p.n_tokens, false};
    if (p.n_slots != 0u) {
        const int slot = slots[seq];
        sq.skip = slot < 0 || uint(slot) >= p.n_slots;
        sq.state = ulong(uint(slot));
    }
    if (p.varlen != 0u) {
        const int first = cu_seqlens[seq];
        const int end = cu_seqlens[seq + 1];
        // An empty sequence is skipped too: its state is left as it is,
        // not read and written back.
        sq.skip = sq.skip || first < 0 || end <= first || uint(end) > p.n_tokens;
        sq.tok0 = uint(first);
        sq.n_tokens = uint(end - first);
    }
    return sq;
}

// Bits of gdn_params::fused. Each is a uniform branch.
#define GDN_FUSED_L2NORM 1u  // q and k are raw: normalise them per key head and token
#define GDN_FUSED_GATE   2u  // buffer 3 holds a: g = exp(a_log[h]) * softplus(a + dt_bias[h])
#define GDN_FUSED_BETA   4u  // buffer 4 holds b: beta = sigmoid(b)

// The epsilon inside the square root of the L2 norm.
#define GDN_L2NORM_EPS 1e-6f

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

// 1 / sqrt(ss + eps): the factor that normalises a vector whose squares sum
// to ss.
inline float gdn_inv_norm(float ss) {
    return 1.0f / metal::sqrt(ss + GDN_L2NORM_EPS);
}

// log(1 + y) for y >= 0, accurate for small y too: when 1 + y rounds to 1
// the answer is y itself, otherwise log(u) * y / (u - 1) corrects the
// rounding of u = 1 + y.
inline float gdn_log1p(float y) {
    const float u = 1.0f + y;
    if (u == 1.0f) {
        return y;
    }
    return metal::log(u) * (y / (u - 1.0f));
}

// torch's softplus with its threshold: x above 20, log(1 + e^x) below.
inline float gdn_softplus(float x) {
    return x > 20.0f ? x : gdn_log1p(metal::exp(x));
}

// The constants of the fused gate of value head h, read once per kernel:
// exp(A_log[h]) and dt_bias[h]; (1, 0), unused, when the gate is given.
struct gdn_gate_consts {
    float a;        // exp(A_log[h])
    float dt_bias;
};

inline gdn_gate_consts gdn_gate_constants(constant gdn_params &p,
                                          device const float *a_log,
                                          device const float *dt_bias, uint h) {
    gdn_gate_consts c = {1.0f, 0.0f};
    if (p.fused & GDN_FUSED_GATE) {
        c.a = metal::exp(a_log[h]);
        c.dt_bias = dt_bias[h];
    }
    return c;
}

// What the threadgroup of value head h of sequence seq starts from: where
// the sequence lives (gdn_sequence), the key head h reads q and k from
// (gdn_key_head), the output scale (gdn_out_scale) and the gate's
// constants (gdn_gate_constants). For a skipped sequence only sq is set:
// the kernel returns before reading anything else.
struct gdn_head {
    gdn_seq sq;
    uint kh;
    float scale;
    gdn_gate_consts gc;
};

inline gdn_head gdn_head_of(constant gdn_params &p, device const int *slots,
                            device const int *cu_seqlens, device const float *a_log,
                            device const float *dt_bias, uint h, uint seq) {
    gdn_head hd = {gdn_sequence(p, slots, cu_seqlens, seq), 0u, 0.0f, {1.0f, 0.0f}};
    if (!hd.sq.skip) {
        hd.kh = gdn_key_head(p, h);
        hd.scale = gdn_out_scale(p);
        hd.gc = gdn_gate_constants(p, a_log, dt_bias, h);
    }
    return hd;
}

// g of one token: as given, or exp(A_log) * softplus(a + dt_bias).
inline float gdn_gate(constant gdn_params &p, gdn_gate_consts c, float g) {
    if (p.fused & GDN_FUSED_GATE) {
        return c.a * gdn_softplus(g + c.dt_bias);
    }
    return g;
}

// beta of one token: as given, or 1 / (1 + exp(-b)).
inline float gdn_beta(constant gdn_params &p, float b) {
    if (p.fused & GDN_FUSED_BETA) {
        return 1.0f / (1.0f + metal::exp(-b));
    }
    return b;
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

// Normalises the vector whose NSG elements x a lane holds (the SIMD group
// holds all D_k = 32 * NSG): x / sqrt(sum x^2 + eps). Every lane must call it.
template <int NSG>
inline void gdn_lane_l2norm(thread float *x) {
    float ss = 0.0f;
    for (int c = 0; c < NSG; ++c) {
        ss += x[c] * x[c];
    }
    const float inv = gdn_inv_norm(simd_sum(ss));
    for (int c = 0; c < NSG; ++c) {
        x[c] = x[c] * inv;
    }
}

// One token of the decode family on the cells a lane holds: loads the
// lane's q and k (from qp, kp), v, and the gate inputs, applies the fused
// parts, runs gdn_lane_step and returns the scaled output. Every kernel of
// the family calls it, whatever way it finds the addresses.
template <typename A, int NSG>
inline float gdn_token(constant gdn_params &p, gdn_gate_consts gc,
                       thread float *s, device const A *qp, device const A *kp,
                       device const A *vp, device const A *gp,
                       device const A *bp, float scale) {
    float kr[NSG];
    float qr[NSG];
    for (int c = 0; c < NSG; ++c) {
        kr[c] = load_elem(kp + c);
        qr[c] = load_elem(qp + c);
    }
    if (p.fused & GDN_FUSED_L2NORM) {
        gdn_lane_l2norm<NSG>(kr);
        gdn_lane_l2norm<NSG>(qr);
    }
    const float g = gdn_gate(p, gc, load_elem(gp));
    const float beta = gdn_beta(p, load_elem(bp));
    return scale * gdn_lane_step<NSG>(s, kr, qr, load_elem(vp), g, beta);
}

// The decode kernel with indices rebuilt from the parameters every token.
// Threadgroup (32, NSG, 1), grid (D_v / NSG, n_v_heads, n_seqs); D_k must be
// 32 * NSG. Lane x of SIMD group y in threadgroup X owns the cells
// j = x*NSG .. x*NSG + NSG-1 of row i = X*NSG + y. The state is read once
// before the token loop and written once after it; with CAPTURE, S is also
// written to capture[..., t, s] after every token.
template <typename A, typename S, int NSG, bool CAPTURE>
inline void gdn_decode_indexed(device const A *q, device const A *k,
                               device const A *v, device const A *g,
                               device const A *beta,
                               device const S *state_in,
                               device A *output, device S *state_out,
                               constant gdn_params &p, device S *capture,
                               device const float *a_log,
                               device const float *dt_bias,
                               device const int *slots,
                               device const int *cu_seqlens,
                               uint3 tg, uint3 tid) {
    const uint lane = tid.x;
    const uint row = tg.x * NSG + tid.y;
    const uint h = tg.y;
    const gdn_head hd = gdn_head_of(p, slots, cu_seqlens, a_log, dt_bias, h, tg.z);
    if (hd.sq.skip) {
        return;  // the whole threadgroup: one sequence
    }

    const ulong cell = ((hd.sq.state * p.n_v_heads + h) * p.d_v + row) * p.d_k + lane * NSG;
    float s[NSG];
    for (int c = 0; c < NSG; ++c) {
        s[c] = load_elem(state_in + cell + c);
    }

    for (uint t = 0; t < hd.sq.n_tokens; ++t) {
        const uint tok = hd.sq.tok0 + t;
        const uint qk = (tok * p.n_k_heads + hd.kh) * p.d_k + lane * NSG;
        const uint vh = tok * p.n_v_heads + h;
        const float o = gdn_token<A, NSG>(p, hd.gc, s, q + qk, k + qk,
                                          v + vh * p.d_v + row, g + vh, beta + vh, hd.scale);
        if (lane == 0) {
            store_elem(output + vh * p.d_v + row, o);
        }
        if (CAPTURE) {
            const uint cap = (vh * p.d_v + row) * p.d_k + lane * NSG;
            for (int c = 0; c < NSG; ++c) {
                store_elem(capture + cap + c, s[c]);
            }
        }
    }

    for (int c = 0; c < NSG; ++c) {
        store_elem(state_out + cell + c, s[c]);
    }
}

// The pointers of one row of S through a sequence's tokens, for the
// kernels that move them on once per token instead of rebuilding every
// index (the seq kernels): q and k at column col of key head kh, v and the
// output at row of value head h, g and beta of h. next() moves each to
// the next token.
template <typename A>
struct gdn_token_ptrs {
    device const A *q;
    device const A *k;
    device const A *v;
    device A       *o;
    device const A *g;
    device const A *beta;
    uint qk_step;
    uint v_step;
    uint gb_step;

    inline void next() {
        q += qk_step;
        k += qk_step;
        v += v_step;
        o += v_step;
        g += gb_step;
        beta += gb_step;
    }
};

// The pointers of gdn_token_ptrs at token tok0, for D_k = dk.
template <typename A>
inline gdn_token_ptrs<A> gdn_token_pointers(constant gdn_params &p, device const A *q,
                                            device const A *k, device const A *v,
                                            device A *output, device const A *g,
                                            device const A *beta, uint tok0, uint kh,
                                            uint h, uint dk, uint col, uint row) {
    gdn_token_ptrs<A> tp;
    tp.qk_step = p.n_k_heads * dk;
    tp.v_step = p.n_v_heads * p.d_v;
    tp.gb_step = p.n_v_heads;
    tp.q = q + (tok0 * p.n_k_heads + kh) * dk + col;
    tp.k = k + (tok0 * p.n_k_heads + kh) * dk + col;
    tp.v = v + (tok0 * p.n_v_heads + h) * p.d_v + row;
    tp.o = output + (tok0 * p.n_v_heads + h) * p.d_v + row;
    tp.g = g + tok0 * p.n_v_heads + h;
    tp.beta = beta + tok0 * p.n_v_heads + h;
    return tp;
}

// An entry point of the decode family that runs
// impl<A, S, NSG, false>(GDN_STEP_ARGS, no capture, GDN_SEQ_ARGS, tg, tid):
// the kernels that rebuild every index from the parameters each token.
#define GDN_INDEXED_KERNEL(name, impl) \
    template <typename A, typename S, int NSG> \
    kernel void name( \
        GDN_STEP_BUFFERS, \
        GDN_SEQ_BUFFERS, \
        uint3 tg  [[threadgroup_position_in_grid]], \
        uint3 tid [[thread_position_in_threadgroup]]) { \
        impl<A, S, NSG, false>(GDN_STEP_ARGS, nullptr, GDN_SEQ_ARGS, tg, tid); \
    }
