// Gated DeltaNet blocked prefill: any number of tokens, D_k = 64 (NSG = 2)
// or 128 (NSG = 4), D_v a multiple of 32; the packed layout of
// gdn_packed_common.metal, threadgroup (32, GDN_PACKED_SIMDGROUPS, 1),
// grid (D_v / 32, n_v_heads, n_seqs). Each threadgroup finds its
// sequence's state slot, first token and token count (gdn_sequence: state
// pools, packed sequences) and skips padding.
//
// The lanes keep their cells of S in registers for the whole window. The
// tokens go through in blocks of BT = GDN_BLOCK_BYTES / sizeof(A) tokens
// (16 of f32, 32 of f16 or bf16): the threadgroup's 128 threads stage a
// block's q and k (D_k each per token) and the v of its 32 rows in the
// activation type (bfloat as its bits), and g and beta (the fused gate and beta applied once
// per token) as float, in threadgroup memory at index 0:
//
//   k[BT][D_k] | q[BT][D_k] | v[BT][32]   (type A)   | g[BT] | beta[BT]   (float)
//
// then every SIMD-group runs the block's tokens (gdn_packed_step) with no
// barrier between them: two barriers per block, one before the block is
// read and one before it is overwritten.

#define GDN_BLOCK_BYTES 64  // bytes of one element of q or k, times the tokens of a block

// The type a block of activations of type T is staged in: T itself, and
// bfloat as its 16 bits (ushort), converted when read.
template <typename T>
struct gdn_staging {
    typedef T type;
    static inline T bits(T x) { return x; }
};

#if __METAL_VERSION__ >= 310
template <>
struct gdn_staging<bfloat> {
    typedef ushort type;
    static inline ushort bits(bfloat x) { return as_type<ushort>(x); }
};
#endif

// Loads of staged elements (threadgroup memory), widened to float exactly;
// ushort holds bfloat16 bits.
template <typename T>
struct gdn_staged;

template <>
struct gdn_staged<float> {
    static inline float load(threadgroup const float *p) { return *p; }
    static inline float4 load4(threadgroup const float *p) { return *(threadgroup const float4 *)p; }
};

template <>
struct gdn_staged<half> {
    static inline float load(threadgroup const half *p) { return float(*p); }
    static inline float4 load4(threadgroup const half *p) { return float4(*(threadgroup const half4 *)p); }
};

template <>
struct gdn_staged<ushort> {
    static inline float load(threadgroup const ushort *p) { return bf16_float(*p); }
    static inline float4 load4(threadgroup const ushort *p) {
        const ushort4 b = *(threadgroup const ushort4 *)p;
        return float4(bf16_float(b.x), bf16_float(b.y), bf16_float(b.z), bf16_float(b.w));
    }
};

// A lane's view of a staged vector of D_k elements (q or k of one token).
template <typename T>
struct gdn_staged_vec {
    threadgroup const T *p;
    uint u;
    inline float4 group(int c) const { return gdn_staged<T>::load4(p + gdn_packed_col(c, u)); }
};

// Stages g and beta of value head h for the nb tokens of a block from
// tok0, thread ti the token ti (as given, or from a and b with the fused
// step), for every thread to read after the next barrier.
template <typename A>
inline void gdn_stage_gates(constant gdn_params &p, gdn_gate_consts gc, device const A *g,
                            device const A *beta, threadgroup float *gs, threadgroup float *bs,
                            uint tok0, uint h, uint nb, uint ti) {
    if (ti < nb) {
        const uint vh = (tok0 + ti) * p.n_v_heads + h;
        gs[ti] = gdn_gate(p, gc, load_elem(g + vh));
        bs[ti] = gdn_beta(p, load_elem(beta + vh));
    }
}

