// puremetal MSL prelude: force-included before every translated .metal file.
// Makes Metal Shading Language compute code valid C++17 for clang: scalar
// and vector types, address spaces, vector constructors, and the plumbing
// the generated kernel launchers use. Functions of namespace metal live in
// the shim <metal_stdlib>.
#ifndef __PM_PRELUDE_H
#define __PM_PRELUDE_H

#include "pm_abi.h"

// ---------------------------------------------------------------------------
// Scalar types. half is clang's __fp16 with native half arithmetic
// (-fnative-half-type): every operation is rounded to half precision.
typedef unsigned char uchar;
typedef unsigned short ushort;
typedef unsigned int uint;
typedef unsigned long ulong;
typedef __fp16 half;
typedef decltype(sizeof(0)) size_t;
typedef decltype((char *)0 - (char *)0) ptrdiff_t;

// ---------------------------------------------------------------------------
// Vector types: clang ext_vector_type, so swizzles (v.xy, v.zyx, v.rgba)
// work and sizeof(T3) == sizeof(T4) as in MSL. bool vectors are int vectors
// (clang 14 has no bool vectors; comparisons of 32-bit vectors yield them).
#define __PM_VEC(T, name)                                                  \
	typedef T name##2 __attribute__((ext_vector_type(2)));               \
	typedef T name##3 __attribute__((ext_vector_type(3)));               \
	typedef T name##4 __attribute__((ext_vector_type(4)));
__PM_VEC(char, char)
__PM_VEC(uchar, uchar)
__PM_VEC(short, short)
__PM_VEC(ushort, ushort)
__PM_VEC(int, int)
__PM_VEC(uint, uint)
__PM_VEC(long, long)
__PM_VEC(ulong, ulong)
__PM_VEC(float, float)
__PM_VEC(half, half)
__PM_VEC(int, bool)
#undef __PM_VEC

// __pm_ext is clang's vector of N T; vec<T, N> (below) is MSL's vector
// type of any element type, bfloat included.
template <class T, int N> using __pm_ext = T __attribute__((ext_vector_type(N)));

// Component traits: elem is the scalar type, n the component count (1 for
// scalars).
template <class T> struct __pm_vt {
	typedef T elem;
	enum { n = 1, is_vec = 0 };
};
template <class T, int N> struct __pm_vt<T __attribute__((ext_vector_type(N)))> {
	typedef T elem;
	enum { n = N, is_vec = 1 };
};
template <class T> struct __pm_vt<const T> : __pm_vt<T> {};

// __pm_brace(a, b, c) is a brace list passed as a function argument,
// f({a, b, c}): it converts to the parameter's type T as T{a, b, c}.
template <class T> struct __pm_tag {
	typedef T type;
};
template <class F> struct __pm_braced {
	F f;
	template <class T> operator T() const { return f(__pm_tag<T>{}); }
};
template <class... A> inline auto __pm_brace(A... a) {
	auto f = [=](auto tag) {
		typedef typename decltype(tag)::type T;
		return T{a...};
	};
	return __pm_braced<decltype(f)>{f};
}

template <bool B, class T = void> struct __pm_enable_if {};
template <class T> struct __pm_enable_if<true, T> {
	typedef T type;
};
#define __PM_IF_VEC(V) typename = typename __pm_enable_if<__pm_vt<V>::is_vec>::type

// Packed vectors: element-aligned, sizeof(packed_float3) == 12, with the
// components named x, y, z, w (or r, g, b, a) as well as indexed.
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wgnu-anonymous-struct"
#pragma clang diagnostic ignored "-Wnested-anon-types"
template <class T, int N> struct __pm_packed_data;
template <class T> struct __pm_packed_data<T, 2> {
	union {
		T v[2];
		struct { T x, y; };
		struct { T r, g; };
	};
};
template <class T> struct __pm_packed_data<T, 3> {
	union {
		T v[3];
		struct { T x, y, z; };
		struct { T r, g, b; };
	};
};
template <class T> struct __pm_packed_data<T, 4> {
	union {
		T v[4];
		struct { T x, y, z, w; };
		struct { T r, g, b, a; };
	};
};
#pragma clang diagnostic pop
template <class T, int N> struct __pm_packed : __pm_packed_data<T, N> {
	__pm_packed() = default;
	__pm_packed(__pm_ext<T, N> x) {
		for (int i = 0; i < N; i++) this->v[i] = x[i];
	}
	operator __pm_ext<T, N>() const {
		__pm_ext<T, N> r;
		for (int i = 0; i < N; i++) r[i] = this->v[i];
		return r;
	}
	T &operator[](int i) { return this->v[i]; }
	T operator[](int i) const { return this->v[i]; }
};
template <class T, int N> struct __pm_vt<__pm_packed<T, N>> {
	typedef T elem;
	enum { n = N, is_vec = 0 };
};
#define __PM_PACKED(T)                                                     \
	typedef __pm_packed<T, 2> packed_##T##2;                             \
	typedef __pm_packed<T, 3> packed_##T##3;                             \
	typedef __pm_packed<T, 4> packed_##T##4;
