// The Autograd kernel of an op without derivative formulas that writes arguments (vLLM's
// `rms_norm(Tensor(a!) result, Tensor input, ...) -> ()`) or takes a Tensor?[].
//
// torch's autogradNotImplementedFallback attaches its NotImplemented node to the returns
// only, and sees the tensors of Tensor and Tensor[] arguments only: an op that writes an
// argument it does not return (`-> ()`) would leave that argument silently detached from the
// inputs that require grad, and the elements of a Tensor?[] would be silently detached from
// the op's results.  Here every input tensor (Tensor?[] elements included) is an input of a
// torch::autograd::Function whose backward raises "derivative for <op> is not implemented",
// and its outputs are the returns and every written argument (marked dirty): backward
// through any of them raises, writing a leaf that requires grad is an error at the call (as
// for any in-place op), and the written arguments' version counters move.  With nothing to record
// (grad mode off, or no tensor requiring grad) it redispatches below autograd, where the
// ADInplaceOrView kernel (opwrap::rt::bump_written_versions) moves the version counters.
#pragma once

#include <opwrap/runtime/autograd.h>

#include <torch/csrc/autograd/custom_function.h>

#include <string>
#include <vector>

namespace opwrap::rt {

struct NotImplementedFunction : public torch::autograd::Function<NotImplementedFunction> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, at::TensorList inputs,
                                                const c10::OperatorHandle* op, c10::DispatchKeySet ks,
                                                torch::jit::Stack* stack) {
    const c10::FunctionSchema& schema = op->schema();
    ctx->saved_data["op"] = schema.name();
    torch::autograd::variable_list outputs = written_arguments(schema, *stack);
    {
      at::AutoDispatchBelowADInplaceOrView guard;
      op->redispatchBoxed(ks & c10::after_ADInplaceOrView_keyset, stack);
    }
    ctx->mark_dirty(outputs);
    // The returns that are not written arguments are the Function's outputs too.
    const size_t n = schema.returns().size(), start = stack->size() - n;
    for (size_t i = 0; i < n; ++i) {
      if (schema.returns()[i].alias_info() == nullptr) {
        for_each_tensor((*stack)[start + i], [&](const at::Tensor& t) { outputs.push_back(t); });
      }
    }
    return outputs;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    TORCH_CHECK(false, "derivative for ", ctx->saved_data["op"].toStringRef(), " is not implemented");
    return grads;
  }
};

inline void autograd_not_implemented(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  const size_t n = op.schema().arguments().size(), start = stack->size() - n;
  std::vector<at::Tensor> inputs;
  bool record = false;
  const bool grad_mode = c10::GradMode::is_enabled();
  for (size_t i = 0; i < n; ++i) {
    for_each_tensor((*stack)[start + i], [&](const at::Tensor& t) {
      inputs.push_back(t);
      record = record || needs_autograd_one(t, grad_mode);
    });
  }
  if (!record) {
    at::AutoDispatchBelowAutograd guard;
    op.redispatchBoxed(ks & c10::after_autograd_keyset, stack);
    return;
  }
  const torch::autograd::variable_list outputs = NotImplementedFunction::apply(at::TensorList(inputs), &op, ks, stack);
  // The stack's non-aliasing returns become the Function's outputs (which carry its node).
  const c10::FunctionSchema& schema = op.schema();
  const size_t r = schema.returns().size(), rstart = stack->size() - r;
  size_t k = outputs.size();
  for (size_t i = 0; i < r; ++i) {
    if (schema.returns()[i].alias_info() == nullptr) {
      for_each_tensor((*stack)[rstart + i], [&](const at::Tensor&) { --k; });
    }
  }
  for (size_t i = 0; i < r; ++i) {
    c10::IValue& v = (*stack)[rstart + i];
    if (schema.returns()[i].alias_info() != nullptr) continue;
    if (v.isTensor()) {
      v = outputs[k++];
    } else if (v.isTensorList()) {
      c10::List<at::Tensor> list = v.toTensorList();
      for (size_t j = 0; j < list.size(); ++j) list.set(j, outputs[k++]);
      v = list;
    }
  }
}

}  // namespace opwrap::rt
