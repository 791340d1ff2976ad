// `index: {indices: weight.size(0)}`: every value of an integer tensor lies in [low, high),
// checked before the kernel reads memory through it (on the CPU; on CUDA a check would
// synchronize the stream, and kernels use CUDA_KERNEL_ASSERT as aten's do).  Included only by
// the wrappers of ops with an `index:` rule.
#pragma once

#include <ATen/core/List.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/aminmax.h>
#include <c10/util/Exception.h>

#include <optional>
#include <string>

namespace opwrap::rt {

inline void check_index(const char* op, const char* arg, const at::Tensor& t, int64_t low, int64_t high,
                        const char* rule) {
  TORCH_CHECK(!at::isFloatingType(t.scalar_type()) && !at::isComplexType(t.scalar_type()) &&
                  t.scalar_type() != at::ScalarType::Bool,
              op, ": argument '", arg, "' holds indices, so it must have an integer dtype, not ", t.scalar_type());
  if (t.numel() == 0) return;
  const auto [lo, hi] = at::aminmax(t);
  const int64_t min = lo.item<int64_t>(), max = hi.item<int64_t>();
  TORCH_CHECK(min >= low && max < high, op, ": argument '", arg, "' holds ", (min < low ? min : max),
              ", out of range: its values must lie in [", low, ", ", high, ") (index: ", rule, ")");
}

// A tensor list's bound is every element's (`offsets[2]` in messages); a Tensor?[]'s None
// elements are left out.
inline void check_index(const char* op, const char* arg, at::TensorList ts, int64_t low, int64_t high,
                        const char* rule) {
  for (size_t i = 0; i < ts.size(); ++i) {
    check_index(op, (std::string(arg) + "[" + std::to_string(i) + "]").c_str(), ts[i], low, high, rule);
  }
}

inline void check_index(const char* op, const char* arg, const c10::List<std::optional<at::Tensor>>& ts, int64_t low,
                        int64_t high, const char* rule) {
  for (size_t i = 0; i < ts.size(); ++i) {
    const std::optional<at::Tensor> t = ts.get(i);
    if (t.has_value() && t->defined()) {
      check_index(op, (std::string(arg) + "[" + std::to_string(i) + "]").c_str(), *t, low, high, rule);
    }
  }
}

}  // namespace opwrap::rt
