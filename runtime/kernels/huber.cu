// CUDA kernel of opwrap::huber behind the C kernel ABI: CUDA C that includes no torch header,
// compiled by nvcc ([tool.codegen] sources) and launched on the stream the wrapper passes
// (the device's current stream).  The inputs come with their own strides (contiguous: false).
#include <cuda_runtime.h>

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
__global__ void huber_kernel(const T* x, Strided xs, const T* y, Strided ys, T* out, int64_t n, T delta) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const T e = x[offset(xs, i)] - y[offset(ys, i)];
    const T a = e < T(0) ? -e : e;
    out[i] = a <= delta ? T(0.5) * e * e : delta * (a - T(0.5) * delta);
  }
}

template <typename T>
int32_t huber(opwrap_context* ctx, const opwrap_tensor* input, const opwrap_tensor* target, double delta,
              opwrap_tensor* result) {
  if (!(delta > 0)) return opwrap_fail(ctx, "delta must be positive, got %g", delta);
  if (input->ndim > kMaxDims) return opwrap_fail(ctx, "at most %d dimensions, got %lld", kMaxDims, (long long)input->ndim);
  const int64_t n = opwrap_numel(result);
  if (n == 0) return OPWRAP_OK;
  const int threads = 256;
  const int64_t blocks = (n + threads - 1) / threads < 65535 ? (n + threads - 1) / threads : 65535;
  huber_kernel<T><<<static_cast<unsigned>(blocks), threads, 0, static_cast<cudaStream_t>(ctx->stream)>>>(
      static_cast<const T*>(input->data), strided(input), static_cast<const T*>(target->data), strided(target),
      static_cast<T*>(result->data), n, static_cast<T>(delta));
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
