// Hand-written kernel of opwrap::bincount_fixed: one instantiation per index dtype and
// weights dtype (weights_t is float when no weights are given, and then unused).  Counts are
// int64; weighted sums are the weights' dtype, accumulated in index order as torch.bincount's
// CPU kernel does.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>

namespace opwrap::kernels {

template <typename index_t, typename weights_t>
void bincount_fixed_cpu(const at::Tensor& self, int64_t /*bins*/, const std::optional<at::Tensor>& weights,
                        at::Tensor& result) {
  const index_t* in = self.const_data_ptr<index_t>();
  const int64_t n = self.numel();
  result.zero_();
  if (weights.has_value() && weights->defined()) {
    const weights_t* w = weights->const_data_ptr<weights_t>();
    weights_t* out = result.mutable_data_ptr<weights_t>();
    for (int64_t i = 0; i < n; ++i) out[in[i]] += w[i];
  } else {
    int64_t* out = result.mutable_data_ptr<int64_t>();
    for (int64_t i = 0; i < n; ++i) out[in[i]] += 1;
  }
}

}  // namespace opwrap::kernels
