// opwrap::bucketize_count against torch's stable API: for each value the index of its bucket
// among sorted boundaries (torch.bucketize, right=False: the first i with value <=
// boundaries[i]; a NaN past the last), and how many values fell in each of the K + 1
// buckets.  The full target's kernel (../bucketize_count.h) counts into one histogram per
// thread (at::get_thread_num, which the stable API lacks); this one into one per chunk of a
// fixed split, added at the end (integers: the same counts for any split).
#pragma once

#include "common.h"

#include <torch/headeronly/macros/Macros.h>

#include "../bucketize_search.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace opwrap::kernels {

template <typename scalar_t>
void bucketize_count_cpu(const torch::stable::Tensor& values, const torch::stable::Tensor& boundaries,
                         torch::stable::Tensor& indices, torch::stable::Tensor& counts) {
  const scalar_t* v = values.const_data_ptr<scalar_t>();
  const scalar_t* b = boundaries.const_data_ptr<scalar_t>();
  const int64_t K = boundaries.numel(), N = values.numel();
  int64_t* idx = indices.mutable_data_ptr<int64_t>();
  int64_t* cnt = counts.mutable_data_ptr<int64_t>();
  constexpr int64_t kChunk = 16384;
  const int64_t chunks = (N + kChunk - 1) / kChunk;
  std::vector<int64_t> local(static_cast<size_t>(chunks) * static_cast<size_t>(K + 1), 0);
  torch::stable::parallel_for(0, chunks, 1, [&](int64_t first, int64_t last) {
    for (int64_t c = first; c < last; ++c) {
      int64_t* mine = local.data() + c * (K + 1);
      constexpr int kLanes = 8;
      const int64_t stop = std::min(N, (c + 1) * kChunk);
      int64_t i = c * kChunk;
      if (K > 0) {
        for (; i + kLanes <= stop; i += kLanes) {
          buckets_of<kLanes>(b, K, v + i, idx + i);
          for (int j = 0; j < kLanes; ++j) ++mine[idx[i + j]];
        }
      }
      for (; i < stop; ++i) ++mine[idx[i] = bucket_of(b, K, v[i])];
    }
  });
  std::memset(cnt, 0, sizeof(int64_t) * static_cast<size_t>(K + 1));
  for (int64_t c = 0; c < chunks; ++c) {
    for (int64_t k = 0; k <= K; ++k) cnt[k] += local[static_cast<size_t>(c * (K + 1) + k)];
  }
}

}  // namespace opwrap::kernels
