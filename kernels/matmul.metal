// Dense matrix products: y = x W^T for decode (matvec: one to MV_MAX_N rows
// of x, bandwidth-bound), for prefill and batched decode (matmul: tiled,
// simdgroup_matrix), and the gathered matvec of stacked MoE experts.
//
// Layouts, row-major, the last index innermost (W as HF stores nn.Linear):
//   w     [out][in]               weight type W   (gather: [n_experts][out][in])
//   x     [n][in]                 activation type A (gather: [n][in], or
//                                 [n][k][in] with x_per_slot)
//   y     [n][out]                A               (gather: [n][k][out])
//   r     [n][out]                A, the residual: y = r + x W^T when
//                                 residual is set; r may be y itself (each
//                                 element is read, then written, by the
//                                 same thread)
//   ids   [n][k]                  uint, the experts of each token (gather)
//
// Buffer indices: 0 w, 1 x, 2 y, 3 r, 4 the parameters (matmul_params,
// setBytes), 5 ids.
//
// W and A are each float, half or bf16_t (elem.metal); every load widens to
// float, the products accumulate in float and y is rounded once, after the
// residual add. Entry points: matvec_{W}_{A}, matmul_{W}_{A} and
// gather_matvec_{W}_{A}.

// The parameter block at buffer index 4.
struct matmul_params {
    uint n;           // rows of x (gather: tokens)
    uint in;          // columns of x and W
    uint out;         // rows of W, columns of y
    uint residual;    // 1: y = r + x W^T
    uint n_experts;   // gather: matrices in w
    uint k;           // gather: experts per token
    uint x_per_slot;  // gather: 1: x is [n][k][in], one row per selected expert
    uint reserved;
};

// ---------------------------------------------------------------------------
// matvec: each SIMD-group computes MV_ROWS rows of W against all n rows of
// x (n <= MV_MAX_N), so each weight element is loaded once per dispatch
// whatever n is: decode is bound by the weight bytes, and a few rows of x
// cost no more weight traffic than one. As in MLX's gemv and llama.cpp's
// kernel_mul_mv, the 32 lanes walk a row together: lane l takes the
// MV_CHUNK consecutive elements at l * MV_CHUNK of every 32 * MV_CHUNK, so
// one step of the SIMD-group reads a contiguous run of each row (256 bytes
// of a 16-bit row, 512 of an f32 one), keeps its partial sums in
// registers, and simd_sum reduces them once at the end.
//
// Threadgroups of (32, MV_SIMDGROUPS) threads cover MV_SIMDGROUPS *
// MV_ROWS rows of W; the grid is (ceil(out / MV_TG_ROWS), 1) threadgroups
// (gather: (ceil(out / MV_TG_ROWS), n * k)). A SIMD-group whose rows all
// lie past out returns; one that straddles it reads the last row again in
// place of the missing ones and stores nothing for them, so that every
// lane takes part in the reductions.

#define MV_ROWS 4        // rows of W per SIMD-group
#define MV_CHUNK 4       // consecutive elements per lane per step
#define MV_SIMDGROUPS 4  // SIMD-groups per threadgroup
#define MV_TG_ROWS (MV_ROWS * MV_SIMDGROUPS)
#define MV_MAX_N 8       // rows of x per dispatch at most

// One SIMD-group's products of rows row0 .. row0 + MV_ROWS - 1 of w with
// the n rows of x (x_stride elements apart), written to y (y_stride apart)
// and added to r (alike) when residual: the matvec, and the model of every
// product kernel that reads each weight once (the quantized ones too).
template <typename W, typename A>
inline void matvec_simdgroup(device const W *w, device const A *x, uint x_stride,
                             device A *y, device const A *r, uint y_stride, bool residual,
                             uint n, uint in, uint out, uint row0, uint lane) {
    device const W *wr[MV_ROWS];
    for (int i = 0; i < MV_ROWS; ++i) {
        wr[i] = w + min(row0 + i, out - 1) * in;  // past the end: the last row, not stored
    }
    float acc[MV_ROWS][MV_MAX_N] = {};

    uint c = lane * MV_CHUNK;
    for (; c + MV_CHUNK <= in; c += 32 * MV_CHUNK) {
        float wv[MV_ROWS][MV_CHUNK];
        for (int i = 0; i < MV_ROWS; ++i) {
            for (int j = 0; j < MV_CHUNK; ++j) {
                wv[i][j] = load_elem(wr[i] + c + j);
            }
        }
        for (uint t = 0; t < MV_MAX_N && t < n; ++t) {
            float xv[MV_CHUNK];
            for (int j = 0; j < MV_CHUNK; ++j) {
                xv[j] = load_elem(x + t * x_stride + c + j);
            }
            for (int i = 0; i < MV_ROWS; ++i) {
                for (int j = 0; j < MV_CHUNK; ++j) {
                    acc[i][t] += wv[i][j] * xv[j];
                }
            }
        }
    }
    // in not a multiple of MV_CHUNK: the last in % MV_CHUNK elements
    // belong to one lane, whose chunk starts below in and ends past it.
    if (c < in) {
        for (int i = 0; i < MV_ROWS; ++i) {
            for (uint j = c; j < in; ++j) {
                const float wj = load_elem(wr[i] + j);
                for (uint t = 0; t < MV_MAX_N && t < n; ++t) {
                    acc[i][t] += wj * load_elem(x + t * x_stride + j);
                }
            }
        }
    }

    // Lane t * MV_ROWS + i stores row i of token t.
    for (uint t = 0; t < MV_MAX_N && t < n; ++t) {
        for (int i = 0; i < MV_ROWS; ++i) {
            const float s = simd_sum(acc[i][t]);
            const uint row = row0 + i;
            if (lane == t * MV_ROWS + i && row < out) {
                const uint o = t * y_stride + row;
                store_elem(y + o, residual ? load_elem(r + o) + s : s);
            }
        }
    }
}

