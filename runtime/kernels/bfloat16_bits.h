// float32 <-> bfloat16 on the bits, shared by the kernels of both targets; it includes no
// torch header.
#pragma once

#include <cstdint>
#include <cstring>

namespace opwrap::kernels {

// The bfloat16 nearest (ties to even) to a float's bits `u`, in the low 16 bits, as
// c10::BFloat16 rounds a float that is not NaN: for a uint32_t or a GCC vector of them.
template <typename U>
inline U bfloat16_rounded_bits(U u) {
  return (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
}

#if !defined(__CUDACC__) && !defined(__HIPCC__)
// float32 <-> bfloat16 over a run, in loops the compiler vectorizes (c10::BFloat16's
// conversions, with their NaN branch, it does not): a bfloat16 is the top half of a float,
// rounded to nearest even, NaN kept a (quiet) NaN, exactly as c10::BFloat16 converts.
__attribute__((always_inline)) inline void float_to_bfloat16(const float* in, uint16_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, in + i, sizeof(u));
    out[i] = static_cast<uint16_t>(in[i] != in[i] ? 0x7FC0u : bfloat16_rounded_bits(u));
  }
}

inline void bfloat16_to_float(const uint16_t* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t u = static_cast<uint32_t>(in[i]) << 16;
    std::memcpy(out + i, &u, sizeof(u));
  }
}

// Baseline x86-64 (SSE2) has no instruction that narrows 32-bit lanes to 16: the float ->
// bfloat16 loop is also compiled for AVX2, in a function of its own name (so that no inline
// function is built for two instruction sets), and chosen at run time.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("avx2"))) inline void float_to_bfloat16_avx2(const float* in, uint16_t* out, int64_t n) {
  float_to_bfloat16(in, out, n);
}
#endif

// float_to_bfloat16 in the best build this CPU runs.
inline void float_to_bfloat16_best(const float* in, uint16_t* out, int64_t n) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) return float_to_bfloat16_avx2(in, out, n);
#endif
  float_to_bfloat16(in, out, n);
}
#endif  // !__CUDACC__

}  // namespace opwrap::kernels