__PM_PACKED(char)
__PM_PACKED(uchar)
__PM_PACKED(short)
__PM_PACKED(ushort)
__PM_PACKED(int)
__PM_PACKED(uint)
__PM_PACKED(float)
__PM_PACKED(half)
#undef __PM_PACKED

// ---------------------------------------------------------------------------
// bfloat (MSL 3.1): the upper 16 bits of a float (1 sign, 8 exponent and 7
// fraction bits). clang has no bfloat arithmetic on this target, so it is a
// class: conversion from float rounds to nearest even (NaN stays a quiet
// NaN), conversion to float is exact, and arithmetic computes in float and
// rounds every result to bfloat, as half does. An operation with a float
// or half operand yields float; with an integer operand, bfloat.
constexpr ushort __pm_bf_round(float f) {
	uint u = __builtin_bit_cast(uint, f);
	if ((u & 0x7fffffffu) > 0x7f800000u) return (ushort)((u >> 16) | 0x40u);
	return (ushort)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
template <class T> struct __pm_bf_arg { enum { ok = 0 }; };
#define __PM_BF_ARG(T, R)                                                  \
	template <> struct __pm_bf_arg<T> {                                  \
		enum { ok = 1 };                                                 \
		typedef R result;                                                \
	};
struct bfloat;
__PM_BF_ARG(bool, bfloat)
__PM_BF_ARG(char, bfloat)
__PM_BF_ARG(signed char, bfloat)
__PM_BF_ARG(uchar, bfloat)
__PM_BF_ARG(short, bfloat)
__PM_BF_ARG(ushort, bfloat)
__PM_BF_ARG(int, bfloat)
__PM_BF_ARG(uint, bfloat)
__PM_BF_ARG(long, bfloat)
__PM_BF_ARG(ulong, bfloat)
__PM_BF_ARG(long long, bfloat)
__PM_BF_ARG(unsigned long long, bfloat)
__PM_BF_ARG(half, float)
__PM_BF_ARG(float, float)
#undef __PM_BF_ARG
#define __PM_IF_BF_ARG(T) typename = typename __pm_enable_if<__pm_bf_arg<T>::ok>::type
struct bfloat {
	ushort __bits;
	bfloat() = default;
	template <class T, __PM_IF_BF_ARG(T)> constexpr bfloat(T x) : __bits(__pm_bf_round((float)x)) {}
	// Implicitly bfloat becomes float or half, and an integer only by a
	// cast, so that cond ? b : 0 is a bfloat (as in MSL) rather than
	// ambiguous between bfloat and int.
	template <class T, typename __pm_enable_if<__pm_bf_arg<T>::ok && (T)0.5f != 0, int>::type = 0>
	constexpr operator T() const {
		return (T)__builtin_bit_cast(float, (uint)__bits << 16);
	}
	template <class T, typename __pm_enable_if<__pm_bf_arg<T>::ok && (T)0.5f == 0, int>::type = 0>
	explicit constexpr operator T() const {
		return (T)__builtin_bit_cast(float, (uint)__bits << 16);
	}
	// a class converting to a scalar (MLX's _NoMask: operator bool) is
	// assigned through that conversion, as to a half
	template <class C, typename __pm_enable_if<__is_class(C) && !__is_same(C, bfloat) && __is_convertible_to(C, bool), int>::type = 0>
	constexpr bfloat &operator=(const C &c) {
		__bits = __pm_bf_round((float)(bool)c);
		return *this;
	}
	static constexpr bfloat __from_bits(ushort b) {
		bfloat r{};
		r.__bits = b;
		return r;
	}
};
constexpr bfloat operator-(bfloat a) { return bfloat::__from_bits(a.__bits ^ 0x8000u); }
constexpr bfloat operator+(bfloat a) { return a; }
#define __PM_BF_OP(op)                                                                         \
	constexpr bfloat operator op(bfloat a, bfloat b) { return bfloat((float)a op(float) b); }    \
	template <class T, __PM_IF_BF_ARG(T)>                                                      \
	constexpr typename __pm_bf_arg<T>::result operator op(bfloat a, T b) {                   \
		return (typename __pm_bf_arg<T>::result)((float)a op(float) b);                      \
	}                                                                                        \
	template <class T, __PM_IF_BF_ARG(T)>                                                      \
	constexpr typename __pm_bf_arg<T>::result operator op(T a, bfloat b) {                   \
		return (typename __pm_bf_arg<T>::result)((float)a op(float) b);                      \
	}                                                                                        \
	constexpr bfloat &operator op##=(bfloat &a, bfloat b) { return a = a op b; }             \
	template <class T, __PM_IF_BF_ARG(T)> constexpr bfloat &operator op##=(bfloat &a, T b) { \
		return a = bfloat((float)a op(float) b);                                             \
	}
