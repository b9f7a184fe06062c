// Softmax attention over a KV cache (SPEC section 14's attention): the
// cache append, decode split over the cache with its reduction, and the
// tiled causal prefill. q k^T is scaled, the softmax is online (a running
// maximum and sum per query, never the whole score matrix), and scores,
// softmax and accumulation are float; loads widen to float and the output
// is rounded once to the activation type A (float, half or bf16_t).
//
// Layouts, innermost dimension first:
//   q, output         [head_dim, n_heads, n_tokens]              A
//   k, v              [head_dim, n_kv_heads, n_tokens]           A (the step's new keys and values)
//   k_cache, v_cache  [head_dim, max_len, n_kv_heads, n_slots]   A
//   gate              element d of head h of token t at gate[(t * n_heads + h) * gate_stride + d]
//                     (gate_stride head_dim: its own tensor; 2 * head_dim: q_proj's output of
//                     the hybrids, [query | gate] per head, the view starting at the first gate)
//   slots             [n_seqs] int32: the cache slot of each sequence
//   cache_lens        [n_seqs] int32: the tokens the slot held before this step
//   cu_seqlens        [n_seqs + 1] int32 (varlen): sequence s owns tokens cu_seqlens[s] ..
//                     cu_seqlens[s+1] - 1; otherwise each owns n_tokens / n_seqs tokens in order
//   partial_o         [head_dim, n_splits, n_heads, n_seqs]      float (decode with n_splits > 1)
//   partial_ml        [2, n_splits, n_heads, n_seqs]             float: the split's maximum and sum
//
// Each KV head of a slot is one contiguous run of max_len * head_dim
// elements, so decode streams a sequence's keys (and values) as a single
// coalesced range, the layout MLX's caches have ([B, n_kv_heads, L, D]).
// Query token i of a sequence sits at position cache_lens[s] + i and sees
// the keys at positions 0 .. cache_lens[s] + i: the append runs first, so
// the cache holds the step's own keys too, and a chunk of a prompt after
// earlier chunks attends to them as well (chunked prefill). Query head h
// reads KV head h / (n_heads / n_kv_heads) (HF's repeat_kv).
//
// A sequence whose slot is negative (padding) or not below n_slots, whose
// cache_lens is negative or leaves no room for its tokens in max_len,
// which has no tokens, or whose cu_seqlens range decreases or passes
// n_tokens, is skipped: it reads and writes nothing, so no index the host
// did not check is dereferenced.
//
// Buffer indices: 0 q (append: k), 1 k_cache (append: v), 2 v_cache
// (append: k_cache), 3 output (append: v_cache), 4 parameters, 5 slots,
// 6 cache_lens, 7 cu_seqlens, 8 gate, 9 partial_o, 10 partial_ml.

// The parameter block bound with setBytes at buffer index 4.
struct attn_params {
    uint  head_dim;
    uint  n_heads;
    uint  n_kv_heads;
    uint  n_tokens;     // query tokens of the dispatch, all sequences
    uint  n_seqs;
    uint  n_slots;      // slots of the cache pool
    uint  max_len;      // tokens a slot holds
    uint  varlen;       // 1: cu_seqlens says which tokens each sequence owns
    float scale;        // applied to q k^T, usually 1 / sqrt(head_dim)
    uint  gate_stride;  // 0: no gate; else out *= sigmoid(gate), see the layout
    uint  n_splits;     // decode: partitions of the cache; 1 writes the output directly
    uint  reserved;
};

// The largest GQA ratio n_heads / n_kv_heads: the decode kernel keeps this
// many queries of one KV head in registers.
#define ATTN_MAX_GROUP 8

// Decode takes the cache in blocks of this many keys (one per lane).
#define ATTN_DECODE_BLOCK 32

// Where one sequence of a dispatch lives.
struct attn_seq {
    uint cache;     // its slot's first element in k_cache and v_cache
    uint tok0;      // its first token along the token axis
    uint n_tokens;  // its tokens in this dispatch
    uint past;      // tokens the cache held before them
    bool skip;
};

