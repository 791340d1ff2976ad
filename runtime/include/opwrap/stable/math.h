// Scalar math of the stable-ABI target's generated kernels (docs/stable-abi.md, "Generated
// pointwise kernels"): the functions of pointwise expressions (codegen/lang/pointwise.py), by the
// same names as the full target's <opwrap/runtime/pointwise.h>, over plain scalars only (float,
// double, integers), on the host and on a CUDA device.  It includes only torch/headeronly.
//
// The stable target has no at::vec: its CPU loops are plain loops that GCC vectorizes.  GCC
// vectorizes arithmetic, comparisons and selects, but not a call into libm (std::exp, std::tanh:
// glibc's vector variants are declared only under -ffast-math).  So e^x of a float, and what is
// built on it here (sigmoid), is a branch-free polynomial the compiler vectorizes (exp_f32,
// within 1 ulp of std::exp over float's range; Cody-Waite reduction and Sleef's degree-6
// polynomial); the other transcendental functions call libm and keep their loop scalar.  On a
// CUDA device every function is CUDA's own.
//
// Internal linkage (an unnamed namespace), as <opwrap/runtime/pointwise.h>: the loops are
// compiled once per instruction set (target_clones), and each build inlines its own copy.
#pragma once

#include <torch/headeronly/macros/Macros.h>
#include <torch/headeronly/util/BFloat16.h>
#include <torch/headeronly/util/Half.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace opwrap::pw {
namespace {

// The type an element computes in: float for the reduced floating types, else itself (aten's
// at::opmath_type).
template <typename T>
struct OpMath {
  using type = T;
};
template <>
struct OpMath<c10::Half> {
  using type = float;
};
template <>
struct OpMath<c10::BFloat16> {
  using type = float;
};
template <typename T>
using opmath_t = typename OpMath<T>::type;

// An element into the type it computes in, and back (`static_cast` for all but bfloat16, whose
// conversions are written here in integer arithmetic, rounding to nearest even and keeping NaN
// a NaN as c10's, so that GCC vectorizes them: c10::BFloat16's own, with their NaN branch,
// kept a bfloat16 loop scalar, at 0.05x to 0.3x of the full target's).
template <typename T>
C10_HOST_DEVICE inline opmath_t<T> load(T x) {
  return static_cast<opmath_t<T>>(x);
}
template <typename T>
C10_HOST_DEVICE inline T store(opmath_t<T> x) {
  return static_cast<T>(x);
}
template <>
C10_HOST_DEVICE inline float load(c10::BFloat16 x) {
  const uint32_t bits = static_cast<uint32_t>(x.x) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
template <>
C10_HOST_DEVICE inline c10::BFloat16 store<c10::BFloat16>(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  return c10::BFloat16(static_cast<uint16_t>(x != x ? 0x7FC0u : rounded), c10::BFloat16::from_bits());
}

// The results of an expression with several (`sin(self), cos(self)`), in the order of the op's returns.
template <typename T, int N>
struct Values {
  T v[N];
};

#if !defined(__CUDA_ARCH__)
// e^x of a float in plain arithmetic, so that a loop calling it vectorizes: x = n ln2 + r with
// |r| <= ln2/2 (ln2 in two parts, Cody-Waite), e^r by a degree-6 polynomial (Sleef's expf_u10
// coefficients), 2^n in two factors so that results below FLT_MIN (n down to -150) are
// subnormal, not zero.  Clamped to [-104, 89], beyond which e^x is 0 and inf; NaN stays NaN.
inline float exp_f32(float x) {
  const float c = x < -104.0f ? -104.0f : (x > 89.0f ? 89.0f : x);  // NaN: compares false, stays
  const float big = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float n = (c * 1.44269504088896341f + big) - big;
  float r = c - n * 0.693145751953125f;
  r = r - n * 1.428606765330187045e-06f;
  float p = 0.000198527617612853646278381f;
  p = p * r + 0.00139304355252534151077271f;
  p = p * r + 0.00833336077630519866943359f;
  p = p * r + 0.0416664853692054748535156f;
  p = p * r + 0.166666671633720397949219f;
  p = p * r + 0.5f;
  p = p * r * r + r + 1.0f;
  const int32_t k = static_cast<int32_t>(n);
  const int32_t k1 = k >> 1, k2 = k - k1;  // each in [-75, 64]: 2^k1 and 2^k2 are normal
  const int32_t b1 = (k1 + 127) << 23, b2 = (k2 + 127) << 23;
  float s1, s2;
  std::memcpy(&s1, &b1, sizeof s1);
  std::memcpy(&s2, &b2, sizeof s2);
  return (p * s1) * s2;
}
#endif

template <typename T>
C10_HOST_DEVICE inline T exp(T x) {
#if !defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<T, float>) return exp_f32(x);
#endif
  return std::exp(x);
}

// fast_exp: e^x within 20 ulp in the full target's vectorized loops; here exp_f32 (within 1 ulp)
// on the CPU, and for float32 on a CUDA device the special function unit's __expf, as there.
template <typename T>
C10_HOST_DEVICE inline T fast_exp(T x) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<T, float>) return __expf(x);
#endif
  return exp(x);
}

