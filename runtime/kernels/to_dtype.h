// Hand-written kernel of opwrap::to_dtype: one instantiation per pair of input and output
// dtypes; each element converted as aten's copy_ converts it.
#pragma once

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <c10/util/BFloat16.h>
#include <c10/util/TypeCast.h>

#include "bfloat16_bits.h"  // float_to_bfloat16_best, bfloat16_to_float
#include "common.h"

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace opwrap::kernels {

template <typename scalar_t, typename result_t>
void to_dtype_cpu(const at::Tensor& self, at::ScalarType /*dtype*/, at::Tensor& result) {
  const scalar_t* in = self.const_data_ptr<scalar_t>();
  result_t* out = result.mutable_data_ptr<result_t>();
  at::parallel_for(0, self.numel(), 32768, [&](int64_t begin, int64_t end) {
    if constexpr (std::is_same_v<scalar_t, float> && std::is_same_v<result_t, c10::BFloat16>) {
      float_to_bfloat16_best(in + begin, reinterpret_cast<uint16_t*>(out + begin), end - begin);
    } else if constexpr (std::is_same_v<scalar_t, c10::BFloat16> && std::is_same_v<result_t, float>) {
      bfloat16_to_float(reinterpret_cast<const uint16_t*>(in + begin), out + begin, end - begin);
    } else {
      for (int64_t i = begin; i < end; ++i) out[i] = c10::static_cast_with_inter_type<result_t, scalar_t>::apply(in[i]);
    }
  });
}

}  // namespace opwrap::kernels
