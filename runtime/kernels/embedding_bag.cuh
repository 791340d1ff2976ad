// CUDA kernels of opwrap::embedding_bag_sum and its backward.  Out-of-range indices are
// caught on the CPU by the wrapper; here, as in aten's CUDA kernels, a device assert.
//
// Forward: a gather of random weight rows, bound by the rows' bytes read (131072 rows of 512
// bytes in the benchmark, from a table that mostly fits in L2).  A thread per (bag, column)
// issues 4-byte loads and one load in flight per thread; here a group of G lanes of a warp
// (G a power of two up to 32, as many as the row has 16-byte chunks) sums one bag, each lane
// owning 16-byte column chunks (4 float32, 8 bfloat16 or float16, 2 float64): the group
// loads G indices of the bag at once (one coalesced load) and passes them round by shuffles,
// and a lane issues kUnroll row loads before it adds them, so a warp keeps kUnroll x 512 bytes
// in flight.  The sums are in float for reduced types (at::opmath_type), in index order per
// column, as the CPU kernel adds them: float32 and bfloat16 give the CPU's results bit for
// bit.  A row that is not whole 16-byte chunks (D not a multiple of the chunk, or an
// unaligned table) takes the thread-per-(bag, column) kernel.
//
// Backward: a scatter-add (two bags may name one row).  The same groups: a lane loads its
// chunk of the bag's gradient row once and adds it into the row of every index of the bag
// with atomics.  float32 adds with 16-byte float4 atomics on sm_90 (red.global.add.v4.f32;
// scalar float atomics before), float64 with double atomics.  bfloat16 and float16 do not
// scatter into the result: gpuAtomicAdd on them is a 16-bit atomic per element (native on
// sm_90, a compare-and-swap loop on the 32-bit word before), much slower than the float ones
// (hence bfloat16 at 0.77x aten where float32 was 3.7x), and it rounds every partial sum to
// 16 bits.  They accumulate in a float32 buffer of the result's shape with the float4
// atomics, and one vectorized pass rounds it into the result, as the CPU kernel rounds its
// float sums once.
// aten's backward sorts the indices and reduces segments; atomics into rows touched about
// twice each are cheaper, at the price of an order of additions that varies from run to run
// (float rounding only).
#pragma once

#include <ATen/OpMathType.h>
#include <ATen/core/Tensor.h>
#include <ATen/cuda/Atomic.cuh>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/macros/Macros.h>

#include <opwrap/runtime/cuda.cuh>

#include <algorithm>
#include <cstdint>

#include "embedding_bag.h"

