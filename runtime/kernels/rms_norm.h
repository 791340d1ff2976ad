// Hand-written kernel of opwrap::rms_norm, and the helper its derivative formula calls.
// out = input * rstd * weight over the last dimension, rstd = 1 / sqrt(mean(input^2) + eps).
// Reduced types (float16, bfloat16) accumulate in float.
#pragma once

#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>

#include "common.h"

#include <array>
#include <cmath>
#include <numeric>
#include <tuple>
#include <vector>

namespace opwrap::kernels {

// The per-row math, shared with rms_norm.cuh.
template <typename opmath_t>
C10_HOST_DEVICE inline opmath_t rms_norm_inv(opmath_t sumsq, int64_t D, double eps) {
  // D == 0: the mean over nothing is 0 / 0 = NaN, so rstd is NaN, as aten's _fused_rms_norm
  // gives (out is empty then).
  const opmath_t mean = sumsq / static_cast<opmath_t>(D);
  return opmath_t(1) / std::sqrt(mean + static_cast<opmath_t>(eps));
}

template <typename scalar_t, typename opmath_t>
C10_HOST_DEVICE inline scalar_t rms_norm_apply(scalar_t x, opmath_t inv, scalar_t w) {
  return static_cast<scalar_t>(static_cast<opmath_t>(x) * inv * static_cast<opmath_t>(w));
}

template <typename scalar_t>
void rms_norm_cpu(const at::Tensor& input, const at::Tensor& weight, double eps, at::Tensor& out, at::Tensor& rstd) {
  using opmath_t = at::opmath_type<scalar_t>;
  const int64_t D = input.size(-1);
  const int64_t rows = rstd.numel();
  const scalar_t* x = input.const_data_ptr<scalar_t>();
  const scalar_t* w = weight.const_data_ptr<scalar_t>();
  scalar_t* y = out.mutable_data_ptr<scalar_t>();
  scalar_t* r = rstd.mutable_data_ptr<scalar_t>();
  const int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, D));
  at::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const scalar_t* xr = x + row * D;
      opmath_t sumsq = 0;
      for (int64_t d = 0; d < D; ++d) {
        const auto v = static_cast<opmath_t>(xr[d]);
        sumsq += v * v;
      }
      const opmath_t inv = rms_norm_inv(sumsq, D, eps);
      r[row] = static_cast<scalar_t>(inv);
      for (int64_t d = 0; d < D; ++d) {
        y[row * D + d] = rms_norm_apply(xr[d], inv, w[d]);
      }
    }
  });
}

// Gradients of rms_norm from the saved rstd (so the backward itself is not differentiable
// through rstd: the declaration says once_differentiable).  Written with ATen ops, which
// keeps it SymInt-safe for torch.compile(dynamic=True); computed in float for reduced types.
inline std::tuple<at::Tensor, at::Tensor> rms_norm_backward(const at::Tensor& grad, const at::Tensor& input,
                                                            const at::Tensor& weight, const at::Tensor& rstd,
                                                            std::array<bool, 2> grad_input_mask) {
  const at::ScalarType acc = at::toOpMathType(input.scalar_type());
  const at::Tensor g = grad.to(acc), x = input.to(acc), w = weight.to(acc), r = rstd.to(acc).unsqueeze(-1);
  const at::Tensor xhat = x * r;
  at::Tensor grad_input, grad_weight;
  if (grad_input_mask[0]) {
    const at::Tensor gw = g * w;
    const std::vector<int64_t> last{-1};
    grad_input = (r * (gw - xhat * (gw * xhat).mean(last, /*keepdim=*/true))).to(input.scalar_type());
  }
  if (grad_input_mask[1]) {
    std::vector<int64_t> batch(static_cast<size_t>(input.dim() - 1));
    std::iota(batch.begin(), batch.end(), 0);
    const at::Tensor per_row = g * xhat;
    // An empty dim list would make sum() reduce everything; 1-D input has no batch to sum.
    grad_weight = (batch.empty() ? per_row : per_row.sum(batch)).to(weight.scalar_type());
  }
  return {grad_input, grad_weight};
}

}  // namespace opwrap::kernels