inline attn_seq attn_sequence(constant attn_params &p, device const int *slots,
                              device const int *cache_lens,
                              device const int *cu_seqlens, uint s) {
    const uint per = p.n_tokens / p.n_seqs;
    attn_seq sq = {0u, s * per, per, 0u, false};
    if (p.varlen != 0u) {
        const int first = cu_seqlens[s];
        const int end = cu_seqlens[s + 1];
        sq.skip = first < 0 || end <= first || uint(end) > p.n_tokens;
        sq.tok0 = uint(first);
        sq.n_tokens = uint(end - first);
    }
    const int slot = slots[s];
    const int past = cache_lens[s];
    sq.skip = sq.skip || sq.n_tokens == 0u || slot < 0 || uint(slot) >= p.n_slots ||
              past < 0 || uint(past) > p.max_len || sq.n_tokens > p.max_len - uint(past);
    sq.past = uint(past);
    sq.cache = uint(slot) * p.n_kv_heads * p.max_len * p.head_dim;
    return sq;
}

// The first element of KV head g of a sequence's slot.
inline uint attn_kv_base(constant attn_params &p, attn_seq sq, uint g) {
    return sq.cache + g * p.max_len * p.head_dim;
}

// Writes element d of the output row of query head h of token tok: x,
// times sigmoid of the gate when there is one, rounded once.
template <typename T>
inline void attn_store(constant attn_params &p, device T *out,
                       device const T *gate, uint tok, uint h, uint d, float x) {
    const uint row = tok * p.n_heads + h;
    if (p.gate_stride != 0u) {
        x = x / (1.0f + metal::exp(-load_elem(gate + row * p.gate_stride + d)));
    }
    store_elem(out + row * p.head_dim + d, x);
}

// ---------------------------------------------------------------------------
// Append: writes the step's k and v into the cache, token i of sequence s
// at position cache_lens[s] + i of its slot. Threadgroup (head_dim, 1, 1),
// grid (n_kv_heads, tokens of the longest sequence, n_seqs): thread d of
// threadgroup (g, i, s) copies element d of KV head g of that token.
template <typename T>
kernel void attn_kv_append(
    device const T      *k          [[buffer(0)]],
    device const T      *v          [[buffer(1)]],
    device T            *k_cache    [[buffer(2)]],
    device T            *v_cache    [[buffer(3)]],
    constant attn_params &p         [[buffer(4)]],
    device const int    *slots      [[buffer(5)]],
    device const int    *cache_lens [[buffer(6)]],
    device const int    *cu_seqlens [[buffer(7)]],
    uint3 tg  [[threadgroup_position_in_grid]],
    uint3 tid [[thread_position_in_threadgroup]]) {
    const attn_seq sq = attn_sequence(p, slots, cache_lens, cu_seqlens, tg.z);
    if (sq.skip || tg.y >= sq.n_tokens) {
        return;
    }
    const uint g = tg.x, d = tid.x;
    const uint src = ((sq.tok0 + tg.y) * p.n_kv_heads + g) * p.head_dim + d;
    const uint dst = attn_kv_base(p, sq, g) + (sq.past + tg.y) * p.head_dim + d;
    k_cache[dst] = k[src];
    v_cache[dst] = v[src];
}

// ---------------------------------------------------------------------------
// Decode: one query token per sequence (n_tokens == n_seqs, no varlen)
// against its whole cache, split over the cache as MLX's sdpa_vector_2pass
// and llama.cpp's flash_attn_ext_vec do, so that a long cache keeps the
// GPU busy with a single sequence.
//
// Threadgroup (32, 1, 1), grid (n_kv_heads, n_splits, n_seqs). The SIMD
// group of (g, i, s) takes the r = n_heads / n_kv_heads query heads that
// read KV head g together, so each key and value is loaded once for all r
// of them: lane x holds elements x, x + 32, ... of each query (D / 32
// each) and of each running output. The cache is read in blocks of 32
// keys: per key the lanes load one coalesced row, and a simd_sum per query
// head gives its score to the lane of that key; the block's softmax then
// runs across lanes (simd_max, one exp per lane), and the values follow,
// each weight broadcast with simd_shuffle.
//
// Split i takes blocks [i * b, (i + 1) * b) of the sequence's
// ceil(n_keys / 32) blocks, b = ceil(blocks / n_splits), so a short
// cache uses fewer splits (attn_decode_splits) and the host never needs
// the lengths. With n_splits == 1 the kernel writes the output; otherwise
// each split writes its unnormalised output and its maximum and sum, and
// attn_decode_reduce combines them.

// The splits a sequence of n_keys keys uses and the blocks each takes.
struct attn_split {
    uint used;    // splits with keys
    uint blocks;  // blocks per split
};

inline attn_split attn_decode_splits(uint n_keys, uint n_splits) {
    const uint blocks = (n_keys + ATTN_DECODE_BLOCK - 1) / ATTN_DECODE_BLOCK;
    const uint per = (blocks + n_splits - 1) / n_splits;
    return {(blocks + per - 1) / per, per};
}

