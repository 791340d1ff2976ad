// Hand-written kernel of opwrap::addmv_: self = beta * self + alpha * (mat @ vec), in place.
// As aten does, self is not read when beta == 0 (NaN/inf in self do not propagate).
#pragma once

#include <ATen/OpMathType.h>
#include <ATen/core/Tensor.h>

#include "common.h"

namespace opwrap::kernels {

// The last step of a row, shared with addmv.cuh: combine the row's dot product with self.
template <typename scalar_t, typename opmath_t>
C10_HOST_DEVICE inline scalar_t addmv_combine(scalar_t prev, opmath_t dot, opmath_t beta, opmath_t alpha) {
  const opmath_t kept = beta == opmath_t(0) ? opmath_t(0) : beta * static_cast<opmath_t>(prev);
  return static_cast<scalar_t>(kept + alpha * dot);
}

template <typename scalar_t>
void addmv_cpu(at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec,
               const at::Scalar& beta, const at::Scalar& alpha) {
  using opmath_t = at::opmath_type<scalar_t>;
  const int64_t N = mat.size(0), M = mat.size(1);
  const auto b = beta.to<opmath_t>();
  const auto a = alpha.to<opmath_t>();
  const scalar_t* A = mat.const_data_ptr<scalar_t>();
  const scalar_t* v = vec.const_data_ptr<scalar_t>();
  scalar_t* out = self.mutable_data_ptr<scalar_t>();
  const int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, M));
  at::parallel_for(0, N, grain, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      opmath_t acc = 0;
      for (int64_t m = 0; m < M; ++m) {
        acc += static_cast<opmath_t>(A[n * M + m]) * static_cast<opmath_t>(v[m]);
      }
      out[n] = addmv_combine(out[n], acc, b, a);
    }
  });
}

}  // namespace opwrap::kernels
