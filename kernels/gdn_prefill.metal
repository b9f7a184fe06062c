// Gated DeltaNet prefill: any number of tokens, D_k <= 128, D_v <= 128.
//
// Threadgroup (D_v, 1, 1), grid (n_v_heads, n_seqs, 1). Thread i owns row i
// of S in private memory (widened to float once) for the whole token loop.
// Each token's k and q (shared by every row) and v are widened and staged in
// threadgroup memory at index 0, laid out k[D_k] | q[D_k] | v[D_v], inside
// the (2*D_k + 2*D_v) floats the dispatcher reserves.
//
// With the fused L2 norm the staged q and k stay raw: with
// r_k = 1 / sqrt(sum_j k_j^2 + eps) (r_q likewise), S k^ = r_k (S k),
// delta k^ = (r_k delta) k and S q^ = r_q (S q), so the norm costs three
// multiplies per row. The sums of squares are taken once per token while
// staging: each thread adds the squares it staged, simd_sum adds up each
// SIMD group (32 threads), and with more than one SIMD group lane 0 of each
// leaves its pair of sums after v in threadgroup memory, which every thread
// adds in SIMD-group order after the barrier.

// The layer core (gated_delta_net_prefill_core, SPEC section 13; flags
// and buffers 14-20 of gdn_core_common.metal). The threadgroup holds all
// D_v rows of its value head, so both parts stay in it.
//   Convolution: thread i owns entries i + e D_v (e < 4) of the head's
//   2 D_k + D_v channels (q, k of its key head, v of its own), their
//   weights and last K-1 inputs in registers for the whole sequence
//   (gdn_conv_lane: the conv state read once, written once at the end, the
//   q and k channels by the first value head of the key head only); per
//   token it reads each channel's mixed_qkv once and stages u =
//   silu(conv) in place of k, q and v (and, with the fused L2 norm, adds
//   the squares of its k and q channels). No barrier added.
//   Norm: simd_sum adds o^2 over each SIMD-group's rows, lane 0 leaves it
//   in threadgroup memory after the other sums, and after the barrier that
//   ends the token every thread adds the groups' sums in order, r = 1 /
//   sqrt(ss / D_v + eps), and writes y = ((o r) norm_w) act(z), rounded
//   once. The next token writes those sums only after its first barrier:
//   no barrier added either.
// With grouped heads the value heads of a key head read its conv state
// while the first writes it, with no order between threadgroups: in place
// is refused there (gdn validation).

#define GDN_MAX_DK 128
#define GDN_PREFILL_CONV_CHANNELS 4  // the convolution's channels per thread (with the core)

