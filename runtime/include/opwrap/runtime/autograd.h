// For generated Autograd kernels: whether a call has anything for autograd to record; the
// saved metadata of Tensor[] arguments; and the boxed Autograd and ADInplaceOrView kernels
// of out= overloads and of ops that write their arguments.
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

inline bool needs_autograd_one(const c10::List<std::optional<at::Tensor>>& ts, bool grad_mode) {
  for (size_t i = 0; i < ts.size(); ++i) {
    if (needs_autograd_one(static_cast<std::optional<at::Tensor>>(ts.get(i)), grad_mode)) return true;
  }
  return false;
}

// A Tensor?[] as torch::autograd::Function sees it: its given elements (each an input; an
// undefined tensor cannot be one) and the mask of the positions given; and back: the
// dispatcher's list for the redispatch, every position (undefined where none was given) for
// the formula, and the formula's gradients (one per position) into the flat gradient list.
inline std::vector<at::Tensor> given_elements(const c10::List<std::optional<at::Tensor>>& ts) {
  std::vector<at::Tensor> out;
  for (size_t i = 0; i < ts.size(); ++i) {
    const std::optional<at::Tensor> t = ts.get(i);
    if (t.has_value() && t->defined()) out.push_back(*t);
  }
  return out;
}

inline std::vector<bool> given_mask(const c10::List<std::optional<at::Tensor>>& ts) {
  std::vector<bool> out;
  for (size_t i = 0; i < ts.size(); ++i) {
    const std::optional<at::Tensor> t = ts.get(i);
    out.push_back(t.has_value() && t->defined());
  }
  return out;
}

inline c10::List<bool> mask_list(const std::vector<bool>& mask) {
  c10::List<bool> out;
  for (const bool given : mask) out.push_back(given);
  return out;
}

template <typename Mask>
c10::List<std::optional<at::Tensor>> to_optional_list(at::TensorList given, const Mask& mask) {
  c10::List<std::optional<at::Tensor>> out;
  size_t k = 0;
  for (size_t i = 0; i < mask.size(); ++i) {
    out.push_back(mask[i] ? std::optional<at::Tensor>(given[k++]) : std::nullopt);
  }
  return out;
}

template <typename Mask>
std::vector<at::Tensor> all_positions(at::TensorList given, const Mask& mask) {
  std::vector<at::Tensor> out;
  size_t k = 0;
  for (size_t i = 0; i < mask.size(); ++i) out.push_back(mask[i] ? given[k++] : at::Tensor());
  return out;
}

// True when grad mode is on and a tensor requires grad, or a tensor has a forward gradient.
template <typename... Tensors>
inline bool needs_autograd(const Tensors&... tensors) {
  const bool grad_mode = c10::GradMode::is_enabled();
  return (false || ... || needs_autograd_one(tensors, grad_mode));
}

// ---- Tensor[] arguments in formulas -------------------------------------------------------
// What torchgen's to_args_sizes(xs), to_args_sizes_symint(xs) and to_args_scalartypes(xs)
// are in a formula: saved in ctx->saved_data (an IValue) instead of the tensors.

inline c10::IValue save_list_sizes(at::TensorList ts) {
  c10::impl::GenericList out(c10::AnyType::get());
  for (const at::Tensor& t : ts) out.push_back(c10::IValue(t.defined() ? t.sizes().vec() : std::vector<int64_t>()));
  return out;
}

inline std::vector<std::vector<int64_t>> load_list_sizes(const c10::IValue& v) {
  std::vector<std::vector<int64_t>> out;
  for (const c10::IValue& e : v.toListRef()) out.push_back(e.toIntVector());
  return out;
}

inline c10::IValue save_list_sym_sizes(at::TensorList ts) {
  c10::impl::GenericList out(c10::AnyType::get());
  for (const at::Tensor& t : ts) {
    out.push_back(t.defined() ? c10::IValue(t.sym_sizes()) : c10::IValue(std::vector<int64_t>()));
  }
  return out;
}

inline std::vector<std::vector<c10::SymInt>> load_list_sym_sizes(const c10::IValue& v) {
  std::vector<std::vector<c10::SymInt>> out;
  for (const c10::IValue& e : v.toListRef()) out.push_back(e.toSymIntVector());
  return out;
}

inline c10::IValue save_list_scalar_types(at::TensorList ts) {
  std::vector<int64_t> out;
  for (const at::Tensor& t : ts) {
    out.push_back(static_cast<int64_t>(t.defined() ? t.scalar_type() : at::ScalarType::Undefined));
  }
  return c10::IValue(out);
}

inline std::vector<at::ScalarType> load_list_scalar_types(const c10::IValue& v) {
  std::vector<at::ScalarType> out;
  for (const int64_t s : v.toIntVector()) out.push_back(static_cast<at::ScalarType>(s));
  return out;
}

// The gradients a formula gave for the elements of Tensor[] argument `arg` (one per element)
// into the flat gradient list of torch::autograd::Function's backward, where the list's
// elements are inputs `slot`, `slot + 1`...  The gradient of an element that needs none
// (`needs(edge + i)` false) is dropped, as torch drops it.
template <typename Needs>
void scatter_list_grads(const char* op, const char* arg, const std::vector<at::Tensor>& grads, size_t size,
                        std::vector<at::Tensor>& grad_inputs, size_t slot, size_t edge, Needs&& needs) {
  TORCH_CHECK(grads.size() == size, op, ": the derivative formula for '", arg, "' gave ", grads.size(),
              " gradients, but '", arg, "' has ", size, " tensors");
  for (size_t i = 0; i < size; ++i) {
    if (needs(edge + i)) grad_inputs[slot + i] = grads[i];
  }
}

// The same for a Tensor?[] (`given`: the positions given): the formula gave one gradient per
// position; those of given elements go to their inputs, in order.
template <typename Needs>
void scatter_optional_list_grads(const char* op, const char* arg, const std::vector<at::Tensor>& grads,
                                 const c10::List<bool>& given, std::vector<at::Tensor>& grad_inputs, size_t slot,
                                 size_t edge, Needs&& needs) {
  TORCH_CHECK(grads.size() == given.size(), op, ": the derivative formula for '", arg, "' gave ", grads.size(),
              " gradients, but '", arg, "' has ", given.size(), " positions");
  size_t k = 0;
  for (size_t i = 0; i < given.size(); ++i) {
    if (!given.get(i)) continue;
    if (needs(edge + k)) grad_inputs[slot + k] = grads[i];
    ++k;
  }
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
