// CUDA kernel of opwrap::bincount_fixed against torch's stable API: a thread per element
// adding its weight (or 1) to its bin with atomicAdd.  The wrapper checks the index bound on
// the CPU only (host_checks), as in the full target: a bad index is a device-side assert.
#pragma once

#include "common.cuh"

#include <optional>

namespace opwrap::kernels {

template <typename index_t, typename weights_t>
struct BincountFixedStable {
  const index_t* in;
  const weights_t* w;  // nullptr: count
  void* out;
  int64_t bins;
  __device__ void operator()(int64_t i) const {
    const int64_t b = static_cast<int64_t>(in[i]);
    if (b < 0 || b >= bins) __trap();  // the full target's CUDA_KERNEL_ASSERT
    if (w != nullptr) {
      atomicAdd(static_cast<weights_t*>(out) + b, w[i]);
    } else {
      atomicAdd(reinterpret_cast<unsigned long long*>(static_cast<int64_t*>(out) + b), 1ull);
    }
  }
};

template <typename index_t, typename weights_t>
void bincount_fixed_cuda(const torch::stable::Tensor& self, int64_t bins,
                         const std::optional<torch::stable::Tensor>& weights, torch::stable::Tensor& result) {
  torch::stable::zero_(result);
  const bool weighted = weights.has_value() && weights->defined();
  stable::launch_elementwise(self, self.numel(), BincountFixedStable<index_t, weights_t>{
      self.const_data_ptr<index_t>(), weighted ? weights->const_data_ptr<weights_t>() : nullptr,
      result.mutable_data_ptr(), bins});
}

}  // namespace opwrap::kernels
