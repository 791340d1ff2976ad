// Hand-written kernel of opwrap::linear: result[n, m] = sum_k input[n, k] * weight[m, k] + bias[m].
// Accumulates in opmath (float for bfloat16).  Rows are computed in parallel.
#pragma once

#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>

#include "common.h"

#include <optional>

namespace opwrap::kernels {

template <typename scalar_t>
void linear_cpu(const at::Tensor& input, const at::Tensor& weight,
                const std::optional<at::Tensor>& bias, at::Tensor& result) {
  using opmath_t = at::opmath_type<scalar_t>;
  const int64_t N = input.size(0), K = input.size(1), M = weight.size(0);
  const scalar_t* x = input.const_data_ptr<scalar_t>();
  const scalar_t* w = weight.const_data_ptr<scalar_t>();
  const scalar_t* b = bias.has_value() ? bias->const_data_ptr<scalar_t>() : nullptr;
  scalar_t* y = result.mutable_data_ptr<scalar_t>();
  const int64_t grain = std::max<int64_t>(1, opwrap::kernels::kGrainSize / std::max<int64_t>(1, K * M));
  at::parallel_for(0, N, grain, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      const scalar_t* xn = x + n * K;
      for (int64_t m = 0; m < M; ++m) {
        const scalar_t* wm = w + m * K;
        opmath_t acc = b ? static_cast<opmath_t>(b[m]) : opmath_t(0);
        for (int64_t k = 0; k < K; ++k) {
          acc += static_cast<opmath_t>(xn[k]) * static_cast<opmath_t>(wm[k]);
        }
        y[n * M + m] = static_cast<scalar_t>(acc);
      }
    }
  });
}

}  // namespace opwrap::kernels
