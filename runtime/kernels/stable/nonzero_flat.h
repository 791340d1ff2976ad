// opwrap::nonzero_flat against torch's stable API.  The result's length is data-dependent
// ('?nnz' in the shape rule): it arrives with size 0 and is resized here.
#pragma once

#include "common.h"

#include <torch/headeronly/macros/Macros.h>

namespace opwrap::kernels {

// The predicate, shared with nonzero_flat.cuh.
template <typename scalar_t>
struct IsNonzero {
  const scalar_t* x;
  C10_HOST_DEVICE bool operator()(int64_t i) const { return x[i] != scalar_t(0); }
};

template <typename scalar_t>
void nonzero_flat_cpu(const torch::stable::Tensor& self, torch::stable::Tensor& result) {
  const IsNonzero<scalar_t> keep{self.const_data_ptr<scalar_t>()};
  const int64_t n = self.numel();
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) count += keep(i);
  stable::resize(result, {count});
  int64_t* out = result.mutable_data_ptr<int64_t>();
  for (int64_t i = 0, j = 0; i < n; ++i) {
    if (keep(i)) out[j++] = i;
  }
}

}  // namespace opwrap::kernels
