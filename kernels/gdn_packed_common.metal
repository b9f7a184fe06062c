// Gated DeltaNet, packed rows: the layout and per-token arithmetic shared by
// the packed decode family (gdn_packed.metal) and the blocked prefill
// (gdn_prefill_blocked.metal). Placed after gdn_common.metal in front of
// both sources.
//
// A SIMD-group holds 8 rows of S, 4 lanes per row: lane l works on row
// l / 4 of its SIMD-group's 8, and u = l % 4 is its quarter of the row.
// With D_k = 32 * NSG (NSG = 2 or 4) a lane holds NC = 8 * NSG cells of its
// row in registers, as NG = 2 * NSG groups of 4 contiguous cells: group c
// is columns 16c + 4u .. 16c + 4u + 3. The 4 lanes of a row thus cover 16
// contiguous cells with each group, and one vector access per lane and
// group moves whole 32-byte segments of a row (f32: 64 bytes per row, 16-bit
// types: 32). q and k are read with the same mapping.
//
// A dot product over the row is the lane's own NC products added in order,
// then the sums of lanes u ^ 1 and u ^ 2 (simd_shuffle_xor by 1 and 2): two
// dependent shuffle steps per reduction, for 8 rows at once, where one row
// per SIMD-group takes a 5-step simd_sum per row.
//
// Threadgroup (32, GDN_PACKED_SIMDGROUPS, 1): 32 rows; grid (D_v / 32,
// n_v_heads, n_seqs) threadgroups.

#define GDN_PACKED_ROWS 8        // rows of S per SIMD-group
#define GDN_PACKED_SIMDGROUPS 4  // SIMD-groups per threadgroup: 32 rows

// instantiate_gdn_packed(host, fn, A, S) makes fn<A, S, NSG> the entry
// points host_2 and host_4 (D_k = 64, 128), for instantiate_gdn_types.
#define instantiate_gdn_packed(host, fn, A, S) \
    template [[host_name(host "_2")]] kernel decltype(fn<A, S, 2>) fn<A, S, 2>; \
    template [[host_name(host "_4")]] kernel decltype(fn<A, S, 4>) fn<A, S, 4>;

// Vector loads (widened to float) and stores (rounded once) of 4 contiguous
// elements of one type, 4-element aligned.
template <typename T>
struct gdn_vec4;

template <>
struct gdn_vec4<float> {
    static inline float4 load(device const float *p) { return *(device const float4 *)p; }
    static inline void store(device float *p, float4 x) { *(device float4 *)p = x; }
};

template <>
struct gdn_vec4<half> {
    static inline float4 load(device const half *p) { return float4(*(device const half4 *)p); }
    static inline void store(device half *p, float4 x) { *(device half4 *)p = half4(x); }
};

#if __METAL_VERSION__ >= 310
template <>
struct gdn_vec4<bfloat> {
    static inline float4 load(device const bfloat *p) { return float4(*(device const bfloat4 *)p); }
    static inline void store(device bfloat *p, float4 x) { *(device bfloat4 *)p = bfloat4(x); }
};
#else
template <>
struct gdn_vec4<ushort> {
    static inline float4 load(device const ushort *p) {
        const ushort4 b = *(device const ushort4 *)p;
        return float4(bf16_float(b.x), bf16_float(b.y), bf16_float(b.z), bf16_float(b.w));
    }
    static inline void store(device ushort *p, float4 x) {
        *(device ushort4 *)p = ushort4(bf16_bits(x.x), bf16_bits(x.y), bf16_bits(x.z), bf16_bits(x.w));
    }
};
#endif

// The column of the first cell of group c of quarter u.
inline uint gdn_packed_col(int c, uint u) { return uint(c) * 16u + 4u * u; }

// A lane's view of a vector of D_k elements in device memory (q or k of
// one token and key head): group(c) is its group c, widened.
template <typename T>
struct gdn_device_vec {
    device const T *p;
    uint u;
    inline float4 group(int c) const { return gdn_vec4<T>::load(p + gdn_packed_col(c, u)); }
};

