// CUDA kernel of opwrap::addmv_: cuBLAS gemv through at::addmv_out (addmv.h), on the current
// stream.
#pragma once

#include "addmv.h"

namespace opwrap::kernels {

template <typename scalar_t>
void addmv_cuda(at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec,
                const at::Scalar& beta, const at::Scalar& alpha) {
  addmv_blas(self, mat, vec, beta, alpha);
}

}  // namespace opwrap::kernels
