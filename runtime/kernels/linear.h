// Hand-written kernel of opwrap::linear: result = input @ weight.T + bias.  The matmul is the
// work, so it runs in the BLAS aten uses (MKL or OpenBLAS on the CPU, cuBLAS on CUDA) through
// at::addmm_out, with the bias folded into the GEMM (its beta = 1 term) instead of a second
// pass; accumulation is the BLAS's (float for bfloat16).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/mm.h>

#include <optional>

namespace opwrap::kernels {

// Shared by linear_cpu and linear_cuda (linear.cuh): aten dispatches on the tensors' device.
inline void linear_blas(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                        at::Tensor& result) {
  if (bias.has_value() && bias->defined()) {
    at::addmm_out(result, *bias, input, weight.t());
  } else {
    at::mm_out(result, input, weight.t());
  }
}

template <typename scalar_t>
void linear_cpu(const at::Tensor& input, const at::Tensor& weight,
                const std::optional<at::Tensor>& bias, at::Tensor& result) {
  linear_blas(input, weight, bias, result);
}

}  // namespace opwrap::kernels
