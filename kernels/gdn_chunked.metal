// Gated DeltaNet chunked prefill: the WY (UT transform) form of the delta
// rule, any number of tokens, D_k <= 128, D_v <= 128.
//
// Threadgroup (4 D_v, 1, 1), grid (n_v_heads, n_seqs, 1). The four
// threads 4i .. 4i+3 (lanes of one SIMD-group) own row i of S, lane l the
// cells j = l + 4c, in private memory (widened to float once) for the
// whole sequence: at most 32 floats each. The tokens go through C = 16 at
// a time (GDN_CHUNK), the last chunk of a sequence possibly shorter; the
// chunk's k, q and v are staged in threadgroup memory.
//
// The math. Within a chunk of n tokens r, s = 0 .. n-1, with S_0 the state
// before it (rows of S are D_k long, so S k is a column of D_v values),
//
//   Gamma[r][s] = exp(-(g_{s+1} + ... + g_r))   s <= r   (Gamma[r][r] = 1)
//   e_r         = exp(-(g_0 + ... + g_r))        the decay from S_0 to token r
//
// Every exponent is a sum of g >= 0 over a range of tokens, computed as
// such, never as the difference of two running sums: a product of decays
// that underflows is 0 (never inf / inf), and a huge g in one token costs
// the others no precision. The token recurrence (SPEC section 1) is
// S_r = alpha_r S_{r-1} + u_r k_r^T with u_r = beta_r (v_r - alpha_r S_{r-1} k_r),
// so
//
//   S_r = e_r S_0 + sum_{s<=r} Gamma[r][s] u_s k_s^T
//
// and, since alpha_r S_{r-1} k_r = e_r S_0 k_r + sum_{s<r} Gamma[r][s] (k_s . k_r) u_s,
//
//   u_r = beta_r (v_r - e_r (S_0 k_r)) - sum_{s<r} A[r][s] u_s,
//   A[r][s] = beta_r Gamma[r][s] (k_r . k_s):
//
// the unit lower-triangular system (I + A) U = diag(beta) (V - diag(e) K S_0^T),
// solved by forward substitution (its inverse is the UT transform T). Then
//
//   o_r = scale (e_r (S_0 q_r) + sum_{s<=r} M[r][s] u_s),  M[r][s] = Gamma[r][s] (q_r . k_s)
//   S_n = e_{n-1} S_0 + sum_s Gamma[n-1][s] u_s k_s^T
//
// Each row i of S takes part in all of it on its own: S_0 k_r and S_0 q_r
// are dot products of row i, and the substitution, the outputs and the
// update of row i need only u_{., i}, v_{., i} and the shared A, M, e,
// Gamma[n-1][.] and K. So the lanes of row i sum their cells' parts of
// S_0 k_r and S_0 q_r with two shuffle steps (gdn_row_sum), each computes
// the row's u (the same values in the same order) and updates its own
// cells; lane 0 writes the outputs. The threadgroup shares the staged
// chunk and the n x n matrices A and M (computed once per chunk, spread
// over the threads). Per chunk: stage k, q and the gates (barrier); with the fused
// norm, the inverse norms (barrier) and the normalised k and q (barrier);
// the decays, A, M and each row's S_0 k, S_0 q (barrier); then each thread
// solves, writes its outputs and updates its row (barrier before the next
// chunk overwrites the stage). Three barriers per chunk (five with the
// fused norm) against the prefill kernel's two per token. Everything runs
// in float.
//
// Threadgroup memory at index 0, in floats (the dispatcher reserves
// kernels.ChunkedThreadgroupMemory bytes):
//   k[C][D_k] | q[C][D_k] | v[C][D_v] | A[C][C] | M[C][C] | e[C] | last[C] | beta[C] | g[C] | rnorm[2C]
// (last[s] = Gamma[n-1][s]; rnorm: 1/|k_r|, then 1/|q_r|, with the fused
// norm). 27,008 bytes at D_k = D_v = 128, 14,720 at 64.
//
// The chunk length. Per row of S and token the kernel does
// D_k (3 + 1/C + (C+1)/D_v) + 2(C-1) + (C+1)/2 multiply-adds: S_0 k_r and
// S_0 q_r, the update, its share of A and M, the substitution (in each of
// the row's four lanes) and the outputs. At C = 16 that is 448 at
// D_k = D_v = 128 and 252 at 64, against the token-by-token kernel's
// 4 D_k (512, 256), spread over four threads instead of one; at C = 32
// the C-sized terms make it 306 at D = 64. The barriers, 3 per chunk, are
// 3/16 per token against 2; the shuffles 2 row sums of 2 steps per token.