namespace opwrap::kernels {

template <typename index_t>
__device__ inline void bag_bounds(const index_t* off, int64_t b, int64_t B, int64_t N, int64_t& start, int64_t& stop) {
  start = static_cast<int64_t>(off[b]);
  stop = b + 1 < B ? static_cast<int64_t>(off[b + 1]) : N;
  CUDA_KERNEL_ASSERT(0 <= start && start <= stop && stop <= N);
}

namespace embedding_bag_detail {

constexpr int kThreads = 256;
constexpr int kUnroll = 8;  // row loads a lane issues before it adds them

// 16 bytes of T.
template <typename T>
struct Chunk {
  static constexpr int kSize = 16 / sizeof(T);
};

// acc[k] += the k-th T of a 16-byte chunk, in opmath.
template <typename T>
__device__ __forceinline__ void add_chunk(at::opmath_type<T> (&acc)[Chunk<T>::kSize], const uint4& raw) {
  const T* x = reinterpret_cast<const T*>(&raw);
#pragma unroll
  for (int k = 0; k < Chunk<T>::kSize; ++k) acc[k] += static_cast<at::opmath_type<T>>(x[k]);
}

template <typename T>
__device__ __forceinline__ void load_chunk(const T* p, at::opmath_type<T> (&v)[Chunk<T>::kSize]) {
  const uint4 raw = __ldg(reinterpret_cast<const uint4*>(p));
  const T* x = reinterpret_cast<const T*>(&raw);
#pragma unroll
  for (int k = 0; k < Chunk<T>::kSize; ++k) v[k] = static_cast<at::opmath_type<T>>(x[k]);
}

// Lanes per bag: the 16-byte chunks of a row, rounded up to a power of two, at most a warp.
inline int group_for(int64_t chunks) {
  int g = 1;
  while (g < 32 && g < chunks) g *= 2;
  return g;
}

// The shuffle mask of the group of `group` lanes the calling lane belongs to.
__device__ __forceinline__ unsigned group_mask(int group) {
  if (group == 32) return 0xffffffffu;
  const int lane = threadIdx.x % 32;
  return ((1u << group) - 1u) << (lane / group * group);
}

template <typename scalar_t, typename index_t>
__global__ void __launch_bounds__(kThreads) bag_sum_chunks(const scalar_t* __restrict__ w,
                                                           const index_t* __restrict__ idx,
                                                           const index_t* __restrict__ off,
                                                           scalar_t* __restrict__ out, int64_t B, int64_t D,
                                                           int64_t N, int64_t V, int group) {
  using acc_t = at::opmath_type<scalar_t>;
  constexpr int kVec = Chunk<scalar_t>::kSize;
  const int64_t b = (static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x) / group;
  if (b >= B) return;  // the whole group leaves together
  const int lane = threadIdx.x % group;
  const unsigned mask = group_mask(group);
  int64_t start = 0, stop = 0;
  bag_bounds(off, b, B, N, start, stop);
  for (int64_t c0 = 0; c0 < D; c0 += static_cast<int64_t>(group) * kVec) {
    const int64_t c = c0 + static_cast<int64_t>(lane) * kVec;
    const bool active = c < D;  // a lane past the row still passes indices round
    acc_t acc[kVec];
#pragma unroll
    for (int k = 0; k < kVec; ++k) acc[k] = acc_t(0);
    for (int64_t i0 = start; i0 < stop; i0 += group) {
      index_t mine = 0;  // (shuffled as index_t: one shuffle for int32 indices)
      if (i0 + lane < stop) {
        mine = idx[i0 + lane];
        CUDA_KERNEL_ASSERT(0 <= mine && static_cast<int64_t>(mine) < V);
      }
      const int count = static_cast<int>(stop - i0 < group ? stop - i0 : group);
      int j = 0;
      for (; j + kUnroll <= count; j += kUnroll) {
        uint4 raw[kUnroll];  // the loads first (kept raw: 4 registers each), then the adds
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const int64_t row = static_cast<int64_t>(__shfl_sync(mask, mine, j + u, group));
          if (active) raw[u] = __ldg(reinterpret_cast<const uint4*>(w + row * D + c));
        }
        if (active) {
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) add_chunk<scalar_t>(acc, raw[u]);  // in index order
        }
      }
      for (; j < count; ++j) {
        const int64_t row = static_cast<int64_t>(__shfl_sync(mask, mine, j, group));
        if (active) add_chunk<scalar_t>(acc, __ldg(reinterpret_cast<const uint4*>(w + row * D + c)));
      }
    }
    if (active) {
      uint4 raw;
      scalar_t* y = reinterpret_cast<scalar_t*>(&raw);
#pragma unroll
      for (int k = 0; k < kVec; ++k) y[k] = static_cast<scalar_t>(acc[k]);
      *reinterpret_cast<uint4*>(out + b * D + c) = raw;
    }
  }
}

