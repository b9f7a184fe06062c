// MLX affine-quantized matrix products and the embedding lookup.
//
// A quantized weight W [rows][cols] is three arrays (MLX's "affine" mode):
//   words  uint32 [rows][cols * BITS / 32]: element j of a word sits at bits
//          [j * BITS, (j + 1) * BITS), the first element lowest;
//   scales S      [rows][cols / group]
//   biases S      [rows][cols / group]
// and W[r][c] = scales[r][c / group] * q + biases[r][c / group]. BITS is 4
// or 8 (a template parameter: it decides the unpacking), the group size 32,
// 64 or 128 (a parameter: it only moves the scale index, as a shift). cols
// is a multiple of the group size, so of 32: every row starts on a word and
// a group never straddles a row. No kernel materialises a dequantized W:
// each dequantizes in registers (QuantMatVec) or one tile at a time in
// threadgroup memory (QuantMatMul).
//
// Types: T is the activation type (x, y, residual), S the type of scales
// and biases; each f32, f16 or bf16. Arithmetic is f32; y is rounded once.
//
// Buffer indices, every kernel:
//   0 words (uint32) or the dense embedding table
//   1 scales   2 biases
//   3 x (matrix products) or token ids (embedding; uint32 or int32 bits)
//   4 y        5 residual (read only when p.residual is 1)
//   6 the parameter block, quant_params
//   7 expert ids (gathered products)
//
// Entry points quant_matvec_{T}_{S}_{BITS}, quant_matmul_{T}_{S}_{BITS},
// quant_gather_matvec_{T}_{S}_{BITS}, quant_embed_{T}_{S}_{BITS} and
// embed_{W}_{T} (dense table of type W).

// The parameter block at buffer index 6.
struct quant_params {
    uint rows;         // output features (vocab for the embedding, per expert when gathered)
    uint cols;         // input features (hidden for the embedding)
    uint n;            // rows of x; token ids for the embedding; tokens when gathered
    uint group_shift;  // log2 of the group size: 5, 6 or 7
    uint residual;     // 1: y = x W^T + residual
    uint k;            // gathered: expert slots per token
    uint experts;      // gathered: experts stacked in W
    uint x_per_slot;   // gathered: x is [n][k][cols] (1) or [n][cols] (0)
};

// QuantMatVec (decode). Design, after MLX's qmv_fast: each SIMD-group
// computes QMV_ROWS = 4 output rows, two SIMD-groups a threadgroup. Per
// step a lane takes QMV_VALUES = 16 consecutive inputs of each of its four
// rows (8 bytes at 4 bits, 16 at 8), so the 32 lanes read a contiguous
// stretch of each row: every weight byte is read once per dispatch. The
// 16 values lie in one group (the group size is a multiple of 16), so the
// bias enters once per lane and step as bias * sum(x), and the scale once
// as scale * sum(q x). The 4 rows' words, scales and biases are held in
// registers while up to QMV_NX = 8 rows of x pass over them, so W is read
// once for up to 8 tokens. Each 32-bit word is split in 16-bit halves and
// x is pre-scaled by 2^-(BITS * i) for the i-th element of a half, so the
// element is its masked bits unshifted: (h & (m << BITS*i)) * (x * 2^-BITS*i)
// equals q * x exactly in float (a power-of-two scale commutes with the
// rounding, barring underflow below 2^-98).
constant constexpr uint QMV_ROWS = 4;
constant constexpr uint QMV_SIMDGROUPS = 2;
constant constexpr uint QMV_VALUES = 16;
constant constexpr uint QMV_BLOCK = 32 * QMV_VALUES;
constant constexpr uint QMV_NX = 8;

// A lane's 16 values of x, pre-scaled for qmv_dot, and their plain sum.
template <int BITS, typename T>
inline float qmv_load_x(device const T *x, thread float *xs) {
    constexpr int per_half = 16 / BITS;
    float sum = 0.0f;
    for (int j = 0; j < int(QMV_VALUES); ++j) {
        const float v = load_elem(x + j);
        sum += v;
        xs[j] = v * (1.0f / float(1u << (BITS * (j % per_half))));
    }
    return sum;
}

