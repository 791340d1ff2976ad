// CUDA kernel of opwrap::to_dtype against torch's stable API: a thread per element.
#pragma once

#include "common.cuh"
#include "to_dtype.h"

namespace opwrap::kernels {

template <typename scalar_t, typename result_t>
struct ToDtypeStable {
  const scalar_t* in;
  result_t* out;
  __device__ void operator()(int64_t i) const { out[i] = static_cast<result_t>(in[i]); }
};

template <typename scalar_t, typename result_t>
void to_dtype_cuda(const torch::stable::Tensor& self, torch::headeronly::ScalarType /*dtype*/,
                   torch::stable::Tensor& result) {
  stable::launch_elementwise(self, self.numel(), ToDtypeStable<scalar_t, result_t>{
      self.const_data_ptr<scalar_t>(), result.mutable_data_ptr<result_t>()});
}

}  // namespace opwrap::kernels
