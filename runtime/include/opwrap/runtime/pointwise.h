// The functions of pointwise expressions (codegen/pointwise.py), for both kinds of value a
// generated loop evaluates an expression over: a scalar (host and device code) and, on the
// CPU, an at::vec::Vectorized of one.  The generated text is the same for both.
//
// Everything here has internal linkage (an unnamed namespace): each kernel translation
// unit is compiled for one CPU capability (DEFAULT, AVX2, AVX-512), and a shared inline
// definition compiled with AVX-512 instructions must never be the one a DEFAULT loop calls.
//
// The TensorIterator the generated kernel wrappers build comes with it (pointwise_iterator.h).
#pragma once

#include <c10/macros/Macros.h>

#include <cmath>
#include <type_traits>

#include <opwrap/runtime/pointwise_iterator.h>

#if !defined(__CUDACC__) && !defined(__HIPCC__)
#include <ATen/cpu/vec/vec.h>
#define OPWRAP_PW_VECTORIZED 1
#endif

namespace opwrap::pw {
namespace {

template <typename T>
constexpr bool is_scalar_v = std::is_arithmetic_v<T>;

// ---------------------------------------------------------------- scalars
#define OPWRAP_PW_SCALAR_UNARY(name, expr)                                 \
  template <typename T, std::enable_if_t<is_scalar_v<T>, int> = 0>        \
  C10_HOST_DEVICE inline T name(T x) {                                     \
    return expr;                                                           \
  }

OPWRAP_PW_SCALAR_UNARY(neg, -x)
OPWRAP_PW_SCALAR_UNARY(abs, std::abs(x))
OPWRAP_PW_SCALAR_UNARY(exp, std::exp(x))
OPWRAP_PW_SCALAR_UNARY(expm1, std::expm1(x))
OPWRAP_PW_SCALAR_UNARY(log, std::log(x))
OPWRAP_PW_SCALAR_UNARY(log1p, std::log1p(x))
OPWRAP_PW_SCALAR_UNARY(log2, std::log2(x))
OPWRAP_PW_SCALAR_UNARY(log10, std::log10(x))
OPWRAP_PW_SCALAR_UNARY(sqrt, std::sqrt(x))
OPWRAP_PW_SCALAR_UNARY(rsqrt, T(1) / std::sqrt(x))
OPWRAP_PW_SCALAR_UNARY(reciprocal, T(1) / x)
OPWRAP_PW_SCALAR_UNARY(sin, std::sin(x))
OPWRAP_PW_SCALAR_UNARY(cos, std::cos(x))
OPWRAP_PW_SCALAR_UNARY(tan, std::tan(x))
OPWRAP_PW_SCALAR_UNARY(tanh, std::tanh(x))
OPWRAP_PW_SCALAR_UNARY(sigmoid, T(1) / (T(1) + std::exp(-x)))
OPWRAP_PW_SCALAR_UNARY(erf, std::erf(x))
OPWRAP_PW_SCALAR_UNARY(erfc, std::erfc(x))
OPWRAP_PW_SCALAR_UNARY(floor, std::floor(x))
OPWRAP_PW_SCALAR_UNARY(ceil, std::ceil(x))
OPWRAP_PW_SCALAR_UNARY(trunc, std::trunc(x))
#undef OPWRAP_PW_SCALAR_UNARY

// NaN-propagating, as torch.maximum and torch.minimum (x != x only for NaN).
template <typename T, std::enable_if_t<is_scalar_v<T>, int> = 0>
C10_HOST_DEVICE inline T maximum(T a, T b) {
  return a != a ? a : (b != b ? b : (a > b ? a : b));
}
template <typename T, std::enable_if_t<is_scalar_v<T>, int> = 0>
C10_HOST_DEVICE inline T minimum(T a, T b) {
  return a != a ? a : (b != b ? b : (a < b ? a : b));
}
template <typename T, std::enable_if_t<is_scalar_v<T>, int> = 0>
C10_HOST_DEVICE inline T relu(T x) {
  return maximum(x, T(0));
}
template <typename T, std::enable_if_t<is_scalar_v<T>, int> = 0>
C10_HOST_DEVICE inline T clamp(T x, T lo, T hi) {
  return minimum(maximum(x, lo), hi);
}
template <typename T, std::enable_if_t<is_scalar_v<T>, int> = 0>
C10_HOST_DEVICE inline T pow(T a, T b) {
  return std::pow(a, b);
}
template <typename T, std::enable_if_t<is_scalar_v<T>, int> = 0>
C10_HOST_DEVICE inline T where(bool condition, T a, T b) {
  return condition ? a : b;
}

// ---------------------------------------------------------------- vectors (CPU)
#ifdef OPWRAP_PW_VECTORIZED
template <typename T>
using Vec = at::vec::Vectorized<T>;

#define OPWRAP_PW_VECTOR_METHOD(name, method) \
  template <typename T>                       \
  inline Vec<T> name(const Vec<T>& x) {       \
    return x.method();                        \
  }

OPWRAP_PW_VECTOR_METHOD(neg, neg)
OPWRAP_PW_VECTOR_METHOD(abs, abs)
OPWRAP_PW_VECTOR_METHOD(exp, exp)
OPWRAP_PW_VECTOR_METHOD(expm1, expm1)
OPWRAP_PW_VECTOR_METHOD(log, log)
OPWRAP_PW_VECTOR_METHOD(log1p, log1p)
OPWRAP_PW_VECTOR_METHOD(log2, log2)
OPWRAP_PW_VECTOR_METHOD(log10, log10)
OPWRAP_PW_VECTOR_METHOD(sqrt, sqrt)
OPWRAP_PW_VECTOR_METHOD(rsqrt, rsqrt)
OPWRAP_PW_VECTOR_METHOD(reciprocal, reciprocal)
OPWRAP_PW_VECTOR_METHOD(sin, sin)
OPWRAP_PW_VECTOR_METHOD(cos, cos)
OPWRAP_PW_VECTOR_METHOD(tan, tan)
OPWRAP_PW_VECTOR_METHOD(tanh, tanh)
OPWRAP_PW_VECTOR_METHOD(erf, erf)
OPWRAP_PW_VECTOR_METHOD(erfc, erfc)
OPWRAP_PW_VECTOR_METHOD(floor, floor)
OPWRAP_PW_VECTOR_METHOD(ceil, ceil)
OPWRAP_PW_VECTOR_METHOD(trunc, trunc)
#undef OPWRAP_PW_VECTOR_METHOD

template <typename T>
inline Vec<T> sigmoid(const Vec<T>& x) {
  return (Vec<T>(T(1)) + x.neg().exp()).reciprocal();
}
template <typename T>
inline Vec<T> maximum(const Vec<T>& a, const Vec<T>& b) {
  return at::vec::maximum(a, b);
}
template <typename T>
inline Vec<T> minimum(const Vec<T>& a, const Vec<T>& b) {
  return at::vec::minimum(a, b);
}
template <typename T>
inline Vec<T> relu(const Vec<T>& x) {
  return at::vec::maximum(x, Vec<T>(T(0)));
}
template <typename T>
inline Vec<T> clamp(const Vec<T>& x, const Vec<T>& lo, const Vec<T>& hi) {
  return at::vec::minimum(at::vec::maximum(x, lo), hi);
}
template <typename T>
inline Vec<T> pow(const Vec<T>& a, const Vec<T>& b) {
  return a.pow(b);
}
// A vector comparison is a mask with all bits of the true lanes set.
template <typename T>
inline Vec<T> where(const Vec<T>& mask, const Vec<T>& a, const Vec<T>& b) {
  return Vec<T>::blendv(b, a, mask);
}
#endif  // OPWRAP_PW_VECTORIZED

}  // namespace
}  // namespace opwrap::pw