__PM_BF_OP(+)
__PM_BF_OP(-)
__PM_BF_OP(*)
__PM_BF_OP(/)
#undef __PM_BF_OP
// comparisons, and float, half or integer op= bfloat, which the built-in
// operators do not reach through bfloat's conversion template
#define __PM_BF_CMP(op)                                                                            \
	constexpr bool operator op(bfloat a, bfloat b) { return (float)a op(float) b; }              \
	template <class T, __PM_IF_BF_ARG(T)> constexpr bool operator op(bfloat a, T b) {              \
		return (float)a op(float) b;                                                             \
	}                                                                                            \
	template <class T, __PM_IF_BF_ARG(T)> constexpr bool operator op(T a, bfloat b) {              \
		return (float)a op(float) b;                                                             \
	}
__PM_BF_CMP(==)
__PM_BF_CMP(!=)
__PM_BF_CMP(<)
__PM_BF_CMP(>)
__PM_BF_CMP(<=)
__PM_BF_CMP(>=)
#undef __PM_BF_CMP
#define __PM_BF_FOP(op)                                                                                          \
	template <class T, typename __pm_enable_if<__pm_bf_arg<T>::ok, int>::type = 0>                             \
	constexpr T &operator op##=(T &a, bfloat b) {                                                              \
		return a = (T)((float)a op(float) b);                                                                  \
	}
__PM_BF_FOP(+)
__PM_BF_FOP(-)
__PM_BF_FOP(*)
__PM_BF_FOP(/)
#undef __PM_BF_FOP
// a bfloat with a float vector: the bfloat becomes a float, and the result
// is the float vector (scales[0] * float4(...) with scales a bfloat4)
#define __PM_BF_VOP(op)                                                                              \
	template <int N> constexpr __pm_ext<float, N> operator op(bfloat a, __pm_ext<float, N> b) {      \
		return (float)a op b;                                                                      \
	}                                                                                              \
	template <int N> constexpr __pm_ext<float, N> operator op(__pm_ext<float, N> a, bfloat b) {      \
		return a op(float) b;                                                                      \
	}                                                                                              \
	template <int N> constexpr __pm_ext<float, N> &operator op##=(__pm_ext<float, N> &a, bfloat b) { \
		return a = a op(float) b;                                                                  \
	}
__PM_BF_VOP(+)
__PM_BF_VOP(-)
__PM_BF_VOP(*)
__PM_BF_VOP(/)
#undef __PM_BF_VOP
constexpr bfloat &operator++(bfloat &a) { return a += 1; }
constexpr bfloat &operator--(bfloat &a) { return a -= 1; }
constexpr bfloat operator++(bfloat &a, int) {
	bfloat r = a;
	a += 1;
	return r;
}
constexpr bfloat operator--(bfloat &a, int) {
	bfloat r = a;
	a -= 1;
	return r;
}

// A bfloat initializing or assigned to an integer variable converts to it,
// as in MSL: the translator writes such a value, in a program using
// bfloat, as __pm_int(value), which gives a bfloat as a __pm_bf_value
// (converting implicitly to every arithmetic type, integers included) and
// every other value as it is.
struct __pm_bf_value {
	bfloat b;
	template <class T, typename __pm_enable_if<__pm_bf_arg<T>::ok, int>::type = 0> constexpr operator T() const {
		return (T)b;
	}
	constexpr operator bfloat() const { return b; }
};
constexpr __pm_bf_value __pm_int(bfloat b) { return {b}; }
// Every other value passes by value: an element of a vector (v.y) is an
// lvalue no reference binds to.
template <class U> constexpr U __pm_int(U u) { return u; }

