// Support of generated row-wise CUDA kernels (templates/rowwise/kernel.cuh.j2): the sweep of
// a block over a row, with 16-byte loads where the rows allow them.
#pragma once

#include <opwrap/runtime/cuda.cuh>

#include <cstdint>
#include <initializer_list>

namespace opwrap::rt::cuda {

// kRun consecutive elements, loaded and stored as one (16 bytes: a vector load).
template <typename T, int kRun>
struct alignas(sizeof(T) * kRun) RunOf {
  T val[kRun];
};

// This thread's elements of a row of D (d = threadIdx.x, then + blockDim.x, ...): f(d, x) with
// x[k] = rows[k][d].  With `vec` (every row 16-byte aligned, D a multiple of the run), the
// thread takes runs of 16 bytes, loaded at once from each row (as aten's vectorized loads),
// and visits their elements in order.
template <typename scalar_t, int N, typename F>
__device__ __forceinline__ void sweep_row(const scalar_t* const (&rows)[N], int64_t D, bool vec, const F& f) {
  constexpr int kRun = sizeof(scalar_t) >= 16 ? 1 : static_cast<int>(16 / sizeof(scalar_t));
  using Run = RunOf<scalar_t, kRun>;
  int64_t start = 0;
  if (vec) {
    const int64_t runs = D / kRun;
    for (int64_t r = threadIdx.x; r < runs; r += blockDim.x) {
      Run loaded[N];
#pragma unroll
      for (int k = 0; k < N; ++k) loaded[k] = reinterpret_cast<const Run*>(rows[k])[r];
#pragma unroll
      for (int j = 0; j < kRun; ++j) {
        scalar_t x[N];
#pragma unroll
        for (int k = 0; k < N; ++k) x[k] = loaded[k].val[j];
        f(r * kRun + j, x);
      }
    }
    start = runs * kRun;
  }
  for (int64_t d = start + threadIdx.x; d < D; d += blockDim.x) {
    scalar_t x[N];
#pragma unroll
    for (int k = 0; k < N; ++k) x[k] = rows[k][d];
    f(d, x);
  }
}

// Whether sweep_row may load runs: every pointer 16-byte aligned and rows of whole runs.
template <typename scalar_t>
inline bool runs_aligned(std::initializer_list<const void*> pointers, int64_t D) {
  if ((D * static_cast<int64_t>(sizeof(scalar_t))) % 16 != 0) return false;
  for (const void* p : pointers) {
    if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0) return false;
  }
  return true;
}

}  // namespace opwrap::rt::cuda