// acc[0..4) += v[0..4), atomically: one 16-byte atomic on sm_90, four before.
__device__ __forceinline__ void atomic_add4(float* acc, const float (&v)[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  atomicAdd(reinterpret_cast<float4*>(acc), make_float4(v[0], v[1], v[2], v[3]));
#else
#pragma unroll
  for (int k = 0; k < 4; ++k) atomicAdd(acc + k, v[k]);
#endif
}

// The gradient's chunk, added into the accumulator acc (float or double, rows of D) at the
// rows of every index of the bag.  acc_t is float for float32, bfloat16 and float16 (16
// bytes of float32 gradient or 8 columns of a 16-bit one: one or two float4 atomics), double
// for float64.
template <typename scalar_t, typename index_t, typename acc_t>
__global__ void __launch_bounds__(kThreads) bag_scatter_chunks(const scalar_t* __restrict__ g,
                                                               const index_t* __restrict__ idx,
                                                               const index_t* __restrict__ off,
                                                               acc_t* __restrict__ acc, int64_t B, int64_t D,
                                                               int64_t N, int64_t V, int group) {
  constexpr int kVec = Chunk<scalar_t>::kSize;
  const int64_t b = (static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x) / group;
  if (b >= B) return;
  const int lane = threadIdx.x % group;
  const unsigned mask = group_mask(group);
  int64_t start = 0, stop = 0;
  bag_bounds(off, b, B, N, start, stop);
  for (int64_t c0 = 0; c0 < D; c0 += static_cast<int64_t>(group) * kVec) {
    const int64_t c = c0 + static_cast<int64_t>(lane) * kVec;
    const bool active = c < D;
    acc_t v[kVec];
    if (active) {
      at::opmath_type<scalar_t> x[kVec];
      load_chunk(g + b * D + c, x);
#pragma unroll
      for (int k = 0; k < kVec; ++k) v[k] = static_cast<acc_t>(x[k]);
    }
    for (int64_t i0 = start; i0 < stop; i0 += group) {
      index_t mine = 0;  // (shuffled as index_t: one shuffle for int32 indices)
      if (i0 + lane < stop) {
        mine = idx[i0 + lane];
        CUDA_KERNEL_ASSERT(0 <= mine && static_cast<int64_t>(mine) < V);
      }
      const int count = static_cast<int>(stop - i0 < group ? stop - i0 : group);
      for (int j = 0; j < count; ++j) {
        const int64_t row = static_cast<int64_t>(__shfl_sync(mask, mine, j, group));
        if (!active) continue;
        acc_t* dst = acc + row * D + c;
        if constexpr (std::is_same_v<acc_t, float>) {
#pragma unroll
          for (int k = 0; k < kVec; k += 4) atomic_add4(dst + k, {v[k], v[k + 1], v[k + 2], v[k + 3]});
        } else {
#pragma unroll
          for (int k = 0; k < kVec; ++k) atomicAdd(dst + k, v[k]);
        }
      }
    }
  }
}

// result = the float sums rounded to scalar_t, 8 elements (two float4 loads, one 16-byte
// store) a thread, grid-stride; n a multiple of 8 (D is a multiple of the 16-byte chunk).
template <typename scalar_t>
__global__ void __launch_bounds__(kThreads) round_sums(const float* __restrict__ acc, scalar_t* __restrict__ out,
                                                       int64_t n) {
  static_assert(sizeof(scalar_t) == 2);
  for (int64_t j = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; j < n / 8;
       j += static_cast<int64_t>(gridDim.x) * kThreads) {
    const float4 a = reinterpret_cast<const float4*>(acc)[2 * j];
    const float4 b = reinterpret_cast<const float4*>(acc)[2 * j + 1];
    uint4 raw;
    scalar_t* y = reinterpret_cast<scalar_t*>(&raw);
    y[0] = static_cast<scalar_t>(a.x);
    y[1] = static_cast<scalar_t>(a.y);
    y[2] = static_cast<scalar_t>(a.z);
    y[3] = static_cast<scalar_t>(a.w);
    y[4] = static_cast<scalar_t>(b.x);
    y[5] = static_cast<scalar_t>(b.y);
    y[6] = static_cast<scalar_t>(b.z);
    y[7] = static_cast<scalar_t>(b.w);
    reinterpret_cast<uint4*>(out)[j] = raw;
  }
}

inline bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

}  // namespace embedding_bag_detail

// The kernels of rows that are not whole 16-byte chunks: a thread per (bag, column).
template <typename scalar_t, typename index_t>
struct EmbeddingBagSum {
  const scalar_t* w;
  const index_t* idx;
  const index_t* off;
  scalar_t* out;
  int64_t B, D, N, V;
  __device__ void operator()(int64_t k) const {
    const int64_t b = k / D, d = k % D;
    int64_t start = 0, stop = 0;
    bag_bounds(off, b, B, N, start, stop);
    at::opmath_type<scalar_t> acc = 0;
    for (int64_t i = start; i < stop; ++i) {
      const int64_t row = static_cast<int64_t>(idx[i]);
      CUDA_KERNEL_ASSERT(0 <= row && row < V);
      acc += static_cast<at::opmath_type<scalar_t>>(w[row * D + d]);
    }
    out[k] = static_cast<scalar_t>(acc);
  }
};

// acc_t: float for bfloat16 and float16 (a buffer rounded once into the result, as the chunked
// kernel does: 16-bit atomics would round every partial sum), else scalar_t.
template <typename scalar_t, typename index_t, typename acc_t>
struct EmbeddingBagSumBackward {
  const scalar_t* g;
  const index_t* idx;
  const index_t* off;
  acc_t* out;
  int64_t B, D, N, V;
  __device__ void operator()(int64_t k) const {
    const int64_t b = k / D, d = k % D;
    int64_t start = 0, stop = 0;
    bag_bounds(off, b, B, N, start, stop);
    for (int64_t i = start; i < stop; ++i) {
      const int64_t row = static_cast<int64_t>(idx[i]);
      CUDA_KERNEL_ASSERT(0 <= row && row < V);
      gpuAtomicAdd(out + row * D + d, static_cast<acc_t>(g[k]));
    }
  }
};

