// CUDA kernel of opwrap::dropout, shaped as aten's fused dropout (native_dropout's
// fused_dropout_kernel_vec in aten/src/ATen/native/cuda/Dropout.cu):
//
// - the draws are Philox4x32-10 from the given CUDA generator, else the device's default one
//   (at::CUDAGeneratorImpl::philox_cuda_state, under the generator's mutex, so
//   torch.manual_seed / torch.cuda.manual_seed reproduce them and CUDA graph capture works);
//   each thread owns the Philox subsequence of its global index and takes 4 uniforms per
//   curand_uniform4 call (one 128-bit counter), not one curand call per element;
// - a thread handles kVec consecutive elements per step of a grid-stride loop: one 16-byte
//   load and store of the data (float32: 4 elements; float16/bfloat16: 8, two draws of 4;
//   float64: 4, two 16-byte halves) and a 4- or 8-byte store of the bool mask;
// - the grid is what the device holds at once (SMs x the kernel's occupancy), not the data,
//   so the counter offset each call reserves (the draws one thread takes) stays small and
//   every thread takes the same number of steps in a single wave.
//
// The op is memory bound: read the input, write the output and a byte of mask per element
// (16M float32: 144 MB).  The draws are not CPU's (a different generator); the relation
// out = self * mask / (1 - p) and P(mask) = 1 - p hold as on the CPU.  A draw u in (0, 1]
// keeps its element when u > p, so p = 0 keeps every element (curand_uniform may return 1).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <ATen/cuda/PhiloxUtils.cuh>
#include <ATen/OpMathType.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <curand_kernel.h>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <optional>

#include "dropout.h"

namespace opwrap::kernels {
namespace dropout_detail {

constexpr int kThreads = 256;

// Elements per thread per step: 16 bytes of data, at least the 4 draws of one Philox counter.
template <typename scalar_t>
constexpr int vec_of() {
  return sizeof(scalar_t) == 2 ? 8 : 4;
}

template <typename T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};

// mask bytes of kVec elements, as one 4- or 8-byte store.
template <int N>
using MaskPack = Pack<bool, N>;

template <typename scalar_t, int kVec, bool kAligned>
__global__ void __launch_bounds__(kThreads) dropout_kernel(const scalar_t* __restrict__ in, scalar_t* __restrict__ out,
                                                            bool* __restrict__ mask, int64_t n, float p,
                                                            at::opmath_type<scalar_t> scale,
                                                            at::PhiloxCudaState philox) {
  using acc_t = at::opmath_type<scalar_t>;
  const auto seeds = at::cuda::philox::unpack(philox);
  const int64_t tid = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  curandStatePhilox4_32_10_t state;
  curand_init(std::get<0>(seeds), tid, std::get<1>(seeds), &state);
  const int64_t chunks = (n + kVec - 1) / kVec;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t c = tid; c < chunks; c += stride) {
    // Every thread draws for each of its steps, also past the end: the counter offset the
    // call reserved counts them all.
    float u[kVec];
#pragma unroll
    for (int k = 0; k < kVec; k += 4) {
      const float4 r = curand_uniform4(&state);
      u[k] = r.x;
      u[k + 1] = r.y;
      u[k + 2] = r.z;
      u[k + 3] = r.w;
    }
    const int64_t base = c * kVec;
    if (kAligned && base + kVec <= n) {
      Pack<scalar_t, kVec> x = *reinterpret_cast<const Pack<scalar_t, kVec>*>(in + base);
      Pack<scalar_t, kVec> y;
      MaskPack<kVec> m;
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        const bool keep = u[k] > p;
        m.v[k] = keep;
        y.v[k] = static_cast<scalar_t>(keep ? static_cast<acc_t>(x.v[k]) * scale : acc_t(0));
      }
      *reinterpret_cast<Pack<scalar_t, kVec>*>(out + base) = y;
      *reinterpret_cast<MaskPack<kVec>*>(mask + base) = m;
    } else {
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        if (base + k < n) {
          const bool keep = u[k] > p;
          mask[base + k] = keep;
          out[base + k] = static_cast<scalar_t>(keep ? static_cast<acc_t>(in[base + k]) * scale : acc_t(0));
        }
      }
    }
  }
}

// Blocks of the kernel that the device holds at once (SMs x the kernel's occupancy, which
// its registers may hold under 2048 / kThreads), cached per device: every thread then runs
// the same number of steps in one wave, with no second partial wave.
template <typename scalar_t, int kVec, bool kAligned>
unsigned resident_blocks() {
  static int cached[64] = {};
  int device = 0;
  C10_CUDA_CHECK(cudaGetDevice(&device));
  int& blocks = cached[device & 63];
  if (blocks == 0) {
    int sms = 0, per_sm = 0;
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, dropout_kernel<scalar_t, kVec, kAligned>,
                                                                 kThreads, 0));
    blocks = std::max(1, sms * std::max(1, per_sm));
  }
  return static_cast<unsigned>(blocks);
}

}  // namespace dropout_detail

template <typename scalar_t>
void dropout_cuda(const at::Tensor& self, double p, const std::optional<at::Generator>& generator, at::Tensor& out,
                  at::Tensor& mask) {
  using namespace dropout_detail;
  TORCH_CHECK(p >= 0 && p < 1, "opwrap::dropout: argument 'p' must lie in [0, 1), but got ", p);
  const int64_t n = self.numel();
  if (n == 0) return;
  constexpr int kVec = vec_of<scalar_t>();
  const int64_t chunks = (n + kVec - 1) / kVec;
  const scalar_t* in = self.const_data_ptr<scalar_t>();
  scalar_t* o = out.mutable_data_ptr<scalar_t>();
  bool* m = mask.mutable_data_ptr<bool>();
  // A contiguous view may start anywhere: vector accesses only when every pointer is aligned
  // to its pack (out and mask are fresh allocations; self may be a view at an offset).
  const bool aligned = reinterpret_cast<uintptr_t>(in) % sizeof(Pack<scalar_t, kVec>) == 0 &&
                       reinterpret_cast<uintptr_t>(o) % sizeof(Pack<scalar_t, kVec>) == 0 &&
                       reinterpret_cast<uintptr_t>(m) % sizeof(MaskPack<kVec>) == 0;
  const int64_t resident =
      aligned ? resident_blocks<scalar_t, kVec, true>() : resident_blocks<scalar_t, kVec, false>();
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(resident, (chunks + kThreads - 1) / kThreads));
  // The uniforms one thread draws: kVec per step of its grid-stride loop (a multiple of 4,
  // as philox_cuda_state asks).
  const int64_t steps = (chunks + static_cast<int64_t>(blocks) * kThreads - 1) / (static_cast<int64_t>(blocks) * kThreads);
  auto* gen = at::get_generator_or_default<at::CUDAGeneratorImpl>(generator, at::cuda::detail::getDefaultCUDAGenerator());
  at::PhiloxCudaState philox;
  {
    std::lock_guard<std::mutex> lock(gen->mutex_);
    philox = gen->philox_cuda_state(static_cast<uint64_t>(steps * kVec));
  }
  const auto scale = static_cast<at::opmath_type<scalar_t>>(1.0 / (1.0 - p));
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
  if (aligned) {
    dropout_kernel<scalar_t, kVec, true><<<blocks, kThreads, 0, stream>>>(in, o, m, n, static_cast<float>(p), scale, philox);
  } else {
    dropout_kernel<scalar_t, kVec, false><<<blocks, kThreads, 0, stream>>>(in, o, m, n, static_cast<float>(p), scale, philox);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace opwrap::kernels
