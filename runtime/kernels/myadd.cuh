// CUDA kernel of opwrap::myadd: the functor of myadd.h over a grid-stride loop.
#pragma once

#include <opwrap/runtime/cuda.cuh>

#include "myadd.h"

namespace opwrap::kernels {

template <typename scalar_t>
void myadd_cuda(const at::Tensor& self, const at::Tensor& other, at::Tensor& result) {
  rt::cuda::launch_elementwise(result.numel(), MyAdd<scalar_t>{self.const_data_ptr<scalar_t>(),
                                                               other.const_data_ptr<scalar_t>(),
                                                               result.mutable_data_ptr<scalar_t>()});
}

}  // namespace opwrap::kernels
