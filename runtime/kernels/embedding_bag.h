// Hand-written kernels of opwrap::embedding_bag_sum and its backward: float data indexed by
// int32 or int64 tensors (two template parameters: the data's type and the indices').  The
// wrapper has checked that every index lies in [0, V) and every offset in [0, N].
#pragma once

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/OpMathType.h>
#include <c10/util/Exception.h>

#include <cstdint>

namespace opwrap::kernels {

// The range [start, stop) of indices in bag b; offsets must not decrease.
template <typename index_t>
inline void bag_range(const char* op, const index_t* offsets, int64_t b, int64_t B, int64_t N, int64_t& start,
                      int64_t& stop) {
  start = static_cast<int64_t>(offsets[b]);
  stop = b + 1 < B ? static_cast<int64_t>(offsets[b + 1]) : N;
  TORCH_CHECK(start <= stop, op, ": argument 'offsets' must not decrease, but offsets[", b, "] = ", start,
              " > offsets[", b + 1, "] = ", stop);
}

template <typename scalar_t, typename index_t>
void embedding_bag_sum_cpu(const at::Tensor& weight, const at::Tensor& indices, const at::Tensor& offsets,
                           at::Tensor& result) {
  using acc_t = at::opmath_type<scalar_t>;
  const scalar_t* w = weight.const_data_ptr<scalar_t>();
  const index_t* idx = indices.const_data_ptr<index_t>();
  const index_t* off = offsets.const_data_ptr<index_t>();
  scalar_t* out = result.mutable_data_ptr<scalar_t>();
  const int64_t B = offsets.size(0), D = weight.size(1), N = indices.size(0);
  // Bags are independent: each writes its own row.
  at::parallel_for(0, B, 1, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      int64_t start = 0, stop = 0;
      bag_range("opwrap::embedding_bag_sum", off, b, B, N, start, stop);
      for (int64_t d = 0; d < D; ++d) {
        acc_t acc = 0;
        for (int64_t i = start; i < stop; ++i) acc += static_cast<acc_t>(w[static_cast<int64_t>(idx[i]) * D + d]);
        out[b * D + d] = static_cast<scalar_t>(acc);
      }
    }
  });
}

template <typename scalar_t, typename index_t>
void embedding_bag_sum_backward_cpu(const at::Tensor& grad_output, const at::Tensor& indices, const at::Tensor& offsets,
                                    int64_t num_weights, at::Tensor& result) {
  using acc_t = at::opmath_type<scalar_t>;
  const scalar_t* g = grad_output.const_data_ptr<scalar_t>();
  const index_t* idx = indices.const_data_ptr<index_t>();
  const index_t* off = offsets.const_data_ptr<index_t>();
  scalar_t* out = result.mutable_data_ptr<scalar_t>();
  const int64_t B = offsets.size(0), D = grad_output.size(1), N = indices.size(0);
  for (int64_t i = 0; i < num_weights * D; ++i) out[i] = scalar_t(0);
  // Serial: two bags may index one row (a scatter-add); columns could be split across
  // threads, which this small example does not need.
  for (int64_t b = 0; b < B; ++b) {
    int64_t start = 0, stop = 0;
    bag_range("opwrap::embedding_bag_sum_backward", off, b, B, N, start, stop);
    for (int64_t i = start; i < stop; ++i) {
      scalar_t* row = out + static_cast<int64_t>(idx[i]) * D;
      for (int64_t d = 0; d < D; ++d) row[d] = static_cast<scalar_t>(static_cast<acc_t>(row[d]) + static_cast<acc_t>(g[b * D + d]));
    }
  }
}

}  // namespace opwrap::kernels
