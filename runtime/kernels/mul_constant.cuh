// CUDA kernel of opwrap::mul_constant: the functor of mul_constant.h over a grid-stride loop.
#pragma once

#include <opwrap/runtime/cuda.cuh>

#include "mul_constant.h"

namespace opwrap::kernels {

template <typename scalar_t>
void mul_constant_cuda(const at::Tensor& self, double constant, at::Tensor& result) {
  using opmath_t = at::opmath_type<scalar_t>;
  rt::cuda::launch_elementwise(result.numel(), MulConstant<scalar_t>{self.const_data_ptr<scalar_t>(),
                                                                     static_cast<opmath_t>(constant),
                                                                     result.mutable_data_ptr<scalar_t>()});
}

}  // namespace opwrap::kernels
