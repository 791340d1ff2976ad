// Scalar math of the stable-ABI target's generated kernels (docs/stable-abi.md, "Generated
// pointwise kernels"): the functions of pointwise expressions (codegen/lang/pointwise.py), by the
// same names as the full target's <opwrap/runtime/pointwise.h>, over plain scalars only (float,
// double, integers), on the host and on a CUDA device.  It includes only torch/headeronly.
//
// The stable target has no at::vec: its CPU loops are plain loops that GCC vectorizes.  GCC
// vectorizes arithmetic, comparisons and selects, but not a call into libm (std::exp, std::tanh:
// glibc's vector variants are declared only under -ffast-math).  So e^x of a float, and what is
// built on it here (sigmoid, tanh), is a branch-free polynomial the compiler vectorizes (exp_f32,
// within 1 ulp of std::exp over float's range; Cody-Waite reduction and Sleef's degree-6
// polynomial), and so is float's log (log_f32); the other transcendental functions call libm and
// keep their loop scalar.  On a
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
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <type_traits>

#if !defined(__CUDACC__) && !defined(__HIPCC__) && defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#include <immintrin.h>  // F16C's conversions, in functions built for it (target attributes)
#endif

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

// Bit casts and a select on bits.  GCC (12) keeps a loop scalar where a floating-point
// comparison selects a value computed with further: under -ftrapping-math (the default) the
// comparison may raise, so it does not if-convert it.  The selects of the functions here are
// made on the values' bits, with integer comparisons, as masks (so that nothing computed for
// one side sinks into a branch), which it vectorizes.
C10_HOST_DEVICE inline uint32_t bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
C10_HOST_DEVICE inline float float_of(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}
C10_HOST_DEVICE inline uint32_t select_bits(bool condition, uint32_t a, uint32_t b) {
  const uint32_t mask = 0u - static_cast<uint32_t>(condition);
  return (mask & a) | (~mask & b);
}

// An element into the type it computes in, and back: `static_cast`, but for float16 and
// bfloat16, whose conversions are written here in integer arithmetic (rounding to nearest even,
// NaN kept a NaN, subnormals and infinities as c10's: the fp16 library's branch-free
// algorithms for float16) so that GCC vectorizes them; c10::Half's and c10::BFloat16's own,
// with their branches, kept a loop scalar (0.05x to 0.3x of the full target's).
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
  return float_of(static_cast<uint32_t>(x.x) << 16);
}
template <>
C10_HOST_DEVICE inline c10::BFloat16 store<c10::BFloat16>(float x) {
  const uint32_t u = bits_of(x);
  const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  // NaN by a self-compare (quiet, so if-converted): AVX-512 narrows it with fewer instructions
  // than an integer compare's mask (rms_norm's bfloat16 rows of 1024: 0.59 -> 0.47 ms)
  return c10::BFloat16(static_cast<uint16_t>(x != x ? 0x7FC0u : rounded), c10::BFloat16::from_bits());
}
template <>
C10_HOST_DEVICE inline float load(c10::Half x) {
  const uint32_t w = static_cast<uint32_t>(x.x) << 16;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t two_w = w + w;
  const float normalized = float_of((two_w >> 4) + (0xE0u << 23)) * 0x1.0p-112f;
  const float denormalized = float_of((two_w >> 17) | (126u << 23)) - 0.5f;
  return float_of(sign | select_bits(two_w < (1u << 27), bits_of(denormalized), bits_of(normalized)));
}
template <>
C10_HOST_DEVICE inline c10::Half store<c10::Half>(float x) {
  const uint32_t w = bits_of(x);
  const uint32_t shl1_w = w + w;
  const uint32_t sign = w & 0x80000000u;
  float base = (float_of(w & 0x7FFFFFFFu) * 0x1.0p+112f) * 0x1.0p-110f;
  uint32_t bias = shl1_w & 0xFF000000u;
  bias = bias < 0x71000000u ? 0x71000000u : bias;
  base = float_of((bias >> 1) + 0x07800000u) + base;
  const uint32_t bits = bits_of(base);
  const uint32_t nonsign = ((bits >> 13) & 0x00007C00u) + (bits & 0x00000FFFu);
  return c10::Half(static_cast<uint16_t>((sign >> 16) | select_bits(shl1_w > 0xFF000000u, 0x7E00u, nonsign)),
                   c10::Half::from_bits());
}

