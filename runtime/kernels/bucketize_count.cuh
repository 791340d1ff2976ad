// CUDA kernel of opwrap::bucketize_count: a thread per value (the binary search of
// bucketize_count.h), counts by atomic adds.
#pragma once

#include <opwrap/runtime/cuda.cuh>

#include "bucketize_count.h"

namespace opwrap::kernels {

template <typename scalar_t>
struct BucketizeCount {
  const scalar_t* v;
  const scalar_t* b;
  int64_t K;
  int64_t* idx;
  unsigned long long* cnt;  // atomicAdd has no int64_t overload
  __device__ void operator()(int64_t i) const {
    const int64_t bucket = bucket_of(b, K, v[i]);
    idx[i] = bucket;
    atomicAdd(cnt + bucket, 1ull);
  }
};

template <typename scalar_t>
void bucketize_count_cuda(const at::Tensor& values, const at::Tensor& boundaries, at::Tensor& indices,
                          at::Tensor& counts) {
  static_assert(sizeof(unsigned long long) == sizeof(int64_t));
  C10_CUDA_CHECK(cudaMemsetAsync(counts.mutable_data_ptr<int64_t>(), 0, sizeof(int64_t) * counts.numel(),
                                 rt::cuda::stream()));
  rt::cuda::launch_elementwise(values.numel(), BucketizeCount<scalar_t>{
      values.const_data_ptr<scalar_t>(), boundaries.const_data_ptr<scalar_t>(), boundaries.numel(),
      indices.mutable_data_ptr<int64_t>(), reinterpret_cast<unsigned long long*>(counts.mutable_data_ptr<int64_t>())});
}

}  // namespace opwrap::kernels
