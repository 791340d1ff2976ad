// CUDA kernel of opwrap::nonzero_flat against torch's stable API: cub::DeviceSelect::If over
// the flat indices (a stream compaction keeps them in order), its scratch a byte tensor on the
// device, then one device-to-host copy of the count to size the result, as aten's nonzero does.
#pragma once

#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>

#include "common.cuh"
#include "nonzero_flat.h"

namespace opwrap::kernels {

template <typename scalar_t>
void nonzero_flat_cuda(const torch::stable::Tensor& self, torch::stable::Tensor& result) {
  const int64_t n = self.numel();
  stable::resize(result, {n});
  const cudaStream_t stream = stable::stream_of(self);
  const int32_t device = self.get_device_index();
  const int32_t cuda = static_cast<int32_t>(torch::headeronly::DeviceType::CUDA);
  torch::stable::Tensor count = opwrap::rt::abi::allocate_workspace(cuda, device, sizeof(int64_t));
  const thrust::counting_iterator<int64_t> indices(0);
  const IsNonzero<scalar_t> keep{self.const_data_ptr<scalar_t>()};
  auto* out = result.mutable_data_ptr<int64_t>();
  auto* num = static_cast<int64_t*>(count.mutable_data_ptr());
  size_t bytes = 0;
  STD_CUDA_CHECK(cub::DeviceSelect::If(nullptr, bytes, indices, out, num, n, keep, stream));
  torch::stable::Tensor scratch = opwrap::rt::abi::allocate_workspace(cuda, device, static_cast<int64_t>(bytes) + 1);
  STD_CUDA_CHECK(cub::DeviceSelect::If(scratch.mutable_data_ptr(), bytes, indices, out, num, n, keep, stream));
  int64_t nnz = 0;
  STD_CUDA_CHECK(cudaMemcpyAsync(&nnz, num, sizeof(int64_t), cudaMemcpyDeviceToHost, stream));
  STD_CUDA_CHECK(cudaStreamSynchronize(stream));
  stable::resize(result, {nnz});
}

}  // namespace opwrap::kernels