#if !defined(__CUDACC__) && !defined(__HIPCC__)
// The CPU builds of a loop: which one this CPU runs, chosen once, as torch chooses its own
// kernels' (ATEN_CPU_CAPABILITY=default|avx2|avx512 caps it, as it caps torch's).
enum class Capability { DEFAULT = 0, AVX2 = 1, AVX512 = 2 };

inline Capability capability() {
  static const Capability chosen = [] {
    Capability best = Capability::DEFAULT;
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
    // The levels the loops' builds are compiled for (pointwise.h's OPWRAP_PW_CLONES, whose
    // resolver asks the same), which hold aten's AVX2 (AVX2, FMA, F16C) and AVX-512 (F, BW, VL,
    // DQ): the conversions below, built for those levels, run only where a level's every
    // instruction does.
    __builtin_cpu_init();
#if __GNUC__ >= 12  // the levels by name
    const bool v3 = __builtin_cpu_supports("x86-64-v3"), v4 = v3 && __builtin_cpu_supports("x86-64-v4");
#else
    const bool v3 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c") &&
                    __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("lzcnt") &&
                    __builtin_cpu_supports("movbe");
    const bool v4 = v3 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                    __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                    __builtin_cpu_supports("avx512cd");
#endif
    if (v3) best = v4 ? Capability::AVX512 : Capability::AVX2;
#endif
    const char* env = std::getenv("ATEN_CPU_CAPABILITY");
    if (env != nullptr) {
      const std::string_view cap(env);
      const Capability asked = cap == "default" ? Capability::DEFAULT
                               : cap == "avx2"  ? Capability::AVX2
                                                : Capability::AVX512;
      if (cap == "default" || cap == "avx2" || cap == "avx512")
        best = static_cast<int>(asked) < static_cast<int>(best) ? asked : best;
    }
    return best;
  }();
  return chosen;
}