// c ? x : y with a bfloat and a float or half operand is a float, as the
// usual arithmetic conversions make it in MSL: the translator writes the
// operands of a conditional expression of a program using bfloat as
// __PM_ARMS((x), (y)) (or __PM_ARM for one operand beside a literal), a
// comma expression whose left operand is a __pm_arm tag naming both
// operands' types. Where one is a bfloat and the other a float or half,
// the tag's comma operator converts the operand to float; for every
// other pair the built-in comma operator applies, so the operand passes as
// it is: an lvalue stays one (c ? a : b = x), a void operand stays void
// (c ? f() : g()), a vector's element stays itself.
template <class T> struct __pm_unref { typedef T type; };
template <class T> struct __pm_unref<T &> { typedef T type; };
template <class T> struct __pm_unref<T &&> { typedef T type; };
template <class T> struct __pm_uncv { typedef T type; };
template <class T> struct __pm_uncv<const T> { typedef T type; };
template <class T> struct __pm_uncv<volatile T> { typedef T type; };
template <class T> struct __pm_uncv<const volatile T> { typedef T type; };
template <class S, class O> struct __pm_arm_float {
	enum { v = (__is_same(S, bfloat) && (__is_same(O, float) || __is_same(O, half))) ||
	           ((__is_same(S, float) || __is_same(S, half)) && __is_same(O, bfloat)) };
};
template <class S, class O,
          bool = __pm_arm_float<typename __pm_uncv<typename __pm_unref<S>::type>::type,
                                typename __pm_uncv<typename __pm_unref<O>::type>::type>::v>
struct __pm_arm {};
template <class S, class O> constexpr float operator,(__pm_arm<S, O, true>, float x) { return x; }
#define __PM_ARMS(a, b) (__pm_arm<decltype(a), decltype(b)>(), a) : (__pm_arm<decltype(b), decltype(a)>(), b)
#define __PM_ARM(a, b) (__pm_arm<decltype(a), decltype(b)>(), a)

// bfloat2, bfloat3, bfloat4: elementwise arithmetic, components (x, y, z,
// w and [i]), and conversion to and from float and half vectors. As half3,
// bfloat3 takes 8 bytes.
template <int N> struct __pm_bfstore;
template <> struct __pm_bfstore<2> {
	union {
		bfloat __v[2];
		struct {
			bfloat x, y;
		};
	};
};
template <> struct __pm_bfstore<3> {
	union {
		bfloat __v[4];
		struct {
			bfloat x, y, z;
		};
	};
};
template <> struct __pm_bfstore<4> {
	union {
		bfloat __v[4];
		struct {
			bfloat x, y, z, w;
		};
	};
};
template <int N> struct alignas(N == 2 ? 4 : 8) __pm_bfvec : __pm_bfstore<N> {
	__pm_bfvec() = default;
	__pm_bfvec(bfloat s) {
		for (int i = 0; i < N; i++) this->__v[i] = s;
	}
	// a splat of an integer or float scalar, bfloat4 v = 0 as in MSL
	template <class T, __PM_IF_BF_ARG(T)> __pm_bfvec(T s) {
		for (int i = 0; i < N; i++) this->__v[i] = bfloat(s);
	}
	template <class T> __pm_bfvec(__pm_ext<T, N> x) {
		for (int i = 0; i < N; i++) this->__v[i] = bfloat(x[i]);
	}
	template <class T> operator __pm_ext<T, N>() const {
		__pm_ext<T, N> r;
		for (int i = 0; i < N; i++) r[i] = (T)(float)this->__v[i];
		return r;
	}
	bfloat &operator[](int i) { return this->__v[i]; }
	bfloat operator[](int i) const { return this->__v[i]; }
};
#define __PM_BFVEC_OP(op)                                                                       \
	template <int N> __pm_bfvec<N> operator op(__pm_bfvec<N> a, __pm_bfvec<N> b) {  \
		for (int i = 0; i < N; i++) a[i] = a[i] op b[i];                                      \
		return a;                                                                             \
	}                                                                                         \
	template <int N> __pm_bfvec<N> operator op(__pm_bfvec<N> a, bfloat b) {         \
		return a op __pm_bfvec<N>(b);                                                         \
	}                                                                                         \
	template <int N> __pm_bfvec<N> operator op(bfloat a, __pm_bfvec<N> b) {         \
		return __pm_bfvec<N>(a) op b;                                                         \
	}                                                                                         \
	template <int N> __pm_bfvec<N> &operator op##=(__pm_bfvec<N> &a, __pm_bfvec<N> b) { \
		return a = a op b;                                                                    \
	}
