// Hand-written kernel of opwrap::to_dtype: one instantiation per pair of input and output
// dtypes; each element converted as aten's copy_ converts it.
#pragma once

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <c10/util/BFloat16.h>
#include <c10/util/TypeCast.h>

#include "common.h"

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace opwrap::kernels {

// float32 <-> bfloat16 on the bits, in loops the compiler vectorizes (c10::BFloat16's
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
// bfloat16 loop is also compiled for AVX2 (common.h's OPWRAP_AVX2_CLONES), chosen at run time.
#if OPWRAP_AVX2_CLONES
__attribute__((target("avx2"))) inline void float_to_bfloat16_avx2(const float* in, uint16_t* out, int64_t n) {
  float_to_bfloat16(in, out, n);
}
#endif

template <typename scalar_t, typename result_t>
void to_dtype_cpu(const at::Tensor& self, at::ScalarType /*dtype*/, at::Tensor& result) {
  const scalar_t* in = self.const_data_ptr<scalar_t>();
  result_t* out = result.mutable_data_ptr<result_t>();
  at::parallel_for(0, self.numel(), 32768, [&](int64_t begin, int64_t end) {
    if constexpr (std::is_same_v<scalar_t, float> && std::is_same_v<result_t, c10::BFloat16>) {
#if OPWRAP_AVX2_CLONES
      static const bool avx2 = __builtin_cpu_supports("avx2");
      if (avx2) return float_to_bfloat16_avx2(in + begin, reinterpret_cast<uint16_t*>(out + begin), end - begin);
#endif
      float_to_bfloat16(in + begin, reinterpret_cast<uint16_t*>(out + begin), end - begin);
    } else if constexpr (std::is_same_v<scalar_t, c10::BFloat16> && std::is_same_v<result_t, float>) {
      bfloat16_to_float(reinterpret_cast<const uint16_t*>(in + begin), out + begin, end - begin);
    } else {
      for (int64_t i = begin; i < end; ++i) out[i] = c10::static_cast_with_inter_type<result_t, scalar_t>::apply(in[i]);
    }
  });
}

}  // namespace opwrap::kernels
