// For generated Autograd kernels of ops with `derivatives:`: the helpers their backward Node
// (a torch::autograd::Node subclass, as torchgen's VariableType kernels have, not a
// torch::autograd::Function, which functorch transforms refuse) and their kernel share.
//
// The kernel records as aten's do: compute_requires_grad over the inputs, a node whose next
// edges are the inputs' gradient edges (one per Tensor, per element of a Tensor[], per
// position of a Tensor?[], invalid where absent), the saved inputs, the redispatch below
// autograd, then each return's history (set_history, rebase_history for a written argument;
// a non-differentiable return reserves its input slot undefined, so grads[i] is always the
// gradient of return i) and the saved outputs.
#pragma once

#include <ATen/ExpandUtils.h>
#include <ATen/core/List.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>  // c10::OptionalArray: a saved int[]? / SymInt[]? / float[]?
#include <c10/util/string_view.h>
#include <ATen/ops/zeros_like.h>
#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/saved_variable.h>
#include <torch/csrc/autograd/variable.h>
#include <opwrap/runtime/autograd.h>
#include <opwrap/runtime/shape_str.h>
#include <opwrap/runtime/torch_compat.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace opwrap::rt {

// A str? argument a formula names, saved as torchgen saves it (its own string).
inline std::optional<std::string> saved_string(std::optional<c10::string_view> s) {
  return s.has_value() ? std::optional<std::string>(std::string(*s)) : std::nullopt;
}

using torch::autograd::Node;
using torch::autograd::SavedVariable;
using torch::autograd::variable_list;

// Whether any input has a forward-mode gradient (a tangent) at level 0: the level of
// torch.autograd.forward_ad, and of each torch.func.jvp / jacfwd layer once unwrapped.
// (needs_autograd's test without its grad-mode half.)
template <typename... Tensors>
inline bool any_forward_grad(const Tensors&... tensors) {
  return (false || ... || needs_autograd_one(tensors, /*grad_mode=*/false));
}

// Forward-mode AD (torch.func.jvp, jacfwd, hessian, torch.autograd.forward_ad) needs a forward
// formula, which the declaration does not have: a clear error instead of a tangent dropped.
template <typename... Tensors>
inline void refuse_forward_grad(const char* op, const Tensors&... tensors) {
  TORCH_CHECK_NOT_IMPLEMENTED(!any_forward_grad(tensors...), op,
                              ": forward-mode AD (torch.func.jvp, jacfwd, hessian, forward_ad) needs a "
                              "forward-derivative formula: a 'result:' key in the declaration's derivatives");
}

// ---- forward-mode formulas ---------------------------------------------------------------------

// An input's value without its tangent (torchgen's toNonOptPrimal), so a formula's own ops do
// not propagate tangents of their own; undefined for an absent Tensor?.
inline at::Tensor primal(const at::Tensor& t) {
  return t.defined() ? t._fw_primal(/*level=*/0) : t;
}
inline at::Tensor primal(const std::optional<at::Tensor>& t) {
  return t.has_value() ? primal(*t) : at::Tensor();
}
inline std::vector<at::Tensor> primal(at::TensorList ts) {
  std::vector<at::Tensor> out;
  out.reserve(ts.size());
  for (const at::Tensor& t : ts) out.push_back(primal(t));
  return out;
}

// An input's tangent as it is: undefined where it has none (derived formulas skip such terms).
inline at::Tensor raw_tangent(const at::Tensor& t) {
  return t.defined() ? t._fw_grad(/*level=*/0) : t;
}
inline at::Tensor raw_tangent(const std::optional<at::Tensor>& t) {
  return t.has_value() ? raw_tangent(*t) : at::Tensor();
}