__PM_BFVEC_OP(+)
__PM_BFVEC_OP(-)
__PM_BFVEC_OP(*)
__PM_BFVEC_OP(/)
#undef __PM_BFVEC_OP
template <int N> __pm_bfvec<N> operator-(__pm_bfvec<N> a) {
	for (int i = 0; i < N; i++) a[i] = -a[i];
	return a;
}
template <int N> struct __pm_vt<__pm_bfvec<N>> {
	typedef bfloat elem;
	enum { n = N, is_vec = 0 };
};
template <class T, int N> struct __pm_vec_of {
	typedef __pm_ext<T, N> type;
};
template <int N> struct __pm_vec_of<bfloat, N> {
	typedef __pm_bfvec<N> type;
};
// vec<bool, N> is boolN (int components here, as above)
template <int N> struct __pm_vec_of<bool, N> {
	typedef __pm_ext<int, N> type;
};
template <class T, int N> using vec = typename __pm_vec_of<T, N>::type;
// __pm_vec_elem<V>::type is the element type of a vector type V, and V a
// type that is not a vector has none: a function template parameter
// vec<T, N> is written as a type deduced from the argument, with T its
// element type (the translator's vecDeductions)
template <class V> struct __pm_vec_elem {};
template <class T, int N> struct __pm_vec_elem<T __attribute__((ext_vector_type(N)))> {
	typedef T type;
};
template <int N> struct __pm_vec_elem<__pm_bfvec<N>> {
	typedef bfloat type;
};
typedef __pm_bfvec<2> bfloat2;
typedef __pm_bfvec<3> bfloat3;
typedef __pm_bfvec<4> bfloat4;

