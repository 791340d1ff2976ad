// The search of opwrap::bucketize_count, shared by its kernels in both targets
// (bucketize_count.h against ATen, stable/bucketize_count.h against the stable API, and their
// CUDA kernels): plain C++ over pointers.  It includes no torch header: its includer has
// C10_HOST_DEVICE from its target's own (c10/macros/Macros.h, torch/headeronly/macros/Macros.h).
#pragma once

#include <cstdint>

#ifndef C10_HOST_DEVICE
#error "include c10/macros/Macros.h or torch/headeronly/macros/Macros.h before bucketize_search.h"
#endif

namespace opwrap::kernels {

// Whether v goes past boundary `bound`: torch.bucketize's !(bound >= v), true for a NaN.
template <typename scalar_t>
C10_HOST_DEVICE inline bool past(scalar_t bound, scalar_t v) {
  return !(bound >= v);
}

// The bucket of v: a binary search without branches on the data (Khuong and Morin's lower
// bound: the steps depend on K only).
template <typename scalar_t>
C10_HOST_DEVICE inline int64_t bucket_of(const scalar_t* boundaries, int64_t K, scalar_t v) {
  if (K == 0) return 0;
  int64_t base = 0;
  for (int64_t n = K; n > 1; n -= n / 2) base = past(boundaries[base + n / 2], v) ? base + n / 2 : base;
  return base + past(boundaries[base], v);
}

// The buckets of kLanes values at once: the searches take the same steps, so they run in
// lockstep and their loads overlap (one search is a chain of dependent loads).
template <int kLanes, typename scalar_t>
inline void buckets_of(const scalar_t* boundaries, int64_t K, const scalar_t* v, int64_t* out) {
  int64_t base[kLanes] = {};
  for (int64_t n = K; n > 1; n -= n / 2) {
    const int64_t half = n / 2;
#pragma GCC unroll 8
    for (int j = 0; j < kLanes; ++j) base[j] = past(boundaries[base[j] + half], v[j]) ? base[j] + half : base[j];
  }
#pragma GCC unroll 8
  for (int j = 0; j < kLanes; ++j) out[j] = base[j] + past(boundaries[base[j]], v[j]);
}

}  // namespace opwrap::kernels
