// Hand-written kernel of opwrap::addmv_: self = beta * self + alpha * (mat @ vec), in place,
// in the BLAS aten uses (gemv: MKL or OpenBLAS on the CPU, cuBLAS on CUDA) through aten's
// in-place at::addmv_.  As aten does, self is not read when beta == 0 (NaN/inf in self do not
// propagate).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/addmv.h>

namespace opwrap::kernels {

// Shared by addmv_cpu and addmv_cuda (addmv.cuh): aten dispatches on the tensors' device.
inline void addmv_blas(at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec, const at::Scalar& beta,
                       const at::Scalar& alpha) {
  at::addmv_(self, mat, vec, beta, alpha);
}

template <typename scalar_t>
void addmv_cpu(at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec,
               const at::Scalar& beta, const at::Scalar& alpha) {
  addmv_blas(self, mat, vec, beta, alpha);
}

}  // namespace opwrap::kernels
