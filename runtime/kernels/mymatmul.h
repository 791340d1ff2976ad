// Hand-written kernel of opwrap::mymatmul: result = self @ other, in the BLAS aten uses (MKL
// or OpenBLAS on the CPU, cuBLAS on CUDA) through at::mm_out; reduced types accumulate in
// float there.  What this op adds is its autocast policy (lower_precision), not the loop.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/mm.h>

namespace opwrap::kernels {

template <typename scalar_t>
void mymatmul_cpu(const at::Tensor& self, const at::Tensor& other, at::Tensor& result) {
  at::mm_out(result, self, other);
}

}  // namespace opwrap::kernels
