// For generated Autograd kernels: whether a call has anything for autograd to record.
//
// torch::autograd::Function::apply builds a node, a context and its bookkeeping on every
// call, even when no input requires grad; for a small tensor that is about as much work as
// the op itself.  aten's own Autograd kernels (VariableType) record only when grad mode is on
// and an input requires grad, or when an input has a forward-mode gradient; otherwise they
// just redispatch below autograd.  `needs_autograd` is that test, for the same shortcut: a
// kernel that skips its Function when it returns false behaves as the Function would
// (outputs without grad_fn), as long as the op writes no argument in place (the Function
// bumps the version counter of the arguments it marks dirty).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/GradMode.h>

#include <optional>

namespace opwrap::rt {

inline bool needs_autograd_one(const at::Tensor& t, bool grad_mode) {
  // Level 0 is the forward-AD level torch::autograd::Function checks (and then refuses).
  return t.defined() && ((grad_mode && t.requires_grad()) || t._fw_grad(/*level=*/0).defined());
}

inline bool needs_autograd_one(const std::optional<at::Tensor>& t, bool grad_mode) {
  return t.has_value() && needs_autograd_one(*t, grad_mode);
}

inline bool needs_autograd_one(at::TensorList ts, bool grad_mode) {
  for (const at::Tensor& t : ts) {
    if (needs_autograd_one(t, grad_mode)) return true;
  }
  return false;
}

// True when grad mode is on and a tensor requires grad, or a tensor has a forward gradient.
template <typename... Tensors>
inline bool needs_autograd(const Tensors&... tensors) {
  const bool grad_mode = c10::GradMode::is_enabled();
  return (false || ... || needs_autograd_one(tensors, grad_mode));
}

}  // namespace opwrap::rt
