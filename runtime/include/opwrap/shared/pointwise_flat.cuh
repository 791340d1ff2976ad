// The flat CUDA loop of generated pointwise kernels, one text for both targets: every operand
// contiguous, but for inputs broadcast along the leading dimensions (a bias [C] against
// x [R, C] or [B, T, C], a 0-dim tensor), run as one flat range of R * C elements.  Each
// thread loads 16 bytes of every contiguous operand, takes the broadcast operands at column
// i % C (one division per vector, by a multiply-high), computes in opmath_t (float for bfloat16
// and float16) and stores 16 bytes of each output; kUnroll vectors a pass, all loaded before
// any is computed.  As many blocks as the device holds at once.
//
// - The full target (opwrap/runtime/pointwise_cuda.cuh) runs it for the broadcast layout only,
//   which aten's gpu_kernel runs slowly (its offset calculator divides per element, no
//   vectors); gpu_kernel keeps every other layout, the contiguous one included.
// - The stable target (opwrap/stable/pointwise.h, launch_flat) has no gpu_kernel: it runs
//   every layout this loop takes, contiguous ones included, and its grid-stride loop with an
//   offset per element the rest (measured on an H200: docs/stable-abi.md).
//
// plan() refuses (returns false, and the caller runs its other loop) any other layout,
// misaligned data, and more than 2^31 - 1 elements (the 32-bit index and divider).
//
// Torch-free (CUDA's runtime and the standard library): aten's aligned_vector, IntDivider and
// opmath_type are not in torch's stable API, so their few lines are here, and the caller names
// opmath_t.  Of internal linkage, as the headers that include it.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

namespace opwrap::pw::flat {
namespace {

constexpr int kThreads = 256;
constexpr int kUnroll = 2;

// Elements of a 16-byte vector of T, and the vector, loaded and stored with one instruction.
template <typename T>
constexpr int kVecOf = sizeof(T) >= 16 ? 1 : static_cast<int>(16 / sizeof(T));
template <typename T, int kVec>
struct alignas(sizeof(T) * kVec) Vec {
  T val[kVec];
};

// n / d and n % d for n < 2^31 by a multiply-high, an add and a shift (Granlund and Montgomery,
// as aten's IntDivider<uint32_t>).
struct Divider {
  uint32_t divisor = 1, magic = 0, shift = 0;
  Divider() = default;
  explicit Divider(uint32_t d) : divisor(d) {
    while (shift < 32 && (uint64_t{1} << shift) < d) ++shift;
    magic = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << shift) - d)) / d + 1);
  }
  __device__ __forceinline__ uint32_t div(uint32_t n) const { return (__umulhi(n, magic) + n) >> shift; }
  __device__ __forceinline__ uint32_t mod(uint32_t n) const { return n - div(n) * divisor; }
};

// The operands: outputs first, then inputs.
template <int N>
struct Operands {
  char* data[N];
  // Inputs broadcast over the rows: their element stride along a row (0: one value for all),
  // and whether a vector of them is one aligned 16-byte load (stride 1, C a multiple of the
  // vector, aligned data).
  bool broadcast[N];
  bool vector[N];
  int64_t stride[N];
};

// `op` called with its kIn inputs from an array: the loop's view of a generated functor.
template <typename Op, int kIn>
struct ArrayCall {
  Op op;
  template <typename T>
  __device__ __forceinline__ auto operator()(const T* x) const {
    return call(x, std::make_integer_sequence<int, kIn>{});
  }
  template <typename T, int... I>
  __device__ __forceinline__ auto call(const T* x, std::integer_sequence<int, I...>) const {
    return op(x[I]...);
  }
};

template <int kOut, typename opmath_t, typename R>
__device__ __forceinline__ opmath_t result(const R& r, int k) {
  if constexpr (std::is_same_v<R, opmath_t>) {
    return r;
  } else {
    return r.v[k];
  }
}

