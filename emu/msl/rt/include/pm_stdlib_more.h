// puremetal shim, included by <metal_stdlib> inside namespace metal: the
// type traits vec_elements and __is_valid_simdgroup_type.

// vec_elements<T>::value is the number of components of a vector type T,
// and 0 for any other type.
template <class T> struct vec_elements : integral_constant<uint, is_vector<T>::value ? (uint)__pm_vt<remove_cv_t<T>>::n : 0u> {};
// __is_valid_simdgroup_type<T>::value tells whether the SIMD-group
// functions take T: the 8-, 16- and 32-bit integers, float and half, and
// their vectors (programs test it to pick a SIMD-group reduction).
template <class T> struct __pm_simd_elem : false_type {};
#define __PM_MM_SIMD(T) \
	template <> struct __pm_simd_elem<T> : true_type {};
__PM_MM_SIMD(char) __PM_MM_SIMD(uchar) __PM_MM_SIMD(short) __PM_MM_SIMD(ushort) __PM_MM_SIMD(int) __PM_MM_SIMD(uint)
__PM_MM_SIMD(float) __PM_MM_SIMD(half)
#undef __PM_MM_SIMD
template <class T> struct __is_valid_simdgroup_type
	: bool_constant<__pm_simd_elem<typename __pm_vt<remove_cv_t<T>>::elem>::value &&
	                (__pm_vt<remove_cv_t<T>>::n == 1 || __pm_vt<remove_cv_t<T>>::is_vec)> {};