#define OPWRAP_PW_UNARY(name, expr)   \
  template <typename T>               \
  C10_HOST_DEVICE inline T name(T x) { \
    return expr;                      \
  }

OPWRAP_PW_UNARY(neg, -x)
OPWRAP_PW_UNARY(abs, x < T(0) ? -x : x)
OPWRAP_PW_UNARY(expm1, std::expm1(x))
OPWRAP_PW_UNARY(log, std::log(x))
OPWRAP_PW_UNARY(log1p, std::log1p(x))
OPWRAP_PW_UNARY(log2, std::log2(x))
OPWRAP_PW_UNARY(log10, std::log10(x))
OPWRAP_PW_UNARY(sqrt, std::sqrt(x))
OPWRAP_PW_UNARY(rsqrt, T(1) / std::sqrt(x))
OPWRAP_PW_UNARY(reciprocal, T(1) / x)
OPWRAP_PW_UNARY(sin, std::sin(x))
OPWRAP_PW_UNARY(cos, std::cos(x))
OPWRAP_PW_UNARY(tan, std::tan(x))
OPWRAP_PW_UNARY(tanh, std::tanh(x))
OPWRAP_PW_UNARY(sigmoid, T(1) / (T(1) + exp(-x)))
OPWRAP_PW_UNARY(erf, std::erf(x))
OPWRAP_PW_UNARY(erfc, std::erfc(x))
OPWRAP_PW_UNARY(floor, std::floor(x))
OPWRAP_PW_UNARY(ceil, std::ceil(x))
OPWRAP_PW_UNARY(trunc, std::trunc(x))
#undef OPWRAP_PW_UNARY

// NaN-propagating, as torch.maximum and torch.minimum (x != x only for NaN).  The arguments of
// the functions of several may differ in type where C++'s arithmetic promoted one (int8 + int8 is
// an int): they compute in the common type, and the functor's result converts back to Tv.
template <typename A, typename B, typename T = std::common_type_t<A, B>>
C10_HOST_DEVICE inline T maximum(A a_, B b_) {
  const T a = a_, b = b_;
  return a != a ? a : (b != b ? b : (a > b ? a : b));
}
template <typename A, typename B, typename T = std::common_type_t<A, B>>
C10_HOST_DEVICE inline T minimum(A a_, B b_) {
  const T a = a_, b = b_;
  return a != a ? a : (b != b ? b : (a < b ? a : b));
}
template <typename T>
C10_HOST_DEVICE inline T relu(T x) {
  return maximum(x, T(0));
}
template <typename X, typename L, typename H>
C10_HOST_DEVICE inline std::common_type_t<X, L, H> clamp(X x, L lo, H hi) {
  return minimum(maximum(x, lo), hi);
}
template <typename A, typename B, typename T = std::common_type_t<A, B>>
C10_HOST_DEVICE inline T pow(A a, B b) {
  return std::pow(T(a), T(b));
}
template <typename A, typename B, typename T = std::common_type_t<A, B>>
C10_HOST_DEVICE inline T where(bool condition, A a, B b) {
  return condition ? T(a) : T(b);
}
// sin(x) and cos(x) of one value (the pointwise compiler pairs them): one sincos on a device.
template <typename T>
C10_HOST_DEVICE inline Values<T, 2> sincos(T x) {
#if defined(__CUDA_ARCH__)
  T s, c;
  if constexpr (std::is_same_v<T, float>) {
    ::sincosf(x, &s, &c);
  } else {
    ::sincos(x, &s, &c);
  }
  return {{s, c}};
#else
  return {{std::sin(x), std::cos(x)}};
#endif
}

}  // namespace
}  // namespace opwrap::pw
