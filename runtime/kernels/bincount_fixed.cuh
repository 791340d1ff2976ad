// CUDA kernel of opwrap::bincount_fixed: a thread per element adding its weight (or 1) to its
// bin with atomicAdd; its index bound is CUDA_KERNEL_ASSERT here (the CPU wrapper checks it first).
#pragma once

#include <ATen/cuda/Atomic.cuh>

#include <opwrap/runtime/cuda.cuh>

#include "bincount_fixed.h"

namespace opwrap::kernels {

template <typename index_t, typename weights_t>
struct BincountFixed {
  const index_t* in;
  const weights_t* w;  // nullptr: count
  void* out;
  int64_t bins;
  __device__ void operator()(int64_t i) const {
    const int64_t b = static_cast<int64_t>(in[i]);
    CUDA_KERNEL_ASSERT(b >= 0 && b < bins);
    if (w != nullptr) {
      gpuAtomicAdd(static_cast<weights_t*>(out) + b, w[i]);
    } else {
      gpuAtomicAdd(static_cast<int64_t*>(out) + b, int64_t{1});
    }
  }
};

template <typename index_t, typename weights_t>
void bincount_fixed_cuda(const at::Tensor& self, int64_t bins, const std::optional<at::Tensor>& weights,
                         at::Tensor& result) {
  result.zero_();
  const bool weighted = weights.has_value() && weights->defined();
  rt::cuda::launch_elementwise(self.numel(), BincountFixed<index_t, weights_t>{
      self.const_data_ptr<index_t>(), weighted ? weights->const_data_ptr<weights_t>() : nullptr,
      result.mutable_data_ptr(), bins});
}

}  // namespace opwrap::kernels