template <typename T, int D>
kernel void attn_decode(
    device const T      *q          [[buffer(0)]],
    device const T      *k_cache    [[buffer(1)]],
    device const T      *v_cache    [[buffer(2)]],
    device T            *out        [[buffer(3)]],
    constant attn_params &p         [[buffer(4)]],
    device const int    *slots      [[buffer(5)]],
    device const int    *cache_lens [[buffer(6)]],
    device const T      *gate       [[buffer(8)]],
    device float        *partial_o  [[buffer(9)]],
    device float        *partial_ml [[buffer(10)]],
    uint3 tg   [[threadgroup_position_in_grid]],
    uint  lane [[thread_index_in_simdgroup]]) {
    constexpr int E = D / 32;
    const attn_seq sq = attn_sequence(p, slots, cache_lens, nullptr, tg.z);
    if (sq.skip) {
        return;
    }
    const uint g = tg.x, split = tg.y, tok = sq.tok0;
    const uint r = p.n_heads / p.n_kv_heads;
    const uint n_keys = sq.past + 1u;
    const attn_split sp = attn_decode_splits(n_keys, p.n_splits);
    if (split >= sp.used) {
        return;
    }
    const uint key0 = split * sp.blocks * ATTN_DECODE_BLOCK;
    const uint key_end = min(n_keys, key0 + sp.blocks * ATTN_DECODE_BLOCK);

    float qr[ATTN_MAX_GROUP][E];
    float acc[ATTN_MAX_GROUP][E];
    float m[ATTN_MAX_GROUP];
    float l[ATTN_MAX_GROUP];
    for (uint j = 0; j < ATTN_MAX_GROUP; ++j) {
        for (int e = 0; e < E; ++e) {
            qr[j][e] = j < r ? load_elem(q + (tok * p.n_heads + g * r + j) * D + e * 32 + lane) : 0.0f;
            acc[j][e] = 0.0f;
        }
        m[j] = -INFINITY;
        l[j] = 0.0f;
    }

    device const T *kp = k_cache + attn_kv_base(p, sq, g);
    device const T *vp = v_cache + attn_kv_base(p, sq, g);
    for (uint b0 = key0; b0 < key_end; b0 += ATTN_DECODE_BLOCK) {
        const uint nb = min(uint(ATTN_DECODE_BLOCK), key_end - b0);
        float s[ATTN_MAX_GROUP];
        for (uint j = 0; j < ATTN_MAX_GROUP; ++j) {
            s[j] = -INFINITY;
        }
        for (uint t = 0; t < nb; ++t) {
            float kr[E];
            for (int e = 0; e < E; ++e) {
                kr[e] = load_elem(kp + (b0 + t) * D + e * 32 + lane);
            }
            for (uint j = 0; j < ATTN_MAX_GROUP; ++j) {
                if (j < r) {
                    float dot = 0.0f;
                    for (int e = 0; e < E; ++e) {
                        dot += qr[j][e] * kr[e];
                    }
                    dot = simd_sum(dot) * p.scale;
                    s[j] = lane == t ? dot : s[j];
                }
            }
        }
        for (uint j = 0; j < ATTN_MAX_GROUP; ++j) {
            if (j < r) {
                const float m_new = max(m[j], simd_max(s[j]));
                const float factor = metal::exp(m[j] - m_new);
                s[j] = metal::exp(s[j] - m_new);  // the lane's key's weight; 0 past nb
                l[j] = l[j] * factor + simd_sum(s[j]);
                m[j] = m_new;
                for (int e = 0; e < E; ++e) {
                    acc[j][e] *= factor;
                }
            }
        }
        for (uint t = 0; t < nb; ++t) {
            float vr[E];
            for (int e = 0; e < E; ++e) {
                vr[e] = load_elem(vp + (b0 + t) * D + e * 32 + lane);
            }
            for (uint j = 0; j < ATTN_MAX_GROUP; ++j) {
                if (j < r) {
                    const float w = simd_shuffle(s[j], ushort(t));
                    for (int e = 0; e < E; ++e) {
                        acc[j][e] += w * vr[e];
                    }
                }
            }
        }
    }

    for (uint j = 0; j < ATTN_MAX_GROUP; ++j) {
        if (j >= r) {
            break;
        }
        const uint h = g * r + j;
        if (p.n_splits == 1u) {
            for (int e = 0; e < E; ++e) {
                attn_store(p, out, gate, tok, h, e * 32 + lane, acc[j][e] / l[j]);
            }
            continue;
        }
        const uint part = (tg.z * p.n_heads + h) * p.n_splits + split;
        for (int e = 0; e < E; ++e) {
            partial_o[part * D + e * 32 + lane] = acc[j][e];
        }
        if (lane == 0) {
            partial_ml[part * 2] = m[j];
            partial_ml[part * 2 + 1] = l[j];
        }
    }
}

