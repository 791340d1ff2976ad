// opwrap::embedding_bag_sum and its backward against torch's stable API: float data indexed
// by int32 or int64 tensors.  The wrapper has checked that every index lies in [0, V) and
// every offset in [0, N].  The loops are the full target's (../embedding_bag_loops.h: bags
// summed in registers with the rows ahead prefetched, in parallel over bags; the backward's
// scatter-add in parallel over column blocks, each adding its columns of every bag's gradient
// row in order, deterministic), compiled once per instruction set here (OPWRAP_PW_CLONES).
#pragma once

#include "common.h"

#include <opwrap/stable/pointwise.h>
#include <torch/headeronly/macros/Macros.h>
#include <torch/headeronly/util/BFloat16.h>
#include <torch/headeronly/util/Half.h>

#include "../embedding_bag_loops.h"

#include <algorithm>
#include <type_traits>
#include <vector>

namespace opwrap::kernels {

template <typename scalar_t>
using bag_acc_t = std::conditional_t<std::is_same_v<scalar_t, c10::BFloat16> || std::is_same_v<scalar_t, c10::Half>,
                                     float, scalar_t>;

// Offsets must not decrease: checked before the parallel loops (an exception thrown inside
// torch::stable::parallel_for reaches Python wrapped in the C shim's own words).
template <typename index_t>
inline void check_offsets(const char* op, const index_t* offsets, int64_t B, int64_t N) {
  for (int64_t b = 0; b < B; ++b) {
    int64_t start = 0, stop = 0;
    bag_range(offsets, b, B, N, start, stop);
    OPWRAP_STABLE_CHECK(start <= stop, op, ": argument 'offsets' must not decrease, but offsets[", b, "] = ", start,
                        " > offsets[", b + 1, "] = ", stop);
  }
}

// The shared loops, each compiled once per instruction set.
template <typename scalar_t, typename index_t, typename acc_t>
OPWRAP_PW_CLONES void sum_bags_cloned(const scalar_t* w, const index_t* idx, const index_t* off, scalar_t* out,
                                      int64_t B, int64_t D, int64_t N, int64_t begin, int64_t end, acc_t* acc) {
  sum_bags(w, idx, off, out, B, D, N, begin, end, acc);
}

template <typename acc_t, typename scalar_t, typename index_t>
OPWRAP_PW_CLONES void scatter_bags_cloned(const scalar_t* g, const index_t* idx, const index_t* off, int64_t B,
                                          int64_t D, int64_t N, int64_t d0, int64_t width, acc_t* acc, int64_t stride) {
  scatter_bags(g, idx, off, B, D, N, d0, width, acc, stride);
}

template <typename scalar_t, typename index_t>
void embedding_bag_sum_cpu(const torch::stable::Tensor& weight, const torch::stable::Tensor& indices,
                           const torch::stable::Tensor& offsets, torch::stable::Tensor& result) {
  using acc_t = bag_acc_t<scalar_t>;
  const scalar_t* w = weight.const_data_ptr<scalar_t>();
  const index_t* idx = indices.const_data_ptr<index_t>();
  const index_t* off = offsets.const_data_ptr<index_t>();
  scalar_t* out = result.mutable_data_ptr<scalar_t>();
  const int64_t B = offsets.size(0), D = weight.size(1), N = indices.size(0);
  check_offsets("opwrap::embedding_bag_sum", off, B, N);
  const int64_t per_bag = std::max<int64_t>(1, D * (B > 0 ? N / B : 1));
  torch::stable::parallel_for(0, B, std::max<int64_t>(1, 32768 / per_bag), [&](int64_t begin, int64_t end) {
    std::vector<acc_t> acc(static_cast<size_t>(D));
    sum_bags_cloned(w, idx, off, out, B, D, N, begin, end, acc.data());
  });
}

template <typename scalar_t, typename index_t>
void embedding_bag_sum_backward_cpu(const torch::stable::Tensor& grad_output, const torch::stable::Tensor& indices,
                                    const torch::stable::Tensor& offsets, int64_t num_weights,
                                    torch::stable::Tensor& result) {
  using acc_t = bag_acc_t<scalar_t>;
  const scalar_t* g = grad_output.const_data_ptr<scalar_t>();
  const index_t* idx = indices.const_data_ptr<index_t>();
  const index_t* off = offsets.const_data_ptr<index_t>();
  scalar_t* out = result.mutable_data_ptr<scalar_t>();
  const int64_t B = offsets.size(0), D = grad_output.size(1), N = indices.size(0);
  check_offsets("opwrap::embedding_bag_sum_backward", off, B, N);
  const int64_t threads = std::max<int64_t>(1, opwrap::rt::abi::num_threads());
  const int64_t cols = std::max<int64_t>(16, (D + threads - 1) / threads + 15) / 16 * 16;
  torch::stable::parallel_for(0, (D + cols - 1) / cols, 1, [&](int64_t begin, int64_t end) {
    const int64_t d0 = begin * cols, width = std::min(D, end * cols) - d0;
    scatter_columns<acc_t>(num_weights, D, d0, width, out, [&](acc_t* acc, int64_t stride) {
      scatter_bags_cloned(g, idx, off, B, D, N, d0, width, acc, stride);
    });
  });
}

}  // namespace opwrap::kernels