// Loads the NG groups of cells a lane holds from v into x.
template <int NG, typename V>
inline void gdn_packed_load(thread float *x, V v) {
    for (int c = 0; c < NG; ++c) {
        const float4 g = v.group(c);
        x[4 * c] = g.x;
        x[4 * c + 1] = g.y;
        x[4 * c + 2] = g.z;
        x[4 * c + 3] = g.w;
    }
}

// Loads the NG groups of cells quarter u holds of the row of S at p.
template <typename T, int NG>
inline void gdn_packed_load_row(thread float *x, device const T *p, uint u) {
    gdn_device_vec<T> v = {p, u};
    gdn_packed_load<NG>(x, v);
}

// Stores the NG groups of cells quarter u holds to the row at p.
template <typename T, int NG>
inline void gdn_packed_store(device T *p, thread const float *x, uint u) {
    for (int c = 0; c < NG; ++c) {
        gdn_vec4<T>::store(p + gdn_packed_col(c, u),
                           float4(x[4 * c], x[4 * c + 1], x[4 * c + 2], x[4 * c + 3]));
    }
}

// Sums x over the 4 lanes of a row: lanes u ^ 1, then u ^ 2. Every lane of
// the SIMD-group must call it.
inline float2 gdn_row_sum(float2 x) {
    x += simd_shuffle_xor(x, ushort(1));
    x += simd_shuffle_xor(x, ushort(2));
    return x;
}

// One token of the recurrence on the NC = 4 * NG cells of a row that a
// lane holds, with the lane's cells of k in kr and its view of q, read
// group by group in the second pass so that q takes no registers of its
// own (both raw when l2norm: then the norms come from the same reductions,
// S k^ = r_k (S k), delta k^ = (r_k delta) k and S q^ = r_q (S q),
// r = 1 / sqrt(sum x^2 + eps)):
//
//   S      = alpha * S                  alpha = exp(-g), decay first
//   delta  = beta * (v - S k)           from the decayed state
//   S      = S + delta k^T
//   returns  S q                        (unscaled)
//
// Two row sums of two values each. Every lane of the SIMD-group must call it.
template <int NG, typename V>
inline float gdn_packed_step(thread float *s, thread const float *kr, V q,
                             float v, float g, float beta, bool l2norm) {
    const int NC = 4 * NG;
    const float alpha = metal::exp(-g);
    float sk = 0.0f;
    float kk = 0.0f;
    for (int c = 0; c < NC; ++c) {
        s[c] = alpha * s[c];
        sk += s[c] * kr[c];
        kk += kr[c] * kr[c];
    }
    const float2 a = gdn_row_sum(float2(sk, kk));
    const float rk = l2norm ? gdn_inv_norm(a.y) : 1.0f;
    float delta = beta * (v - rk * a.x);
    if (l2norm) {
        delta = delta * rk;
    }
    float sq = 0.0f;
    float qq = 0.0f;
    for (int c = 0; c < NG; ++c) {
        const float4 qg = q.group(c);
        for (int e = 0; e < 4; ++e) {
            const int i = 4 * c + e;
            s[i] = s[i] + delta * kr[i];
            sq += s[i] * qg[e];
            qq += qg[e] * qg[e];
        }
    }
    const float2 b = gdn_row_sum(float2(sq, qq));
    const float rq = l2norm ? gdn_inv_norm(b.y) : 1.0f;
    return rq * b.x;
}

// The position of a lane in the packed layout.
struct gdn_packed_lane {
    uint row;  // row of S, in 0 .. D_v-1
    uint u;    // quarter of the row, 0 .. 3
};

inline gdn_packed_lane gdn_packed_position(uint3 tg, uint3 tid) {
    gdn_packed_lane l;
    l.row = (tg.x * GDN_PACKED_SIMDGROUPS + tid.y) * GDN_PACKED_ROWS + tid.x / 4u;
    l.u = tid.x % 4u;
    return l;
}