// float16 to float and back over a run of elements, for loops that compute float16 in float
// over buffers.  Where the CPU has F16C, its vcvtph2ps and vcvtps2ph convert 8 elements an
// instruction (16 with AVX-512), as aten's Vectorized<Half> does (rounding to nearest even, as
// c10's; a NaN's payload kept, as there); else `load` and `store`, about 15 integer and float
// instructions an element (GCC 12 converts a `_Float16` with F16C one element at a time, and not
// at all in a vectorized loop: a loop converting with `load` and `store` ran float16 `myadd` at
// 0.18x of the full target, and 0.25x as loops over buffers).
// Each width is built for exactly the instruction set of one build of the loops that call it
// (pointwise.h's OPWRAP_PW_CLONES: arch=x86-64-v3, arch=x86-64-v4), because GCC inlines a
// function with a target of its own only into a caller of the same `arch`: inlined into those
// builds, the conversions run beside the loop's arithmetic, where a call to a function built
// for "avx,f16c" took each block out of the loop (myadd float16, 16M elements, one thread: 4.4
// -> 2.5 ms with the loop's own changes, templates/stable/pointwise.cpp.j2; the full target's
// 2.4).  `to_float` and `from_float`, which choose the width, are always inlined: GCC inlines a
// width into a build of the loop only where the call to it is in that build's own body.
#if defined(__GNUC__)
#define OPWRAP_PW_ALWAYS_INLINE __attribute__((always_inline))
#else
#define OPWRAP_PW_ALWAYS_INLINE
#endif
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
__attribute__((target("arch=x86-64-v3"))) inline void to_float_v3(const c10::Half* in, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
  for (; i < n; ++i) out[i] = _cvtsh_ss(in[i].x);
}
__attribute__((target("arch=x86-64-v3"))) inline void from_float_v3(const float* in, c10::Half* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  for (; i < n; ++i) out[i] = c10::Half(_cvtss_sh(in[i], _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), c10::Half::from_bits());
}
__attribute__((target("arch=x86-64-v4"))) inline void to_float_v4(const c10::Half* in, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(out + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i))));
  for (; i < n; ++i) out[i] = _cvtsh_ss(in[i].x);
}
__attribute__((target("arch=x86-64-v4"))) inline void from_float_v4(const float* in, c10::Half* out, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                        _mm512_cvtps_ph(_mm512_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  for (; i < n; ++i) out[i] = c10::Half(_cvtss_sh(in[i], _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), c10::Half::from_bits());
}
#endif

OPWRAP_PW_ALWAYS_INLINE inline void to_float(const Capability cap, const c10::Half* in, float* out, int64_t n) {
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
  switch (cap) {
    case Capability::AVX512:
      return to_float_v4(in, out, n);
    case Capability::AVX2:
      return to_float_v3(in, out, n);
    case Capability::DEFAULT:
      break;
  }
#endif
  for (int64_t i = 0; i < n; ++i) out[i] = load(in[i]);
}
OPWRAP_PW_ALWAYS_INLINE inline void from_float(const Capability cap, const float* in, c10::Half* out, int64_t n) {
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
  switch (cap) {
    case Capability::AVX512:
      return from_float_v4(in, out, n);
    case Capability::AVX2:
      return from_float_v3(in, out, n);
    case Capability::DEFAULT:
      break;
  }
#endif
  for (int64_t i = 0; i < n; ++i) out[i] = store<c10::Half>(in[i]);
}
// The same, asking which instruction set the CPU has (for one row; a loop over blocks asks
// once and passes `cap`).
OPWRAP_PW_ALWAYS_INLINE inline void to_float(const c10::Half* in, float* out, int64_t n) {
  to_float(capability(), in, out, n);
}
#endif  // !__CUDACC__

// The results of an expression with several (`sin(self), cos(self)`), in the order of the op's returns.
template <typename T, int N>
struct Values {
  T v[N];
};

#if !defined(__CUDA_ARCH__)
// GCC (12) keeps a loop scalar when a floating-point comparison selects a value that is
// computed with further: under -ftrapping-math (the default) a comparison may raise, so it
// does not if-convert it.  The selects here are made on the floats' bits, with integer
// comparisons, which it vectorizes.
// e^x of a float in plain arithmetic, so that a loop calling it vectorizes: Sleef's expf_u10.
// x = n ln2 + r with |r| <= ln2/2 (ln2 in two parts, Cody-Waite), e^r by a degree-6 polynomial,
// 2^n in two factors so that results below FLT_MIN (n down to -150) are subnormal, not zero.
// The ends are masks on the result, as Sleef selects them: inf above 89 (and for inf), 0 below
// -104 (and for -inf); within, the arithmetic overflows to inf where e^x does.  A NaN flows
// through the arithmetic (r, and so the result, is NaN) and falls in neither mask.  Nothing
// clamps x first: n is read from t's bits (no float-to-int conversion, undefined out of range),
// garbage only where a mask replaces the result.
inline float exp_f32(float x) {
  const float big = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer, n in t's low bits
  const float t = x * 1.44269504088896341f + big;
  const float n = t - big;
  float r = x - n * 0.693145751953125f;
  r = r - n * 1.428606765330187045e-06f;
  float p = 0.000198527617612853646278381f;
  p = p * r + 0.00139304355252534151077271f;
  p = p * r + 0.00833336077630519866943359f;
  p = p * r + 0.0416664853692054748535156f;
  p = p * r + 0.166666671633720397949219f;
  p = p * r + 0.5f;
  p = p * r * r + r + 1.0f;
  const uint32_t k = bits_of(t) - 0x4B400000u;  // n in two's complement, for |n| < 2^22
  const uint32_t k1 = static_cast<uint32_t>(static_cast<int32_t>(k) >> 1), k2 = k - k1;  // within: each in [-75, 64]
  const float result = (p * float_of((k1 + 127u) << 23)) * float_of((k2 + 127u) << 23);
  // Ranges of bits, each one unsigned comparison: positive floats above 89 up to inf, negative
  // ones below -104 down to -inf (NaNs lie beyond both).
  const uint32_t u = bits_of(x);
  const bool over = u - 0x42B20001u <= 0x7F800000u - 0x42B20001u, under = u - 0xC2D00001u <= 0xFF800000u - 0xC2D00001u;
  return float_of(select_bits(over, 0x7F800000u, select_bits(under, 0u, bits_of(result))));
}

// tanh(x) of a float in plain arithmetic, so that a loop calling it vectorizes (the full target's
// loops take Sleef's): Cephes' tanhf, its two branches both computed and one selected on the bits.
// Below |x| = 0.625 an odd polynomial (x + x^3 P(x^2)); above, 1 - 2 / (e^2|x| + 1) with the sign
// of x (exp_f32: inf from 2|x| = 89, so 1 there and for inf); NaN stays NaN.  Within 2 ulp of
// std::tanh over float's range (measured: docs/stable-abi.md).
inline float tanh_f32(float x) {
  const uint32_t u = bits_of(x), magnitude = u & 0x7FFFFFFFu;
  const float a = float_of(magnitude), z = a * a;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = p * z * a + a;
  const float e = exp_f32(2.0f * a);
  const float large = 1.0f - 2.0f / (e + 1.0f);
  return float_of((u & 0x80000000u) | select_bits(magnitude < 0x3F200000u, bits_of(small), bits_of(large)));
}

// log(x) of a float in plain arithmetic, so that a loop calling it vectorizes: Cephes' logf.  x =
// 2^e m with m in [sqrt(1/2), sqrt(2)) from the bits (a subnormal x scaled by 2^25 first), log(m)
// = f - f^2/2 + f^3 P(f) with f = m - 1, then e ln 2 in two parts.  -inf for +-0, NaN below 0
// and for NaN, inf for inf, all selected on the bits.  Within 1 ulp of std::log (measured:
// docs/stable-abi.md).
inline float log_f32(float x) {
  const uint32_t u0 = bits_of(x);
  const bool subnormal = u0 < 0x00800000u;  // (and +0: its result is replaced below)
  const uint32_t u = bits_of(float_of(u0) * float_of(select_bits(subnormal, 0x4C000000u, 0x3F800000u)));  // * 2^25
  const bool below = (u & 0x007FFFFFu) < 0x003504F3u;  // m = 2^-1 * 1.mantissa below sqrt(1/2)? then 2m
  const float m = float_of((u & 0x007FFFFFu) | select_bits(below, 0x3F800000u, 0x3F000000u));  // in [0.707, 1.414)
  const int32_t e = static_cast<int32_t>(u >> 23) - select_bits(below, 127u, 126u) - select_bits(subnormal, 25u, 0u);
  const float f = m - 1.0f, z = f * f, ef = static_cast<float>(e);
  float p = 7.0376836292e-2f;
  p = p * f - 1.1514610310e-1f;
  p = p * f + 1.1676998740e-1f;
  p = p * f - 1.2420140846e-1f;
  p = p * f + 1.4249322787e-1f;
  p = p * f - 1.6668057665e-1f;
  p = p * f + 2.0000714765e-1f;
  p = p * f - 2.4999993993e-1f;
  p = p * f + 3.3333331174e-1f;
  float y = p * f * z;
  y = y + ef * -2.12194440e-4f;
  y = y - 0.5f * z;
  const float result = (f + y) + ef * 0.693359375f;
  const uint32_t magnitude = u0 & 0x7FFFFFFFu;
  return float_of(select_bits(magnitude == 0u, 0xFF800000u,                   // log(+-0) = -inf
                              select_bits(u0 > 0x7F800000u, 0x7FC00000u,      // NaN, x < 0: NaN
                                          select_bits(u0 == 0x7F800000u, u0,  // inf
                                                      bits_of(result)))));
}

// e^x of a float, cheaper than exp_f32 for fast_exp (as the full target's loops take at::vec's
// exp_u20 for it): Cephes' expf polynomial without its last term and one power of two, about 18
// vector instructions against 28.  Within 3 ulp for x in [ln 2^-126, ln 2^127.5], 0 below (no
// subnormal results), inf above, NaN for NaN; the ends fixed by masks on the bits (select_bits).
inline float fast_exp_f32(float x) {
  const float t = x * 1.44269504088896341f + 12582912.0f;  // n = round(x log2(e)), in t's low bits too
  const float n = t - 12582912.0f;
  const float r = (x - n * 0.693359375f) - n * -2.12194440e-4f;  // |r| <= ln(2) / 2 (Cody-Waite)
  float p = 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // 2^n from t's bits (no float-to-int conversion, undefined out of range): n in [-126, 127] in range
  const float y = p * float_of((bits_of(t) - (0x4B400000u - 127u)) << 23);  // NaN for a NaN x
  // as in exp_f32: ranges of bits, positive floats above 88.37626 up to inf and negative ones
  // below -87.33655 down to -inf; a NaN is in neither, and y is NaN for it
  const uint32_t u = bits_of(x);
  const bool over = u - 0x42B0C0A6u <= 0x7F800000u - 0x42B0C0A6u, under = u - 0xC2AEAC51u <= 0xFF800000u - 0xC2AEAC51u;
  return float_of(select_bits(over, 0x7F800000u, select_bits(under, 0u, bits_of(y))));
}
#endif

template <typename T>
C10_HOST_DEVICE inline T exp(T x) {
#if !defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<T, float>) return exp_f32(x);
#endif
  return std::exp(x);
}

// tanh: tanh_f32 for float on the CPU (vectorized), else the library's.
template <typename T>
C10_HOST_DEVICE inline T tanh(T x) {
#if !defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<T, float>) return tanh_f32(x);
#endif
  return std::tanh(x);
}

// log: log_f32 for float on the CPU (vectorized), else the library's.
template <typename T>
C10_HOST_DEVICE inline T log(T x) {
#if !defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<T, float>) return log_f32(x);
#endif
  return std::log(x);
}

// fast_exp: e^x within 20 ulp in the full target's vectorized loops; here fast_exp_f32 (within 3
// ulp) for float32 on the CPU, and on a CUDA device the special function unit's __expf, as there.
template <typename T>
C10_HOST_DEVICE inline T fast_exp(T x) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<T, float>) return __expf(x);
#else
  if constexpr (std::is_same_v<T, float>) return fast_exp_f32(x);
