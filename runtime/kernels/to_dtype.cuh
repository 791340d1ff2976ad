// CUDA kernel of opwrap::to_dtype: each element converted as aten converts it
// (c10::static_cast_with_inter_type, what aten's copy_ kernel applies), so the results are
// bit for bit the old thread-per-element kernel's and the CPU kernel's.
//
// A conversion is a copy: memory bound.  aten's copy_ between dtypes is TensorIterator's
// vectorized kernel; a thread-per-element loop with 2-byte stores (float32 -> bfloat16)
// leaves most of the bandwidth unused.  Here a thread converts kVec consecutive elements per
// step of a grid-stride loop, kVec chosen so that the narrower side is one 16-byte access:
// float32 -> bfloat16 reads two 16-byte vectors and writes one, bfloat16 -> float32 the
// reverse, float64 -> int32 four and one.  Every instantiated pair takes this path when both
// pointers are 16-byte aligned (the result is a fresh allocation; self, made contiguous by
// the wrapper, may be a view at an offset), the elements past the last whole vector one a
// thread; an unaligned input takes the element loop.
#pragma once

#include <c10/util/TypeCast.h>

#include <opwrap/runtime/cuda.cuh>

#include <algorithm>
#include <cstdint>

#include "to_dtype.h"

namespace opwrap::kernels {
namespace to_dtype_detail {

constexpr int kThreads = 256;

template <typename scalar_t, typename result_t>
constexpr int vec_of() {
  return 16 / static_cast<int>(sizeof(scalar_t) < sizeof(result_t) ? sizeof(scalar_t) : sizeof(result_t));
}

template <typename scalar_t, typename result_t>
__device__ __forceinline__ result_t convert_one(scalar_t v) {
  return c10::static_cast_with_inter_type<result_t, scalar_t>::apply(v);
}

// Elements [0, chunks * kVec) by kVec a thread per step, as whole 16-byte vectors on both
// sides; then the last n % kVec elements, one a thread.
template <typename scalar_t, typename result_t>
__global__ void __launch_bounds__(kThreads) to_dtype_vec(const scalar_t* __restrict__ in, result_t* __restrict__ out,
                                                         int64_t n) {
  constexpr int kVec = vec_of<scalar_t, result_t>();
  constexpr int kIn = kVec * static_cast<int>(sizeof(scalar_t)) / 16;   // 16-byte loads a step
  constexpr int kOut = kVec * static_cast<int>(sizeof(result_t)) / 16;  // 16-byte stores a step
  static_assert(kIn >= 1 && kOut >= 1);
  const int64_t chunks = n / kVec;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  for (int64_t c = tid; c < chunks; c += stride) {
    uint4 raw_in[kIn];
    const uint4* src = reinterpret_cast<const uint4*>(in + c * kVec);
#pragma unroll
    for (int k = 0; k < kIn; ++k) raw_in[k] = src[k];
    const scalar_t* x = reinterpret_cast<const scalar_t*>(raw_in);
    uint4 raw_out[kOut];
    result_t* y = reinterpret_cast<result_t*>(raw_out);
#pragma unroll
    for (int k = 0; k < kVec; ++k) y[k] = convert_one<scalar_t, result_t>(x[k]);
    uint4* dst = reinterpret_cast<uint4*>(out + c * kVec);
#pragma unroll
    for (int k = 0; k < kOut; ++k) dst[k] = raw_out[k];
  }
  const int64_t tail = chunks * kVec + tid;
  if (tail < n) out[tail] = convert_one<scalar_t, result_t>(in[tail]);
}

template <typename scalar_t, typename result_t>
struct ToDtype {
  const scalar_t* in;
  result_t* out;
  __device__ void operator()(int64_t i) const { out[i] = convert_one<scalar_t, result_t>(in[i]); }
};

// Blocks that fill the device once (resident threads / kThreads), cached per device.
inline int64_t resident_blocks() {
  static int cached[64] = {};
  int device = 0;
  C10_CUDA_CHECK(cudaGetDevice(&device));
  int& blocks = cached[device & 63];
  if (blocks == 0) {
    int sms = 0, threads = 0;
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&threads, cudaDevAttrMaxThreadsPerMultiProcessor, device));
    blocks = std::max(1, sms * (threads / kThreads));
  }
  return blocks;
}

}  // namespace to_dtype_detail

template <typename scalar_t, typename result_t>
void to_dtype_cuda(const at::Tensor& self, at::ScalarType /*dtype*/, at::Tensor& result) {
  using namespace to_dtype_detail;
  const int64_t n = self.numel();
  if (n == 0) return;
  const scalar_t* in = self.const_data_ptr<scalar_t>();
  result_t* out = result.mutable_data_ptr<result_t>();
  if (reinterpret_cast<uintptr_t>(in) % 16 == 0 && reinterpret_cast<uintptr_t>(out) % 16 == 0) {
    constexpr int kVec = vec_of<scalar_t, result_t>();
    // One chunk a thread where the device holds them all at once (a few waves), else a
    // grid-stride loop; at least one block for the tail.
    const int64_t blocks = std::clamp<int64_t>((n / kVec + kThreads - 1) / kThreads, 1, 4 * resident_blocks());
    to_dtype_vec<scalar_t, result_t><<<static_cast<unsigned>(blocks), kThreads, 0, rt::cuda::stream()>>>(in, out, n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  } else {
    rt::cuda::launch_elementwise(n, ToDtype<scalar_t, result_t>{in, out});
  }
}

}  // namespace opwrap::kernels
