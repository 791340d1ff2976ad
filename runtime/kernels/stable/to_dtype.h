// opwrap::to_dtype against torch's stable API: one instantiation per pair of input and output
// dtypes, each element converted with static_cast (through float for float16 and bfloat16,
// as c10's conversions do).  The full target's kernel (../to_dtype.h) has vectorized
// float32 <-> bfloat16 loops besides; this one converts an element at a time there.
#pragma once

#include "common.h"

#include <torch/headeronly/util/BFloat16.h>
#include <torch/headeronly/util/Half.h>

namespace opwrap::kernels {

template <typename scalar_t, typename result_t>
void to_dtype_cpu(const torch::stable::Tensor& self, torch::headeronly::ScalarType /*dtype*/,
                  torch::stable::Tensor& result) {
  const scalar_t* in = self.const_data_ptr<scalar_t>();
  result_t* out = result.mutable_data_ptr<result_t>();
  torch::stable::parallel_for(0, self.numel(), 32768, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = static_cast<result_t>(in[i]);
  });
}

}  // namespace opwrap::kernels
