// CUDA kernel of opwrap::bucketize_count against torch's stable API: a thread per value, its
// bucket by the CPU kernel's search, counted with a global atomicAdd.  (The full target's
// kernel keeps the boundaries and a histogram in shared memory per block; this one is the
// plain form.)
#pragma once

#include "bucketize_count.h"
#include "common.cuh"

namespace opwrap::kernels {

template <typename scalar_t>
struct BucketizeCountStable {
  const scalar_t* values;
  const scalar_t* boundaries;
  int64_t K;
  int64_t* indices;
  unsigned long long* counts;
  __device__ void operator()(int64_t i) const {
    const int64_t k = bucket_of(boundaries, K, values[i]);
    indices[i] = k;
    atomicAdd(counts + k, 1ull);
  }
};

template <typename scalar_t>
void bucketize_count_cuda(const torch::stable::Tensor& values, const torch::stable::Tensor& boundaries,
                          torch::stable::Tensor& indices, torch::stable::Tensor& counts) {
  torch::stable::zero_(counts);
  stable::launch_elementwise(values, values.numel(), BucketizeCountStable<scalar_t>{
      values.const_data_ptr<scalar_t>(), boundaries.const_data_ptr<scalar_t>(), boundaries.numel(),
      indices.mutable_data_ptr<int64_t>(), static_cast<unsigned long long*>(counts.mutable_data_ptr())});
}

}  // namespace opwrap::kernels
