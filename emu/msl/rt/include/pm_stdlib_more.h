// puremetal shim, included by <metal_stdlib> inside namespace metal: the
// type trait vec_elements.

// vec_elements<T>::value is the number of components of a vector type T,
// and 0 for any other type.
template <class T> struct vec_elements : integral_constant<uint, is_vector<T>::value ? (uint)__pm_vt<remove_cv_t<T>>::n : 0u> {};
