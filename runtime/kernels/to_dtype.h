// Hand-written kernel of opwrap::to_dtype: one instantiation per pair of input and output
// dtypes; each element converted as aten's copy_ converts it.
#pragma once

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <c10/util/TypeCast.h>

namespace opwrap::kernels {

template <typename scalar_t, typename result_t>
void to_dtype_cpu(const at::Tensor& self, at::ScalarType /*dtype*/, at::Tensor& result) {
  const scalar_t* in = self.const_data_ptr<scalar_t>();
  result_t* out = result.mutable_data_ptr<result_t>();
  at::parallel_for(0, self.numel(), 32768, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = c10::static_cast_with_inter_type<result_t, scalar_t>::apply(in[i]);
  });
}

}  // namespace opwrap::kernels
