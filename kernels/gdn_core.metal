// Gated DeltaNet layer core (SPEC section 13): the short convolution with
// its state, the fused step and the gated RMSNorm in one dispatch, for any
// number of tokens (decode and seq windows alike), D_k = 32, 64 or 128
// (NSG = D_k / 32), D_v a multiple of 8, at most 256.
//
// Two geometries, one entry point (GDN_CORE_GROUPED says which):
//
// Per value head: one threadgroup owns one value head h of one sequence,
// all D_v rows of its state, so that the norm's reduction over the D_v
// outputs of a token stays inside it: threadgroup (32, D_v / 8, 1), the
// packed layout of gdn_packed_common.metal (8 rows per SIMD-group, 4 lanes
// per row), grid (1, n_v_heads, n_seqs).
//
// Grouped (GDN_CORE_GROUPED): one threadgroup owns one key head kh of one
// sequence and the r = n_v_heads / n_k_heads value heads that read it:
// threadgroup (32, P D_v / 8, 1) with P a divisor of r (P D_v at most
// GDN_CORE_MAX_DV), grid (1, n_k_heads, n_seqs). It runs the r value heads
// in r / P passes of P heads side by side, each pass as the per-head
// geometry runs one head (SIMD-group y belongs to head y / (D_v / 8) of the
// pass), and is the only threadgroup that reads or writes the key head's
// conv state, so that state is read once, written once, and may be updated
// in place.
//
// Each threadgroup finds its sequence's slot, first token and token count
// (gdn_sequence) and skips padding.
//
// The convolution. A pass reads 2 D_k + P D_v channels of mixed_qkv: q and
// k of key head kh, v of its P value heads' rows. Thread i of the
// threadgroup (4 P D_v threads) owns channels i and i + 4 P D_v of that
// list; it keeps their K = 4 weights and the last K-1 inputs in registers
// for the whole window (read once from the conv state), and per token
// computes, in f32,
//   c = ((w0 x(t-3) + w1 x(t-2)) + w2 x(t-1)) + w3 x(t),  u = c / (1 + exp(-c))
// into threadgroup memory, where the lanes read q, k and v as they would
// from device memory (u is never rounded). After the window it writes its
// channels' last K-1 inputs to the conv state: the v channels always, the
// q and k channels only once per key head: per value head in the
// threadgroup of the first value head that reads key head kh, grouped in
// the last pass. A grouped pass after the first restarts the q and k
// channels from the conv state inputs the first pass read (kept in
// registers), so it reads no conv state but its own v channels, and
// recomputes q and k from mixed_qkv (with P = r there is one pass: q and k
// are computed once per token). Every channel is read and written by one
// thread, reads before writes: in place is safe in the grouped geometry.
// The per-value-head geometry's r threadgroups of a key head all read its
// q and k conv state while one of them writes it: there the two must be
// apart (gdn.ValidateCore; the dispatcher picks the grouped geometry for a
// conv state updated in place).
//
// The norm. After the step all 4 lanes of a row hold the row's output o
// (scaled, f32). simd_shuffle_xor by 4, 8 and 16 sums o^2 over the 8 rows of
// a SIMD-group, lane 0 puts it in threadgroup memory, and after one barrier
// every thread adds the D_v / 8 partial sums in order:
//   r = 1 / sqrt(ss / D_v + eps),  y = ((o r) norm_w[row]) act(z)
// act = silu or sigmoid. Lane 0 of the row rounds y once and writes it.
//
// Barriers per token: 1 after the convolution (u visible), 1 for the norm;
// without the norm a second barrier keeps the next token's u from
// overwriting this one's while it is read. The partial sums alternate
// between two arrays by the parity of the token counted over all passes,
// so one barrier suffices for them. Both geometries do the same f32
// operations in the same order per value head: their bytes are the same.
//
// Capture (speculative decoding): with GDN_CORE_CAPTURE the lanes also
// write S after every token to capture[..., t, s] as the packed capture
// kernel does. The conv state after token t is not written: it is the
// newest K-1 inputs of (conv state in, mixed_qkv of tokens 0..t), which a
// rollback copies from those buffers (gdn.RollbackCore).
//
// Buffers: 0-13 as every kernel (q, k, v unused with the convolution),
// 14 mixed_qkv, 15 conv weight [K, conv_dim], 16 conv_state_in, 17
// conv_state_out ([conv_dim, K-1, states], type A), 18 z, 19 norm_w (type A),
// 20 the core parameters.

