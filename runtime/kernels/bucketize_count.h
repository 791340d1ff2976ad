// Hand-written kernel of opwrap::bucketize_count: for each value, the index of its bucket
// among sorted boundaries (torch.bucketize with right=False: the first i with
// value <= boundaries[i]; a NaN goes past the last, as in torch), and how many values fell
// in each of the K + 1 buckets.
#pragma once

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <c10/macros/Macros.h>

#include "bucketize_search.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

namespace opwrap::kernels {

template <typename scalar_t>
void bucketize_count_cpu(const at::Tensor& values, const at::Tensor& boundaries, at::Tensor& indices,
                         at::Tensor& counts) {
  const scalar_t* v = values.const_data_ptr<scalar_t>();
  const scalar_t* b = boundaries.const_data_ptr<scalar_t>();
  const int64_t K = boundaries.numel(), N = values.numel();
  int64_t* idx = indices.mutable_data_ptr<int64_t>();
  int64_t* cnt = counts.mutable_data_ptr<int64_t>();
  // Each thread counts into its own histogram; they are added at the end (integers: the same
  // counts for any split).
  constexpr int kLanes = 8;
  const int threads = at::get_num_threads();
  std::vector<int64_t> local(static_cast<size_t>(threads) * static_cast<size_t>(K + 1), 0);
  at::parallel_for(0, N, 16384, [&](int64_t begin, int64_t end) {
    int64_t* mine = local.data() + static_cast<int64_t>(at::get_thread_num()) * (K + 1);
    int64_t i = begin;
    if (K > 0) {
      for (; i + kLanes <= end; i += kLanes) {
        buckets_of<kLanes>(b, K, v + i, idx + i);
        for (int j = 0; j < kLanes; ++j) ++mine[idx[i + j]];
      }
    }
    for (; i < end; ++i) ++mine[idx[i] = bucket_of(b, K, v[i])];
  });
  std::memset(cnt, 0, sizeof(int64_t) * static_cast<size_t>(K + 1));
  for (int t = 0; t < threads; ++t) {
    for (int64_t k = 0; k <= K; ++k) cnt[k] += local[static_cast<size_t>(t) * static_cast<size_t>(K + 1) + k];
  }
}

}  // namespace opwrap::kernels
