// Shared by the hand-written kernels.  Kernel math lives in C10_HOST_DEVICE functors and
// inline functions in the op's .h, called by the CPU loop here and by the CUDA kernel in
// the op's .cuh, so the CPU tests exercise the arithmetic the GPU runs.
#pragma once

#include <ATen/Parallel.h>
#include <c10/macros/Macros.h>

#include "bfloat16_bits.h"  // bfloat16_rounded_bits

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace opwrap::kernels {

// The library is compiled for baseline x86-64 (SSE2), as torch's own kernels are before their
// per-CPU builds.  Where a hot loop gains from AVX2, a kernel also compiles it for AVX2 (in a
// function of its own name, `__attribute__((target("avx2")))`, so no inline function is built
// for two instruction sets) and chooses it once at run time (`__builtin_cpu_supports`): with
// GCC or Clang on x86-64, where OPWRAP_AVX2_CLONES is 1.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define OPWRAP_AVX2_CLONES 1
#else
#define OPWRAP_AVX2_CLONES 0
#endif

// Elements per parallel chunk (at::internal::GRAIN_SIZE lives in a heavier header).
constexpr int64_t kGrainSize = 32768;

// f(i) for i in [0, n), in parallel chunks: the CPU counterpart of
// opwrap::rt::cuda::launch_elementwise.
template <typename F>
void parallel_elementwise(int64_t n, const F& f) {
  at::parallel_for(0, n, kGrainSize, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) f(i);
  });
}

// memcpy split across the intra-op threads: one core does not fill the memory bandwidth a
// copy of megabytes can use.  Copies under 256 KB run in the calling thread.
inline void parallel_memcpy(void* dst, const void* src, size_t bytes) {
  constexpr int64_t kGrainBytes = int64_t{1} << 18;
  at::parallel_for(0, static_cast<int64_t>(bytes), kGrainBytes, [&](int64_t begin, int64_t end) {
    std::memcpy(static_cast<char*>(dst) + begin, static_cast<const char*>(src) + begin, static_cast<size_t>(end - begin));
  });
}

}  // namespace opwrap::kernels