// The layer core (gated_delta_net_chunked_core, SPEC section 13; the
// flags and buffers 14-20 of gdn_core_common.metal). The threadgroup holds
// all D_v rows of its value head, so both parts stay in it.
//   Convolution: thread t owns entries t and t + 4 D_v of the head's 2 D_k
//   + D_v channels (q, k of its key head, v of its own), with their
//   weights and last K-1 inputs in registers for the whole sequence
//   (gdn_conv_lane: read once from the conv state, written once at the
//   end, the q and k channels by the first value head of the key head
//   only). Staging a chunk reads each channel's mixed_qkv once per token
//   and stores u = silu(conv) into the stage in place of q, k and v; the
//   staging barrier makes it visible: no barrier added. A sequence
//   shorter than K-1 tokens leaves the old state shifted.
//   Norm: lane 0 of row i keeps o_r (scaled, f32) for the chunk's tokens;
//   after the update each SIMD-group sums o_r^2 over its 8 rows (xor 4,
//   8, 16: 3 shuffle steps per token) into ps[r][group]; the barrier that
//   ends the chunk makes the sums visible, and lane 0 adds the D_v / 8 of
//   its token in order, r = 1 / sqrt(ss / D_v + eps), and writes y =
//   ((o r) norm_w) act(z), rounded once. The next chunk writes ps only
//   after its own first barrier: no barrier added either.
// With grouped heads the value heads of a key head read its conv state
// while the first writes it, with no order between threadgroups: in place
// is refused there (gdn validation).

#define GDN_CHUNK 16
#define GDN_CHUNK_LANES 4   // threads per row of S
#define GDN_CHUNK_CELLS 32  // cells per lane: D_k / GDN_CHUNK_LANES at D_k = 128
#define GDN_CHUNK_CONV_CHANNELS 2  // the convolution's channels per thread (with the core)

// exp(-(g[from] + ... + g[to])), summed in order; 1 for an empty range.
inline float gdn_range_decay(threadgroup const float *g, uint from, uint to) {
    float sum = 0.0f;
    for (uint u = from; u <= to; ++u) {
        sum += g[u];
    }
    return metal::exp(-sum);
}

// The sum of x over the four lanes of a row (lanes 4i .. 4i+3 of the
// SIMD-group), in every one of them: two shuffle steps.
inline float gdn_row_sum(float x) {
    x += simd_shuffle_xor(x, 1);
    x += simd_shuffle_xor(x, 2);
    return x;
}

