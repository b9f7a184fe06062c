// Picking the next token on the device, so that a decode loop never copies
// logits to the host: argmax (greedy) and sampling with temperature,
// top-k, top-p and min-p, applied in HF's order (TemperatureLogitsWarper,
// TopKLogitsWarper, TopPLogitsWarper, MinPLogitsWarper).
//
// argmax: the index of the largest logit, NaN above every number and
// equal values to the lower index, as torch.argmax (ranked).
//
// sample, per row, with z = logit / temperature (float32):
//   - top_k > 0: the candidates are the top_k logits (ranked: ties to the
//     lower index, where HF keeps every token tied with the k-th). In rank
//     order, e_j = exp(z_j - z_0) and total = sum of the candidates' e_j.
//     Candidate j > 0 is kept while the mass ranked above it,
//     sum_{i<j} e_i, stays below top_p * total (HF removes a token when
//     the probability ranked above it reaches top_p) and e_j >= min_p
//     (p_j >= min_p * p_max). Candidate 0 is always kept.
//   - top_k == 0 (top_p must be 1): every token with
//     exp(z - z_max) >= min_p is kept (all of them when min_p is 0).
// The token is drawn from the kept ones with probability proportional to
// exp(z) by the Gumbel-max trick: the kept token of the largest
// z + G(token), G = -log(-log(u)), u uniform in (0, 1) from Philox4x32-10
// keyed by the seed, counter (token, row, step, 0). The noise belongs to
// the token id, so a draw depends only on (seed, step, row) and the kept
// set, needs no state, and top_k == 0 with min_p == 0 draws what top_k ==
// vocab would. A row with a NaN logit yields its first NaN's index.
//
// Layouts: logits [rows][vocab]; out uint [rows].
// Buffers: 0 logits, 1 out, 2 sample_params.
// Geometry: one threadgroup per row, a multiple of 32 threads up to 1024;
// consecutive threads read consecutive logits. sample's top-k keeps
// SAMPLE_LIST candidates per thread in registers from one pass over the
// row; each of the top_k rounds takes the best head over the threadgroup
// (threadgroup_best), and a thread whose list runs out refills it with a
// pass over its own logits below the last one it gave (rare: only a
// thread holding more than SAMPLE_LIST of the top_k).

#define SAMPLE_MAX_K 64
#define SAMPLE_LIST 4

struct sample_params {
    uint vocab;
    uint top_k;         // 0: off; else 1 to min(vocab, SAMPLE_MAX_K)
    float temperature;  // > 0 (sample only)
    float top_p;        // (0, 1]
    float min_p;        // [0, 1)
    uint seed_lo;
    uint seed_hi;
    uint step;
};

