// Support code for CUDA kernels: launch shapes for grid-stride loops, warp and block
// reductions, and the current stream.  Light on includes (c10/cuda only, not
// ATen/cuda/CUDAContext.h, which pulls in cuBLAS and cuSPARSE headers).
#pragma once

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/macros/Macros.h>

#include <algorithm>
#include <cstdint>

namespace opwrap::rt::cuda {

constexpr int kThreads = 256;
constexpr int kWarp = 32;

inline cudaStream_t stream() {
  return c10::cuda::getCurrentCUDAStream().stream();
}

// Blocks for a grid-stride loop over n items: enough to fill the device, never more than
// the work needs (and at least one, so a launch over zero items is still valid).
inline unsigned int blocks_for(int64_t n, int threads = kThreads) {
  const int64_t needed = (n + threads - 1) / threads;
  return static_cast<unsigned int>(std::max<int64_t>(1, std::min<int64_t>(needed, 65535)));
}

template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    v += __shfl_down_sync(0xffffffffu, v, offset);
  }
  return v;
}

// Sum over the block; every thread gets the total.  `shared` holds one T per warp.
template <typename T>
__device__ T block_sum(T v, T* shared) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  v = warp_sum(v);
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + kWarp - 1) / kWarp;
  T total = threadIdx.x < warps ? shared[lane] : T(0);
  if (warp == 0) total = warp_sum(total);
  if (threadIdx.x == 0) shared[0] = total;
  __syncthreads();
  total = shared[0];
  __syncthreads();  // shared may be reused by the caller
  return total;
}

// Any reduction R (opwrap/runtime/rowwise.h: Sum, Max, Min) over the block; every thread
// gets the result.  `shared` holds one T per warp.
template <typename R, typename T>
__device__ T block_reduce(T v, T* shared) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    v = R::combine(v, __shfl_down_sync(0xffffffffu, v, offset));
  }
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  if (warp == 0) {
    const int warps = (blockDim.x + kWarp - 1) / kWarp;
    T total = lane < warps ? shared[lane] : R::template identity<T>();
#pragma unroll
    for (int offset = kWarp / 2; offset > 0; offset /= 2) {
      total = R::combine(total, __shfl_down_sync(0xffffffffu, total, offset));
    }
    if (lane == 0) shared[0] = total;
  }
  __syncthreads();
  const T total = shared[0];
  __syncthreads();  // shared may be reused by the caller
  return total;
}

// out[i] = f(i) for i in [0, n), grid-stride.
template <typename F>
__global__ void elementwise_kernel(int64_t n, F f) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    f(i);
  }
}

template <typename F>
void launch_elementwise(int64_t n, F f) {
  if (n == 0) return;
  elementwise_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(n, f);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace opwrap::rt::cuda
