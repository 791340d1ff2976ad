// CUDA kernel of opwrap::mymatmul: one thread per output element (the functor of
// mymatmul.h) over a grid-stride loop.
#pragma once

#include <opwrap/runtime/cuda.cuh>

#include "mymatmul.h"

namespace opwrap::kernels {

template <typename scalar_t>
void mymatmul_cuda(const at::Tensor& self, const at::Tensor& other, at::Tensor& result) {
  rt::cuda::launch_elementwise(result.numel(), matmul_element<scalar_t>(self, other, result));
}

}  // namespace opwrap::kernels