// The first word of Philox4x32-10 (Salmon et al., "Parallel random
// numbers: as easy as 1, 2, 3", SC 2011) of counter c and key k.
inline uint philox(uint4 c, uint2 k) {
    for (int r = 0; r < 10; r++) {
        const uint hi0 = mulhi(0xD2511F53u, c.x), lo0 = 0xD2511F53u * c.x;
        const uint hi1 = mulhi(0xCD9E8D57u, c.z), lo1 = 0xCD9E8D57u * c.z;
        c = uint4(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
        k += uint2(0x9E3779B9u, 0xBB67AE85u);
    }
    return c.x;
}

// The Gumbel noise of token in this row and step: u = (the top 24 bits +
// 1/2) / 2^24, in (0, 1) and exact in float; -log(-log(u)).
inline float gumbel(constant sample_params &p, uint row, uint token) {
    const uint x = philox(uint4(token, row, p.step, 0u), uint2(p.seed_lo, p.seed_hi));
    const float u = (float(x >> 8) + 0.5f) * 5.9604644775390625e-8f;
    return -log(-log(u));
}

template <typename T>
kernel void argmax(
    device const T *logits [[buffer(0)]],
    device uint    *out    [[buffer(1)]],
    constant sample_params &p [[buffer(2)]],
    uint row     [[threadgroup_position_in_grid]],
    uint tid     [[thread_position_in_threadgroup]],
    uint threads [[threads_per_threadgroup]],
    uint sg      [[simdgroup_index_in_threadgroup]],
    uint lane    [[thread_index_in_simdgroup]],
    uint nsg     [[simdgroups_per_threadgroup]]) {
    threadgroup float scratch_v[32];
    threadgroup uint scratch_i[32];
    logits += ulong(row) * p.vocab;
    ranked best = ranked_none;
    for (uint i = tid; i < p.vocab; i += threads) {
        const ranked c = {load_elem(logits + i), i};
        if (ranks_above(c, best)) {
            best = c;
        }
    }
    best = threadgroup_best(best, scratch_v, scratch_i, sg, lane, nsg);
    if (tid == 0) {
        out[row] = best.i;
    }
}

// A thread's best SAMPLE_LIST logits below a floor, in rank order.
struct sample_list {
    float v[SAMPLE_LIST];
    uint i[SAMPLE_LIST];
    uint n;     // held
    uint head;  // the next to offer
    bool done;  // the thread has no logits left below the held ones
};

// Fills l with the thread's best logits ranked below floor (all of them
// when first).
template <typename T>
inline void sample_refill(thread sample_list &l, device const T *logits, uint vocab,
                          uint tid, uint threads, ranked floor, bool first) {
    l.n = 0;
    l.head = 0;
    for (uint i = tid; i < vocab; i += threads) {
        const ranked c = {load_elem(logits + i), i};
        if (!first && !ranks_above(floor, c)) {
            continue;
        }
        if (l.n == SAMPLE_LIST && !ranks_above(c, ranked{l.v[SAMPLE_LIST - 1], l.i[SAMPLE_LIST - 1]})) {
            continue;
        }
        uint j = min(l.n, uint(SAMPLE_LIST - 1));
        for (; j > 0 && ranks_above(c, ranked{l.v[j - 1], l.i[j - 1]}); j--) {
            l.v[j] = l.v[j - 1];
            l.i[j] = l.i[j - 1];
        }
        l.v[j] = c.v;
        l.i[j] = c.i;
        l.n = min(l.n + 1, uint(SAMPLE_LIST));
    }
    l.done = l.n < SAMPLE_LIST;
}

template <typename T>
kernel void sample(
    device const T *logits [[buffer(0)]],
    device uint    *out    [[buffer(1)]],
    constant sample_params &p [[buffer(2)]],
    uint row     [[threadgroup_position_in_grid]],
    uint tid     [[thread_position_in_threadgroup]],
    uint threads [[threads_per_threadgroup]],
    uint sg      [[simdgroup_index_in_threadgroup]],
    uint lane    [[thread_index_in_simdgroup]],
    uint nsg     [[simdgroups_per_threadgroup]]) {
    threadgroup float scratch_v[32];
    threadgroup uint scratch_i[32];
    threadgroup float cand_v[SAMPLE_MAX_K];
    threadgroup uint cand_i[SAMPLE_MAX_K];
    logits += ulong(row) * p.vocab;
    const float t = p.temperature;

    if (p.top_k == 0) {
        float zmax = 0.0f;
        if (p.min_p > 0.0f) {
            ranked top = ranked_none;
            for (uint i = tid; i < p.vocab; i += threads) {
                const ranked c = {load_elem(logits + i), i};
                if (ranks_above(c, top)) {
                    top = c;
                }
            }
            top = threadgroup_best(top, scratch_v, scratch_i, sg, lane, nsg);
            if (isnan(top.v)) {
                if (tid == 0) {
                    out[row] = top.i;
                }
                return;  // the whole threadgroup
            }
            zmax = top.v / t;
        }
        ranked best = ranked_none;
        for (uint i = tid; i < p.vocab; i += threads) {
            const float z = load_elem(logits + i) / t;
            if (p.min_p > 0.0f && !(metal::exp(z - zmax) >= p.min_p)) {
                continue;
            }
            const ranked c = {z + gumbel(p, row, i), i};
            if (ranks_above(c, best)) {
                best = c;
            }
        }
        best = threadgroup_best(best, scratch_v, scratch_i, sg, lane, nsg);
        if (tid == 0) {
            out[row] = best.i;
        }
        return;
    }

    sample_list l;
    sample_refill(l, logits, p.vocab, tid, threads, ranked_none, true);
    ranked floor = ranked_none;
    for (uint r = 0; r < p.top_k; r++) {
        if (l.head == l.n && !l.done) {
            sample_refill(l, logits, p.vocab, tid, threads, floor, false);
        }
        const bool has = l.head < l.n;
        const ranked mine = has ? ranked{l.v[l.head], l.i[l.head]} : ranked_none;
        const ranked b = threadgroup_best(mine, scratch_v, scratch_i, sg, lane, nsg);
        if (has && b.i == mine.i) {
            floor = b;
            l.head++;
        }
        if (tid == 0) {
            cand_v[r] = b.v;
            cand_i[r] = b.i;
        }
    }
    if (tid != 0) {
        return;  // thread 0 wrote the candidates and finishes alone
    }
    if (isnan(cand_v[0])) {
        out[row] = cand_i[0];
        return;
    }
    const float z0 = cand_v[0] / t;
    float total = 0.0f;
    for (uint j = 0; j < p.top_k; j++) {
        total += metal::exp(cand_v[j] / t - z0);
    }
    float above = 0.0f;
    ranked best = ranked_none;
    for (uint j = 0; j < p.top_k; j++) {
        const float z = cand_v[j] / t;
        const float e = metal::exp(z - z0);
        if (j > 0 && (!(above < p.top_p * total) || !(e >= p.min_p))) {
            break;
        }
        above += e;
        const ranked c = {z + gumbel(p, row, cand_i[j]), cand_i[j]};
        if (ranks_above(c, best)) {
            best = c;
        }
    }
    out[row] = best.i;
}

#define instantiate_sample(tn, T)                                                    \
    template [[host_name("argmax_" #tn)]] kernel void argmax<T>(                     \
        device const T *, device uint *, constant sample_params &,                   \
        uint, uint, uint, uint, uint, uint);                                         \
    template [[host_name("sample_" #tn)]] kernel void sample<T>(                     \
        device const T *, device uint *, constant sample_params &,                   \
        uint, uint, uint, uint, uint, uint);

instantiate_sample(f32, float)
instantiate_sample(f16, half)
instantiate_sample(bf16, bf16_t)