// The decode reduction: combines the splits of one query head, each
// weighted by exp(its maximum - the overall maximum), and writes the
// output. Threadgroup (32, 1, 1), grid (n_heads, n_seqs, 1); lane x
// writes elements x, x + 32, ...
template <typename T>
kernel void attn_decode_reduce(
    device T            *out        [[buffer(3)]],
    constant attn_params &p         [[buffer(4)]],
    device const int    *slots      [[buffer(5)]],
    device const int    *cache_lens [[buffer(6)]],
    device const T      *gate       [[buffer(8)]],
    device const float  *partial_o  [[buffer(9)]],
    device const float  *partial_ml [[buffer(10)]],
    uint3 tg   [[threadgroup_position_in_grid]],
    uint  lane [[thread_index_in_simdgroup]]) {
    const attn_seq sq = attn_sequence(p, slots, cache_lens, nullptr, tg.y);
    if (sq.skip) {
        return;
    }
    const uint h = tg.x;
    const uint used = attn_decode_splits(sq.past + 1u, p.n_splits).used;
    const uint part0 = (tg.y * p.n_heads + h) * p.n_splits;
    float mx = -INFINITY;
    for (uint i = 0; i < used; ++i) {
        mx = max(mx, partial_ml[(part0 + i) * 2]);
    }
    float sum = 0.0f;
    for (uint i = 0; i < used; ++i) {
        sum += partial_ml[(part0 + i) * 2 + 1] * metal::exp(partial_ml[(part0 + i) * 2] - mx);
    }
    for (uint d = lane; d < p.head_dim; d += 32) {
        float o = 0.0f;
        for (uint i = 0; i < used; ++i) {
            o += partial_o[(part0 + i) * p.head_dim + d] * metal::exp(partial_ml[(part0 + i) * 2] - mx);
        }
        attn_store(p, out, gate, sq.tok0, h, d, o / sum);
    }
}

// ---------------------------------------------------------------------------
// Prefill: causal attention of packed prompts (or chunks of them) over
// their caches, tiled with an online softmax (FlashAttention-2's loop
// order: the queries of a tile stay put while the keys stream by).
//
// The query rows of KV head g in sequence s are (token i, head g * r + j),
// row i * r + j: the r heads of a token are neighbours, so every row of a
// tile reads the same keys. Threadgroup (32, ATTN_ROWS, 1), grid
// (n_kv_heads, ceil(longest sequence's tokens * r / ATTN_ROWS), n_seqs):
// SIMD group y owns row tile * ATTN_ROWS + y. The threadgroup stages
// BK = 2048 / D keys and their values in threadgroup memory (each loaded
// once for ATTN_ROWS rows), two barriers per tile, rows padded by one
// float so that the lanes reading different keys hit different banks.
// Lane x scores key x % BK on 64 of its D elements (part x / BK), the
// LPK = 32 / BK parts summed with simd_shuffle_xor; the softmax of the
// tile runs across lanes; then lane x accumulates output elements
// x, x + 32, ..., each key's weight broadcast with simd_shuffle.
#define ATTN_ROWS 8

