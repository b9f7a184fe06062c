// Ranking of logits, shared by the argmax, the sampler and the MoE router:
// an element and its index, ordered as torch.argmax orders them — the
// larger value first, NaN above every number (torch's max propagates NaN),
// equal values (and NaNs) by the lower index — and the best of a
// SIMD-group and of a threadgroup under that order.

struct ranked {
    float v;
    uint i;
};

// Ranks below every element of a row (a real -inf ranks above it by its
// lower index): what a thread offers when it has nothing.
constant ranked ranked_none = {-INFINITY, 0xffffffffu};

// Whether a ranks strictly above b.
inline bool ranks_above(ranked a, ranked b) {
    const bool an = isnan(a.v), bn = isnan(b.v);
    if (an != bn) {
        return an;
    }
    if (!an && a.v != b.v) {
        return a.v > b.v;
    }
    return a.i < b.i;
}

// The best of the SIMD-group's a, in every lane: a butterfly over
// simd_shuffle_xor, so every lane compares the same pairs in the same order.
inline ranked simd_best(ranked a) {
    for (ushort d = 16; d > 0; d >>= 1) {
        const ranked b = {simd_shuffle_xor(a.v, d), simd_shuffle_xor(a.i, d)};
        if (ranks_above(b, a)) {
            a = b;
        }
    }
    return a;
}

// The best of the threadgroup's a, in every thread. scratch_v and
// scratch_i hold one element per SIMD-group (32 each); they are free again
// when this returns.
inline ranked threadgroup_best(ranked a, threadgroup float *scratch_v,
                               threadgroup uint *scratch_i,
                               uint sg, uint lane, uint nsg) {
    a = simd_best(a);
    if (lane == 0) {
        scratch_v[sg] = a.v;
        scratch_i[sg] = a.i;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    const uint s = min(lane, nsg - 1);
    a = simd_best(ranked{scratch_v[s], scratch_i[s]});
    threadgroup_barrier(mem_flags::mem_threadgroup);
    return a;
}