template <typename W, typename A>
kernel void matvec(
    device const W           *w [[buffer(0)]],
    device const A           *x [[buffer(1)]],
    device A                 *y [[buffer(2)]],
    device const A           *r [[buffer(3)]],
    constant matmul_params   &p [[buffer(4)]],
    uint3 tg  [[threadgroup_position_in_grid]],
    uint3 tid [[thread_position_in_threadgroup]]) {
    const uint row0 = tg.x * MV_TG_ROWS + tid.y * MV_ROWS;
    if (row0 >= p.out) {
        return;  // the whole SIMD-group: past the last row
    }
    matvec_simdgroup<W, A>(w, x, p.in, y, r, p.out, p.residual != 0u, p.n, p.in, p.out, row0, tid.x);
}

// gather_matvec: y[t][j] = x[t] W[ids[t][j]]^T (x[t][j] with x_per_slot),
// as llama.cpp's kernel_mul_mv_id and MLX's gather_mm: threadgroup row tg.y
// is one (token, slot) pair and reads only its expert's matrix, so a
// decode step reads the k selected experts' weights once each. An id at or
// beyond n_experts reads no weight: its row of y is written as zeros.
template <typename W, typename A>
kernel void gather_matvec(
    device const W           *w   [[buffer(0)]],
    device const A           *x   [[buffer(1)]],
    device A                 *y   [[buffer(2)]],
    constant matmul_params   &p   [[buffer(4)]],
    device const uint        *ids [[buffer(5)]],
    uint3 tg  [[threadgroup_position_in_grid]],
    uint3 tid [[thread_position_in_threadgroup]]) {
    const uint slot = tg.y;  // t * k + j
    const uint expert = ids[slot];
    const uint row0 = tg.x * MV_TG_ROWS + tid.y * MV_ROWS;
    device A *ys = y + slot * p.out;
    if (expert >= p.n_experts) {
        // The whole threadgroup takes this branch: no reduction is split.
        const uint row = row0 + tid.x;
        if (tid.x < MV_ROWS && row < p.out) {
            store_elem(ys + row, 0.0f);
        }
        return;
    }
    if (row0 >= p.out) {
        return;  // the whole SIMD-group: past the last row
    }
    const uint xrow = p.x_per_slot != 0u ? slot : slot / p.k;
    matvec_simdgroup<W, A>(w + expert * p.out * p.in, x + xrow * p.in, p.in, ys, ys, p.out, false,
                           1, p.in, p.out, row0, tid.x);
}

// ---------------------------------------------------------------------------
// matmul: Y = X W^T tiled as MLX's steel GEMM, for n above MV_MAX_N. A
// threadgroup of MM_SIMDGROUPS SIMD-groups computes an MM_BM x MM_BN tile
// of Y; for each step of MM_BK along in, its threads stage the X tile
// [MM_BM][MM_BK] and the W tile [MM_BN][MM_BK] in threadgroup memory,
// widened to float (one path for every W and A, bf16 included without
// MSL's bfloat; twice the threadgroup memory of 16-bit staging), and each
// SIMD-group multiplies its 16 x 16 quarter as 2 x 2 simdgroup_matrix 8x8
// products per 8 of in, B read transposed from the W tile. Elements past
// n, out or in are staged as zeros, so any shape works; the tile is stored
// through threadgroup memory and each thread writes the elements inside
// Y, adding the residual. Each weight element is loaded ceil(n / MM_BM)
// times (once per row of tiles), each x element ceil(out / MM_BN) times.
//
// Threadgroups of 32 * MM_SIMDGROUPS threads (one dimension); grid
// (ceil(out / MM_BN), ceil(n / MM_BM)).