#define GDN_CORE_MAX_DV 256
#define GDN_CORE_MAX_CHANNELS (2 * 128 + GDN_CORE_MAX_DV)

// A lane's view of D_k staged floats in threadgroup memory, read group by
// group as gdn_device_vec reads device memory.
struct gdn_tg_vec {
    threadgroup const float *p;
    uint u;
    inline float4 group(int c) const {
        return *(threadgroup const float4 *)(p + gdn_packed_col(c, u));
    }
};

// The value heads a threadgroup runs, head m being first + m * stride:
// grouped, the r = n_v_heads / n_k_heads value heads that read key head kh
// (kh r + m, or m n_k_heads + kh with the tiled map); per value head, h
// alone.
struct gdn_core_heads {
    uint first;
    uint stride;
    inline uint head(uint m) const { return first + m * stride; }
};

inline gdn_core_heads gdn_core_key_heads(constant gdn_params &p, uint kh) {
    if (p.head_map == 1u) {
        return {kh, p.n_k_heads};
    }
    return {kh * (p.n_v_heads / p.n_k_heads), 1u};
}

// The channel of mixed_qkv behind entry ch of a pass's channel list: q of
// key head kh (D_k), k of kh (D_k), then v of each of the pass's value
// heads hs.head(m0 + j) (D_v each).
inline uint gdn_core_channel(constant gdn_params &p, uint kh, gdn_core_heads hs, uint m0, uint ch) {
    const uint DK = p.d_k;
    if (ch < DK) {
        return kh * DK + ch;
    }
    if (ch < 2u * DK) {
        return p.n_k_heads * DK + kh * DK + (ch - DK);
    }
    const uint j = (ch - 2u * DK) / p.d_v;
    return 2u * p.n_k_heads * DK + hs.head(m0 + j) * p.d_v + (ch - 2u * DK - j * p.d_v);
}

