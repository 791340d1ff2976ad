// `dtype: {result: "promote(a, b)"}`: the promotion of tensor arguments, computed as
// torch.result_type computes it (zero-dim tensors take part by category only).  Included only
// by the wrappers of ops with such a rule.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/native/TypeProperties.h>

#include <initializer_list>

namespace opwrap::rt {

inline at::ScalarType result_type(std::initializer_list<at::Tensor> tensors) {
  at::native::ResultTypeState state;
  for (const at::Tensor& t : tensors) state = at::native::update_result_type_state(t, state);
  return at::native::result_type(state);
}

}  // namespace opwrap::rt
