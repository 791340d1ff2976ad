// CUDA kernel of opwrap::addmv_: a block per row; its threads stride over the row and
// block-reduce the dot product in opmath, then one thread combines it with self.
#pragma once

#include <opwrap/runtime/cuda.cuh>

#include "addmv.h"

namespace opwrap::kernels {

template <typename scalar_t, typename opmath_t>
__global__ void addmv_rows(scalar_t* out, const scalar_t* A, const scalar_t* v, int64_t N, int64_t M,
                           opmath_t beta, opmath_t alpha) {
  __shared__ opmath_t shared[rt::cuda::kThreads / rt::cuda::kWarp];
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    opmath_t acc = 0;
    for (int64_t m = threadIdx.x; m < M; m += blockDim.x) {
      acc += static_cast<opmath_t>(A[n * M + m]) * static_cast<opmath_t>(v[m]);
    }
    acc = rt::cuda::block_sum(acc, shared);
    if (threadIdx.x == 0) out[n] = addmv_combine(out[n], acc, beta, alpha);
  }
}

template <typename scalar_t>
void addmv_cuda(at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec,
                const at::Scalar& beta, const at::Scalar& alpha) {
  using opmath_t = at::opmath_type<scalar_t>;
  const int64_t N = mat.size(0), M = mat.size(1);
  if (N == 0) return;
  addmv_rows<scalar_t, opmath_t><<<rt::cuda::blocks_for(N, 1), rt::cuda::kThreads, 0, rt::cuda::stream()>>>(
      self.mutable_data_ptr<scalar_t>(), mat.const_data_ptr<scalar_t>(), vec.const_data_ptr<scalar_t>(), N, M,
      beta.to<opmath_t>(), alpha.to<opmath_t>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace opwrap::kernels
