// once_differentiable for the generated backward nodes, as torch.autograd.function.once_differentiable
// does it for Python Functions: the backward runs without recording a graph, and when a double
// backward was asked for (create_graph=True) its results carry an error node, so that
// differentiating them raises a clear error instead of silently returning wrong gradients.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/DispatchKey.h>
#include <torch/csrc/autograd/functions/basic_ops.h>

#include <memory>
#include <ostream>
#include <vector>
#include <sstream>
#include <string>
#include <utility>

namespace at::functorch {
// ATen/functorch/TensorWrapper.h (which needs headers torch does not ship): how a tensor is
// wrapped, "Wrapper[lvl=2, Wrapper[lvl=1, Tensor[3]]]".
TORCH_API void dumpTensor(std::ostream& ss, const at::Tensor& tensor);
}  // namespace at::functorch

namespace opwrap::rt {

// Whether `t` is a torch.func grad level's wrapper around another grad level's: a grad of
// a grad (torch.func.grad(grad(f)), jacrev(grad(f))...).  The outer level records this
// backward's formulas with the grad mode it was entered with, where no error node of this
// level is seen, so such a second derivative is refused at once.
inline bool nested_grad_levels(const at::Tensor& t) {
  if (!t.defined() || !t.key_set().has(c10::DispatchKey::FuncTorchGradWrapper)) return false;
  std::ostringstream ss;
  at::functorch::dumpTensor(ss, t);
  const std::string s = ss.str();
  return s.find("Wrapper[", s.find("Wrapper[") + 1) != std::string::npos;
}

inline bool differentiated_again(const at::Tensor& t) {
  // A forward gradient (torch.autograd.forward_ad over a backward), or two levels of
  // torch.func AD wrappers (grad of grad, jacrev of jacrev, hessian's jacfwd of jacrev).
  return t.defined() && (t._fw_grad(/*level=*/0).defined() || nested_grad_levels(t));
}
inline bool differentiated_again(const std::vector<at::Tensor>& ts) {
  for (const at::Tensor& t : ts) {
    if (differentiated_again(t)) return true;
  }
  return false;
}

// Called by the backward of a once_differentiable op with its incoming gradients and saved
// tensors, before its formulas run: when any of them is being differentiated again, the
// once_differentiable error, instead of formulas that treat saved values as constants (or a
// library op without derivatives) giving a wrong second derivative or a vaguer error.
template <typename... Tensors>
inline void refuse_second_order(const char* op, const Tensors&... tensors) {
  TORCH_CHECK(!(false || ... || differentiated_again(tensors)), "trying to differentiate twice the backward of ", op,
              ", which is declared once_differentiable");
}

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
  const std::string msg = std::string("trying to differentiate twice the backward of ") + op +
                          ", which is declared once_differentiable";
  bool functorch = false;
  for (const at::Tensor& g : out) {
    TORCH_CHECK(!nested_grad_levels(g), msg);
    functorch = functorch || (g.defined() && (g.key_set().has(c10::DispatchKey::FuncTorchGradWrapper) ||
                                              g.key_set().has(c10::DispatchKey::FuncTorchBatched)));
  }
  if (functorch) {  // one grad level (vjp, jacrev, vmap of grad): nothing differentiates these again
    return out;
  }
  torch::autograd::variable_list inputs;
  inputs.reserve(out.size());
  for (const at::Tensor& g : out) {
    inputs.push_back(g.defined() ? g.detach().requires_grad_(true) : at::Tensor());
  }
  auto error = std::make_shared<torch::autograd::DelayedError>(msg, static_cast<int64_t>(inputs.size()));
  return error->apply(std::move(inputs));
}

}  // namespace opwrap::rt
