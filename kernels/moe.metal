// The MoE router and the combination of the experts' outputs.
//
// moe_route: per token, p = softmax(logits) in float; the top_k experts by
// logit (hence by p), ties to the lower expert index (ranked); their
// weights p_e, divided by their sum when norm_topk (norm_topk_prob).
// Selecting by logit rather than by the rounded p keeps two experts whose
// p round alike in the order of their logits.
//
//   Layouts: logits [tokens][experts]; ids uint [tokens][top_k] and
//   weights float [tokens][top_k], in rank order.
//   Buffers: 0 logits, 1 ids, 2 weights, 3 route_params.
//   Geometry: one SIMD-group per token, ROUTE_TOKENS tokens per
//   threadgroup (32, ROUTE_TOKENS, 1). Lane l holds the logits of experts
//   l + 32 j, j < ROUTE_PER, in registers (experts <= 32 * ROUTE_PER =
//   512); each of the top_k rounds takes the best expert not yet taken
//   with one simd_best, its owner lane marking it taken.
//
// moe_combine: per token and element,
//     out = sum_j weights[j] * experts[j] (+ sigmoid(gate) * shared)
// with the shared expert's scalar gate logit (a [1][hidden] projection);
// float arithmetic in slot order, rounded once.
//
//   Layouts: experts [tokens][top_k][dim] (slot j of a token is the
//   expert ids[j]'s output), weights float [tokens][top_k], shared
//   [tokens][dim], gate [tokens], out [tokens][dim].
//   Buffers: 0 experts, 1 weights, 2 shared, 3 gate, 4 out,
//   5 combine_params.
//   Geometry: one thread per output element: (ceil(dim / 256), tokens)
//   threadgroups of 256 threads.

#define ROUTE_PER 16
#define ROUTE_TOKENS 4

struct route_params {
    uint tokens;
    uint experts;
    uint top_k;
    uint norm_topk;
};

template <typename T>
kernel void moe_route(
    device const T *logits  [[buffer(0)]],
    device uint    *ids     [[buffer(1)]],
    device float   *weights [[buffer(2)]],
    constant route_params &p [[buffer(3)]],
    uint2 tg  [[threadgroup_position_in_grid]],
    uint2 tid [[thread_position_in_threadgroup]]) {
    const uint tok = tg.x * ROUTE_TOKENS + tid.y, lane = tid.x;
    if (tok >= p.tokens) {
        return;  // the whole SIMD-group
    }
    logits += ulong(tok) * p.experts;
    float l[ROUTE_PER];
    float m = -INFINITY;
    for (uint j = 0; j < ROUTE_PER; j++) {
        const uint e = lane + 32 * j;
        l[j] = e < p.experts ? load_elem(logits + e) : -INFINITY;
        m = max(m, l[j]);
    }
    m = simd_max(m);
    float s = 0.0f;
    for (uint j = 0; j < ROUTE_PER; j++) {
        s += lane + 32 * j < p.experts ? metal::exp(l[j] - m) : 0.0f;
    }
    s = simd_sum(s);

    uint taken = 0;
    uint id = 0;
    float w = 0.0f, sum = 0.0f;
    for (uint r = 0; r < p.top_k; r++) {
        ranked best = ranked_none;
        for (uint j = 0; j < ROUTE_PER; j++) {
            const ranked c = {l[j], lane + 32 * j};
            if (c.i < p.experts && (taken & (1u << j)) == 0 && ranks_above(c, best)) {
                best = c;
            }
        }
        best = simd_best(best);
        if (best.i % 32 == lane) {
            taken |= 1u << (best.i / 32);
        }
        const float pr = metal::exp(best.v - m) / s;
        sum += pr;
        if (lane == r) {
            id = best.i;
            w = pr;
        }
    }
    if (lane < p.top_k) {
        ids[ulong(tok) * p.top_k + lane] = id;
        weights[ulong(tok) * p.top_k + lane] = p.norm_topk ? w / sum : w;
    }
}

struct combine_params {
    uint dim;
    uint top_k;
    uint shared;  // 1: add sigmoid(gate) * shared
};

template <typename T>
kernel void moe_combine(
    device const T     *experts [[buffer(0)]],
    device const float *weights [[buffer(1)]],
    device const T     *shared  [[buffer(2)]],
    device const T     *gate    [[buffer(3)]],
    device T           *out     [[buffer(4)]],
    constant combine_params &p  [[buffer(5)]],
    uint2 gid [[thread_position_in_grid]]) {
    const uint i = gid.x, tok = gid.y;
    if (i >= p.dim) {
        return;
    }
    float acc = 0.0f;
    for (uint j = 0; j < p.top_k; j++) {
        const ulong slot = ulong(tok) * p.top_k + j;
        acc += weights[slot] * load_elem(experts + slot * p.dim + i);
    }
    if (p.shared) {
        const float g = load_elem(gate + tok);
        acc += 1.0f / (1.0f + metal::exp(-g)) * load_elem(shared + ulong(tok) * p.dim + i);
    }
    store_elem(out + ulong(tok) * p.dim + i, acc);
}

#define instantiate_moe(tn, T)                                                         \
    template [[host_name("moe_route_" #tn)]] kernel void moe_route<T>(                 \
        device const T *, device uint *, device float *, constant route_params &,      \
        uint2, uint2);                                                                 \
    template [[host_name("moe_combine_" #tn)]] kernel void moe_combine<T>(             \
        device const T *, device const float *, device const T *, device const T *,    \
        device T *, constant combine_params &, uint2);

instantiate_moe(f32, float)
instantiate_moe(f16, half)
instantiate_moe(bf16, bf16_t)