// One value head of one sequence, token by token; with CORE the layer
// core's options of cp->flags (see the top of the file).
template <typename A, typename S, bool CORE>
inline void gdn_prefill_head(GDN_PREFILL_HEAD_PARAMS) {
    const uint d_k = p.d_k;
    const uint d_v = p.d_v;
    const uint i = tid.x;
    const uint h = tg.x;
    const gdn_head hd = gdn_head_of(p, slots, cu_seqlens, a_log, dt_bias, h, tg.y);
    if (hd.sq.skip) {
        return;  // the whole threadgroup: one sequence
    }
    const bool l2norm = (p.fused & GDN_FUSED_L2NORM) != 0u;
    const bool conv = CORE && (cp->flags & GDN_CORE_CONV) != 0u;
    const bool norm = CORE && (cp->flags & GDN_CORE_NORM) != 0u;

    threadgroup float *ks = stage;
    threadgroup float *qs = stage + d_k;
    threadgroup float *vs = stage + 2 * d_k;
    // The per-SIMD-group sums of squares, k then q: 2 * groups floats, fewer
    // than the D_v floats reserved after v when there is more than one group.
    threadgroup float *sums = stage + 2 * d_k + d_v;
    // With the core's norm, the per-SIMD-group sums of o^2 (groups floats
    // after those D_v).
    threadgroup float *nsums = stage + 2 * d_k + 2 * d_v;
    const uint groups = (d_v + 31) / 32;
    const uint lane = i % 32;
    const uint group = i / 32;

    const ulong row = ((hd.sq.state * p.n_v_heads + h) * d_v + i) * d_k;
    float s[GDN_MAX_DK];
    for (uint j = 0; j < d_k; ++j) {
        s[j] = load_elem(state_in + row + j);
    }

    // The convolution's registers (CORE).
    const ulong conv_base = hd.sq.state * ulong(GDN_CONV_K - 1) * ulong(CORE ? cp->conv_dim : 0u);
    gdn_conv_lane<A, GDN_PREFILL_CONV_CHANNELS> cl;
    if (conv) {
        cl.begin(p, *cp, conv_w, conv_in, conv_base, hd.kh, h, i, d_v);
    }
    const float nw = norm ? load_elem(norm_w + i) : 1.0f;

    for (uint t = 0; t < hd.sq.n_tokens; ++t) {
        const uint tok = hd.sq.tok0 + t;
        const uint qk = (tok * p.n_k_heads + hd.kh) * d_k;
        const uint vh = tok * p.n_v_heads + h;

        float ssk = 0.0f;
        float ssq = 0.0f;
        if (conv) {
            device const A *xr = mixed + ulong(tok) * cp->conv_dim;
            for (int e = 0; e < GDN_PREFILL_CONV_CHANNELS; ++e) {
                if (cl.has(e)) {
                    const uint ch = cl.ch[e];
                    const float y = cl.step(e, load_elem(xr + cl.src[e]));
                    if (ch < d_k) {
                        qs[ch] = y;
                        ssq += y * y;
                    } else if (ch < 2u * d_k) {
                        ks[ch - d_k] = y;
                        ssk += y * y;
                    } else {
                        vs[ch - 2u * d_k] = y;
                    }
                }
            }
        } else {
            for (uint j = i; j < d_k; j += d_v) {
                const float kj = load_elem(k + qk + j);
                const float qj = load_elem(q + qk + j);
                ks[j] = kj;
                qs[j] = qj;
                ssk += kj * kj;
                ssq += qj * qj;
            }
            vs[i] = load_elem(v + vh * d_v + i);
        }
        if (l2norm) {
            ssk = simd_sum(ssk);
            ssq = simd_sum(ssq);
            if (groups > 1 && lane == 0) {
                sums[2 * group] = ssk;
                sums[2 * group + 1] = ssq;
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);

        float rk = 1.0f;
        float rq = 1.0f;
        if (l2norm) {
            if (groups > 1) {
                ssk = 0.0f;
                ssq = 0.0f;
                for (uint sg = 0; sg < groups; ++sg) {
                    ssk += sums[2 * sg];
                    ssq += sums[2 * sg + 1];
                }
            }
            rk = gdn_inv_norm(ssk);
            rq = gdn_inv_norm(ssq);
        }
        const float gt = gdn_gate(p, hd.gc, load_elem(g + vh));
        const float bt = gdn_beta(p, load_elem(beta + vh));

        // Decay first, then delta from the decayed state. With the core the
        // two dot products are summed in four parts, cells j of quarter
        // (j / 4) % 4 each (the 4 lanes of a row in the packed layout),
        // then (0 + 1) + (2 + 3): the norm divides every output by its row
        // set's rms, so the error of a token whose outputs are small against
        // S and q grows with it: on the golden layer set one running sum of
        // D_k products is past the contract's f32 bound (1.1e-6 against
        // 1e-6), these four parts well inside it (1.7e-7).
        const float alpha = metal::exp(-gt);
        float sk = 0.0f;
        if (CORE) {
            float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            for (uint j = 0; j < d_k; ++j) {
                s[j] = alpha * s[j];
                part[(j / 4u) % 4u] += s[j] * ks[j];
            }
            sk = (part[0] + part[1]) + (part[2] + part[3]);
        } else {
            for (uint j = 0; j < d_k; ++j) {
                s[j] = alpha * s[j];
                sk += s[j] * ks[j];
            }
        }
        float delta = bt * (vs[i] - rk * sk);
        if (l2norm) {
            delta = delta * rk;
        }
        float sq = 0.0f;
        if (CORE) {
            float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            for (uint j = 0; j < d_k; ++j) {
                s[j] = s[j] + delta * ks[j];
                part[(j / 4u) % 4u] += s[j] * qs[j];
            }
            sq = (part[0] + part[1]) + (part[2] + part[3]);
        } else {
            for (uint j = 0; j < d_k; ++j) {
                s[j] = s[j] + delta * ks[j];
                sq += s[j] * qs[j];
            }
        }
        const float o = hd.scale * (rq * sq);
        float ss = 0.0f;
        if (norm) {
            ss = simd_sum(o * o);
            if (groups > 1 && lane == 0) {
                nsums[group] = ss;
            }
        } else {
            store_elem(output + vh * d_v + i, o);
        }

        // Nobody overwrites the staged token before every row is done with it
        // (and, with the norm, every sum is in).
        threadgroup_barrier(mem_flags::mem_threadgroup);

        if (norm) {
            if (groups > 1) {
                ss = 0.0f;
                for (uint sg = 0; sg < groups; ++sg) {
                    ss += nsums[sg];
                }
            }
            const float r = gdn_norm_rms(ss, d_v, cp->eps);
            store_elem(output + vh * d_v + i, gdn_norm_apply(*cp, o, r, nw, load_elem(z + vh * d_v + i)));
        }
    }

    for (uint j = 0; j < d_k; ++j) {
        store_elem(state_out + row + j, s[j]);
    }
    if (conv) {
        cl.end(p, *cp, conv_out, conv_base, gdn_core_owns_key_head(p, h));
    }
}

// The entry points, without and with the layer core (buffers 14-20 of
// gdn_core_common.metal).
GDN_PREFILL_KERNELS(gated_delta_net, gated_delta_net_prefill_core, gdn_prefill_head)

// Every combination of activation and state type (gdn_common.metal), each
// without and with the layer core.
instantiate_gdn_types(instantiate_gdn, "gated_delta_net", gated_delta_net)
instantiate_gdn_types(instantiate_gdn, "gated_delta_net_prefill_core", gated_delta_net_prefill_core)