template <typename scalar_t, typename index_t>
void embedding_bag_sum_cuda(const at::Tensor& weight, const at::Tensor& indices, const at::Tensor& offsets,
                            at::Tensor& result) {
  using namespace embedding_bag_detail;
  const int64_t B = offsets.size(0), D = weight.size(1), N = indices.size(0), V = weight.size(0);
  if (B == 0 || D == 0) return;
  const scalar_t* w = weight.const_data_ptr<scalar_t>();
  scalar_t* out = result.mutable_data_ptr<scalar_t>();
  constexpr int kVec = Chunk<scalar_t>::kSize;
  if (D % kVec == 0 && aligned16(w) && aligned16(out)) {
    const int group = group_for(D / kVec);
    const int64_t blocks = (B * group + kThreads - 1) / kThreads;
    bag_sum_chunks<scalar_t, index_t><<<static_cast<unsigned>(blocks), kThreads, 0, rt::cuda::stream()>>>(
        w, indices.const_data_ptr<index_t>(), offsets.const_data_ptr<index_t>(), out, B, D, N, V, group);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  } else {
    rt::cuda::launch_elementwise(B * D, EmbeddingBagSum<scalar_t, index_t>{
        w, indices.const_data_ptr<index_t>(), offsets.const_data_ptr<index_t>(), out, B, D, N, V});
  }
}

template <typename scalar_t, typename index_t>
void embedding_bag_sum_backward_cuda(const at::Tensor& grad_output, const at::Tensor& indices,
                                     const at::Tensor& offsets, int64_t num_weights, at::Tensor& result) {
  using namespace embedding_bag_detail;
  const int64_t B = offsets.size(0), D = grad_output.size(1), N = indices.size(0);
  const cudaStream_t stream = rt::cuda::stream();
  scalar_t* out = result.mutable_data_ptr<scalar_t>();
  const scalar_t* g = grad_output.const_data_ptr<scalar_t>();
  constexpr int kVec = Chunk<scalar_t>::kSize;
  const bool chunks = D % kVec == 0 && aligned16(g) && aligned16(out);
  if (!chunks || B == 0 || D == 0 || num_weights == 0) {
    if (result.numel() == 0) return;
    C10_CUDA_CHECK(cudaMemsetAsync(out, 0, sizeof(scalar_t) * result.numel(), stream));
    if (B * D == 0) return;
    if constexpr (sizeof(scalar_t) == 2) {
      const at::Tensor acc = at::zeros({num_weights, D}, grad_output.options().dtype(at::kFloat));
      rt::cuda::launch_elementwise(B * D, EmbeddingBagSumBackward<scalar_t, index_t, float>{
          g, indices.const_data_ptr<index_t>(), offsets.const_data_ptr<index_t>(), acc.mutable_data_ptr<float>(),
          B, D, N, num_weights});
      result.copy_(acc);
    } else {
      rt::cuda::launch_elementwise(B * D, EmbeddingBagSumBackward<scalar_t, index_t, scalar_t>{
          g, indices.const_data_ptr<index_t>(), offsets.const_data_ptr<index_t>(), out, B, D, N, num_weights});
    }
    return;
  }
  const int group = group_for(D / kVec);
  const int64_t blocks = (B * group + kThreads - 1) / kThreads;
  const index_t* idx = indices.const_data_ptr<index_t>();
  const index_t* off = offsets.const_data_ptr<index_t>();
  if constexpr (sizeof(scalar_t) == 2) {
    // Float sums in a buffer from the caching allocator (stream-ordered, freed at return),
    // rounded into the result once.
    const at::Tensor acc = at::empty({num_weights, D}, grad_output.options().dtype(at::kFloat));
    float* a = acc.mutable_data_ptr<float>();
    C10_CUDA_CHECK(cudaMemsetAsync(a, 0, sizeof(float) * acc.numel(), stream));
    bag_scatter_chunks<scalar_t, index_t, float><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
        g, idx, off, a, B, D, N, num_weights, group);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    const int64_t n = acc.numel();
    const int64_t round_blocks = std::clamp<int64_t>((n / 8 + kThreads - 1) / kThreads, 1, 65535);
    round_sums<scalar_t><<<static_cast<unsigned>(round_blocks), kThreads, 0, stream>>>(a, out, n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  } else {
    C10_CUDA_CHECK(cudaMemsetAsync(out, 0, sizeof(scalar_t) * result.numel(), stream));
    bag_scatter_chunks<scalar_t, index_t, scalar_t><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
        g, idx, off, out, B, D, N, num_weights, group);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
}

}  // namespace opwrap::kernels