// ---------------------------------------------------------------------------
// Vector constructors: float4(x) splats, float4(int4) converts,
// float4(a.xy, z, w) concatenates. In C++ a functional cast takes one
// argument, so each vector type name followed by '(' is a macro calling
// __pm_vmake; the plain name stays a type.
template <class E, class A> constexpr inline void __pm_vput(E *t, int &i, const A &a) {
	if constexpr (__pm_vt<A>::n == 1) {
		t[i++] = (E)a;
	} else {
		for (int j = 0; j < __pm_vt<A>::n; j++) t[i++] = (E)a[j];
	}
}
template <class V> constexpr inline V __pm_vmake() { return (V)(typename __pm_vt<V>::elem)0; }
template <class V, class A> constexpr inline V __pm_vmake(A a) {
	typedef typename __pm_vt<V>::elem E;
	if constexpr (__pm_vt<A>::n == 1 && __is_class(A) && __is_class(E) && !__is_constructible(E, A)) {
		// a class converting to a scalar (MLX's _NoMask: operator bool)
		// reaches bfloat through float, one conversion as MSL's bfloat has
		return (V)(E)(float)a;
	} else if constexpr (__pm_vt<A>::n == 1) {
		return (V)(E)a;
	} else if constexpr (__pm_vt<A>::is_vec && __pm_vt<V>::is_vec) {
		static_assert(__pm_vt<A>::n == __pm_vt<V>::n, "vector conversion between different sizes");
		return __builtin_convertvector(a, V);
	} else {
		static_assert(__pm_vt<A>::n == __pm_vt<V>::n, "vector conversion between different sizes");
		V r{};
		for (int i = 0; i < __pm_vt<V>::n; i++) r[i] = (E)a[i];
		return r;
	}
}
template <class V, class A, class B, class... R> constexpr inline V __pm_vmake(A a, B b, R... r) {
	typedef typename __pm_vt<V>::elem E;
	static_assert(__pm_vt<A>::n + __pm_vt<B>::n + (0 + ... + __pm_vt<R>::n) == __pm_vt<V>::n,
	              "wrong number of components in vector constructor");
	E t[__pm_vt<V>::n] = {};
	int i = 0;
	__pm_vput(t, i, a);
	__pm_vput(t, i, b);
	(__pm_vput(t, i, r), ...);
	V v{};
	for (int j = 0; j < __pm_vt<V>::n; j++) v[j] = t[j];
	return v;
}
// __pm_mask(a > b) marks a comparison of vectors (an int vector, -1 for
// true) that a conversion to a vector type turns into 0 and 1, as MSL's
// bool vectors convert (float4(a > b) is 1.0 where a > b); the translator
// writes it around a comparison that is the whole operand of a vector
// conversion. A comparison of scalars is a bool already.
template <class M> struct __pm_mask_t {
	M m;
};
template <class M> constexpr inline auto __pm_mask(M m) {
	if constexpr (__pm_vt<M>::is_vec) {
		return __pm_mask_t<M>{m};
	} else {
		return m;
	}
}
template <class V, class M> constexpr inline V __pm_vmake(__pm_mask_t<M> a) {
	typedef typename __pm_vt<V>::elem E;
	static_assert(__pm_vt<M>::n == __pm_vt<V>::n, "vector conversion between different sizes");
	V r{};
	for (int i = 0; i < __pm_vt<V>::n; i++) r[i] = a.m[i] ? (E)1 : (E)0;
	return r;
}
// T(a, b, ...) of a template parameter or typedef T: a vector's
// constructor when T names a vector type, else T's (the translator writes
// it __pm_construct<T>(a, b, ...)).
template <class V, class... A> constexpr inline V __pm_construct(A... a) {
	if constexpr (__pm_vt<V>::n > 1) {
		return __pm_vmake<V>(a...);
	} else {
		return V(a...);
	}
}
// static_cast<T>(x) of a template parameter or typedef T (the translator
// writes it __pm_static_cast<T>(x)): a vector conversion when T names a
// vector type, as MSL's static_cast converts the components, else
// static_cast<T>(x).
// A class object is forwarded; a scalar or vector is taken by value, as
// it may be a vector's element (static_cast<T>(v.x)).
template <class T, class A, typename __pm_enable_if<__is_class(typename __pm_uncv<typename __pm_unref<A>::type>::type), int>::type = 0>
constexpr inline T __pm_static_cast(A &&a) {
	if constexpr (__pm_vt<T>::n > 1) {
		return __pm_vmake<T>(a);
	} else {
		return static_cast<T>(static_cast<A &&>(a));
	}
}
template <class T, class A, typename __pm_enable_if<!__is_class(A), int>::type = 0>
constexpr inline T __pm_static_cast(A a) {
	if constexpr (__pm_vt<T>::n > 1) {
		return __pm_vmake<T>(a);
	} else {
		return static_cast<T>(a);
	}
}
// reinterpret_cast<threadgroup T*>(p), which may change the address space
// (threadgroup structs can be generic here: see __pm_threadgroup)
template <class P, class A> constexpr inline P __pm_reinterpret(A a) { return (P)a; }
#define char2(...) __pm_vmake<::char2>(__VA_ARGS__)
#define char3(...) __pm_vmake<::char3>(__VA_ARGS__)
#define char4(...) __pm_vmake<::char4>(__VA_ARGS__)
#define uchar2(...) __pm_vmake<::uchar2>(__VA_ARGS__)
#define uchar3(...) __pm_vmake<::uchar3>(__VA_ARGS__)
#define uchar4(...) __pm_vmake<::uchar4>(__VA_ARGS__)
#define short2(...) __pm_vmake<::short2>(__VA_ARGS__)
#define short3(...) __pm_vmake<::short3>(__VA_ARGS__)
#define short4(...) __pm_vmake<::short4>(__VA_ARGS__)
#define ushort2(...) __pm_vmake<::ushort2>(__VA_ARGS__)
#define ushort3(...) __pm_vmake<::ushort3>(__VA_ARGS__)
#define ushort4(...) __pm_vmake<::ushort4>(__VA_ARGS__)
#define int2(...) __pm_vmake<::int2>(__VA_ARGS__)
#define int3(...) __pm_vmake<::int3>(__VA_ARGS__)
#define int4(...) __pm_vmake<::int4>(__VA_ARGS__)
#define uint2(...) __pm_vmake<::uint2>(__VA_ARGS__)
#define uint3(...) __pm_vmake<::uint3>(__VA_ARGS__)
#define uint4(...) __pm_vmake<::uint4>(__VA_ARGS__)
#define long2(...) __pm_vmake<::long2>(__VA_ARGS__)
#define long3(...) __pm_vmake<::long3>(__VA_ARGS__)
#define long4(...) __pm_vmake<::long4>(__VA_ARGS__)
#define ulong2(...) __pm_vmake<::ulong2>(__VA_ARGS__)
#define ulong3(...) __pm_vmake<::ulong3>(__VA_ARGS__)
#define ulong4(...) __pm_vmake<::ulong4>(__VA_ARGS__)
#define float2(...) __pm_vmake<::float2>(__VA_ARGS__)
#define float3(...) __pm_vmake<::float3>(__VA_ARGS__)
#define float4(...) __pm_vmake<::float4>(__VA_ARGS__)
#define half2(...) __pm_vmake<::half2>(__VA_ARGS__)
#define half3(...) __pm_vmake<::half3>(__VA_ARGS__)
#define half4(...) __pm_vmake<::half4>(__VA_ARGS__)
#define bfloat2(...) __pm_vmake<::bfloat2>(__VA_ARGS__)
#define bfloat3(...) __pm_vmake<::bfloat3>(__VA_ARGS__)
#define bfloat4(...) __pm_vmake<::bfloat4>(__VA_ARGS__)
#define bool2(...) __pm_vmake<::bool2>(__VA_ARGS__)
#define bool3(...) __pm_vmake<::bool3>(__VA_ARGS__)
#define bool4(...) __pm_vmake<::bool4>(__VA_ARGS__)

