// CUDA kernel of opwrap::sum_dim: self laid out as the CPU kernel lays it out (sum_dim.h's
// rows_to_sum: a contiguous (kept, reduced) matrix), then a block per row, each thread
// summing a strided part of it in at::acc_type<result_t, true> (float for float32) and the
// block adding the parts (opwrap::rt::cuda::block_sum).  Elements are converted to the
// result's dtype before they are added, as the CPU kernel and torch.sum with dtype= do.
#pragma once

#include <ATen/AccumulateType.h>
#include <c10/util/TypeCast.h>

#include <opwrap/runtime/cuda.cuh>

#include <algorithm>
#include <cstdint>

#include "sum_dim.h"

namespace opwrap::kernels {

template <typename scalar_t, typename result_t, typename acc_t>
__global__ void __launch_bounds__(rt::cuda::kThreads) sum_dim_rows(const scalar_t* __restrict__ in,
                                                                   result_t* __restrict__ out, int64_t outer,
                                                                   int64_t inner) {
  __shared__ acc_t shared[rt::cuda::kThreads / rt::cuda::kWarp];
  for (int64_t row = blockIdx.x; row < outer; row += gridDim.x) {
    const scalar_t* p = in + row * inner;
    acc_t acc = acc_t(0);
    for (int64_t i = threadIdx.x; i < inner; i += blockDim.x) {
      acc += static_cast<acc_t>(c10::static_cast_with_inter_type<result_t, scalar_t>::apply(p[i]));
    }
    acc = rt::cuda::block_sum(acc, shared);
    if (threadIdx.x == 0) out[row] = static_cast<result_t>(acc);
  }
}

template <typename scalar_t, typename result_t>
void sum_dim_cuda(const at::Tensor& self, at::OptionalIntArrayRef dim, bool /*keepdim*/,
                  std::optional<at::ScalarType> /*dtype*/, at::Tensor& result) {
  const at::Tensor rows = rows_to_sum(self, dim);  // (outer, inner): a block a row
  if (rows.size(0) == 0) return;
  sum_dim_rows<scalar_t, result_t, at::acc_type<result_t, /*is_cuda=*/true>>
      <<<static_cast<unsigned>(std::min<int64_t>(rows.size(0), 65535)), rt::cuda::kThreads, 0, rt::cuda::stream()>>>(
          rows.const_data_ptr<scalar_t>(), result.mutable_data_ptr<result_t>(), rows.size(0), rows.size(1));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace opwrap::kernels
