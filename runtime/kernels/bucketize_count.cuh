// CUDA kernel of opwrap::bucketize_count: bucketize and bincount fused in one pass.
//
// The eager pair (torch.bucketize, then torch.bincount of its result) writes the int64
// indices and reads them back; a thread-per-value kernel with a global atomicAdd per value
// serializes on the hot buckets.  Here each block copies the sorted boundaries into shared
// memory once, searches each value there (bucket_of's branch-free lower bound, the steps of
// the CPU kernel, so the same buckets bit for bit), counts into a shared-memory histogram of
// 32-bit counters (shared atomics), and adds its non-zero counters into the int64 counts at
// the end: K + 1 global atomics a block instead of one a value.  Blocks are few (what the
// device holds at once, a grid-stride loop over the values) so that those flushes stay
// cheap.  A thread loads 16 bytes of values at a time (4 float32 or int32, 2 float64 or
// int64), runs their searches in lockstep (independent chains of shared loads overlap) and
// stores their indices as 16-byte vectors.  Bound by the 8 bytes of index written per value
// plus the values read; the searches hide behind them.  Boundaries too many for shared memory
// (a histogram and boundaries over 48 KB), or 2^32 values and more, take the thread-per-value
// kernel with global atomics.
#pragma once

#include <opwrap/runtime/cuda.cuh>

#include <algorithm>
#include <cstdint>

#include "bucketize_count.h"

namespace opwrap::kernels {
namespace bucketize_detail {

constexpr int kThreads = 512;
constexpr int64_t kMaxShared = 48 * 1024;  // dynamic shared memory without an opt-in

// bucket_of (bucketize_count.h) with 32-bit positions: the same steps and comparisons.
template <typename scalar_t>
__device__ __forceinline__ int bucket_in(const scalar_t* boundaries, int K, scalar_t v) {
  if (K == 0) return 0;
  int base = 0;
  for (int n = K; n > 1; n -= n / 2) base = past(boundaries[base + n / 2], v) ? base + n / 2 : base;
  return base + past(boundaries[base], v);
}

// The buckets of kLanes values at once (bucketize_count.h's buckets_of): their searches take
// the same steps, so one loop runs them in lockstep and their shared loads overlap.
template <int kLanes, typename scalar_t>
__device__ __forceinline__ void buckets_in(const scalar_t* boundaries, int K, const scalar_t (&v)[kLanes],
                                           int (&base)[kLanes]) {
#pragma unroll
  for (int j = 0; j < kLanes; ++j) base[j] = 0;
  if (K == 0) return;
  for (int n = K; n > 1; n -= n / 2) {
    const int half = n / 2;
#pragma unroll
    for (int j = 0; j < kLanes; ++j) base[j] = past(boundaries[base[j] + half], v[j]) ? base[j] + half : base[j];
  }
#pragma unroll
  for (int j = 0; j < kLanes; ++j) base[j] += past(boundaries[base[j]], v[j]);
}

// 16 bytes of values.
template <typename scalar_t>
struct alignas(16) Values {
  static constexpr int kSize = 16 / sizeof(scalar_t);
  scalar_t v[kSize];
};

inline int64_t shared_bytes_for(int64_t K, size_t scalar_size) {
  return (K * static_cast<int64_t>(scalar_size) + 15) / 16 * 16 + (K + 1) * static_cast<int64_t>(sizeof(unsigned));
}

template <typename scalar_t, bool kAligned>
__global__ void __launch_bounds__(kThreads) bucketize_count_shared(const scalar_t* __restrict__ values,
                                                                    const scalar_t* __restrict__ boundaries, int K,
                                                                    int64_t n, int64_t* __restrict__ indices,
                                                                    unsigned long long* __restrict__ counts) {
  extern __shared__ __align__(16) unsigned char shared[];
  scalar_t* b = reinterpret_cast<scalar_t*>(shared);
  unsigned* hist = reinterpret_cast<unsigned*>(shared + (static_cast<int64_t>(K) * sizeof(scalar_t) + 15) / 16 * 16);
  for (int k = threadIdx.x; k < K; k += kThreads) b[k] = boundaries[k];
  for (int k = threadIdx.x; k <= K; k += kThreads) hist[k] = 0;
  __syncthreads();

  constexpr int kVec = Values<scalar_t>::kSize;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  int64_t done = 0;  // values covered by whole vectors
  if constexpr (kAligned) {
    const int64_t vectors = n / kVec;
    done = vectors * kVec;
    for (int64_t j = tid; j < vectors; j += stride) {
      const Values<scalar_t> x = reinterpret_cast<const Values<scalar_t>*>(values)[j];
      int bucket[kVec];
      buckets_in<kVec>(b, K, x.v, bucket);
#pragma unroll
      for (int k = 0; k < kVec; ++k) atomicAdd(hist + bucket[k], 1u);
#pragma unroll
      for (int k = 0; k < kVec; k += 2) {
        reinterpret_cast<longlong2*>(indices + j * kVec)[k / 2] = make_longlong2(bucket[k], bucket[k + 1]);
      }
    }
  }
  for (int64_t i = done + tid; i < n; i += stride) {
    const int bucket = bucket_in(b, K, values[i]);
    indices[i] = bucket;
    atomicAdd(hist + bucket, 1u);
  }
  __syncthreads();
  for (int k = threadIdx.x; k <= K; k += kThreads) {
    if (hist[k] != 0) atomicAdd(counts + k, static_cast<unsigned long long>(hist[k]));
  }
}

template <typename scalar_t>
struct BucketizeCount {
  const scalar_t* v;
  const scalar_t* b;
  int64_t K;
  int64_t* idx;
  unsigned long long* cnt;  // atomicAdd has no int64_t overload
  __device__ void operator()(int64_t i) const {
    const int64_t bucket = bucket_of(b, K, v[i]);
    idx[i] = bucket;
    atomicAdd(cnt + bucket, 1ull);
  }
};

// Blocks of the shared-memory kernel the device holds at once (at the most shared memory a
// block may ask for, so for any K that takes it), cached per device.
template <typename scalar_t, bool kAligned>
int64_t resident_blocks() {
  static int cached[64] = {};
  int device = 0;
  C10_CUDA_CHECK(cudaGetDevice(&device));
  int& blocks = cached[device & 63];
  if (blocks == 0) {
    int sms = 0, per_sm = 0;
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &per_sm, bucketize_count_shared<scalar_t, kAligned>, kThreads, static_cast<size_t>(kMaxShared)));
    blocks = std::max(1, sms * std::max(1, per_sm));
  }
  return blocks;
}