// One window of tokens of one value head and sequence.
template <typename A, typename S, int NSG>
kernel void gated_delta_net_core_packed(
    GDN_STEP_BUFFERS,
    device S           *capture    [[buffer(9)]],
    GDN_SEQ_BUFFERS,
    GDN_CORE_BUFFERS,
    uint3 tg  [[threadgroup_position_in_grid]],
    uint3 tid [[thread_position_in_threadgroup]],
    uint3 tpg [[threads_per_threadgroup]]) {
    // float4 storage: the lanes read q and k from it 4 floats at a time,
    // which needs 16-byte alignment.
    threadgroup float4 tg_u4[GDN_CORE_MAX_CHANNELS / 4];
    threadgroup float *tg_u = (threadgroup float *)tg_u4;
    threadgroup float tg_ss[2][GDN_CORE_MAX_DV / GDN_PACKED_ROWS];

    const uint DK = 32 * NSG;
    const uint n_groups = p.d_v / GDN_PACKED_ROWS;  // SIMD-groups of one value head
    const uint hj = tid.y / n_groups;                // this thread's head in a pass
    const uint row = (tid.y % n_groups) * GDN_PACKED_ROWS + tid.x / 4u;
    const uint u = tid.x % 4u;
    const uint thread_i = tid.y * 32u + tid.x;
    const uint n_threads = 32u * tpg.y;             // 4 D_v per head of a pass
    const uint per_pass = tpg.y / n_groups;         // P value heads side by side
    const gdn_seq sq = gdn_sequence(p, slots, cu_seqlens, tg.z);
    if (sq.skip) {
        return;  // the whole threadgroup: one sequence
    }
    const bool grouped = (cp.flags & GDN_CORE_GROUPED) != 0u;
    const uint kh = grouped ? tg.y : gdn_key_head(p, tg.y);
    const gdn_core_heads hs = grouped ? gdn_core_key_heads(p, kh) : gdn_core_heads{tg.y, 0u};
    const uint n_passes = grouped ? p.n_v_heads / p.n_k_heads / per_pass : 1u;
    // The q and k conv state is written by one threadgroup per key head:
    // the grouped one, or the first value head's.
    const bool writes_qk = grouped || gdn_core_owns_key_head(p, tg.y);
    const float scale = gdn_out_scale(p);
    const bool conv = (cp.flags & GDN_CORE_CONV) != 0u;
    const bool norm = (cp.flags & GDN_CORE_NORM) != 0u;
    const bool l2norm = (p.fused & GDN_FUSED_L2NORM) != 0u;

    // The convolution's registers: two channels per thread; cx0 keeps the
    // q and k channels' conv state for the passes after the first.
    const uint n_ch = 2u * DK + per_pass * p.d_v;
    const ulong conv_base = sq.state * ulong(GDN_CONV_K - 1) * ulong(cp.conv_dim);
    float cw[2][GDN_CONV_K];
    float cx[2][GDN_CONV_K - 1];
    float cx0[2][GDN_CONV_K - 1];
    uint cch[2];
    uint parity = 0u;  // token count over the passes, mod 2

    for (uint pass = 0; pass < n_passes; ++pass) {
        const uint m0 = pass * per_pass;
        const uint h = hs.head(m0 + hj);
        const gdn_gate_consts gc = gdn_gate_constants(p, a_log, dt_bias, h);
        for (int e = 0; e < 2; ++e) {
            const uint ch = thread_i + uint(e) * n_threads;
            const bool qk = ch < 2u * DK;
            if (pass > 0u && qk) {
                for (int j = 0; j < GDN_CONV_K - 1; ++j) {
                    cx[e][j] = cx0[e][j];
                }
                continue;  // q and k: the same channel, weights and inputs
            }
            cch[e] = conv && ch < n_ch ? gdn_core_channel(p, kh, hs, m0, ch) : 0u;
            for (int j = 0; j < GDN_CONV_K; ++j) {
                cw[e][j] = 0.0f;
            }
            for (int j = 0; j < GDN_CONV_K - 1; ++j) {
                cx[e][j] = 0.0f;
            }
            if (conv && ch < n_ch) {
                for (int j = 0; j < GDN_CONV_K; ++j) {
                    cw[e][j] = load_elem(conv_w + cch[e] * GDN_CONV_K + uint(j));
                }
                for (int j = 0; j < GDN_CONV_K - 1; ++j) {
                    cx[e][j] = load_elem(conv_in + conv_base + ulong(j) * cp.conv_dim + cch[e]);
                }
            }
            for (int j = 0; j < GDN_CONV_K - 1; ++j) {
                cx0[e][j] = cx[e][j];
            }
        }

        const ulong srow = ((sq.state * p.n_v_heads + h) * p.d_v + row) * DK;
        float s[8 * NSG];
        gdn_packed_load_row<S, 2 * NSG>(s, state_in + srow, u);
        const float nw = norm ? load_elem(norm_w + row) : 1.0f;

        for (uint t = 0; t < sq.n_tokens; ++t, parity ^= 1u) {
            const uint tok = sq.tok0 + t;
            const uint vh = tok * p.n_v_heads + h;
            float kr[8 * NSG];
            float vr;
            float o;
            const float gt = gdn_gate(p, gc, load_elem(g + vh));
            const float bt = gdn_beta(p, load_elem(beta + vh));
            if (conv) {
                for (int e = 0; e < 2; ++e) {
                    const uint ch = thread_i + uint(e) * n_threads;
                    if (ch < n_ch) {
                        const float x = load_elem(mixed + ulong(tok) * cp.conv_dim + cch[e]);
                        float acc = cw[e][0] * cx[e][0];
                        acc = acc + cw[e][1] * cx[e][1];
                        acc = acc + cw[e][2] * cx[e][2];
                        acc = acc + cw[e][3] * x;
                        tg_u[ch] = acc / (1.0f + metal::exp(-acc));
                        cx[e][0] = cx[e][1];
                        cx[e][1] = cx[e][2];
                        cx[e][2] = x;
                    }
                }
                threadgroup_barrier(mem_flags::mem_threadgroup);
                const gdn_tg_vec kv = {tg_u + DK, u};
                const gdn_tg_vec qv = {tg_u, u};
                gdn_packed_load<2 * NSG>(kr, kv);
                vr = tg_u[2u * DK + hj * p.d_v + row];
                o = scale * gdn_packed_step<2 * NSG>(s, kr, qv, vr, gt, bt, l2norm);
            } else {
                const uint qk = (tok * p.n_k_heads + kh) * DK;
                const gdn_device_vec<A> kv = {k + qk, u};
                const gdn_device_vec<A> qv = {q + qk, u};
                gdn_packed_load<2 * NSG>(kr, kv);
                vr = load_elem(v + vh * p.d_v + row);
                o = scale * gdn_packed_step<2 * NSG>(s, kr, qv, vr, gt, bt, l2norm);
            }
            if (norm) {
                float ss = o * o;
                ss += simd_shuffle_xor(ss, ushort(4));
                ss += simd_shuffle_xor(ss, ushort(8));
                ss += simd_shuffle_xor(ss, ushort(16));
                if (tid.x == 0u) {
                    tg_ss[parity][tid.y] = ss;
                }
                threadgroup_barrier(mem_flags::mem_threadgroup);
                float sum = 0.0f;
                for (uint i = 0; i < n_groups; ++i) {
                    sum += tg_ss[parity][hj * n_groups + i];
                }
                const float r = 1.0f / metal::sqrt(sum / float(p.d_v) + cp.eps);
                o = ((o * r) * nw) * gdn_core_gate(cp, load_elem(z + vh * p.d_v + row));
            } else if (conv) {
                threadgroup_barrier(mem_flags::mem_threadgroup);
            }
            if (u == 0u) {
                store_elem(output + vh * p.d_v + row, o);
            }
            if (cp.flags & GDN_CORE_CAPTURE) {
                gdn_packed_store<S, 2 * NSG>(capture + (ulong(vh) * p.d_v + row) * DK, s, u);
            }
        }

        gdn_packed_store<S, 2 * NSG>(state_out + srow, s, u);
        if (conv) {
            const bool last = pass + 1u == n_passes;
            for (int e = 0; e < 2; ++e) {
                const uint ch = thread_i + uint(e) * n_threads;
                if (ch < n_ch && (ch >= 2u * DK || (writes_qk && last))) {
                    for (int j = 0; j < GDN_CONV_K - 1; ++j) {
                        store_elem(conv_out + conv_base + ulong(j) * cp.conv_dim + cch[e], cx[e][j]);
                    }
                }
            }
        }
    }
}

// instantiate_gdn_core(host, fn, A, S) makes fn<A, S, NSG> the entry points
// host_1, host_2 and host_4 (D_k = 32, 64, 128: with NSG = 1 a lane holds 8
// cells of its row, 2 groups of 4).
#define instantiate_gdn_core(host, fn, A, S) \
    template [[host_name(host "_1")]] kernel decltype(fn<A, S, 1>) fn<A, S, 1>; \
    instantiate_gdn_packed(host, fn, A, S)

// Instantiations: every activation and state type, NSG 1, 2 and 4.
instantiate_gdn_types(instantiate_gdn_core, "gated_delta_net_core_packed", gated_delta_net_core_packed)
