// For generated Autograd kernels: whether a call has anything for autograd to record, and
// the boxed Autograd and ADInplaceOrView kernels of out= overloads and of ops that write
// their arguments.  (The helpers of the backward nodes of ops with formulas are in
// autograd_node.h.)
//
// aten's own Autograd kernels (VariableType) record only when grad mode is on and an input
// requires grad, or when an input has a forward-mode gradient; otherwise they just
// redispatch below autograd.  `needs_autograd` is that test, for the same shortcut: a kernel
// that skips recording when it returns false gives outputs without grad_fn, and an op that
// writes arguments redispatches through its ADInplaceOrView kernel, which moves their versions.
#pragma once

#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/List.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/GradMode.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace opwrap::rt {

inline bool needs_autograd_one(const at::Tensor& t, bool grad_mode) {
  // Level 0: the forward-AD level (torch.autograd.forward_ad, torch.func.jvp).
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

inline bool needs_autograd_one(const c10::List<std::optional<at::Tensor>>& ts, bool grad_mode) {
  for (size_t i = 0; i < ts.size(); ++i) {
    if (needs_autograd_one(static_cast<std::optional<at::Tensor>>(ts.get(i)), grad_mode)) return true;
  }
  return false;
}

// True when grad mode is on and a tensor requires grad, or a tensor has a forward gradient.
template <typename... Tensors>
inline bool needs_autograd(const Tensors&... tensors) {
  const bool grad_mode = c10::GradMode::is_enabled();
  return (false || ... || needs_autograd_one(tensors, grad_mode));
}

// ---- boxed kernels for ops without derivative formulas ---------------------------------------

// Calls f on every tensor an argument or return IValue holds (a Tensor, a present Tensor?,
// the elements of a Tensor[] or Tensor?[]).
template <typename F>
void for_each_tensor(const c10::IValue& v, F&& f) {
  if (v.isTensor()) {
    f(v.toTensor());
  } else if (v.isList()) {
    for (const c10::IValue& e : v.toListRef()) {
      if (e.isTensor()) f(e.toTensor());
    }
  }
}

// The tensors of the arguments an op writes (Tensor(a!), Tensor(a!)?, Tensor(a!)[]), from the
// stack before the call.
inline std::vector<at::Tensor> written_arguments(const c10::FunctionSchema& schema, const torch::jit::Stack& stack) {
  const size_t n = schema.arguments().size(), start = stack.size() - n;
  std::vector<at::Tensor> out;
  for (size_t i = 0; i < n; ++i) {
    const c10::AliasInfo* alias = schema.arguments()[i].alias_info();
    if (alias != nullptr && alias->isWrite()) {
      for_each_tensor(stack[start + i], [&](const at::Tensor& t) {
        if (t.defined()) out.push_back(t);
      });
    }
  }
  return out;
}

// ADInplaceOrView kernel of an op that writes arguments: the version counter of every written
// argument moves, returned or not (torch's autogradNotImplementedInplaceOrViewFallback bumps
// only written returns, so `-> ()` ops would leave stale saved tensors undetected), as the
// ADInplaceOrView kernels of aten's in-place and out= ops and torch.library.custom_op do.
inline void bump_written_versions(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  const std::vector<at::Tensor> written = written_arguments(op.schema(), *stack);
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    op.redispatchBoxed(ks & c10::after_ADInplaceOrView_keyset, stack);
  }
  for (const at::Tensor& t : written) t.unsafeGetTensorImpl()->bump_version();
}

// Autograd kernel of an out= overload (keyword-only Tensor(a!) arguments), as aten's: with
// grad mode on, an argument that requires grad (an input or an out tensor) is an error, never
// an out tensor silently attached to a graph; otherwise it redispatches below autograd (the
// ADInplaceOrView kernel then bumps the out tensors' versions).
inline void out_autograd(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  const c10::FunctionSchema& schema = op.schema();
  const size_t n = schema.arguments().size(), start = stack->size() - n;
  bool requires_grad = false, forward_grad = false;
  for (size_t i = 0; i < n; ++i) {
    for_each_tensor((*stack)[start + i], [&](const at::Tensor& t) {
      requires_grad = requires_grad || (t.defined() && t.requires_grad());
      forward_grad = forward_grad || (t.defined() && t._fw_grad(/*level=*/0).defined());
    });
  }
  TORCH_CHECK(!(requires_grad && c10::GradMode::is_enabled()), schema.name(),
              "(): functions with out=... arguments don't support automatic differentiation, "
              "but one of the arguments requires grad.");
  TORCH_CHECK_NOT_IMPLEMENTED(!forward_grad, "Trying to use forward AD with ", schema.name(),
                              " that does not support it because it is an out= function");
  at::AutoDispatchBelowAutograd guard;
  op.redispatchBoxed(ks & c10::after_autograd_keyset, stack);
}

}  // namespace opwrap::rt