// sum_j q_j x_j over a lane's 16 values: wq their words, xs x pre-scaled.
template <int BITS>
inline float qmv_dot(thread const uint *wq, thread const float *xs) {
    constexpr int per_half = 16 / BITS;
    constexpr uint mask = (1u << BITS) - 1u;
    float acc = 0.0f;
    for (int i = 0; i < int(QMV_VALUES) * BITS / 32; ++i) {
        const uint lo = wq[i] & 0xffffu;
        const uint hi = wq[i] >> 16;
        for (int v = 0; v < per_half; ++v) {
            acc += xs[2 * per_half * i + v] * float(lo & (mask << (BITS * v)));
            acc += xs[2 * per_half * i + per_half + v] * float(hi & (mask << (BITS * v)));
        }
    }
    return acc;
}

// One SIMD-group's QMV_ROWS rows from row0 of the weight (w, scales,
// biases) times nx <= NX rows of x (stride p.cols): y[j][row] for j < nx at
// y + j * y_stride. Rows at or past p.rows read nothing and store nothing.
template <typename T, typename S, int BITS, uint NX>
inline void qmv_rows(device const uint *w, device const S *scales, device const S *biases,
                     device const T *x, uint nx, device T *y, uint y_stride,
                     device const T *residual, constant quant_params &p, uint row0, uint lane) {
    constexpr uint words = QMV_VALUES * BITS / 32;  // a lane's words per row and step
    const uint words_per_row = p.cols * BITS / 32;
    const uint groups_per_row = p.cols >> p.group_shift;

    float acc[NX][QMV_ROWS];
    for (uint j = 0; j < NX; ++j) {
        for (uint r = 0; r < QMV_ROWS; ++r) {
            acc[j][r] = 0.0f;
        }
    }
    for (uint c = lane * QMV_VALUES; c < p.cols; c += QMV_BLOCK) {
        uint wq[QMV_ROWS][words];
        float s[QMV_ROWS], b[QMV_ROWS];
        for (uint r = 0; r < QMV_ROWS; ++r) {
            const uint row = row0 + r;
            const bool in = row < p.rows;
            const uint g = row * groups_per_row + (c >> p.group_shift);
            s[r] = in ? load_elem(scales + g) : 0.0f;
            b[r] = in ? load_elem(biases + g) : 0.0f;
            device const uint *wr = w + row * words_per_row + c * BITS / 32;
            for (uint i = 0; i < words; ++i) {
                wq[r][i] = in ? wr[i] : 0u;
            }
        }
        for (uint j = 0; j < NX; ++j) {
            if (j < nx) {
                float xs[QMV_VALUES];
                const float xsum = qmv_load_x<BITS>(x + j * p.cols + c, xs);
                for (uint r = 0; r < QMV_ROWS; ++r) {
                    acc[j][r] += s[r] * qmv_dot<BITS>(wq[r], xs) + b[r] * xsum;
                }
            }
        }
    }
    for (uint j = 0; j < NX; ++j) {
        if (j < nx) {
            for (uint r = 0; r < QMV_ROWS; ++r) {
                const float total = simd_sum(acc[j][r]);
                const uint row = row0 + r;
                if (lane == r && row < p.rows) {
                    const uint o = j * y_stride + row;
                    const float add = p.residual ? load_elem(residual + o) : 0.0f;
                    store_elem(y + o, total + add);
                }
            }
        }
    }
}

// y [n][rows] = x [n][cols] W^T (+ residual). Threadgroup (32, 2, 1); grid
// (ceil(rows / 8), ceil(n / 8), 1): threadgroup (i, z) computes rows
// 8i..8i+7 for the rows of x 8z..8z+7.
template <typename T, typename S, int BITS>
kernel void quant_matvec(
    device const uint  *w        [[buffer(0)]],
    device const S     *scales   [[buffer(1)]],
    device const S     *biases   [[buffer(2)]],
    device const T     *x        [[buffer(3)]],
    device T           *y        [[buffer(4)]],
    device const T     *residual [[buffer(5)]],
    constant quant_params &p     [[buffer(6)]],
    uint3 tg  [[threadgroup_position_in_grid]],
    uint3 tid [[thread_position_in_threadgroup]]) {
    const uint x0 = tg.y * QMV_NX;
    const uint nx = min(QMV_NX, p.n - x0);
    const uint row0 = (tg.x * QMV_SIMDGROUPS + tid.y) * QMV_ROWS;
    const uint o = x0 * p.rows;
    qmv_rows<T, S, BITS, QMV_NX>(w, scales, biases, x + x0 * p.cols, nx, y + o, p.rows,
                                 residual + o, p, row0, tid.x);
}