template <typename A, typename S, int NSG>
kernel void gated_delta_net_prefill_blocked(
    GDN_STEP_BUFFERS,
    GDN_SEQ_BUFFERS,
    threadgroup float  *stage     [[threadgroup(0)]],
    uint3 tg  [[threadgroup_position_in_grid]],
    uint3 tid [[thread_position_in_threadgroup]]) {
    const uint DK = 32 * NSG;
    const uint BT = GDN_BLOCK_BYTES / sizeof(A);
    const uint ROWS = GDN_PACKED_SIMDGROUPS * GDN_PACKED_ROWS;
    const uint THREADS = 32 * GDN_PACKED_SIMDGROUPS;
    const gdn_packed_lane l = gdn_packed_position(tg, tid);
    const uint ti = tid.y * 32 + tid.x;
    const uint h = tg.y;
    const gdn_head hd = gdn_head_of(p, slots, cu_seqlens, a_log, dt_bias, h, tg.z);
    if (hd.sq.skip) {
        return;  // the whole threadgroup, before any barrier: one sequence
    }
    const uint row0 = tg.x * ROWS;
    const bool l2norm = (p.fused & GDN_FUSED_L2NORM) != 0u;

    typedef gdn_staging<A> staging;
    typedef typename staging::type AS;
    threadgroup AS *ks = (threadgroup AS *)stage;
    threadgroup AS *qs = ks + BT * DK;
    threadgroup AS *vs = ks + 2 * BT * DK;
    threadgroup float *gs = (threadgroup float *)(vs + BT * ROWS);
    threadgroup float *bs = gs + BT;

    const ulong row = ((hd.sq.state * p.n_v_heads + h) * p.d_v + l.row) * DK;
    float s[8 * NSG];
    gdn_packed_load_row<S, 2 * NSG>(s, state_in + row, l.u);

    for (uint t0 = 0; t0 < hd.sq.n_tokens; t0 += BT) {
        const uint nb = min(BT, hd.sq.n_tokens - t0);
        const uint tok0 = hd.sq.tok0 + t0;
        for (uint i = ti; i < nb * DK; i += THREADS) {
            const uint src = ((tok0 + i / DK) * p.n_k_heads + hd.kh) * DK + i % DK;
            ks[i] = staging::bits(k[src]);
            qs[i] = staging::bits(q[src]);
        }
        for (uint i = ti; i < nb * ROWS; i += THREADS) {
            vs[i] = staging::bits(v[((tok0 + i / ROWS) * p.n_v_heads + h) * p.d_v + row0 + i % ROWS]);
        }
        gdn_stage_gates(p, hd.gc, g, beta, gs, bs, tok0, h, nb, ti);
        threadgroup_barrier(mem_flags::mem_threadgroup);

        for (uint t = 0; t < nb; ++t) {
            float kr[8 * NSG];
            const gdn_staged_vec<AS> kt = {ks + t * DK, l.u};
            const gdn_staged_vec<AS> qt = {qs + t * DK, l.u};
            gdn_packed_load<2 * NSG>(kr, kt);
            const float vt = gdn_staged<AS>::load(vs + t * ROWS + l.row - row0);
            const float o = hd.scale * gdn_packed_step<2 * NSG>(s, kr, qt, vt, gs[t], bs[t], l2norm);
            if (l.u == 0) {
                store_elem(output + ((tok0 + t) * p.n_v_heads + h) * p.d_v + l.row, o);
            }
        }

        // Nobody overwrites the block before every SIMD-group is done with it.
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }

    gdn_packed_store<S, 2 * NSG>(state_out + row, s, l.u);
}

// The blocked prefill with the layer core (SPEC section 13; flags and
// buffers 14-20 of gdn_core_common.metal). The norm needs all D_v rows of
// a value head, so this variant has the core kernel's grid: threadgroup
// (32, D_v / 8, 1), the same packed layout, one threadgroup per value head
// and sequence, grid (1, n_v_heads, n_seqs). The tokens go through in
// blocks of GDN_BLOCK_CORE tokens staged as float (u of the convolution is
// never rounded):
//
//   k[BT][D_k] | q[BT][D_k] | v[BT][D_v] | g[BT] | beta[BT] | ss[BT][D_v / 8]   (float)
//
// With the convolution thread i (of 4 D_v) owns entries i and i + 4 D_v of
// the head's 2 D_k + D_v channels (gdn_conv_lane), reads each channel's
// mixed_qkv once per token and stages u = silu(conv) for the block; its
// conv state is read once and written once (the key head's q and k by the
// first value head only). Each SIMD-group then runs the block's tokens
// with no barrier between them, and with the norm sums o^2 over its 8 rows
// per token (xor 4, 8, 16) into ss[t][group]; after the barrier that ends
// the block lane 0 of each row adds the D_v / 8 sums of each token in
// order and writes y = ((o r) norm_w) act(z), rounded once. The next block
// writes ss only after its own first barrier. Two barriers per block, as
// without the core; the arithmetic is the core kernel's, in its order.
#define GDN_BLOCK_CORE 16  // tokens of a block with the core

