// CUDA kernel of opwrap::linear: cuBLAS through at::addmm_out (linear.h), on the current
// stream, as F.linear runs.
#pragma once

#include "linear.h"

namespace opwrap::kernels {

template <typename scalar_t>
void linear_cuda(const at::Tensor& input, const at::Tensor& weight,
                 const std::optional<at::Tensor>& bias, at::Tensor& result) {
  linear_blas(input, weight, bias, result);
}

}  // namespace opwrap::kernels