// Gathered QuantMatVec over stacked experts (MLX's switch_mlp layout: words
// [experts][rows][cols*BITS/32], scales and biases [experts][rows][groups]):
// y [n][k][rows], y[t][s] = x_t W_{ids[t][s]}^T with x_t = x[t] ([n][cols])
// or x[t][s] ([n][k][cols], p.x_per_slot). Threadgroup (32, 2, 1); grid
// (ceil(rows / 8), n * k, 1): each token reads only its k experts' rows. An
// id at or past p.experts reads no weight and gives y[t][s] = 0.
template <typename T, typename S, int BITS>
kernel void quant_gather_matvec(
    device const uint  *w        [[buffer(0)]],
    device const S     *scales   [[buffer(1)]],
    device const S     *biases   [[buffer(2)]],
    device const T     *x        [[buffer(3)]],
    device T           *y        [[buffer(4)]],
    device const T     *residual [[buffer(5)]],
    constant quant_params &p     [[buffer(6)]],
    device const uint  *ids      [[buffer(7)]],
    uint3 tg  [[threadgroup_position_in_grid]],
    uint3 tid [[thread_position_in_threadgroup]]) {
    const uint slot = tg.y;  // t * k + s
    const uint e = ids[slot];
    const uint row0 = (tg.x * QMV_SIMDGROUPS + tid.y) * QMV_ROWS;
    device T *ys = y + slot * p.rows;
    if (e >= p.experts) {
        for (uint r = 0; r < QMV_ROWS; ++r) {
            if (tid.x == r && row0 + r < p.rows) {
                store_elem(ys + row0 + r, 0.0f);
            }
        }
        return;  // the whole threadgroup: one slot
    }
    const uint xrow = p.x_per_slot ? slot : slot / p.k;
    const uint words = p.rows * (p.cols * BITS / 32);
    const uint groups = p.rows * (p.cols >> p.group_shift);
    qmv_rows<T, S, BITS, 1>(w + e * words, scales + e * groups, biases + e * groups,
                            x + xrow * p.cols, 1, ys, 0, residual, p, row0, tid.x);
}

// QuantMatMul (prefill): y [n][rows] = x [n][cols] W^T (+ residual).
// Design, after MLX's qmm_t: a threadgroup computes a QMM_BM x QMM_BN tile
// of y with four SIMD-groups in 2 x 2, each 16 x 16 as 2 x 2 8x8
// simdgroup_float8x8 products. For each QMM_BK = 32 slice of cols the
// threadgroup stages x's tile and W's tile, dequantized to float (each
// thread unpacks whole words: one at 4 bits, two at 8), in threadgroup
// memory, W transposed so that both load as plain 8x8 matrices. A 32-wide
// slice lies in one group, so each row of the W tile has one scale and
// bias. Rows past n or rows are staged as zeros and not stored. Threadgroup
// (128, 1, 1); grid (ceil(rows / 32), ceil(n / 32), 1). W is read
// ceil(n / 32) times, once per tile row of x.
constant constexpr uint QMM_BM = 32;
constant constexpr uint QMM_BN = 32;
constant constexpr uint QMM_BK = 32;
constant constexpr uint QMM_THREADS = 128;

