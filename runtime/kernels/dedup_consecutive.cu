// CUDA kernel of opwrap::dedup_consecutive behind the C kernel ABI: CUDA C with CUB (from the
// CUDA toolkit) and no torch header.  The output size is data-dependent: flag the first
// element of each run, scan the flags (their positions in the output), read the count back,
// resize the output (opwrap_resize), scatter.  Scratch memory comes from torch's caching
// allocator (opwrap_workspace), ordered on the stream the wrapper passes.
#include <cub/cub.cuh>
#include <cuda_runtime.h>

#include <climits>

#include "abi/dedup_consecutive.h"

#define OPWRAP_CUDA_OK(ctx, expr)                                                        \
  do {                                                                                   \
    const cudaError_t status_ = (expr);                                                  \
    if (status_ != cudaSuccess) return opwrap_fail(ctx, "%s: %s", #expr, cudaGetErrorString(status_)); \
  } while (0)

namespace {

template <typename T>
__device__ bool starts_run(const T* x, int64_t i) {
  return i == 0 || x[i] != x[i - 1];
}

template <typename T>
__global__ void flag_runs(const T* x, int64_t n, int64_t* flags) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    flags[i] = starts_run(x, i) ? 1 : 0;
}

template <typename T>
__global__ void scatter_runs(const T* x, int64_t n, const int64_t* positions, T* out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    if (starts_run(x, i)) out[positions[i] - 1] = x[i];
}

template <typename T>
int32_t dedup(opwrap_context* ctx, const opwrap_tensor* self, opwrap_tensor* result) {
  const int64_t n = opwrap_numel(self);
  if (n == 0) {
    const int64_t none = 0;
    return opwrap_resize(ctx, result, 1, &none);
  }
  if (n > INT_MAX) return opwrap_fail(ctx, "at most %d elements on CUDA, got %lld", INT_MAX, (long long)n);
  const cudaStream_t stream = static_cast<cudaStream_t>(ctx->stream);
  const T* x = static_cast<const T*>(self->data);
  int64_t* flags = static_cast<int64_t*>(opwrap_workspace(ctx, 2 * n * static_cast<int64_t>(sizeof(int64_t))));
  if (flags == nullptr) return OPWRAP_ERROR;
  int64_t* positions = flags + n;
  const int threads = 256;
  const unsigned blocks = static_cast<unsigned>((n + threads - 1) / threads < 65535 ? (n + threads - 1) / threads : 65535);
  flag_runs<T><<<blocks, threads, 0, stream>>>(x, n, flags);
  OPWRAP_CUDA_OK(ctx, cudaGetLastError());
  size_t scratch_bytes = 0;
  OPWRAP_CUDA_OK(ctx, cub::DeviceScan::InclusiveSum(nullptr, scratch_bytes, flags, positions, static_cast<int>(n), stream));
  void* scratch = opwrap_workspace(ctx, static_cast<int64_t>(scratch_bytes));
  if (scratch == nullptr) return OPWRAP_ERROR;
  OPWRAP_CUDA_OK(ctx, cub::DeviceScan::InclusiveSum(scratch, scratch_bytes, flags, positions, static_cast<int>(n), stream));
  int64_t count = 0;
  OPWRAP_CUDA_OK(ctx, cudaMemcpyAsync(&count, positions + n - 1, sizeof count, cudaMemcpyDeviceToHost, stream));
  OPWRAP_CUDA_OK(ctx, cudaStreamSynchronize(stream));
  const int32_t status = opwrap_resize(ctx, result, 1, &count);
  if (status != OPWRAP_OK) return status;
  scatter_runs<T><<<blocks, threads, 0, stream>>>(x, n, positions, static_cast<T*>(result->data));
  OPWRAP_CUDA_OK(ctx, cudaGetLastError());
  return OPWRAP_OK;
}

}  // namespace

int32_t opwrap_dedup_consecutive_cuda_float32(opwrap_context* ctx, const opwrap_tensor* self, opwrap_tensor* result) {
  return dedup<float>(ctx, self, result);
}
int32_t opwrap_dedup_consecutive_cuda_float64(opwrap_context* ctx, const opwrap_tensor* self, opwrap_tensor* result) {
  return dedup<double>(ctx, self, result);
}
int32_t opwrap_dedup_consecutive_cuda_int32(opwrap_context* ctx, const opwrap_tensor* self, opwrap_tensor* result) {
  return dedup<int32_t>(ctx, self, result);
}
int32_t opwrap_dedup_consecutive_cuda_int64(opwrap_context* ctx, const opwrap_tensor* self, opwrap_tensor* result) {
  return dedup<int64_t>(ctx, self, result);
}
