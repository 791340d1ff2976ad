// Hand-written kernel of opwrap::mymatmul: result[n, m] = sum_k self[n, k] * other[k, m],
// accumulated in opmath (float for float16 and bfloat16).
#pragma once

#include <ATen/OpMathType.h>
#include <ATen/core/Tensor.h>

#include "common.h"

namespace opwrap::kernels {

// One output element, shared with mymatmul.cuh.
template <typename scalar_t>
struct MatmulElement {
  const scalar_t* a;  // [N, K]
  const scalar_t* b;  // [K, M]
  scalar_t* out;      // [N, M]
  int64_t K, M;
  C10_HOST_DEVICE void operator()(int64_t i) const {
    using opmath_t = at::opmath_type<scalar_t>;
    const int64_t n = i / M, m = i % M;
    opmath_t acc = 0;
    for (int64_t k = 0; k < K; ++k) {
      acc += static_cast<opmath_t>(a[n * K + k]) * static_cast<opmath_t>(b[k * M + m]);
    }
    out[i] = static_cast<scalar_t>(acc);
  }
};

template <typename scalar_t>
MatmulElement<scalar_t> matmul_element(const at::Tensor& self, const at::Tensor& other, at::Tensor& result) {
  return {self.const_data_ptr<scalar_t>(), other.const_data_ptr<scalar_t>(), result.mutable_data_ptr<scalar_t>(),
          self.size(1), other.size(1)};
}

template <typename scalar_t>
void mymatmul_cpu(const at::Tensor& self, const at::Tensor& other, at::Tensor& result) {
  const auto element = matmul_element<scalar_t>(self, other, result);
  const int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, element.K));
  at::parallel_for(0, result.numel(), grain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) element(i);
  });
}

}  // namespace opwrap::kernels
