// CUDA kernel of opwrap::to_dtype: a thread per element, converted as aten converts it.
#pragma once

#include <c10/util/TypeCast.h>

#include <opwrap/runtime/cuda.cuh>

#include "to_dtype.h"

namespace opwrap::kernels {

template <typename scalar_t, typename result_t>
struct ToDtype {
  const scalar_t* in;
  result_t* out;
  __device__ void operator()(int64_t i) const { out[i] = c10::static_cast_with_inter_type<result_t, scalar_t>::apply(in[i]); }
};

template <typename scalar_t, typename result_t>
void to_dtype_cuda(const at::Tensor& self, at::ScalarType /*dtype*/, at::Tensor& result) {
  rt::cuda::launch_elementwise(self.numel(), ToDtype<scalar_t, result_t>{self.const_data_ptr<scalar_t>(),
                                                                          result.mutable_data_ptr<result_t>()});
}

}  // namespace opwrap::kernels
