// opwrap::to_dtype against torch's stable API: one instantiation per pair of input and output
// dtypes, each element converted with static_cast (through float for float16 and bfloat16,
// as c10's conversions do), float32 <-> bfloat16 by the full target's loops on the bits
// (../bfloat16_bits.h), which the compiler vectorizes.
#pragma once

#include "../bfloat16_bits.h"  // float_to_bfloat16_best, bfloat16_to_float
#include "common.h"

#include <torch/headeronly/util/BFloat16.h>
#include <torch/headeronly/util/Half.h>

#include <cstdint>
#include <type_traits>

namespace opwrap::kernels {

template <typename scalar_t, typename result_t>
void to_dtype_cpu(const torch::stable::Tensor& self, torch::headeronly::ScalarType /*dtype*/,
                  torch::stable::Tensor& result) {
  const scalar_t* in = self.const_data_ptr<scalar_t>();
  result_t* out = result.mutable_data_ptr<result_t>();
  torch::stable::parallel_for(0, self.numel(), 32768, [&](int64_t begin, int64_t end) {
    if constexpr (std::is_same_v<scalar_t, float> && std::is_same_v<result_t, c10::BFloat16>) {
      float_to_bfloat16_best(in + begin, reinterpret_cast<uint16_t*>(out + begin), end - begin);
    } else if constexpr (std::is_same_v<scalar_t, c10::BFloat16> && std::is_same_v<result_t, float>) {
      bfloat16_to_float(reinterpret_cast<const uint16_t*>(in + begin), out + begin, end - begin);
    } else {
      for (int64_t i = begin; i < end; ++i) out[i] = static_cast<result_t>(in[i]);
    }
  });
}

}  // namespace opwrap::kernels
