// Hand-written kernels of opwrap::embedding_bag_sum and its backward: float data indexed by
// int32 or int64 tensors (two template parameters: the data's type and the indices').  The
// wrapper has checked that every index lies in [0, V) and every offset in [0, N].
#pragma once

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/OpMathType.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Exception.h>

#include "common.h"
#include "embedding_bag_loops.h"  // the loops, shared with the stable target's kernel

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace opwrap::kernels {

// Offsets must not decrease: checked before the loops (embedding_bag_loops.h), which take
// each bag's range as given.
template <typename index_t>
inline void check_offsets(const char* op, const index_t* offsets, int64_t B, int64_t N) {
  for (int64_t b = 0; b < B; ++b) {
    int64_t start = 0, stop = 0;
    bag_range(offsets, b, B, N, start, stop);
    TORCH_CHECK(start <= stop, op, ": argument 'offsets' must not decrease, but offsets[", b, "] = ", start,
                " > offsets[", b + 1, "] = ", stop);
  }
}

// sum_bags is also compiled for AVX2 and FMA (common.h's OPWRAP_AVX2_CLONES), chosen once at
// run time, per chunk of bags.
#if OPWRAP_AVX2_CLONES
template <typename scalar_t, typename index_t, typename acc_t>
__attribute__((target("avx2,fma"))) void sum_bags_avx2(const scalar_t* w, const index_t* idx, const index_t* off,
                                                       scalar_t* out, int64_t B, int64_t D, int64_t N, int64_t begin,
                                                       int64_t end, acc_t* acc) {
  sum_bags(w, idx, off, out, B, D, N, begin, end, acc);
}
#endif

template <typename scalar_t, typename index_t>
void embedding_bag_sum_cpu(const at::Tensor& weight, const at::Tensor& indices, const at::Tensor& offsets,
                           at::Tensor& result) {
  using acc_t = at::opmath_type<scalar_t>;
  const scalar_t* w = weight.const_data_ptr<scalar_t>();
  const index_t* idx = indices.const_data_ptr<index_t>();
  const index_t* off = offsets.const_data_ptr<index_t>();
  scalar_t* out = result.mutable_data_ptr<scalar_t>();
  const int64_t B = offsets.size(0), D = weight.size(1), N = indices.size(0);
#if OPWRAP_AVX2_CLONES
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
  check_offsets("opwrap::embedding_bag_sum", off, B, N);
  // Bags are independent: each writes its own row.
  const int64_t per_bag = std::max<int64_t>(1, D * (B > 0 ? N / B : 1));
  at::parallel_for(0, B, std::max<int64_t>(1, 32768 / per_bag), [&](int64_t begin, int64_t end) {
    std::vector<acc_t> acc(static_cast<size_t>(D));
#if OPWRAP_AVX2_CLONES
    if (avx2) return sum_bags_avx2(w, idx, off, out, B, D, N, begin, end, acc.data());
#endif
    sum_bags(w, idx, off, out, B, D, N, begin, end, acc.data());
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
  check_offsets("opwrap::embedding_bag_sum_backward", off, B, N);
  // A scatter-add: two bags may index one row, so threads split the columns, each adding
  // its columns of every bag's gradient row, in order (deterministic).  As few blocks as
  // threads: each block reads every index again and touches every row it names once more.
  const int64_t threads = std::max<int64_t>(1, at::get_num_threads());
  const int64_t cols = std::max<int64_t>(16, (D + threads - 1) / threads + 15) / 16 * 16;
  at::parallel_for(0, (D + cols - 1) / cols, 1, [&](int64_t begin, int64_t end) {
    const int64_t d0 = begin * cols, width = std::min(D, end * cols) - d0;
    scatter_columns<acc_t>(num_weights, D, d0, width, out, [&](acc_t* acc, int64_t stride) {
      scatter_bags(g, idx, off, B, D, N, d0, width, acc, stride);
    });
  });
}

}  // namespace opwrap::kernels
