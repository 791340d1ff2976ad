// CUDA kernel of opwrap::rms_norm: a block per row; the sum of squares is block-reduced in
// opmath (float for float16 and bfloat16), then every thread normalizes its share of the row.
#pragma once

#include <opwrap/runtime/cuda.cuh>

#include "rms_norm.h"

namespace opwrap::kernels {

template <typename scalar_t, typename opmath_t>
__global__ void rms_norm_rows(const scalar_t* x, const scalar_t* w, scalar_t* y, scalar_t* r, int64_t rows,
                              int64_t D, double eps) {
  __shared__ opmath_t shared[rt::cuda::kThreads / rt::cuda::kWarp];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const scalar_t* xr = x + row * D;
    opmath_t sumsq = 0;
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
      const auto v = static_cast<opmath_t>(xr[d]);
      sumsq += v * v;
    }
    const opmath_t inv = rms_norm_inv(rt::cuda::block_sum(sumsq, shared), D, eps);
    if (threadIdx.x == 0) r[row] = static_cast<scalar_t>(inv);
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
      y[row * D + d] = rms_norm_apply(xr[d], inv, w[d]);
    }
  }
}

template <typename scalar_t>
void rms_norm_cuda(const at::Tensor& input, const at::Tensor& weight, double eps, at::Tensor& out, at::Tensor& rstd) {
  using opmath_t = at::opmath_type<scalar_t>;
  const int64_t rows = rstd.numel();
  if (rows == 0) return;
  rms_norm_rows<scalar_t, opmath_t><<<rt::cuda::blocks_for(rows, 1), rt::cuda::kThreads, 0, rt::cuda::stream()>>>(
      input.const_data_ptr<scalar_t>(), weight.const_data_ptr<scalar_t>(), out.mutable_data_ptr<scalar_t>(),
      rstd.mutable_data_ptr<scalar_t>(), rows, input.size(-1), eps);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace opwrap::kernels