#endif
  return exp(x);
}

// `condition ? a : b` on the values' bits, as a mask (see select_bits): a loop of maximum, clamp
// or where vectorizes.
template <typename T>
C10_HOST_DEVICE inline T select_value(bool condition, T a, T b) {
  using U = std::conditional_t<sizeof(T) == 8, uint64_t,
                               std::conditional_t<sizeof(T) == 4, uint32_t,
                                                  std::conditional_t<sizeof(T) == 2, uint16_t, uint8_t>>>;
  U ua, ub;
  std::memcpy(&ua, &a, sizeof(T));
  std::memcpy(&ub, &b, sizeof(T));
  const U mask = static_cast<U>(U(0) - static_cast<U>(condition));
  const U r = static_cast<U>((mask & ua) | (static_cast<U>(~mask) & ub));
  T out;
  std::memcpy(&out, &r, sizeof(T));
  return out;
}

#define OPWRAP_PW_UNARY(name, expr)   \
  template <typename T>               \
  C10_HOST_DEVICE inline T name(T x) { \
    return expr;                      \
  }

OPWRAP_PW_UNARY(neg, -x)
OPWRAP_PW_UNARY(expm1, std::expm1(x))
OPWRAP_PW_UNARY(log1p, std::log1p(x))
OPWRAP_PW_UNARY(log2, std::log2(x))
OPWRAP_PW_UNARY(log10, std::log10(x))
OPWRAP_PW_UNARY(sqrt, std::sqrt(x))
OPWRAP_PW_UNARY(rsqrt, T(1) / std::sqrt(x))
OPWRAP_PW_UNARY(reciprocal, T(1) / x)
OPWRAP_PW_UNARY(sin, std::sin(x))
OPWRAP_PW_UNARY(cos, std::cos(x))
OPWRAP_PW_UNARY(tan, std::tan(x))
OPWRAP_PW_UNARY(sigmoid, T(1) / (T(1) + exp(-x)))
OPWRAP_PW_UNARY(erf, std::erf(x))
OPWRAP_PW_UNARY(erfc, std::erfc(x))
OPWRAP_PW_UNARY(floor, std::floor(x))
OPWRAP_PW_UNARY(ceil, std::ceil(x))
OPWRAP_PW_UNARY(trunc, std::trunc(x))
#undef OPWRAP_PW_UNARY