// One value head of one sequence, every chunk of its tokens; with CORE the
// layer core's options of c.flags (see the top of the file).
template <typename A, typename S, bool CORE>
inline void gdn_chunked_head(GDN_PREFILL_HEAD_PARAMS) {
    const uint d_k = p.d_k;
    const uint d_v = p.d_v;
    const uint t = tid.x;                       // thread in the threadgroup
    const uint nt = GDN_CHUNK_LANES * d_v;      // threads in the threadgroup
    const uint i = t / GDN_CHUNK_LANES;         // the row of S
    const uint lane = t % GDN_CHUNK_LANES;      // cells j = lane + 4c of the row
    const uint cells = d_k > lane ? (d_k - lane + GDN_CHUNK_LANES - 1) / GDN_CHUNK_LANES : 0;
    const uint h = tg.x;
    // Where the sequence lives: its state, its first token and its length
    // (a slot of a state pool, packed tokens: gdn_sequence). Its chunks
    // start at its own first token, so its results do not depend on the
    // other sequences of the dispatch or on how they are packed.
    const gdn_head hd = gdn_head_of(p, slots, cu_seqlens, a_log, dt_bias, h, tg.y);
    if (hd.sq.skip) {
        return;  // the whole threadgroup: one sequence
    }
    const bool l2norm = (p.fused & GDN_FUSED_L2NORM) != 0u;
    const uint C = GDN_CHUNK;
    const bool conv = CORE && (cp->flags & GDN_CORE_CONV) != 0u;
    const bool norm = CORE && (cp->flags & GDN_CORE_NORM) != 0u;

    threadgroup float *ks = stage;
    threadgroup float *qs = ks + C * d_k;
    threadgroup float *vs = qs + C * d_k;  // v[C][D_v]
    threadgroup float *am = vs + C * d_v;  // A[r][s], s < r
    threadgroup float *mm = am + C * C;    // M[r][s], s <= r
    threadgroup float *es = mm + C * C;    // e_r
    threadgroup float *ls = es + C;        // Gamma[n-1][s]
    threadgroup float *bs = ls + C;        // beta_r
    threadgroup float *gs = bs + C;        // g_r
    threadgroup float *rn = gs + C;        // 1/|k_r|, 1/|q_r|
    threadgroup float *ps = rn + 2 * C;    // the norm's partial sums [C][D_v / 8] (CORE)

    const uint first = hd.sq.tok0;
    const uint len = hd.sq.n_tokens;

    const ulong row = ((hd.sq.state * p.n_v_heads + h) * d_v + i) * d_k + lane;
    float s[GDN_CHUNK_CELLS];  // S[i][lane + 4c]
    for (uint c = 0; c < cells; ++c) {
        s[c] = load_elem(state_in + row + GDN_CHUNK_LANES * c);
    }

    // The convolution's registers (CORE): two channels of the head's list
    // per thread, for the whole sequence.
    const ulong conv_base = hd.sq.state * ulong(GDN_CONV_K - 1) * ulong(CORE ? cp->conv_dim : 0u);
    gdn_conv_lane<A, GDN_CHUNK_CONV_CHANNELS> cl;
    if (conv) {
        cl.begin(p, *cp, conv_w, conv_in, conv_base, hd.kh, h, t, nt);
    }
    const uint n_groups = d_v / 8u;        // SIMD-groups of the threadgroup (CORE, norm)
    const float nw = norm ? load_elem(norm_w + i) : 1.0f;

    float s0k[GDN_CHUNK];  // (S_0 k_r)_i
    float s0q[GDN_CHUNK];  // (S_0 q_r)_i
    float u[GDN_CHUNK];   // u_r, row i
    float oo[GDN_CHUNK];  // the outputs o_r of row i before the norm (lane 0, CORE)

    for (uint t0 = 0; t0 < len; t0 += C) {
        const uint n = min(C, len - t0);
        const uint tok0 = first + t0;

        // Stage the chunk's k, q, v and gates: read, or with the
        // convolution made from mixed_qkv (u = silu(conv), in f32).
        if (conv) {
            for (uint r = 0; r < n; ++r) {
                cl.stage(mixed + ulong(tok0 + r) * cp->conv_dim, d_k, qs + r * d_k, ks + r * d_k, vs + r * d_v);
            }
        } else {
            for (uint r = 0; r < n; ++r) {
                const uint qk = ((tok0 + r) * p.n_k_heads + hd.kh) * d_k;
                for (uint j = t; j < d_k; j += nt) {
                    ks[r * d_k + j] = load_elem(k + qk + j);
                    qs[r * d_k + j] = load_elem(q + qk + j);
                }
                const uint vo = ((tok0 + r) * p.n_v_heads + h) * d_v;
                for (uint j = t; j < d_v; j += nt) {
                    vs[r * d_v + j] = load_elem(v + vo + j);
                }
            }
        }
        for (uint r = t; r < n; r += nt) {
            const uint vh = (tok0 + r) * p.n_v_heads + h;
            gs[r] = gdn_gate(p, hd.gc, load_elem(g + vh));
            bs[r] = gdn_beta(p, load_elem(beta + vh));
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);

        // The fused L2 norm, in place: inverse norms, then the products.
        if (l2norm) {
            for (uint x = t; x < 2 * n; x += nt) {
                threadgroup const float *vec = x < n ? ks + x * d_k : qs + (x - n) * d_k;
                float ss = 0.0f;
                for (uint j = 0; j < d_k; ++j) {
                    ss += vec[j] * vec[j];
                }
                rn[x] = gdn_inv_norm(ss);
            }
            threadgroup_barrier(mem_flags::mem_threadgroup);
            for (uint r = 0; r < n; ++r) {
                for (uint j = t; j < d_k; j += nt) {
                    ks[r * d_k + j] = ks[r * d_k + j] * rn[r];
                    qs[r * d_k + j] = qs[r * d_k + j] * rn[n + r];
                }
            }
            threadgroup_barrier(mem_flags::mem_threadgroup);
        }

        // The decays and the n x n matrices, spread over the threads.
        for (uint r = t; r < n; r += nt) {
            es[r] = gdn_range_decay(gs, 0, r);
            ls[r] = gdn_range_decay(gs, r + 1, n - 1);
        }
        for (uint x = t; x < n * n; x += nt) {
            const uint r = x / n;
            const uint c = x % n;
            if (c > r) {
                continue;
            }
            const float gamma = gdn_range_decay(gs, c + 1, r);
            threadgroup const float *kc = ks + c * d_k;
            threadgroup const float *kr = ks + r * d_k;
            threadgroup const float *qr = qs + r * d_k;
            float kk = 0.0f;
            float qk = 0.0f;
            for (uint j = 0; j < d_k; ++j) {
                kk += kr[j] * kc[j];
                qk += qr[j] * kc[j];
            }
            am[r * C + c] = c < r ? bs[r] * (gamma * kk) : 0.0f;
            mm[r * C + c] = gamma * qk;
        }
        // Row i of S_0 against every k_r and q_r of the chunk: each lane
        // its cells, then the row's four lanes summed.
        for (uint r = 0; r < n; ++r) {
            threadgroup const float *kr = ks + r * d_k + lane;
            threadgroup const float *qr = qs + r * d_k + lane;
            float a = 0.0f;
            float b = 0.0f;
            for (uint c = 0; c < cells; ++c) {
                a += s[c] * kr[GDN_CHUNK_LANES * c];
                b += s[c] * qr[GDN_CHUNK_LANES * c];
            }
            s0k[r] = gdn_row_sum(a);
            s0q[r] = gdn_row_sum(b);
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);

        // Forward substitution for u, row i, and the outputs: the row's
        // four lanes compute the same values; lane 0 writes them (with the
        // norm, keeps them for it).
        for (uint r = 0; r < n; ++r) {
            float ur = bs[r] * (vs[r * d_v + i] - es[r] * s0k[r]);
            for (uint c = 0; c < r; ++c) {
                ur -= am[r * C + c] * u[c];
            }
            u[r] = ur;
            if (lane == 0) {
                float o = es[r] * s0q[r];
                for (uint c = 0; c <= r; ++c) {
                    o += mm[r * C + c] * u[c];
                }
                if (norm) {
                    oo[r] = hd.scale * o;
                } else {
                    store_elem(output + ((tok0 + r) * p.n_v_heads + h) * d_v + i, hd.scale * o);
                }
            }
        }
        // The norm's sums of squares per token and SIMD-group of 8 rows,
        // read after the barrier that ends the chunk.
        if (norm) {
            for (uint r = 0; r < n; ++r) {
                const float ss = gdn_norm_rows_sum(lane == 0 ? oo[r] : 0.0f);
                if (t % 32u == 0u) {
                    ps[r * n_groups + t / 32u] = ss;
                }
            }
        }

        // S_n = e_{n-1} S_0 + sum_s Gamma[n-1][s] u_s k_s^T, the lane's cells of row i.
        for (uint r = 0; r < n; ++r) {
            u[r] = ls[r] * u[r];
        }
        const float decay = es[n - 1];
        for (uint c = 0; c < cells; ++c) {
            const uint j = lane + GDN_CHUNK_LANES * c;
            float x = decay * s[c];
            for (uint r = 0; r < n; ++r) {
                x += u[r] * ks[r * d_k + j];
            }
            s[c] = x;
        }

        // Nobody restages before every row is done with this chunk (and,
        // with the norm, every partial sum is in).
        threadgroup_barrier(mem_flags::mem_threadgroup);

        // The gated norm: y = ((o r) norm_w) act(z), rounded once. The next
        // chunk writes the partial sums only after its first barrier.
        if (norm && lane == 0) {
            for (uint r = 0; r < n; ++r) {
                const uint vo = ((tok0 + r) * p.n_v_heads + h) * d_v + i;
                const float rr = gdn_norm_factor(ps + r * n_groups, n_groups, d_v, cp->eps);
                store_elem(output + vo, gdn_norm_apply(*cp, oo[r], rr, nw, load_elem(z + vo)));
            }
        }
    }

    for (uint c = 0; c < cells; ++c) {
        store_elem(state_out + row + GDN_CHUNK_LANES * c, s[c]);
    }
    if (conv) {
        cl.end(p, *cp, conv_out, conv_base, gdn_core_owns_key_head(p, h));
    }
}

// The entry points, without and with the layer core (buffers 14-20 of
// gdn_core_common.metal).
GDN_PREFILL_KERNELS(gated_delta_net_chunked, gated_delta_net_chunked_core, gdn_chunked_head)

// Every combination of activation and state type (gdn_common.metal), each
// without and with the layer core.
instantiate_gdn_types(instantiate_gdn, "gated_delta_net_chunked", gated_delta_net_chunked)
instantiate_gdn_types(instantiate_gdn, "gated_delta_net_chunked_core", gated_delta_net_chunked_core)