// Casts to a vector type in cast notation, (float4)x, convert as float4(x)
// does: the translator writes them __pm_cast<float4>() ->* x (->* binds
// like a cast). A unary minus, plus or ~ before the cast applies to its
// result, and a cast of a cast converts twice.
template <class V, char Op = 0> struct __pm_cast {};
template <class V, char Op, class B, char OpB> struct __pm_cast2 {};
template <class V, char Op, class A> constexpr inline V operator->*(__pm_cast<V, Op>, A a) {
	V r = __pm_vmake<V>(a);
	if constexpr (Op == '-') {
		return -r;
	} else if constexpr (Op == '~') {
		return ~r;
	} else {
		return r;
	}
}
template <class V, char Op, class B, char OpB>
constexpr inline __pm_cast2<V, Op, B, OpB> operator->*(__pm_cast<V, Op>, __pm_cast<B, OpB>) {
	return {};
}
template <class V, char Op, class B, char OpB, class A> constexpr inline V operator->*(__pm_cast2<V, Op, B, OpB>, A a) {
	return __pm_cast<V, Op>() ->* (__pm_cast<B, OpB>() ->* a);
}
template <class V> constexpr inline __pm_cast<V, '-'> operator-(__pm_cast<V>) { return {}; }
template <class V> constexpr inline __pm_cast<V> operator+(__pm_cast<V>) { return {}; }
template <class V> constexpr inline __pm_cast<V, '~'> operator~(__pm_cast<V>) { return {}; }

// half literals: the translator turns 1.5h into 1.5_h.
constexpr half operator""_h(long double v) { return (half)(float)v; }
constexpr half operator""_h(unsigned long long v) { return (half)(float)v; }

// ---------------------------------------------------------------------------
// Address spaces. threadgroup is a distinct clang address space, so mixing
// threadgroup and device (or thread) pointers is a compile error, as on
// Apple's compiler. device and constant are the generic address space
// (constant adds const): clang's C++ mode cannot copy a struct out of a
// non-generic address space, and MSL code copies structs from buffers all
// the time. constant implying const keeps file-scope constant values
// compile-time constants.
#define device
#define constant const
#define threadgroup __attribute__((address_space(3)))
#define thread
#define kernel

// Memory scopes of atomic_thread_fence and coherent(scope) (MSL 3.2), which
// Apple's compiler knows without an #include; the values are those of the
// __METAL_MEMORY_SCOPE_*__ macros the preprocessor defines. Memory is
// coherent everywhere here, so coherent(scope) qualifies nothing.
namespace metal {
enum thread_scope {
	thread_scope_thread = 5,
	thread_scope_simdgroup = 4,
	thread_scope_threadgroup = 1,
	thread_scope_device = 0,
};
}
#define coherent(scope)

// METAL_FUNC marks helper functions in Apple's headers and MLX's.
#define METAL_FUNC inline __attribute__((always_inline))

// Function constants: the translator declares, beside each
// constant T name [[function_constant(i)]], whether it has a value.
#define is_function_constant_defined(name) __pm_fcd_##name