template <typename T>
C10_HOST_DEVICE inline T abs(T x) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::abs(x);  // (fabs: a mask, vectorized)
  } else {
    return select_value(x < T(0), static_cast<T>(-x), x);
  }
}

// NaN-propagating, as torch.maximum and torch.minimum (x != x only for NaN).  The arguments of
// the functions of several may differ in type where C++'s arithmetic promoted one (int8 + int8 is
// an int): they compute in the common type, and the functor's result converts back to Tv.
template <typename A, typename B, typename T = std::common_type_t<A, B>>
C10_HOST_DEVICE inline T maximum(A a_, B b_) {
  const T a = a_, b = b_;
  return select_value(a != a, a, select_value(b != b, b, select_value(a > b, a, b)));
}
template <typename A, typename B, typename T = std::common_type_t<A, B>>
C10_HOST_DEVICE inline T minimum(A a_, B b_) {
  const T a = a_, b = b_;
  return select_value(a != a, a, select_value(b != b, b, select_value(a < b, a, b)));
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
  return select_value(condition, T(a), T(b));
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

// What a row program computes once a row (codegen/lang/rowwise.py, ROW_FUNCTIONS): the element
// functions, but for float on the CPU libm's exp, log and tanh.  The polynomials above exist so
// that loops vectorize; one value at a time their dependency chains are slower than libm's
// tables (log of a float: log_f32 24-28 ns, std::log 11 ns), which a row-wise program of short
// rows pays once a row (logsumexp: m + log(sum(...))).
namespace per_row {
using namespace ::opwrap::pw;
// static: internal linkage, as the functions above (declared here, not in an unnamed namespace,
// so that a qualified name finds them before those of ::opwrap::pw).  libm's on the CPU only:
// on a CUDA device every function is CUDA's own already.
#if defined(__CUDA_ARCH__)
#define OPWRAP_PW_PER_ROW_LIBM false
#else
#define OPWRAP_PW_PER_ROW_LIBM true
#endif
#define OPWRAP_PW_PER_ROW(name)                                                   \
  template <typename T>                                                           \
  static C10_HOST_DEVICE inline T name(T x) {                                     \
    if constexpr (OPWRAP_PW_PER_ROW_LIBM && std::is_same_v<T, float>) {           \
      return std::name(x);                                                        \
    } else {                                                                      \
      return ::opwrap::pw::name(x);                                               \
    }                                                                             \
  }
OPWRAP_PW_PER_ROW(exp)
OPWRAP_PW_PER_ROW(log)
OPWRAP_PW_PER_ROW(tanh)
#undef OPWRAP_PW_PER_ROW
#undef OPWRAP_PW_PER_ROW_LIBM
}  // namespace per_row
}  // namespace opwrap::pw