template <typename T, int D>
kernel void attn_prefill(
    device const T      *q          [[buffer(0)]],
    device const T      *k_cache    [[buffer(1)]],
    device const T      *v_cache    [[buffer(2)]],
    device T            *out        [[buffer(3)]],
    constant attn_params &p         [[buffer(4)]],
    device const int    *slots      [[buffer(5)]],
    device const int    *cache_lens [[buffer(6)]],
    device const int    *cu_seqlens [[buffer(7)]],
    device const T      *gate       [[buffer(8)]],
    uint3 tg   [[threadgroup_position_in_grid]],
    uint  sg   [[simdgroup_index_in_threadgroup]],
    uint  lane [[thread_index_in_simdgroup]],
    uint  tid  [[thread_index_in_threadgroup]]) {
    constexpr int BK = 2048 / D;   // keys per tile
    constexpr int LPK = 32 / BK;   // lanes per key
    constexpr int QE = D / LPK;    // elements of a score per lane: 64
    constexpr int E = D / 32;      // output elements per lane
    constexpr int KS = D + 1;      // tile row stride
    threadgroup float ks[BK * KS];
    threadgroup float vs[BK * KS];

    const attn_seq sq = attn_sequence(p, slots, cache_lens, cu_seqlens, tg.z);
    const uint r = p.n_heads / p.n_kv_heads;
    const uint rows = sq.n_tokens * r;
    const uint first = tg.y * ATTN_ROWS;
    if (sq.skip || first >= rows) {
        return;  // the whole threadgroup
    }
    const uint g = tg.x;
    const uint row = first + sg;
    const bool live = row < rows;
    const uint t = live ? row / r : 0u;
    const uint h = g * r + (live ? row % r : 0u);
    const uint tok = sq.tok0 + t;
    // Keys this row sees: positions 0 .. past + t; none for a dead row.
    const uint n_keys = live ? sq.past + t + 1u : 0u;
    const uint tile_keys = sq.past + (min(rows, first + ATTN_ROWS) - 1u) / r + 1u;

    const uint kj = lane % BK;   // the key this lane scores
    const uint part = lane / BK; // which QE elements of it
    float qr[QE];
    for (int e = 0; e < QE; ++e) {
        qr[e] = live ? load_elem(q + (tok * p.n_heads + h) * D + part * QE + e) : 0.0f;
    }
    float acc[E];
    for (int e = 0; e < E; ++e) {
        acc[e] = 0.0f;
    }
    float m = -INFINITY;
    float l = 0.0f;

    device const T *kp = k_cache + attn_kv_base(p, sq, g);
    device const T *vp = v_cache + attn_kv_base(p, sq, g);
    for (uint k0 = 0; k0 < tile_keys; k0 += BK) {
        for (uint i = tid; i < uint(BK * D); i += 32 * ATTN_ROWS) {
            const uint j = i / D, d = i % D;
            const bool in = k0 + j < tile_keys;
            ks[j * KS + d] = in ? load_elem(kp + (k0 + j) * D + d) : 0.0f;
            vs[j * KS + d] = in ? load_elem(vp + (k0 + j) * D + d) : 0.0f;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);

        float dot = 0.0f;
        for (int e = 0; e < QE; ++e) {
            dot += qr[e] * ks[kj * KS + part * QE + e];
        }
        for (uint off = BK; off < 32u; off <<= 1) {
            dot += simd_shuffle_xor(dot, ushort(off));
        }
        float s = k0 + kj < n_keys ? dot * p.scale : -INFINITY;
        const float m_tile = simd_max(s);
        if (m_tile != -INFINITY) {  // uniform: some key of the tile is seen
            const float m_new = max(m, m_tile);
            const float factor = metal::exp(m - m_new);
            s = metal::exp(s - m_new);
            l = l * factor + simd_sum(part == 0u ? s : 0.0f);
            m = m_new;
            for (int e = 0; e < E; ++e) {
                acc[e] *= factor;
            }
            for (int j = 0; j < BK; ++j) {
                const float w = simd_shuffle(s, ushort(j));
                for (int e = 0; e < E; ++e) {
                    acc[e] += w * vs[j * KS + e * 32 + lane];
                }
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }

    if (live) {
        for (int e = 0; e < E; ++e) {
            attn_store(p, out, gate, tok, h, e * 32 + lane, acc[e] / l);
        }
    }
}

// Instantiation, one line per kernel and type (MLX style):
// attn_{kernel}_{A} and, for the kernels with the head size in their
// registers, attn_{kernel}_{A}_{D}.
#define instantiate_attn(name, fn, A) \
    template [[host_name(name)]] kernel decltype(fn<A>) fn<A>;
#define instantiate_attn_d(name, fn, A, D) \
    template [[host_name(name "_" #D)]] kernel decltype(fn<A, D>) fn<A, D>;
#define instantiate_attn_dims(name, fn, A) \
    instantiate_attn_d(name, fn, A, 64) \
    instantiate_attn_d(name, fn, A, 128) \
    instantiate_attn_d(name, fn, A, 256)
#define instantiate_attn_types(inst, name, fn) \
    inst(name "_f32", fn, float) \
    inst(name "_f16", fn, half) \
    inst(name "_bf16", fn, bf16_t)

instantiate_attn_types(instantiate_attn, "attn_kv_append", attn_kv_append)
instantiate_attn_types(instantiate_attn_dims, "attn_decode", attn_decode)
instantiate_attn_types(instantiate_attn, "attn_decode_reduce", attn_decode_reduce)
instantiate_attn_types(instantiate_attn_dims, "attn_prefill", attn_prefill)
