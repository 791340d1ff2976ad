// CUDA kernel of opwrap::linear: one thread per output element, the dot product of
// linear.h, over a grid-stride loop.  (A tiled shared-memory GEMM would be faster for large
// K; this op is the seed's LinearFunction, kept to the arithmetic the CPU tests check.)
#pragma once

#include <opwrap/runtime/cuda.cuh>

#include "linear.h"

namespace opwrap::kernels {

template <typename scalar_t>
void linear_cuda(const at::Tensor& input, const at::Tensor& weight,
                 const std::optional<at::Tensor>& bias, at::Tensor& result) {
  rt::cuda::launch_elementwise(result.numel(), linear_element<scalar_t>(input, weight, bias, result));
}

}  // namespace opwrap::kernels
