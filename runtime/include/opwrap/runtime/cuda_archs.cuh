// The wrapper's check of an op declared with `cuda_archs:` (see cuda_archs.h): on a device no
// architecture its kernels were compiled for runs on, a RuntimeError naming the op, the device
// and its compute capability, instead of CUDA's "no kernel image is available".
#pragma once

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/util/Exception.h>
#include <opwrap/runtime/cuda_archs.h>

namespace opwrap::rt {

template <std::size_t N>
inline void check_cuda_arch(const char* op, const int (&declared)[N]) {
  const auto device = c10::cuda::current_device();
  const cudaDeviceProp* prop = at::cuda::getDeviceProperties(device);
  if (cuda_archs::supported(declared, cuda_archs::kBuilt, prop->major, prop->minor)) return;
  TORCH_CHECK(false, op, ": no CUDA kernel for this device: cuda:", static_cast<int>(device), " (", prop->name,
              ") has compute capability ", prop->major, ".", prop->minor, "; the op's kernels are declared for ",
              cuda_archs::names(declared), " (cuda_archs) and were compiled for ",
              cuda_archs::names(cuda_archs::kBuilt, declared, N), " of the library's ",
              cuda_archs::names(cuda_archs::kBuilt), " (its build's TORCH_CUDA_ARCH_LIST)");
}

}  // namespace opwrap::rt
