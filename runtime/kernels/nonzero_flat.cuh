// CUDA kernel of opwrap::nonzero_flat: cub::DeviceSelect::If over the flat indices with the
// predicate of nonzero_flat.h (a stream compaction keeps them in order), then one
// device-to-host copy of the count to size the result, as aten's nonzero does.
#pragma once

#include <ATen/ops/empty.h>
#include <cub/device/device_select.cuh>
#include <opwrap/runtime/cuda.cuh>
#include <thrust/iterator/counting_iterator.h>

#include "nonzero_flat.h"

namespace opwrap::kernels {

template <typename scalar_t>
void nonzero_flat_cuda(const at::Tensor& self, at::Tensor& result) {
  const int64_t n = self.numel();
  result.resize_({n});
  const auto options = self.options().dtype(at::kByte);
  at::Tensor count = at::empty({static_cast<int64_t>(sizeof(int64_t))}, options);
  const thrust::counting_iterator<int64_t> indices(0);
  const IsNonzero<scalar_t> keep{self.const_data_ptr<scalar_t>()};
  auto* out = result.mutable_data_ptr<int64_t>();
  auto* num = reinterpret_cast<int64_t*>(count.mutable_data_ptr());
  size_t bytes = 0;
  C10_CUDA_CHECK(cub::DeviceSelect::If(nullptr, bytes, indices, out, num, n, keep, rt::cuda::stream()));
  at::Tensor scratch = at::empty({static_cast<int64_t>(bytes)}, options);
  C10_CUDA_CHECK(cub::DeviceSelect::If(scratch.mutable_data_ptr(), bytes, indices, out, num, n, keep,
                                       rt::cuda::stream()));
  int64_t nnz = 0;
  C10_CUDA_CHECK(cudaMemcpyAsync(&nnz, num, sizeof(int64_t), cudaMemcpyDeviceToHost, rt::cuda::stream()));
  C10_CUDA_CHECK(cudaStreamSynchronize(rt::cuda::stream()));
  result.resize_({nnz});
}

}  // namespace opwrap::kernels