// Loads the kVec elements from element i (column col) of every input, in opmath_t.
template <typename scalar_t, typename opmath_t, int kVec, int kOut, int kIn>
__device__ __forceinline__ void load(const Operands<kOut + kIn>& a, uint32_t i, uint32_t col, uint32_t cols,
                                     opmath_t (&x)[kIn][kVec]) {
  using V = Vec<scalar_t, kVec>;
#pragma unroll
  for (int k = 0; k < kIn; ++k) {
    const scalar_t* in = reinterpret_cast<const scalar_t*>(a.data[kOut + k]);
    if (!a.broadcast[kOut + k] || a.vector[kOut + k]) {
      const V loaded = *reinterpret_cast<const V*>(in + (a.broadcast[kOut + k] ? col : i));
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

// Each thread handles kUnroll vectors of kVec elements a pass: vector v0 + u * blockDim.x for
// u < kUnroll, v0 advancing over the grid.  The elements after the last whole vector, one a
// thread of the first block.
template <typename scalar_t, typename opmath_t, int kVec, int kOut, int kIn, typename func_t>
__global__ void __launch_bounds__(kThreads) kernel(Operands<kOut + kIn> a, uint32_t n, uint32_t cols, Divider by_cols,
                                                   func_t f) {
  using V = Vec<scalar_t, kVec>;
  const uint32_t vectors = n / kVec;
  for (uint32_t v0 = blockIdx.x * blockDim.x * kUnroll + threadIdx.x; v0 < vectors;
       v0 += blockDim.x * gridDim.x * kUnroll) {
    opmath_t x[kUnroll][kIn][kVec];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const uint32_t v = v0 + u * blockDim.x;
      if (v < vectors) load<scalar_t, opmath_t, kVec, kOut, kIn>(a, v * kVec, by_cols.mod(v * kVec), cols, x[u]);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const uint32_t v = v0 + u * blockDim.x;
      if (v >= vectors) break;
      V out[kOut];
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        opmath_t e[kIn];
#pragma unroll
        for (int k = 0; k < kIn; ++k) e[k] = x[u][k][j];
        const auto r = f(static_cast<const opmath_t*>(e));
#pragma unroll
        for (int k = 0; k < kOut; ++k) out[k].val[j] = static_cast<scalar_t>(result<kOut, opmath_t>(r, k));
      }
#pragma unroll
      for (int k = 0; k < kOut; ++k) *reinterpret_cast<V*>(reinterpret_cast<scalar_t*>(a.data[k]) + v * kVec) = out[k];
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
      reinterpret_cast<scalar_t*>(a.data[k])[i] = static_cast<scalar_t>(result<kOut, opmath_t>(r, k));
    }
  }
}

// The operands of n elements in rows of `cols` (n / cols rows), operand k's element strides
// `inner[k]` along a row and `outer[k]` across rows, into `a`; whether this loop runs them:
// every output and every other input contiguous (strides 1 and cols, any outer stride for one
// row) and 16-byte aligned, an input of outer stride 0 broadcast.  `need_broadcast`: refuse a
// layout without a broadcast input too (the full target's gpu_kernel runs those).
template <typename scalar_t, int kOut, int kIn>
bool plan(Operands<kOut + kIn>& a, char* const* data, const int64_t* inner, const int64_t* outer, int64_t n,
          int64_t cols, bool need_broadcast) {
  constexpr int kVec = kVecOf<scalar_t>;
  if (n <= 0 || cols <= 0 || n > std::numeric_limits<int32_t>::max() || n % cols != 0) return false;
  const int64_t rows = n / cols;
  bool any = false;
  for (int k = 0; k < kOut + kIn; ++k) {
    a.data[k] = data[k];
    a.broadcast[k] = a.vector[k] = false;
    a.stride[k] = 0;
    const bool aligned = reinterpret_cast<std::uintptr_t>(data[k]) % 16 == 0;
    const bool same_each_row = rows == 1 ? inner[k] == 0 : outer[k] == 0;
    if (k >= kOut && same_each_row) {  // the value at column i % cols
      if (inner[k] < 0) return false;
      a.broadcast[k] = any = true;
      a.stride[k] = inner[k];
      a.vector[k] = inner[k] == 1 && cols % kVec == 0 && aligned;
    } else if (inner[k] != 1 || (rows > 1 && outer[k] != cols) || !aligned) {
      return false;
    }
  }
  return any || !need_broadcast;
}

// Runs `f(const opmath_t* inputs)` (returning opmath_t, or a struct of kOut values `v`) over
// the operands plan() filled, on `stream`; CUDA's error, which the caller turns into its
// target's.
template <typename scalar_t, typename opmath_t, int kOut, int kIn, typename func_t>
cudaError_t launch(const Operands<kOut + kIn>& a, int64_t n, int64_t cols, const func_t& f, cudaStream_t stream) {
  constexpr int kVec = kVecOf<scalar_t>;
  const auto run = kernel<scalar_t, opmath_t, kVec, kOut, kIn, func_t>;
  // As many blocks as the device holds at once (the kernel's occupancy, found once for the
  // first device: the lent machines' GPUs are of one kind), fewer where the vectors need fewer,
  // at least one (for the elements after the last vector).
  static const int resident = [&] {
    int device = 0, per_sm = 0, sms = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, run, kThreads, 0) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
      return 0;  // the launch below reports the error, if it persists
    }
    return std::max(per_sm, 1) * std::max(sms, 1);
  }();
  const int64_t per_block = int64_t{kThreads} * kUnroll;
  const int64_t blocks = std::max<int64_t>(
      1, std::min<int64_t>((n / kVec + per_block - 1) / per_block, resident > 0 ? resident : 1024));
  run<<<static_cast<unsigned int>(blocks), kThreads, 0, stream>>>(a, static_cast<uint32_t>(n),
                                                                  static_cast<uint32_t>(cols),
                                                                  Divider(static_cast<uint32_t>(cols)), f);
  return cudaGetLastError();
}

}  // namespace
}  // namespace opwrap::pw::flat