template <typename scalar_t, bool kAligned>
void launch_shared(const scalar_t* v, const scalar_t* b, int64_t K, int64_t n, int64_t* idx, unsigned long long* cnt,
                   int64_t shared_bytes) {
  const int64_t per_block = static_cast<int64_t>(kThreads) * Values<scalar_t>::kSize;
  const int64_t blocks = std::clamp<int64_t>((n + per_block - 1) / per_block, 1, resident_blocks<scalar_t, kAligned>());
  bucketize_count_shared<scalar_t, kAligned><<<static_cast<unsigned>(blocks), kThreads,
                                               static_cast<size_t>(shared_bytes), rt::cuda::stream()>>>(
      v, b, static_cast<int>(K), n, idx, cnt);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace bucketize_detail

template <typename scalar_t>
void bucketize_count_cuda(const at::Tensor& values, const at::Tensor& boundaries, at::Tensor& indices,
                          at::Tensor& counts) {
  using namespace bucketize_detail;
  static_assert(sizeof(unsigned long long) == sizeof(int64_t));
  const int64_t K = boundaries.numel(), n = values.numel();
  auto* cnt = reinterpret_cast<unsigned long long*>(counts.mutable_data_ptr<int64_t>());
  C10_CUDA_CHECK(cudaMemsetAsync(cnt, 0, sizeof(int64_t) * counts.numel(), rt::cuda::stream()));
  if (n == 0) return;
  const scalar_t* v = values.const_data_ptr<scalar_t>();
  const scalar_t* b = boundaries.const_data_ptr<scalar_t>();
  int64_t* idx = indices.mutable_data_ptr<int64_t>();
  const int64_t shared_bytes = shared_bytes_for(K, sizeof(scalar_t));
  // (The per-block counters are 32-bit: a block counts at most n values.)
  if (shared_bytes <= kMaxShared && n <= int64_t{0xFFFFFFFF}) {
    if (reinterpret_cast<uintptr_t>(v) % 16 == 0 && reinterpret_cast<uintptr_t>(idx) % 16 == 0) {
      launch_shared<scalar_t, true>(v, b, K, n, idx, cnt, shared_bytes);
    } else {
      launch_shared<scalar_t, false>(v, b, K, n, idx, cnt, shared_bytes);
    }
  } else {
    rt::cuda::launch_elementwise(n, BucketizeCount<scalar_t>{v, b, K, idx, cnt});
  }
}

}  // namespace opwrap::kernels
