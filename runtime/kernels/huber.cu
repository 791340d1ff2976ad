// CUDA kernel of opwrap::huber behind the C kernel ABI: CUDA C that includes no torch header,
// compiled by nvcc ([tool.codegen] sources) and launched on the stream the wrapper passes
// (the device's current stream).  The inputs come with their own strides (contiguous: false).
//
// The loss is a handful of flops per 12 (float32) bytes moved: memory bound.  aten's
// F.huber_loss(reduction='none') runs through TensorIterator's vectorized elementwise kernel
// (16-byte loads, several per thread in flight); so does the contiguous path here: when
// input, target and result are all dense row-major and 16-byte aligned, each thread of a
// grid-stride loop loads kUnroll 16-byte vectors of each input before it computes (4 loads in
// flight per thread), over enough blocks to fill the device.  Anything else (a broadcast, a
// transposed or sliced input, an unaligned view) takes the strided path: one element per
// thread, its offsets from the sizes and strides.  Both compute the loss as the CPU kernel
// does (runtime/rust/src/lib.rs: huber_loss).
#include <cuda_runtime.h>

#include <cstdint>

#include "abi/huber.h"

namespace {

constexpr int kMaxDims = 8;

struct Strided {
  int64_t sizes[kMaxDims];
  int64_t strides[kMaxDims];
  int ndim;
};

Strided strided(const opwrap_tensor* t) {
  Strided s{};
  s.ndim = static_cast<int>(t->ndim);
  for (int d = 0; d < s.ndim; ++d) {
    s.sizes[d] = t->sizes[d];
    s.strides[d] = t->strides[d];
  }
  return s;
}

// The offset of row-major element i.
__device__ int64_t offset(const Strided& s, int64_t i) {
  int64_t off = 0;
  for (int d = s.ndim - 1; d >= 0; --d) {
    off += (i % s.sizes[d]) * s.strides[d];
    i /= s.sizes[d];
  }
  return off;
}

template <typename T>
__device__ __forceinline__ T huber_loss(T x, T y, T delta) {
  const T e = x - y;
  const T a = e < T(0) ? -e : e;
  return a <= delta ? T(0.5) * e * e : delta * (a - T(0.5) * delta);
}

// Any strides: one element a thread, grid-stride.
template <typename T>
__global__ void huber_strided(const T* x, Strided xs, const T* y, Strided ys, T* out, int64_t n, T delta) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = huber_loss(x[offset(xs, i)], y[offset(ys, i)], delta);
  }
}

// 16 bytes of T.
template <typename T>
struct alignas(16) Vec16 {
  static constexpr int kSize = 16 / sizeof(T);
  T v[kSize];
};

constexpr int kThreads = 256;
constexpr int kUnroll = 2;  // 16-byte vectors of each input a thread loads before computing

// Dense and 16-byte aligned: vectors [0, vectors) by kUnroll per thread, grid-stride (vector
// j of a step is kThreads vectors after j - 1: each load instruction of a warp reads 512
// contiguous bytes); then the elements past the last whole vector, one a thread.
template <typename T>
__global__ void __launch_bounds__(kThreads) huber_contiguous(const T* __restrict__ x, const T* __restrict__ y,
                                                             T* __restrict__ out, int64_t n, T delta) {
  using V = Vec16<T>;
  const int64_t vectors = n / V::kSize;
  const V* xv = reinterpret_cast<const V*>(x);
  const V* yv = reinterpret_cast<const V*>(y);
  V* ov = reinterpret_cast<V*>(out);
  const int64_t step = static_cast<int64_t>(gridDim.x) * kThreads * kUnroll;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * kThreads * kUnroll + threadIdx.x; base < vectors;
       base += step) {
    V a[kUnroll], b[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t j = base + static_cast<int64_t>(u) * kThreads;
      if (j < vectors) {
        a[u] = xv[j];
        b[u] = yv[j];
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t j = base + static_cast<int64_t>(u) * kThreads;
      if (j < vectors) {
        V r;
#pragma unroll
        for (int k = 0; k < V::kSize; ++k) r.v[k] = huber_loss(a[u].v[k], b[u].v[k], delta);
        ov[j] = r;
      }
    }
  }
  const int64_t tail = vectors * V::kSize + blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x;
  if (tail < n) out[tail] = huber_loss(x[tail], y[tail], delta);
}

// Whether t is dense row-major (size-1 dimensions may have any stride).
bool dense(const opwrap_tensor* t) {
  int64_t expected = 1;
  for (int64_t d = t->ndim - 1; d >= 0; --d) {
    if (t->sizes[d] == 1) continue;
    if (t->strides[d] != expected) return false;
    expected *= t->sizes[d];
  }
  return true;
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

// Blocks that fill the device (its resident threads / kThreads), cached per device.
int resident_blocks() {
  static int cached[64] = {};
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return 1024;
  int& blocks = cached[device & 63];
  if (blocks == 0) {
    int sms = 0, threads = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&threads, cudaDevAttrMaxThreadsPerMultiProcessor, device) != cudaSuccess) {
      return 1024;
    }
    blocks = sms * (threads / kThreads) > 0 ? sms * (threads / kThreads) : 1;
  }
  return blocks;
}

template <typename T>
int32_t huber(opwrap_context* ctx, const opwrap_tensor* input, const opwrap_tensor* target, double delta,
              opwrap_tensor* result) {
  if (!(delta > 0)) return opwrap_fail(ctx, "delta must be positive, got %g", delta);
  if (input->ndim > kMaxDims) return opwrap_fail(ctx, "at most %d dimensions, got %lld", kMaxDims, (long long)input->ndim);
  const int64_t n = opwrap_numel(result);
  if (n == 0) return OPWRAP_OK;
  const cudaStream_t stream = static_cast<cudaStream_t>(ctx->stream);
  const T* x = static_cast<const T*>(input->data);
  const T* y = static_cast<const T*>(target->data);
  T* out = static_cast<T*>(result->data);
  const int64_t max_blocks = 4 * static_cast<int64_t>(resident_blocks());  // a few waves, then grid-stride
  if (dense(input) && dense(target) && dense(result) && aligned16(x) && aligned16(y) && aligned16(out)) {
    const int64_t vectors = n / Vec16<T>::kSize;
    int64_t blocks = (vectors + kThreads * kUnroll - 1) / (kThreads * kUnroll);
    blocks = blocks < max_blocks ? blocks : max_blocks;
    if (blocks < 1) blocks = 1;  // (the tail, < one vector, needs one block of threads)
    huber_contiguous<T><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(x, y, out, n, static_cast<T>(delta));
  } else {
    int64_t blocks = (n + kThreads - 1) / kThreads;
    blocks = blocks < max_blocks ? blocks : max_blocks;
    huber_strided<T><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(x, strided(input), y, strided(target), out,
                                                                              n, static_cast<T>(delta));
  }
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) return opwrap_fail(ctx, "kernel launch failed: %s", cudaGetErrorString(status));
  return OPWRAP_OK;
}

}  // namespace

int32_t opwrap_huber_cuda_float32(opwrap_context* ctx, const opwrap_tensor* input, const opwrap_tensor* target,
                                  double delta, opwrap_tensor* result) {
  return huber<float>(ctx, input, target, delta, result);
}

int32_t opwrap_huber_cuda_float64(opwrap_context* ctx, const opwrap_tensor* input, const opwrap_tensor* target,
                                  double delta, opwrap_tensor* result) {
  return huber<double>(ctx, input, target, delta, result);
}
