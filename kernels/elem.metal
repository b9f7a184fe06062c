// Element types and their conversions, shared by every kernel source:
// package kernels compiles this file in front of each one.
//
// A kernel's element types are template parameters: float, half or bf16_t.
// Every load widens to float exactly (load_elem) and every store rounds
// once to nearest even (store_elem); the arithmetic between them is float.

#include <metal_stdlib>
using namespace metal;

// bfloat16. MSL has the bfloat type from language version 3.1 (macOS 14);
// below that the data is read and written as 16-bit integers and converted
// here: widening puts the bits in the upper half of a float, narrowing
// rounds to nearest even and keeps a NaN a (quiet) NaN.
#if __METAL_VERSION__ >= 310
typedef bfloat bf16_t;
#else
typedef ushort bf16_t;
#endif

// Loads (widened to float) and stores (rounded once) of one element type.
template <typename T>
struct elem;

template <>
struct elem<float> {
    static inline float load(device const float *p) { return *p; }
    static inline void store(device float *p, float x) { *p = x; }
};

template <>
struct elem<half> {
    static inline float load(device const half *p) { return float(*p); }
    static inline void store(device half *p, float x) { *p = half(x); }
};

// The bfloat16 bits of x, rounded to nearest even.
inline ushort bf16_bits(float x) {
    const uint u = as_type<uint>(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        return ushort((u >> 16) | 0x40u);  // NaN: keep the sign, set the quiet bit
    }
    return ushort((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// The float a bfloat16 holds: its bits in the upper half.
inline float bf16_float(ushort b) { return as_type<float>(uint(b) << 16); }

#if __METAL_VERSION__ >= 310
template <>
struct elem<bfloat> {
    static inline float load(device const bfloat *p) { return float(*p); }
    static inline void store(device bfloat *p, float x) { *p = bfloat(x); }
};
#else
template <>
struct elem<ushort> {
    static inline float load(device const ushort *p) { return bf16_float(*p); }
    static inline void store(device ushort *p, float x) { *p = bf16_bits(x); }
};
#endif

template <typename T>
inline float load_elem(device const T *p) { return elem<T>::load(p); }

template <typename T>
inline void store_elem(device T *p, float x) { elem<T>::store(p, x); }

