// Hand-written kernel of opwrap::linear: result[n, m] = sum_k input[n, k] * weight[m, k] + bias[m].
// Accumulates in opmath (float for bfloat16).  Rows are computed in parallel.
#pragma once

#include <ATen/OpMathType.h>
#include <ATen/core/Tensor.h>

#include "common.h"

#include <optional>

namespace opwrap::kernels {

// One output element, shared with linear.cuh: a dot product of an input row and a weight
// row, accumulated in opmath, plus the bias.
template <typename scalar_t>
struct LinearElement {
  const scalar_t* x;  // [N, K]
  const scalar_t* w;  // [M, K]
  const scalar_t* b;  // [M] or null
  scalar_t* y;        // [N, M]
  int64_t K, M;
  C10_HOST_DEVICE void operator()(int64_t i) const {
    using opmath_t = at::opmath_type<scalar_t>;
    const int64_t n = i / M, m = i % M;
    const scalar_t* xn = x + n * K;
    const scalar_t* wm = w + m * K;
    opmath_t acc = b ? static_cast<opmath_t>(b[m]) : opmath_t(0);
    for (int64_t k = 0; k < K; ++k) {
      acc += static_cast<opmath_t>(xn[k]) * static_cast<opmath_t>(wm[k]);
    }
    y[i] = static_cast<scalar_t>(acc);
  }
};

template <typename scalar_t>
LinearElement<scalar_t> linear_element(const at::Tensor& input, const at::Tensor& weight,
                                       const std::optional<at::Tensor>& bias, at::Tensor& result) {
  return {input.const_data_ptr<scalar_t>(), weight.const_data_ptr<scalar_t>(),
          bias.has_value() && bias->defined() ? bias->const_data_ptr<scalar_t>() : nullptr,
          result.mutable_data_ptr<scalar_t>(), input.size(1), weight.size(0)};
}

template <typename scalar_t>
void linear_cpu(const at::Tensor& input, const at::Tensor& weight,
                const std::optional<at::Tensor>& bias, at::Tensor& result) {
  const auto element = linear_element<scalar_t>(input, weight, bias, result);
  const int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, element.K));
  at::parallel_for(0, result.numel(), grain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) element(i);
  });
}

}  // namespace opwrap::kernels