// An input's tangent for a written formula (`self_t`): zeros of its shape where it has none
// (torchgen uses a ZeroTensor there), undefined for an absent Tensor?.
inline at::Tensor tangent(const at::Tensor& t) {
  if (!t.defined()) return t;
  at::Tensor fw = raw_tangent(t);
  return fw.defined() ? fw : at::zeros_like(primal(t));
}
inline at::Tensor tangent(const std::optional<at::Tensor>& t) {
  return t.has_value() ? tangent(*t) : at::Tensor();
}
inline std::vector<at::Tensor> tangent(at::TensorList ts) {
  std::vector<at::Tensor> out;
  out.reserve(ts.size());
  for (const at::Tensor& t : ts) out.push_back(tangent(t));
  return out;
}

// A derived formula's terms, one per input with a tangent, summed.
inline void add_tangent(at::Tensor& sum, const at::Tensor& term) {
  if (!term.defined()) return;
  sum = sum.defined() ? sum + term : term;
}

// The tangent of a return: in the return's dtype, and expanded to its shape where it
// broadcasts (a pointwise op's term for a broadcast input).  A tangent of another shape is the
// formula's mistake, reported against the op and the return.
inline void set_forward_grad(const char* op, const char* name, const at::Tensor& result, at::Tensor tangent,
                             bool is_inplace_op) {
  if (!tangent.defined() || !result.defined() || !torch::autograd::isDifferentiableType(result.scalar_type())) {
    return;
  }
  if (tangent.scalar_type() != result.scalar_type()) tangent = tangent.to(result.scalar_type());
  if (tangent.sym_sizes() != result.sym_sizes()) {
    TORCH_CHECK(at::is_expandable_to(tangent.sym_sizes(), result.sym_sizes()), op,
                ": the forward derivative of '", name, "' gave a tangent of shape ", shape_str(tangent.sym_sizes()),
                ", but '", name, "' has shape ", shape_str(result.sym_sizes()));
    tangent = tangent.expand_symint(result.sym_sizes());
  }
  if (is_inplace_op) {
    // The written argument's tangent, if it has one, is updated in place (autograd keeps
    // one tangent object per tensor, and views of it see the change).
    at::Tensor current = result._fw_grad(/*level=*/0);
    if (current.defined()) {
      current.copy_(tangent);
      return;
    }
  }
  result._set_fw_grad(tangent, /*level=*/0, is_inplace_op);
}

// Every position of a Tensor?[], undefined where none was given: its edges, and what its formula sees.
inline std::vector<at::Tensor> all_positions(const c10::List<std::optional<at::Tensor>>& ts) {
  std::vector<at::Tensor> out;
  out.reserve(ts.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    const std::optional<at::Tensor> t = ts.get(i);
    out.push_back(t.has_value() ? *t : at::Tensor());
  }
  return out;
}

inline at::Tensor value_or_undefined(const std::optional<at::Tensor>& t) {
  return t.has_value() ? *t : at::Tensor();
}

// ---- Tensor[] arguments in formulas: torchgen's to_args_sizes(xs), to_args_sizes_symint(xs)
// and to_args_scalartypes(xs), saved as those values instead of the tensors.
inline std::vector<std::vector<int64_t>> list_sizes(at::TensorList ts) {
  std::vector<std::vector<int64_t>> out;
  for (const at::Tensor& t : ts) out.push_back(t.defined() ? t.sizes().vec() : std::vector<int64_t>());
  return out;
}

inline std::vector<std::vector<c10::SymInt>> list_sym_sizes(at::TensorList ts) {
  std::vector<std::vector<c10::SymInt>> out;
  for (const at::Tensor& t : ts) out.push_back(t.defined() ? t.sym_sizes().vec() : std::vector<c10::SymInt>());
  return out;
}

inline std::vector<at::ScalarType> list_scalar_types(at::TensorList ts) {
  std::vector<at::ScalarType> out;
  for (const at::Tensor& t : ts) out.push_back(t.defined() ? t.scalar_type() : at::ScalarType::Undefined);
  return out;
}

inline std::vector<SavedVariable> save_list(at::TensorList ts) {
  std::vector<SavedVariable> out;
  out.reserve(ts.size());
  for (const at::Tensor& t : ts) out.emplace_back(t, /*is_output=*/false);
  return out;
}

