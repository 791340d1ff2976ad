// once_differentiable for C++ autograd Functions, as torch.autograd.function.once_differentiable
// does it for Python ones: the backward runs without recording a graph, and when a double
// backward was asked for (create_graph=True) its results carry an error node, so that
// differentiating them raises a clear error instead of silently returning wrong gradients.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/autograd/functions/basic_ops.h>

#include <memory>
#include <string>
#include <utility>

namespace opwrap::rt {

template <typename Backward>
torch::autograd::variable_list once_differentiable(const char* op, const torch::autograd::variable_list& grads,
                                                   Backward&& backward) {
  torch::autograd::variable_list out;
  {
    at::NoGradGuard no_grad;
    out = backward();
  }
  // Grad mode is on during a backward only under create_graph=True, that is when a double
  // backward may follow.  (Python's decorator also looks at whether the incoming gradients
  // require grad; a double backward through saved inputs would then fail with a vague
  // "does not require grad", so any create_graph backward gets the error node here.)
  if (!at::GradMode::is_enabled()) {
    return out;
  }
  torch::autograd::variable_list inputs;
  inputs.reserve(out.size());
  for (const at::Tensor& g : out) {
    inputs.push_back(g.defined() ? g.detach().requires_grad_(true) : at::Tensor());
  }
  auto error = std::make_shared<torch::autograd::DelayedError>(
      std::string("trying to differentiate twice the backward of ") + op +
          ", which is declared once_differentiable",
      static_cast<int64_t>(inputs.size()));
  return error->apply(std::move(inputs));
}

}  // namespace opwrap::rt
