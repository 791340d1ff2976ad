// opwrap::bincount_fixed against torch's stable API (the full target's: ../bincount_fixed.h):
// counts are int64; weighted sums the weights' dtype, accumulated in index order.
#pragma once

#include "common.h"

#include <optional>

namespace opwrap::kernels {

template <typename index_t, typename weights_t>
void bincount_fixed_cpu(const torch::stable::Tensor& self, int64_t /*bins*/,
                        const std::optional<torch::stable::Tensor>& weights, torch::stable::Tensor& result) {
  const index_t* in = self.const_data_ptr<index_t>();
  const int64_t n = self.numel();
  torch::stable::zero_(result);
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
