// Support of the stable target's generated row-wise CUDA kernels (templates/stable/rowwise.h.j2,
// laid out by templates/rowwise/cuda.j2 as the full target's are): the text both targets share
// (<opwrap/shared/rowwise_cuda.cuh>, which says how rows are laid on threads) with the current
// device's current stream from torch's stable C shim and the stable target's error.  The
// wrapper holds a DeviceGuard on the first tensor's device, so the current device is that one.
#pragma once

#ifndef USE_CUDA
#define USE_CUDA
#endif
#include <opwrap/stable/runtime.h>

#include <cooperative_groups.h>
#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <type_traits>

namespace opwrap::rt::cuda {

constexpr int kWarp = 32;

#define OPWRAP_CUDA_CHECK(expr)                                                              \
  do {                                                                                       \
    const cudaError_t opwrap_error = (expr);                                                 \
    OPWRAP_STABLE_CHECK(opwrap_error == cudaSuccess, "CUDA error: ", cudaGetErrorString(opwrap_error)); \
  } while (0)

inline int current_device() {
  int device = 0;
  OPWRAP_CUDA_CHECK(cudaGetDevice(&device));
  return device;
}

inline cudaStream_t stream() {
  return static_cast<cudaStream_t>(::opwrap::rt::current_cuda_stream(current_device()));
}

#include <opwrap/shared/rowwise_cuda.cuh>
#undef OPWRAP_CUDA_CHECK

}  // namespace opwrap::rt::cuda
