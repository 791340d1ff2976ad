// The CUDA loop of generated pointwise kernels (templates/pointwise/cuda.cu.j2) for one layout
// that aten's gpu_kernel runs slowly: every tensor contiguous except inputs broadcast along
// the leading dimensions, as a bias [C] against x [R, C] (or [B, T, C]).
//
// TensorIterator coalesces such an iterator into two dimensions, [C, R], in which the bias's
// outer stride is 0.  It is then not is_contiguous(), so gpu_kernel takes its general path:
// an OffsetCalculator (a division per dimension) for every element and element-wise loads,
// no 16-byte vectors.  launch_broadcast_rows runs it as one flat range of R * C elements
// instead: each thread loads 16 bytes of every contiguous operand (aten's aligned_vector),
// takes the broadcast operands at column i % C (one division per vector, by aten's
// IntDivider), computes in opmath_t (float for bfloat16 and float16) and stores 16 bytes of
// each output.  aten has no such loop to reuse: its vectorized kernel takes contiguous
// operands only and its offset calculators compute an offset per element.
//
// It refuses (returns false, and the caller runs gpu_kernel) any other layout, a dtype other
// than scalar_t on any operand (gpu_kernel casts those), misaligned data, and more than 2^31
// elements (gpu_kernel splits those into 32-bit pieces).
//
// Of internal linkage, as pointwise.h.
#pragma once

#include <ATen/TensorIterator.h>
#include <ATen/cuda/CUDAContext.h>  // (Loops.cuh, included before this, has it too)
#include <ATen/cuda/detail/IntegerDivider.cuh>
#include <ATen/native/cuda/MemoryAccess.cuh>
#include <c10/core/ScalarType.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/macros/Macros.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>

#include <opwrap/runtime/pointwise.h>

namespace opwrap::pw::cuda {
namespace {

constexpr int kRowsThreads = 256;

// The operands: outputs first, then inputs, as the iterator orders them.
template <int N>
struct RowsOperands {
  char* data[N];
  // Inputs broadcast over the rows: their element stride along a row (0: one value for all),
  // and whether a vector of them is one aligned 16-byte load (stride 1, C a multiple of the
  // vector, aligned data).
  bool broadcast[N];
  bool vector[N];
  int64_t stride[N];
};

template <int kOut, typename opmath_t, typename R>
__device__ __forceinline__ opmath_t rows_result(const R& r, int k) {
  if constexpr (std::is_same_v<R, opmath_t>) {
    return r;
  } else {
    return r.v[k];
  }
}

// Loads the kVec elements from element i (column col) of every input, in opmath_t.
template <typename scalar_t, int kVec, int kOut, int kIn>
__device__ __forceinline__ void rows_load(const RowsOperands<kOut + kIn>& a, uint32_t i, uint32_t col, uint32_t cols,
                                          at::opmath_type<scalar_t> (&x)[kIn][kVec]) {
  using opmath_t = at::opmath_type<scalar_t>;
  using Vec = at::native::memory::aligned_vector<scalar_t, kVec>;
#pragma unroll
  for (int k = 0; k < kIn; ++k) {
    const scalar_t* in = reinterpret_cast<const scalar_t*>(a.data[kOut + k]);
    if (!a.broadcast[kOut + k] || a.vector[kOut + k]) {
      const Vec loaded = *reinterpret_cast<const Vec*>(in + (a.broadcast[kOut + k] ? col : i));
#pragma unroll
      for (int j = 0; j < kVec; ++j) x[k][j] = static_cast<opmath_t>(loaded.val[j]);
    } else {
      uint32_t c = col;
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        x[k][j] = static_cast<opmath_t>(in[static_cast<int64_t>(c) * a.stride[kOut + k]]);
        c = c + 1 == cols ? 0 : c + 1;
      }
    }
  }
}

// Each thread handles kUnroll vectors of kVec elements a pass, all loaded before any is
// computed: vector v0 + u * blockDim.x for u < kUnroll, v0 advancing over the grid.  The
// elements after the last whole vector, one a thread of the first block.
template <typename scalar_t, int kVec, int kUnroll, int kOut, int kIn, typename func_t>
C10_LAUNCH_BOUNDS_1(kRowsThreads)
__global__ void broadcast_rows_kernel(RowsOperands<kOut + kIn> a, uint32_t n, uint32_t cols,
                                      at::cuda::detail::IntDivider<uint32_t> by_cols, func_t f) {
  using opmath_t = at::opmath_type<scalar_t>;
  using Vec = at::native::memory::aligned_vector<scalar_t, kVec>;
  const uint32_t vectors = n / kVec;
  for (uint32_t v0 = blockIdx.x * blockDim.x * kUnroll + threadIdx.x; v0 < vectors;
       v0 += blockDim.x * gridDim.x * kUnroll) {
    opmath_t x[kUnroll][kIn][kVec];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const uint32_t v = v0 + u * blockDim.x;
      if (v < vectors) rows_load<scalar_t, kVec, kOut, kIn>(a, v * kVec, by_cols.mod(v * kVec), cols, x[u]);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const uint32_t v = v0 + u * blockDim.x;
      if (v >= vectors) break;
      Vec out[kOut];
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        opmath_t e[kIn];
#pragma unroll
        for (int k = 0; k < kIn; ++k) e[k] = x[u][k][j];
        const auto r = f(static_cast<const opmath_t*>(e));
#pragma unroll
        for (int k = 0; k < kOut; ++k) out[k].val[j] = static_cast<scalar_t>(rows_result<kOut, opmath_t>(r, k));
      }
#pragma unroll
      for (int k = 0; k < kOut; ++k) {
        *reinterpret_cast<Vec*>(reinterpret_cast<scalar_t*>(a.data[k]) + v * kVec) = out[k];
      }
    }
  }
  const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < n - vectors * kVec) {
    const uint32_t i = vectors * kVec + t;
    const uint32_t col = by_cols.mod(i);
    opmath_t e[kIn];
#pragma unroll
    for (int k = 0; k < kIn; ++k) {
      const scalar_t* in = reinterpret_cast<const scalar_t*>(a.data[kOut + k]);
      e[k] = static_cast<opmath_t>(a.broadcast[kOut + k] ? in[static_cast<int64_t>(col) * a.stride[kOut + k]] : in[i]);
    }
    const auto r = f(static_cast<const opmath_t*>(e));
#pragma unroll
    for (int k = 0; k < kOut; ++k) {
      reinterpret_cast<scalar_t*>(a.data[k])[i] = static_cast<scalar_t>(rows_result<kOut, opmath_t>(r, k));
    }
  }
}

