// Hand-written kernels of opwrap::cat_rows and opwrap::chunk_rows: row blocks copied between
// one tensor and a list of tensors (every element contiguous, of the wrapper-checked shapes).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include "common.h"

#include <cstdint>
#include <vector>

namespace opwrap::kernels {

// The first size of each element's sizes (to_args_sizes(tensors) in a formula): the row
// counts that cat_rows' gradient is split into.
inline std::vector<int64_t> rows_of(const std::vector<std::vector<int64_t>>& sizes) {
  std::vector<int64_t> rows;
  rows.reserve(sizes.size());
  for (const auto& s : sizes) rows.push_back(s.at(0));
  return rows;
}

template <typename scalar_t>
void cat_rows_cpu(at::TensorList tensors, at::Tensor& result) {
  scalar_t* out = result.mutable_data_ptr<scalar_t>();
  for (const at::Tensor& t : tensors) {
    if (t.numel() == 0) continue;  // (an empty tensor's data pointer may be null: no memcpy)
    const at::Tensor c = t.contiguous();
    parallel_memcpy(out, c.const_data_ptr<scalar_t>(), sizeof(scalar_t) * c.numel());
    out += c.numel();
  }
}

template <typename scalar_t>
std::vector<at::Tensor> chunk_rows_cpu(const at::Tensor& self, int64_t chunks) {
  std::vector<at::Tensor> out;
  const int64_t rows = self.size(0) / chunks, cols = self.size(1);
  const scalar_t* in = self.const_data_ptr<scalar_t>();
  for (int64_t i = 0; i < chunks; ++i) {
    at::Tensor block = at::empty({rows, cols}, self.options());
    if (rows * cols != 0) {  // (an empty tensor's data pointer may be null: no memcpy)
      parallel_memcpy(block.mutable_data_ptr<scalar_t>(), in + i * rows * cols, sizeof(scalar_t) * rows * cols);
    }
    out.push_back(std::move(block));
  }
  return out;
}

}  // namespace opwrap::kernels
