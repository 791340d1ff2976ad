// CUDA kernels of opwrap::cat_rows and opwrap::chunk_rows: the copies are aten's (copy_ runs
// on the current stream, any strides); the op's own part is the contract and the gradients.
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

#include "cat_rows.h"

namespace opwrap::kernels {

template <typename scalar_t>
void cat_rows_cuda(at::TensorList tensors, at::Tensor& result) {
  int64_t row = 0;
  for (const at::Tensor& t : tensors) {
    result.narrow(0, row, t.size(0)).copy_(t);
    row += t.size(0);
  }
}

template <typename scalar_t>
std::vector<at::Tensor> chunk_rows_cuda(const at::Tensor& self, int64_t chunks) {
  std::vector<at::Tensor> out;
  const int64_t rows = self.size(0) / chunks;
  for (int64_t i = 0; i < chunks; ++i) out.push_back(self.narrow(0, i * rows, rows).clone());
  return out;
}

}  // namespace opwrap::kernels