#define MM_BM 32
#define MM_BN 32
#define MM_BK 16
#define MM_SIMDGROUPS 4
#define MM_THREADS (32 * MM_SIMDGROUPS)

template <typename W, typename A>
kernel void matmul(
    device const W           *w [[buffer(0)]],
    device const A           *x [[buffer(1)]],
    device A                 *y [[buffer(2)]],
    device const A           *r [[buffer(3)]],
    constant matmul_params   &p [[buffer(4)]],
    uint3 tg  [[threadgroup_position_in_grid]],
    uint  tid [[thread_index_in_threadgroup]]) {
    threadgroup float xs[MM_BM * MM_BK];  // [MM_BM][MM_BK]
    threadgroup float ws[MM_BN * MM_BK];  // [MM_BN][MM_BK]
    threadgroup float ys[MM_BM * MM_BN];  // [MM_BM][MM_BN]

    const uint m0 = tg.y * MM_BM;  // first row of x and y
    const uint n0 = tg.x * MM_BN;  // first row of w, column of y
    const uint sg = tid / 32;
    const uint sm = (sg / 2) * 16;  // the SIMD-group's quarter of the tile
    const uint sn = (sg % 2) * 16;

    simdgroup_matrix<float, 8, 8> acc[2][2];
    for (int i = 0; i < 2; ++i) {
        for (int j = 0; j < 2; ++j) {
            acc[i][j] = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
        }
    }

    for (uint k0 = 0; k0 < p.in; k0 += MM_BK) {
        // Consecutive threads take consecutive columns of a row.
        for (uint e = tid; e < MM_BM * MM_BK; e += MM_THREADS) {
            const uint i = e / MM_BK, c = k0 + e % MM_BK;
            xs[e] = m0 + i < p.n && c < p.in ? load_elem(x + (m0 + i) * p.in + c) : 0.0f;
        }
        for (uint e = tid; e < MM_BN * MM_BK; e += MM_THREADS) {
            const uint i = e / MM_BK, c = k0 + e % MM_BK;
            ws[e] = n0 + i < p.out && c < p.in ? load_elem(w + (n0 + i) * p.in + c) : 0.0f;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        for (uint kk = 0; kk < MM_BK; kk += 8) {
            simdgroup_matrix<float, 8, 8> a[2], b[2];
            for (int i = 0; i < 2; ++i) {
                simdgroup_load(a[i], xs, MM_BK, ulong2(kk, sm + 8 * i));
            }
            for (int j = 0; j < 2; ++j) {
                simdgroup_load(b[j], ws, MM_BK, ulong2(kk, sn + 8 * j), true);
            }
            for (int i = 0; i < 2; ++i) {
                for (int j = 0; j < 2; ++j) {
                    simdgroup_multiply_accumulate(acc[i][j], a[i], b[j], acc[i][j]);
                }
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }

    for (int i = 0; i < 2; ++i) {
        for (int j = 0; j < 2; ++j) {
            simdgroup_store(acc[i][j], ys, MM_BN, ulong2(sn + 8 * j, sm + 8 * i));
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint e = tid; e < MM_BM * MM_BN; e += MM_THREADS) {
        const uint i = m0 + e / MM_BN, c = n0 + e % MM_BN;
        if (i < p.n && c < p.out) {
            const uint o = i * p.out + c;
            store_elem(y + o, p.residual != 0u ? load_elem(r + o) + ys[e] : ys[e]);
        }
    }
}

// Instantiation: instantiate_matmul_types(base, fn) makes fn<W, A> the
// entry point base_{W}_{A} for the nine combinations of weight and
// activation type (the names package kernels builds).
#define instantiate_matmul(host, fn, W, A) \
    template [[host_name(host)]] kernel decltype(fn<W, A>) fn<W, A>;
#define instantiate_matmul_types(base, fn) \
    instantiate_matmul(base "_f32_f32", fn, float, float) \
    instantiate_matmul(base "_f32_f16", fn, float, half) \
    instantiate_matmul(base "_f32_bf16", fn, float, bf16_t) \
    instantiate_matmul(base "_f16_f32", fn, half, float) \
    instantiate_matmul(base "_f16_f16", fn, half, half) \
    instantiate_matmul(base "_f16_bf16", fn, half, bf16_t) \
    instantiate_matmul(base "_bf16_f32", fn, bf16_t, float) \
    instantiate_matmul(base "_bf16_f16", fn, bf16_t, half) \
    instantiate_matmul(base "_bf16_bf16", fn, bf16_t, bf16_t)

instantiate_matmul_types("matvec", matvec)
instantiate_matmul_types("matmul", matmul)
instantiate_matmul_types("gather_matvec", gather_matvec)