inline std::vector<at::Tensor> unpack_list(const std::vector<SavedVariable>& saved) {
  std::vector<at::Tensor> out;
  out.reserve(saved.size());
  for (const SavedVariable& s : saved) out.push_back(s.unpack());
  return out;
}

inline void release_list(std::vector<SavedVariable>& saved) {
  for (SavedVariable& s : saved) s.reset_data();
}

// ---- the returns' history --------------------------------------------------------------------

// A differentiable return: its grad_fn is `node`, at the node's next input.  A return of a
// type without gradients (an integer tensor) or an undefined one keeps its slot, undefined.
inline void set_output_history(const at::Tensor& t, const NodePtr<Node>& node) {
  if (t.defined() && torch::autograd::isDifferentiableType(t.scalar_type())) {
    torch::autograd::set_history(t, node);
  } else {
    node->add_input_metadata(Node::undefined_input());
  }
}

inline void skip_output(const NodePtr<Node>& node) {
  node->add_input_metadata(Node::undefined_input());
}

// As VariableTypeUtils.h's check_inplace: a written argument that requires grad must not be a
// leaf (or a view of one) when the op records.
inline void check_inplace(const at::Tensor& t, bool requires_grad) {
  if (!requires_grad || !c10::GradMode::is_enabled()) return;
  auto* view = torch::autograd::impl::get_view_autograd_meta(t);
  if (view != nullptr && view->has_bw_view()) {
    if (view->get_creation_meta() != torch::autograd::CreationMeta::DEFAULT) {
      torch::autograd::handle_view_on_rebase(view);
      return;
    }
    TORCH_CHECK(!(t.requires_grad() && t._base().is_leaf()),
                "a view of a leaf Variable that requires grad is being used in an in-place operation.");
  }
  TORCH_CHECK(!(t.requires_grad() && t.is_leaf()),
              "a leaf Variable that requires grad is being used in an in-place operation.");
}

// A written argument the op returns: its history moves onto `node` (through CopySlices for a view).
inline void rebase_output_history(const at::Tensor& t, const NodePtr<Node>& node) {
  if (!t.defined() || !torch::autograd::isDifferentiableType(t.scalar_type())) {
    node->add_input_metadata(Node::undefined_input());
    return;
  }
  const uint32_t nr = node->add_input_metadata(t);
  torch::autograd::impl::rebase_history(t, {node, nr});
}

// ---- the backward ------------------------------------------------------------------------

// materialize_grads (the default): an undefined incoming gradient of a differentiable return
// is zeros of that return's metadata, as torch::autograd::Function does.
inline void materialize_grads(const Node& node, variable_list& grads) {
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!grads[i].defined() && !node.input_metadata(i).was_default_constructed()) {
      grads[i] = node.input_metadata(i).zeros_like();
    }
  }
}

inline bool any_defined(const variable_list& grads) {
  for (const at::Tensor& g : grads) {
    if (g.defined()) return true;
  }
  return false;
}

// Whether any of the `n` edges from `edge` (a list's elements) needs a gradient.
inline bool should_compute_any(const Node& node, size_t edge, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (node.task_should_compute_output(edge + i)) return true;
  }
  return false;
}

// The gradients a formula gave for the elements (or positions, of a Tensor?[]) of list `arg`
// into the node's outputs `edge`, `edge + 1`...; those no edge needs are dropped.
inline void scatter_list_grads(const char* op, const char* arg, const std::vector<at::Tensor>& grads, size_t size,
                               variable_list& grad_inputs, size_t edge, const Node& node) {
  TORCH_CHECK(grads.size() == size, op, ": the derivative formula for '", arg, "' gave ", grads.size(),
              " gradients, but '", arg, "' has ", size, " tensors");
  for (size_t i = 0; i < size; ++i) {
    if (node.task_should_compute_output(edge + i)) grad_inputs[edge + i] = grads[i];
  }
}

}  // namespace opwrap::rt
