// CUDA kernels of opwrap::embedding_bag_sum and its backward: a thread per (bag, column),
// accumulating in float for reduced types; the backward scatters with atomic adds (two bags
// may index one row).  Out-of-range indices are caught on the CPU by the wrapper; here, as in
// aten's CUDA kernels, a device assert.
#pragma once

#include <ATen/OpMathType.h>
#include <ATen/cuda/Atomic.cuh>
#include <c10/macros/Macros.h>

#include <opwrap/runtime/cuda.cuh>

#include "embedding_bag.h"

namespace opwrap::kernels {

template <typename index_t>
__device__ inline void bag_bounds(const index_t* off, int64_t b, int64_t B, int64_t N, int64_t& start, int64_t& stop) {
  start = static_cast<int64_t>(off[b]);
  stop = b + 1 < B ? static_cast<int64_t>(off[b + 1]) : N;
  CUDA_KERNEL_ASSERT(0 <= start && start <= stop && stop <= N);
}

template <typename scalar_t, typename index_t>
struct EmbeddingBagSum {
  const scalar_t* w;
  const index_t* idx;
  const index_t* off;
  scalar_t* out;
  int64_t B, D, N, V;
  __device__ void operator()(int64_t k) const {
    const int64_t b = k / D, d = k % D;
    int64_t start = 0, stop = 0;
    bag_bounds(off, b, B, N, start, stop);
    at::opmath_type<scalar_t> acc = 0;
    for (int64_t i = start; i < stop; ++i) {
      const int64_t row = static_cast<int64_t>(idx[i]);
      CUDA_KERNEL_ASSERT(0 <= row && row < V);
      acc += static_cast<at::opmath_type<scalar_t>>(w[row * D + d]);
    }
    out[k] = static_cast<scalar_t>(acc);
  }
};

template <typename scalar_t, typename index_t>
struct EmbeddingBagSumBackward {
  const scalar_t* g;
  const index_t* idx;
  const index_t* off;
  scalar_t* out;
  int64_t B, D, N, V;
  __device__ void operator()(int64_t k) const {
    const int64_t b = k / D, d = k % D;
    int64_t start = 0, stop = 0;
    bag_bounds(off, b, B, N, start, stop);
    for (int64_t i = start; i < stop; ++i) {
      const int64_t row = static_cast<int64_t>(idx[i]);
      CUDA_KERNEL_ASSERT(0 <= row && row < V);
      gpuAtomicAdd(out + row * D + d, g[k]);
    }
  }
};

template <typename scalar_t, typename index_t>
void embedding_bag_sum_cuda(const at::Tensor& weight, const at::Tensor& indices, const at::Tensor& offsets,
                            at::Tensor& result) {
  const int64_t B = offsets.size(0), D = weight.size(1);
  rt::cuda::launch_elementwise(B * D, EmbeddingBagSum<scalar_t, index_t>{
      weight.const_data_ptr<scalar_t>(), indices.const_data_ptr<index_t>(), offsets.const_data_ptr<index_t>(),
      result.mutable_data_ptr<scalar_t>(), B, D, indices.size(0), weight.size(0)});
}

template <typename scalar_t, typename index_t>
void embedding_bag_sum_backward_cuda(const at::Tensor& grad_output, const at::Tensor& indices,
                                     const at::Tensor& offsets, int64_t num_weights, at::Tensor& result) {
  const int64_t B = offsets.size(0), D = grad_output.size(1);
  C10_CUDA_CHECK(cudaMemsetAsync(result.mutable_data_ptr<scalar_t>(), 0, sizeof(scalar_t) * result.numel(),
                                 rt::cuda::stream()));
  rt::cuda::launch_elementwise(B * D, EmbeddingBagSumBackward<scalar_t, index_t>{
      grad_output.const_data_ptr<scalar_t>(), indices.const_data_ptr<index_t>(), offsets.const_data_ptr<index_t>(),
      result.mutable_data_ptr<scalar_t>(), B, D, indices.size(0), num_weights});
}

}  // namespace opwrap::kernels
