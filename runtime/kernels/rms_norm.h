// The helper the derivative formula of opwrap::rms_norm calls (its kernels are generated from
// its row-wise program).
#pragma once

#include <ATen/OpMathType.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>

#include <array>
#include <numeric>
#include <tuple>
#include <vector>

namespace opwrap::kernels {

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
