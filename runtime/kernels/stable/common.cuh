// CUDA support of the bundled library's stable-API kernels: a grid-stride launch over n
// items on the current stream of a tensor's device, its launch checked (the stable API's
// STD_CUDA_KERNEL_LAUNCH_CHECK), as opwrap/runtime/cuda.cuh's launch_elementwise does in the
// full target.
#pragma once

#include <cuda_runtime.h>

#include <torch/csrc/stable/macros.h>

#include <algorithm>
#include <cstdint>

#include "common.h"

namespace opwrap::kernels::stable {

inline cudaStream_t stream_of(const torch::stable::Tensor& t) {
  return static_cast<cudaStream_t>(opwrap::rt::current_cuda_stream(t.get_device_index()));
}

template <typename F>
__global__ void elementwise_kernel(int64_t n, F f) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    f(i);
  }
}

// f(i) for i in [0, n), on `like`'s device and its current stream.
template <typename F>
void launch_elementwise(const torch::stable::Tensor& like, int64_t n, F f) {
  if (n == 0) return;
  constexpr int kThreads = 256;
  const auto blocks = static_cast<unsigned>(std::min<int64_t>((n + kThreads - 1) / kThreads, 65535));
  elementwise_kernel<<<blocks, kThreads, 0, stream_of(like)>>>(n, f);
  STD_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace opwrap::kernels::stable