// Runs `f(const opmath_t* inputs)` (returning opmath_t, or Values<opmath_t, kOut>) over `iter`
// when its layout is the one above, and says whether it did.
template <typename scalar_t, int kOut, int kIn, typename func_t>
bool launch_broadcast_rows(at::TensorIteratorBase& iter, const func_t& f) {
  constexpr int N = kOut + kIn;
  constexpr int64_t kSize = sizeof(scalar_t);
  constexpr int kVec = 16 / kSize > 0 ? 16 / kSize : 1;
  const int64_t n = iter.numel();
  if (iter.ndim() != 2 || iter.noutputs() != kOut || iter.ninputs() != kIn || n == 0 ||
      n > std::numeric_limits<int32_t>::max()) {
    return false;
  }
  const int64_t cols = iter.shape()[0];
  RowsOperands<N> a{};
  bool any = false;
  for (int k = 0; k < N; ++k) {
    if (iter.dtype(k) != c10::CppTypeToScalarType<scalar_t>::value) return false;
    const auto strides = iter.strides(k);  // in bytes, the inner dimension first
    a.data[k] = static_cast<char*>(iter.data_ptr(k));
    const bool aligned = reinterpret_cast<uintptr_t>(a.data[k]) % 16 == 0;
    if (k >= kOut && strides[1] == 0) {
      if (strides[0] < 0 || strides[0] % kSize != 0) return false;
      a.broadcast[k] = any = true;
      a.stride[k] = strides[0] / kSize;
      a.vector[k] = strides[0] == kSize && cols % kVec == 0 && aligned;
    } else if (strides[0] != kSize || strides[1] != cols * kSize || !aligned) {
      return false;
    }
  }
  if (!any) return false;
  constexpr int kUnroll = 2;
  const auto kernel = broadcast_rows_kernel<scalar_t, kVec, kUnroll, kOut, kIn, func_t>;
  // As many blocks as the device holds at once (the kernel's occupancy, found once), fewer
  // where the vectors need fewer, at least one (for the elements after the last vector).
  static const int resident = [&] {
    int per_sm = 0;
    C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kRowsThreads, 0));
    return std::max(per_sm, 1) * at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  }();
  const int64_t per_block = int64_t(kRowsThreads) * kUnroll;
  const int64_t blocks = std::max<int64_t>(1, std::min<int64_t>((n / kVec + per_block - 1) / per_block, resident));
  kernel<<<static_cast<unsigned int>(blocks), kRowsThreads, 0, c10::cuda::getCurrentCUDAStream()>>>(
      a, static_cast<uint32_t>(n), static_cast<uint32_t>(cols),
      at::cuda::detail::IntDivider<uint32_t>(static_cast<uint32_t>(cols)), f);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return true;
}

}  // namespace
}  // namespace opwrap::pw::cuda
