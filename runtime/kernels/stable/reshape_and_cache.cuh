// CUDA kernel of opwrap::reshape_and_cache against torch's stable API: a thread per element
// of the tokens' keys and values, copied to its slot (padding tokens, slot -1, skipped), as
// vLLM's reshape_and_cache_flash kernel does it.
#pragma once

#include "common.cuh"
#include "reshape_and_cache.h"

namespace opwrap::kernels {

template <typename scalar_t, typename slot_t>
struct ReshapeAndCacheStable {
  const scalar_t* k;
  const scalar_t* v;
  scalar_t* kc;
  scalar_t* vc;
  const slot_t* slots;
  int64_t row, num_slots;
  __device__ void operator()(int64_t i) const {
    const int64_t t = i / row, j = i % row;
    const int64_t s = static_cast<int64_t>(slots[t]);
    if (s < 0) return;            // a padding token
    if (s >= num_slots) __trap();  // the full target's CUDA_KERNEL_ASSERT
    kc[s * row + j] = k[i];
    vc[s * row + j] = v[i];
  }
};

template <typename scalar_t, typename slot_t>
void reshape_and_cache_cuda(const torch::stable::Tensor& key, const torch::stable::Tensor& value,
                            const torch::stable::Tensor& key_cache, const torch::stable::Tensor& value_cache,
                            const torch::stable::Tensor& slot_mapping, std::string_view kv_cache_dtype) {
  check_kv_cache_dtype(kv_cache_dtype);
  const int64_t row = key.size(1) * key.size(2);
  stable::launch_elementwise(key, key.numel(), ReshapeAndCacheStable<scalar_t, slot_t>{
      key.const_data_ptr<scalar_t>(), value.const_data_ptr<scalar_t>(), key_cache.mutable_data_ptr<scalar_t>(),
      value_cache.mutable_data_ptr<scalar_t>(), slot_mapping.const_data_ptr<slot_t>(), row,
      key_cache.size(0) * key_cache.size(1)});
}

}  // namespace opwrap::kernels
