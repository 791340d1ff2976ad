// CUDA kernel of opwrap::dedup_consecutive behind the C kernel ABI: CUDA C with CUB (from the
// CUDA toolkit) and no torch header.  The output size is data-dependent.
//
// As aten's unique_consecutive on CUDA (without counts or inverse, as this op returns): one
// cub::DeviceSelect::Unique pass straight into the output, allocated for every element
// (opwrap_resize to n), then the number kept read back (the one host synchronization the
// data-dependent size needs, as aten's .item()) and the output shrunk to it (opwrap_resize
// again: resize_ to fewer elements keeps the storage and the data in place).  Unique is a
// single-pass decoupled look-back compaction: it reads the input once and writes the values
// kept once, where the scan it replaces wrote and read two int64 flags per element.  It keeps
// the first of each run of values equal by ==, as the CPU kernel (x[i] != x[i - 1]): each NaN
// is its own run, 0.0 and -0.0 one.  Scratch memory comes from torch's caching allocator
// (opwrap_workspace), ordered on the stream the wrapper passes.
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
int32_t dedup(opwrap_context* ctx, const opwrap_tensor* self, opwrap_tensor* result) {
  const int64_t n = opwrap_numel(self);
  if (n == 0) {
    const int64_t none = 0;
    return opwrap_resize(ctx, result, 1, &none);
  }
  if (n > INT_MAX) return opwrap_fail(ctx, "at most %d elements on CUDA, got %lld", INT_MAX, (long long)n);
  const cudaStream_t stream = static_cast<cudaStream_t>(ctx->stream);
  const T* x = static_cast<const T*>(self->data);
  int32_t status = opwrap_resize(ctx, result, 1, &n);  // room for every element
  if (status != OPWRAP_OK) return status;
  int* kept = static_cast<int*>(opwrap_workspace(ctx, sizeof(int)));
  if (kept == nullptr) return OPWRAP_ERROR;
  T* out = static_cast<T*>(result->data);
  size_t scratch_bytes = 0;
  OPWRAP_CUDA_OK(ctx, cub::DeviceSelect::Unique(nullptr, scratch_bytes, x, out, kept, static_cast<int>(n), stream));
  void* scratch = opwrap_workspace(ctx, static_cast<int64_t>(scratch_bytes));
  if (scratch == nullptr) return OPWRAP_ERROR;
  OPWRAP_CUDA_OK(ctx, cub::DeviceSelect::Unique(scratch, scratch_bytes, x, out, kept, static_cast<int>(n), stream));
  int count = 0;
  OPWRAP_CUDA_OK(ctx, cudaMemcpyAsync(&count, kept, sizeof count, cudaMemcpyDeviceToHost, stream));
  OPWRAP_CUDA_OK(ctx, cudaStreamSynchronize(stream));
  const int64_t runs = count;
  return opwrap_resize(ctx, result, 1, &runs);
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
