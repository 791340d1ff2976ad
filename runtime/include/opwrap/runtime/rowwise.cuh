// Support of generated row-wise CUDA kernels in the full target (templates/rowwise/kernel.cuh.j2):
// the text both targets share (<opwrap/shared/rowwise_cuda.cuh>, which says how rows are laid on
// threads) with c10's current device, stream and check.
#pragma once

#include <opwrap/runtime/cuda.cuh>

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cooperative_groups.h>
#include <cuda_pipeline.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <type_traits>

namespace opwrap::rt::cuda {

inline int current_device() {
  return c10::cuda::current_device();
}

#define OPWRAP_CUDA_CHECK(expr) C10_CUDA_CHECK(expr)
#include <opwrap/shared/rowwise_cuda.cuh>
#undef OPWRAP_CUDA_CHECK

}  // namespace opwrap::rt::cuda
