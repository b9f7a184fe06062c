// puremetal shim of <simd/simd.h> as Metal programs include it (headers
// shared with the host): the vector and matrix types by their simd_,
// vector_ and matrix_ names.
#pragma once
#include <metal_stdlib>
#define __PM_SIMD_VEC(T)                                                     \
	typedef T simd_##T##2 __attribute__((ext_vector_type(2)));            \
	typedef T simd_##T##3 __attribute__((ext_vector_type(3)));            \
	typedef T simd_##T##4 __attribute__((ext_vector_type(4)));            \
	typedef simd_##T##2 vector_##T##2;                                    \
	typedef simd_##T##3 vector_##T##3;                                    \
	typedef simd_##T##4 vector_##T##4;
__PM_SIMD_VEC(char)
__PM_SIMD_VEC(uchar)
__PM_SIMD_VEC(short)
__PM_SIMD_VEC(ushort)
__PM_SIMD_VEC(int)
__PM_SIMD_VEC(uint)
__PM_SIMD_VEC(long)
__PM_SIMD_VEC(ulong)
__PM_SIMD_VEC(float)
#undef __PM_SIMD_VEC
typedef metal::float2x2 simd_float2x2;
typedef metal::float2x2 matrix_float2x2;
typedef metal::float2x3 simd_float2x3;
typedef metal::float2x3 matrix_float2x3;
typedef metal::float2x4 simd_float2x4;
typedef metal::float2x4 matrix_float2x4;
typedef metal::float3x2 simd_float3x2;
typedef metal::float3x2 matrix_float3x2;
typedef metal::float3x3 simd_float3x3;
typedef metal::float3x3 matrix_float3x3;
typedef metal::float3x4 simd_float3x4;
typedef metal::float3x4 matrix_float3x4;
typedef metal::float4x2 simd_float4x2;
typedef metal::float4x2 matrix_float4x2;
typedef metal::float4x3 simd_float4x3;
typedef metal::float4x3 matrix_float4x3;
typedef metal::float4x4 simd_float4x4;
typedef metal::float4x4 matrix_float4x4;