// ---------------------------------------------------------------------------
// Launcher plumbing (used by the generated entry points).
extern "C" {
__pm_simd_next __pm_simd(uint op, const void *in, void *out, uint line, uint col, const char *file);
__pm_simd_x *__pm_simd_exchange(void);
const void *__pm_lane_var(const void *var, uint from, uint to, uint local);
void __pm_lane_declared(const void *var);
void __pm_simd_done(__pm_simd_x *x);
void __pm_barrier(uint flags, uint line, uint col, const char *file);
void *__pm_tg_static(uint id, ulong size, ulong align);
void __pm_access(const void *addr, ulong size, uint load, uint store);
// The access hooks the compiler calls at every load and store
// (-fsanitize-coverage=trace-loads,trace-stores): defined here, so that the
// library's second optimisation inlines their fast path at each access
// (compile.go). A miss calls the runtime's __pm_access_miss, never merged
// with another's, so that its return address tells the access.
// They have no debug information of their own: inlined, their
// instructions keep the access's line.
extern __thread __pm_access_state *__pm_tls_access __attribute__((tls_model("initial-exec")));
__attribute__((nomerge)) void __pm_access_miss(void *addr, ulong sizestore);
// __pm_tls_access, which stays the same while a kernel runs (a worker's
// threads run on its OS thread): read without telling the compiler of a
// memory read, so that it reads it once per function rather than after
// every miss.
__PM_INLINE __pm_access_state *__pm_tls_state() {
	__pm_access_state *s;
#if defined(__x86_64__)
	__asm__("movq __pm_tls_access@gottpoff(%%rip), %0\n\tmovq %%fs:(%0), %0" : "=r"(s));
#else
	ulong tp;
	__asm__("adrp %0, :gottprel:__pm_tls_access\n\t"
	        "ldr %0, [%0, #:gottprel_lo12:__pm_tls_access]\n\t"
	        "mrs %1, tpidr_el0\n\t"
	        "ldr %0, [%1, %0]"
	        : "=&r"(s), "=&r"(tp));
#endif
	return s;
}
// AddressSanitizer's callbacks come at every load and store too: those of
// the sizes the hooks cover are empty and vanish once inlined; the others
// (whole 32-byte vectors, a by-value argument's copy), which no hook sees,
// are checked and counted by the runtime's __pm_access_n.
void __pm_access_n(void *addr, ulong n, uint store);
#define __PM_HOOK_FN __attribute__((visibility("hidden"), used, always_inline, nodebug, \
                                    no_sanitize("address", "undefined", "coverage"))) void
#define __PM_HOOK(kind, n, store)                                                             \
	__PM_HOOK_FN __sanitizer_cov_##kind##n(void *addr) {                                      \
		if (__builtin_expect(!__pm_access_fast(__pm_tls_state(), (ulong)addr, n, store), 0)) \
			__pm_access_miss(addr, n + 256 * store);                                           \
	}                                                                                         \
	__PM_HOOK_FN __asan_##kind##n(void *addr) {}
__PM_HOOK(load, 1, 0)
__PM_HOOK(load, 2, 0)
__PM_HOOK(load, 4, 0)
__PM_HOOK(load, 8, 0)
__PM_HOOK(load, 16, 0)
__PM_HOOK(store, 1, 1)
__PM_HOOK(store, 2, 1)
__PM_HOOK(store, 4, 1)
__PM_HOOK(store, 8, 1)
__PM_HOOK(store, 16, 1)
#undef __PM_HOOK
#define __PM_ASAN_N(kind, store)                                 \
	__PM_HOOK_FN __asan_##kind##N(void *addr, ulong n) {         \
		if (n != 1 && n != 2 && n != 4 && n != 8 && n != 16)     \
			__pm_access_n(addr, n, store);                        \
	}
__PM_ASAN_N(load, 0)
__PM_ASAN_N(store, 1)
#undef __PM_ASAN_N
#undef __PM_HOOK_FN
}

struct __pm_bufp {
	void *p;
	template <class T> operator T *() const { return (T *)p; }
};
struct __pm_bufr {
	void *p;
	template <class T> operator T &() const { return *(T *)p; }
};
struct __pm_bi {
	uint x, y, z;
	template <class T> operator T() const {
		typedef typename __pm_vt<T>::elem E;
		if constexpr (__pm_vt<T>::n == 1) {
			return (T)x;
		} else if constexpr (__pm_vt<T>::n == 2) {
			return T{(E)x, (E)y};
		} else {
			return T{(E)x, (E)y, (E)z};
		}
	}
};
#define __PM_BI3(a) __pm_bi{(a)[0], (a)[1], (a)[2]}
#define __PM_BI1(v) __pm_bi{(v), 0, 0}

#endif
