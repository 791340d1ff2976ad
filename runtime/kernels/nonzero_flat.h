// Hand-written kernel of opwrap::nonzero_flat.  The result's length is data-dependent
// ('?nnz' in the shape rule): it arrives with size 0 and is resized here.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace opwrap::kernels {

template <typename scalar_t>
void nonzero_flat_cpu(const at::Tensor& self, at::Tensor& result) {
  const scalar_t* x = self.const_data_ptr<scalar_t>();
  const int64_t n = self.numel();
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) {
    count += x[i] != scalar_t(0);
  }
  result.resize_({count});
  int64_t* out = result.mutable_data_ptr<int64_t>();
  for (int64_t i = 0, j = 0; i < n; ++i) {
    if (x[i] != scalar_t(0)) {
      out[j++] = i;
    }
  }
}

}  // namespace opwrap::kernels
