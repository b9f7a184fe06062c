// puremetal shim, included by <metal_stdlib> inside namespace metal: the
// pack and unpack functions of <metal_pack>. Normalized integers sit in a
// uint (or a ushort for 565), the first component in the least significant
// bits. Unpacking divides a code by the largest one: 2^n - 1 for unorm,
// 2^(n-1) - 1 for snorm, whose most negative code then clamps to -1.
// Packing clamps to [0, 1] (unorm) or [-1, 1] (snorm), scales by that
// largest code and rounds to nearest even; a NaN packs as 0. The sRGB
// forms apply the sRGB transfer function to the three color components,
// never to alpha. The half forms compute as the float ones, and round the
// unpacked values to half.

inline float __pm_unorm_to_float(uint c, uint max) { return (float)c / (float)max; }
inline float __pm_snorm_to_float(int c, int max) { return __builtin_fmaxf((float)c / (float)max, -1.0f); }
inline uint __pm_float_to_unorm(float f, uint max) {
	if (f != f) return 0;
	f = __builtin_fminf(__builtin_fmaxf(f, 0.0f), 1.0f);
	return (uint)__builtin_rintf(f * (float)max);
}
// the code of a snorm of bits bits, as the bits of its two's complement
inline uint __pm_float_to_snorm(float f, int max, uint bits) {
	if (f != f) return 0;
	f = __builtin_fminf(__builtin_fmaxf(f, -1.0f), 1.0f);
	return (uint)(int)__builtin_rintf(f * (float)max) & ((1u << bits) - 1u);
}
inline float __pm_srgb_to_linear(float c) {
	return c <= 0.04045f ? c / 12.92f : __builtin_powf((c + 0.055f) / 1.055f, 2.4f);
}
inline float __pm_linear_to_srgb(float c) {
	if (c != c || c <= 0.0f) return 0.0f;
	if (c >= 1.0f) return 1.0f;
	if (c < 0.0031308f) return 12.92f * c;
	return 1.055f * __builtin_powf(c, 1.0f / 2.4f) - 0.055f;
}

inline float4 unpack_unorm4x8_to_float(uint x) {
	float4 r;
	for (int i = 0; i < 4; i++) r[i] = __pm_unorm_to_float(x >> (8 * i) & 0xffu, 255);
	return r;
}
inline float4 unpack_snorm4x8_to_float(uint x) {
	float4 r;
	for (int i = 0; i < 4; i++) r[i] = __pm_snorm_to_float((int)(signed char)(x >> (8 * i)), 127);
	return r;
}
inline float4 unpack_unorm4x8_srgb_to_float(uint x) {
	float4 r = unpack_unorm4x8_to_float(x);
	for (int i = 0; i < 3; i++) r[i] = __pm_srgb_to_linear(r[i]);
	return r;
}
inline float2 unpack_unorm2x16_to_float(uint x) {
	float2 r = {__pm_unorm_to_float(x & 0xffffu, 65535), __pm_unorm_to_float(x >> 16, 65535)};
	return r;
}
inline float2 unpack_snorm2x16_to_float(uint x) {
	float2 r = {__pm_snorm_to_float((int)(short)x, 32767), __pm_snorm_to_float((int)(short)(x >> 16), 32767)};
	return r;
}
inline float4 unpack_unorm10a2_to_float(uint x) {
	float4 r = {__pm_unorm_to_float(x & 0x3ffu, 1023), __pm_unorm_to_float(x >> 10 & 0x3ffu, 1023),
	            __pm_unorm_to_float(x >> 20 & 0x3ffu, 1023), __pm_unorm_to_float(x >> 30, 3)};
	return r;
}
inline float3 unpack_unorm565_to_float(ushort x) {
	float3 r = {__pm_unorm_to_float(x & 0x1fu, 31), __pm_unorm_to_float(x >> 5 & 0x3fu, 63),
	            __pm_unorm_to_float((uint)x >> 11, 31)};
	return r;
}
inline half4 unpack_unorm4x8_to_half(uint x) { return __builtin_convertvector(unpack_unorm4x8_to_float(x), half4); }
inline half4 unpack_snorm4x8_to_half(uint x) { return __builtin_convertvector(unpack_snorm4x8_to_float(x), half4); }
inline half4 unpack_unorm4x8_srgb_to_half(uint x) {
	return __builtin_convertvector(unpack_unorm4x8_srgb_to_float(x), half4);
}
inline half2 unpack_unorm2x16_to_half(uint x) { return __builtin_convertvector(unpack_unorm2x16_to_float(x), half2); }
inline half2 unpack_snorm2x16_to_half(uint x) { return __builtin_convertvector(unpack_snorm2x16_to_float(x), half2); }
inline half4 unpack_unorm10a2_to_half(uint x) { return __builtin_convertvector(unpack_unorm10a2_to_float(x), half4); }
inline half3 unpack_unorm565_to_half(ushort x) { return __builtin_convertvector(unpack_unorm565_to_float(x), half3); }

inline uint pack_float_to_unorm4x8(float4 x) {
	uint r = 0;
	for (int i = 0; i < 4; i++) r |= __pm_float_to_unorm(x[i], 255) << (8 * i);
	return r;
}
inline uint pack_float_to_snorm4x8(float4 x) {
	uint r = 0;
	for (int i = 0; i < 4; i++) r |= __pm_float_to_snorm(x[i], 127, 8) << (8 * i);
	return r;
}
inline uint pack_float_to_srgb_unorm4x8(float4 x) {
	for (int i = 0; i < 3; i++) x[i] = __pm_linear_to_srgb(x[i]);
	return pack_float_to_unorm4x8(x);
}
inline uint pack_float_to_unorm2x16(float2 x) {
	return __pm_float_to_unorm(x[0], 65535) | __pm_float_to_unorm(x[1], 65535) << 16;
}
inline uint pack_float_to_snorm2x16(float2 x) {
	return __pm_float_to_snorm(x[0], 32767, 16) | __pm_float_to_snorm(x[1], 32767, 16) << 16;
}
inline uint pack_float_to_unorm10a2(float4 x) {
	return __pm_float_to_unorm(x[0], 1023) | __pm_float_to_unorm(x[1], 1023) << 10 |
	       __pm_float_to_unorm(x[2], 1023) << 20 | __pm_float_to_unorm(x[3], 3) << 30;
}
inline ushort pack_float_to_unorm565(float3 x) {
	return (ushort)(__pm_float_to_unorm(x[0], 31) | __pm_float_to_unorm(x[1], 63) << 5 | __pm_float_to_unorm(x[2], 31) << 11);
}
inline uint pack_half_to_unorm4x8(half4 x) { return pack_float_to_unorm4x8(__builtin_convertvector(x, float4)); }
inline uint pack_half_to_snorm4x8(half4 x) { return pack_float_to_snorm4x8(__builtin_convertvector(x, float4)); }
inline uint pack_half_to_srgb_unorm4x8(half4 x) { return pack_float_to_srgb_unorm4x8(__builtin_convertvector(x, float4)); }
inline uint pack_half_to_unorm2x16(half2 x) { return pack_float_to_unorm2x16(__builtin_convertvector(x, float2)); }
inline uint pack_half_to_snorm2x16(half2 x) { return pack_float_to_snorm2x16(__builtin_convertvector(x, float2)); }
inline uint pack_half_to_unorm10a2(half4 x) { return pack_float_to_unorm10a2(__builtin_convertvector(x, float4)); }
inline ushort pack_half_to_unorm565(half3 x) { return pack_float_to_unorm565(__builtin_convertvector(x, float3)); }
