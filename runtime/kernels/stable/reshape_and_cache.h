// opwrap::reshape_and_cache against torch's stable API (vLLM's reshape_and_cache_flash on the
// CPU): each token's key and value copied into its cache slot.  The wrapper has checked the
// shapes, that the caches share no memory with the inputs, and that every slot lies in
// [-1, NB * BS); it passes contiguous tensors (non-contiguous caches are written back).
#pragma once

#include "common.h"

#include <cstring>
#include <string_view>

namespace opwrap::kernels {

inline void check_kv_cache_dtype(std::string_view kv_cache_dtype) {
  OPWRAP_STABLE_CHECK(kv_cache_dtype == "auto", "opwrap::reshape_and_cache: kv_cache_dtype '", kv_cache_dtype,
                      "' is not supported; expected 'auto'");
}

template <typename scalar_t, typename slot_t>
void reshape_and_cache_cpu(const torch::stable::Tensor& key, const torch::stable::Tensor& value,
                           const torch::stable::Tensor& key_cache, const torch::stable::Tensor& value_cache,
                           const torch::stable::Tensor& slot_mapping, std::string_view kv_cache_dtype) {
  check_kv_cache_dtype(kv_cache_dtype);
  const int64_t T = key.size(0), row = key.size(1) * key.size(2);
  if (T == 0 || row == 0) return;  // nothing to copy (and empty tensors' data pointers may be null)
  const slot_t* slots = slot_mapping.const_data_ptr<slot_t>();
  const scalar_t* k = key.const_data_ptr<scalar_t>();
  const scalar_t* v = value.const_data_ptr<scalar_t>();
  scalar_t* kc = key_cache.mutable_data_ptr<scalar_t>();
  scalar_t* vc = value_cache.mutable_data_ptr<scalar_t>();
  // Slots of a batch are distinct in vLLM; two tokens writing one slot leave one of them.
  torch::stable::parallel_for(0, T, 64, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t s = static_cast<int64_t>(slots[t]);
      if (s < 0) continue;  // a padding token
      std::memcpy(kc + s * row, k + t * row, sizeof(scalar_t) * row);
      std::memcpy(vc + s * row, v + t * row, sizeof(scalar_t) * row);
    }
  });
}

}  // namespace opwrap::kernels