template <typename A, typename S, int NSG>
kernel void gated_delta_net_prefill_blocked_core(
    GDN_STEP_BUFFERS,
    GDN_SEQ_BUFFERS,
    GDN_CORE_BUFFERS,
    threadgroup float  *stage      [[threadgroup(0)]],
    uint3 tg  [[threadgroup_position_in_grid]],
    uint3 tid [[thread_position_in_threadgroup]]) {
    const uint DK = 32 * NSG;
    const uint BT = GDN_BLOCK_CORE;
    const uint DV = p.d_v;
    const uint h = tg.y;
    const uint row = tid.y * GDN_PACKED_ROWS + tid.x / 4u;
    const uint u = tid.x % 4u;
    const uint ti = tid.y * 32u + tid.x;
    const uint n_threads = 4u * DV;
    const uint n_groups = DV / GDN_PACKED_ROWS;  // SIMD-groups of the threadgroup
    const gdn_head hd = gdn_head_of(p, slots, cu_seqlens, a_log, dt_bias, h, tg.z);
    if (hd.sq.skip) {
        return;  // the whole threadgroup, before any barrier: one sequence
    }
    const bool l2norm = (p.fused & GDN_FUSED_L2NORM) != 0u;
    const bool conv = (cp.flags & GDN_CORE_CONV) != 0u;
    const bool norm = (cp.flags & GDN_CORE_NORM) != 0u;

    threadgroup float *ks = stage;
    threadgroup float *qs = ks + BT * DK;
    threadgroup float *vs = qs + BT * DK;
    threadgroup float *gs = vs + BT * DV;
    threadgroup float *bs = gs + BT;
    threadgroup float *ps = bs + BT;  // the norm's sums [BT][D_v / 8]

    const ulong conv_base = hd.sq.state * ulong(GDN_CONV_K - 1) * ulong(cp.conv_dim);
    gdn_conv_lane<A, 2> cl;
    if (conv) {
        cl.begin(p, cp, conv_w, conv_in, conv_base, hd.kh, h, ti, n_threads);
    }
    const ulong srow = ((hd.sq.state * p.n_v_heads + h) * DV + row) * DK;
    float s[8 * NSG];
    gdn_packed_load_row<S, 2 * NSG>(s, state_in + srow, u);
    const float nw = norm ? load_elem(norm_w + row) : 1.0f;
    float oo[GDN_BLOCK_CORE];  // the block's outputs of the row before the norm

    for (uint t0 = 0; t0 < hd.sq.n_tokens; t0 += BT) {
        const uint nb = min(BT, hd.sq.n_tokens - t0);
        const uint tok0 = hd.sq.tok0 + t0;
        if (conv) {
            for (uint r = 0; r < nb; ++r) {
                cl.stage(mixed + ulong(tok0 + r) * cp.conv_dim, DK, qs + r * DK, ks + r * DK, vs + r * DV);
            }
        } else {
            for (uint i = ti; i < nb * DK; i += n_threads) {
                const uint src = ((tok0 + i / DK) * p.n_k_heads + hd.kh) * DK + i % DK;
                ks[i] = load_elem(k + src);
                qs[i] = load_elem(q + src);
            }
            for (uint i = ti; i < nb * DV; i += n_threads) {
                vs[i] = load_elem(v + ((tok0 + i / DV) * p.n_v_heads + h) * DV + i % DV);
            }
        }
        gdn_stage_gates(p, hd.gc, g, beta, gs, bs, tok0, h, nb, ti);
        threadgroup_barrier(mem_flags::mem_threadgroup);

        for (uint t = 0; t < nb; ++t) {
            float kr[8 * NSG];
            const gdn_staged_vec<float> kt = {ks + t * DK, u};
            const gdn_staged_vec<float> qt = {qs + t * DK, u};
            gdn_packed_load<2 * NSG>(kr, kt);
            const float vt = vs[t * DV + row];
            const float o = hd.scale * gdn_packed_step<2 * NSG>(s, kr, qt, vt, gs[t], bs[t], l2norm);
            if (norm) {
                const float ss = gdn_norm_rows_sum(o);
                if (tid.x == 0u) {
                    ps[t * n_groups + tid.y] = ss;
                }
                oo[t] = o;
            } else if (u == 0u) {
                store_elem(output + ((tok0 + t) * p.n_v_heads + h) * DV + row, o);
            }
        }

        // Nobody overwrites the block before every SIMD-group is done with
        // it (and, with the norm, every sum is in).
        threadgroup_barrier(mem_flags::mem_threadgroup);

        if (norm && u == 0u) {
            for (uint t = 0; t < nb; ++t) {
                const uint vo = ((tok0 + t) * p.n_v_heads + h) * DV + row;
                const float r = gdn_norm_factor(ps + t * n_groups, n_groups, DV, cp.eps);
                store_elem(output + vo, gdn_norm_apply(cp, oo[t], r, nw, load_elem(z + vo)));
            }
        }
    }

    gdn_packed_store<S, 2 * NSG>(state_out + srow, s, u);
    if (conv) {
        cl.end(p, cp, conv_out, conv_base, gdn_core_owns_key_head(p, h));
    }
}

// Instantiations: every activation and state type, NSG 2 and 4.
instantiate_gdn_types(instantiate_gdn_packed, "gated_delta_net_prefill_blocked", gated_delta_net_prefill_blocked)
instantiate_gdn_types(instantiate_gdn_packed, "gated_delta_net_prefill_blocked_core", gated_delta_net_prefill_blocked_core)
