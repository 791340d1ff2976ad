// Hand-written kernel of opwrap::bucketize_count: for each value, the index of its bucket
// among sorted boundaries (torch.bucketize with right=False: the first i with
// value <= boundaries[i]), and how many values fell in each of the K + 1 buckets.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/macros/Macros.h>

#include <cstdint>
#include <cstring>

namespace opwrap::kernels {

// Binary search, shared with bucketize_count.cuh (std::lower_bound is host-only).
template <typename scalar_t>
C10_HOST_DEVICE inline int64_t bucket_of(const scalar_t* boundaries, int64_t K, scalar_t v) {
  int64_t lo = 0, hi = K;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (boundaries[mid] < v) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

template <typename scalar_t>
void bucketize_count_cpu(const at::Tensor& values, const at::Tensor& boundaries, at::Tensor& indices,
                         at::Tensor& counts) {
  const scalar_t* v = values.const_data_ptr<scalar_t>();
  const scalar_t* b = boundaries.const_data_ptr<scalar_t>();
  const int64_t K = boundaries.numel();
  int64_t* idx = indices.mutable_data_ptr<int64_t>();
  int64_t* cnt = counts.mutable_data_ptr<int64_t>();
  std::memset(cnt, 0, sizeof(int64_t) * static_cast<size_t>(K + 1));
  // Serial: the counts are a histogram, and this op is not a hot path on CPU.
  for (int64_t i = 0; i < values.numel(); ++i) {
    idx[i] = bucket_of(b, K, v[i]);
    ++cnt[idx[i]];
  }
}

}  // namespace opwrap::kernels
