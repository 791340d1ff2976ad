// CUDA kernel of opwrap::sincos: the functor of sincos.h over a grid-stride loop.
#pragma once

#include <opwrap/runtime/cuda.cuh>

#include "sincos.h"

namespace opwrap::kernels {

template <typename scalar_t>
void sincos_cuda(const at::Tensor& self, at::Tensor& sin, at::Tensor& cos) {
  rt::cuda::launch_elementwise(self.numel(), SinCos<scalar_t>{self.const_data_ptr<scalar_t>(),
                                                              sin.mutable_data_ptr<scalar_t>(),
                                                              cos.mutable_data_ptr<scalar_t>()});
}

}  // namespace opwrap::kernels