template <typename T, typename S, int BITS>
kernel void quant_matmul(
    device const uint  *w        [[buffer(0)]],
    device const S     *scales   [[buffer(1)]],
    device const S     *biases   [[buffer(2)]],
    device const T     *x        [[buffer(3)]],
    device T           *y        [[buffer(4)]],
    device const T     *residual [[buffer(5)]],
    constant quant_params &p     [[buffer(6)]],
    uint3 tg  [[threadgroup_position_in_grid]],
    uint3 tid [[thread_position_in_threadgroup]]) {
    threadgroup float xt[QMM_BM * QMM_BK];  // x tile [m][k]; y's tile [m][n] at the end
    threadgroup float wt[QMM_BK * QMM_BN];  // W tile, transposed: [k][n]

    constexpr uint per_word = 32 / BITS;
    constexpr uint tile_words = QMM_BN * QMM_BK / per_word;
    constexpr uint mask = (1u << BITS) - 1u;
    const uint t = tid.x;
    const uint sg = t / 32;
    const uint sm = (sg / 2) * 16, sn = (sg % 2) * 16;
    const uint m0 = tg.y * QMM_BM, n0 = tg.x * QMM_BN;
    const uint words_per_row = p.cols * BITS / 32;
    const uint groups_per_row = p.cols >> p.group_shift;

    simdgroup_float8x8 acc[2][2];
    for (uint i = 0; i < 2; ++i) {
        for (uint j = 0; j < 2; ++j) {
            acc[i][j] = simdgroup_float8x8(0.0f);
        }
    }
    // This thread's share of the x tile: 8 consecutive k of row xm.
    const uint xm = t / 4, xk = (t % 4) * 8;
    const bool x_in = m0 + xm < p.n;
    device const T *xp = x + (m0 + xm) * p.cols + xk;

    for (uint k0 = 0; k0 < p.cols; k0 += QMM_BK) {
        threadgroup_barrier(mem_flags::mem_threadgroup);
        for (uint i = 0; i < 8; ++i) {
            xt[xm * QMM_BK + xk + i] = x_in ? load_elem(xp + k0 + i) : 0.0f;
        }
        for (uint wi = t; wi < tile_words; wi += QMM_THREADS) {
            const uint n = wi / (QMM_BK / per_word);
            const uint kw = (wi % (QMM_BK / per_word)) * per_word;
            const uint row = n0 + n;
            if (row < p.rows) {
                const uint g = row * groups_per_row + (k0 >> p.group_shift);
                const float s = load_elem(scales + g), b = load_elem(biases + g);
                const uint word = w[row * words_per_row + (k0 + kw) / per_word];
                for (uint v = 0; v < per_word; ++v) {
                    wt[(kw + v) * QMM_BN + n] = s * float((word >> (BITS * v)) & mask) + b;
                }
            } else {
                for (uint v = 0; v < per_word; ++v) {
                    wt[(kw + v) * QMM_BN + n] = 0.0f;
                }
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        for (uint kk = 0; kk < QMM_BK; kk += 8) {
            simdgroup_float8x8 a[2], b[2];
            for (uint i = 0; i < 2; ++i) {
                simdgroup_load(a[i], xt + (sm + 8 * i) * QMM_BK + kk, QMM_BK);
                simdgroup_load(b[i], wt + kk * QMM_BN + sn + 8 * i, QMM_BN);
            }
            for (uint i = 0; i < 2; ++i) {
                for (uint j = 0; j < 2; ++j) {
                    simdgroup_multiply_accumulate(acc[i][j], a[i], b[j], acc[i][j]);
                }
            }
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint i = 0; i < 2; ++i) {
        for (uint j = 0; j < 2; ++j) {
            simdgroup_store(acc[i][j], xt + (sm + 8 * i) * QMM_BN + sn + 8 * j, QMM_BN);
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint e = t; e < QMM_BM * QMM_BN; e += QMM_THREADS) {
        const uint m = m0 + e / QMM_BN, n = n0 + e % QMM_BN;
        if (m < p.n && n < p.rows) {
            const uint o = m * p.rows + n;
            const float add = p.residual ? load_elem(residual + o) : 0.0f;
            store_elem(y + o, xt[e] + add);
        }
    }
}

// The embedding lookup from a quantized table [vocab = p.rows][hidden =
// p.cols]: y[t] = dequantized row ids[t], in T, for t < p.n. An id at or
// past p.rows (an int32 id below zero is one, as its uint32 bits) gives a
// row of zeros and reads nothing. Threadgroup (64, 1, 1); grid
// (ceil(hidden * BITS / 32 / 64), n, 1): a thread per word.
template <typename T, typename S, int BITS>
kernel void quant_embed(
    device const uint  *w      [[buffer(0)]],
    device const S     *scales [[buffer(1)]],
    device const S     *biases [[buffer(2)]],
    device const uint  *ids    [[buffer(3)]],
    device T           *y      [[buffer(4)]],
    constant quant_params &p   [[buffer(6)]],
    uint3 gid [[thread_position_in_grid]]) {
    constexpr uint per_word = 32 / BITS;
    constexpr uint mask = (1u << BITS) - 1u;
    const uint words_per_row = p.cols / per_word;
    const uint wi = gid.x;
    if (wi >= words_per_row) {
        return;
    }
    const uint id = ids[gid.y];
    device T *out = y + gid.y * p.cols + wi * per_word;
    if (id >= p.rows) {
        for (uint v = 0; v < per_word; ++v) {
            store_elem(out + v, 0.0f);
        }
        return;
    }
    const uint g = id * (p.cols >> p.group_shift) + ((wi * per_word) >> p.group_shift);
    const float s = load_elem(scales + g), b = load_elem(biases + g);
    const uint word = w[id * words_per_row + wi];
    for (uint v = 0; v < per_word; ++v) {
        store_elem(out + v, s * float((word >> (BITS * v)) & mask) + b);
    }
}

// The embedding lookup from a dense table W [vocab = p.rows][hidden =
// p.cols]: y[t] = W[ids[t]] converted to T; an id at or past p.rows gives
// zeros, as quant_embed. Threadgroup (256, 1, 1); grid (ceil(hidden / 256),
// n, 1): a thread per element.
template <typename W, typename T>
kernel void embed(
    device const W     *table [[buffer(0)]],
    device const uint  *ids   [[buffer(3)]],
    device T           *y     [[buffer(4)]],
    constant quant_params &p  [[buffer(6)]],
    uint3 gid [[thread_position_in_grid]]) {
    if (gid.x >= p.cols) {
        return;
    }
    const uint id = ids[gid.y];
    const float v = id < p.rows ? load_elem(table + id * p.cols + gid.x) : 0.0f;
    store_elem(y + gid.y * p.cols + gid.x, v);
}

// instantiate_quant(base, fn) makes fn<T, S, BITS> the entry point
// base_{T}_{S}_{BITS} for every activation type T, scale type S and BITS 4
// and 8; instantiate_embed makes embed<W, T> embed_{W}_{T}.
#define instantiate_quant_bits(host, fn, T, S) \
    template [[host_name(host "_4")]] kernel decltype(fn<T, S, 4>) fn<T, S, 4>; \
    template [[host_name(host "_8")]] kernel decltype(fn<T, S, 8>) fn<T, S, 8>;
#define instantiate_quant_scales(host, fn, T) \
    instantiate_quant_bits(host "_f32", fn, T, float) \
    instantiate_quant_bits(host "_f16", fn, T, half) \
    instantiate_quant_bits(host "_bf16", fn, T, bf16_t)
#define instantiate_quant(base, fn) \
    instantiate_quant_scales(base "_f32", fn, float) \
    instantiate_quant_scales(base "_f16", fn, half) \
    instantiate_quant_scales(base "_bf16", fn, bf16_t)
#define instantiate_embed_out(host, W) \
    template [[host_name(host "_f32")]] kernel decltype(embed<W, float>) embed<W, float>; \
    template [[host_name(host "_f16")]] kernel decltype(embed<W, half>) embed<W, half>; \
    template [[host_name(host "_bf16")]] kernel decltype(embed<W, bf16_t>) embed<W, bf16_t>;

instantiate_quant("quant_matvec", quant_matvec)
instantiate_quant("quant_gather_matvec", quant_gather_matvec)
instantiate_quant("quant_matmul", quant_matmul)
instantiate_quant("quant_embed", quant_embed)
instantiate_embed_out("embed_f32", float)
instantiate_embed_out("embed_f16", half)
instantiate_embed_out("embed_bf16", bf16_t)
