// Run-time choice between the builds of a CPU kernel (DEFAULT, AVX2, AVX-512; see
// cpu_capability.h), by the capability torch itself runs its kernels with:
// at::get_cpu_capability(), which is torch.backends.cpu.get_cpu_capability() and honours
// ATEN_CPU_CAPABILITY=default|avx2|avx512.
//
// aten's DispatchStub does the same for aten, but its layout depends on HAVE_*_CPU_DEFINITION
// macros that torch's build defines and extension builds do not, and its capability query is
// not exported; this is the part of it a generated kernel needs.
#pragma once

#include <ATen/Version.h>

#include <string>

namespace opwrap::rt {

enum class CpuCapability : int { DEFAULT = 0, AVX2 = 1, AVX512 = 2 };
constexpr int kCpuCapabilities = 3;

inline CpuCapability cpu_capability() {
  static const CpuCapability capability = [] {
    const std::string name = at::get_cpu_capability();
    if (name.rfind("AVX512", 0) == 0) return CpuCapability::AVX512;
    if (name.rfind("AVX2", 0) == 0) return CpuCapability::AVX2;
    return CpuCapability::DEFAULT;
  }();
  return capability;
}

inline const char* cpu_capability_name(CpuCapability c) {
  switch (c) {
    case CpuCapability::AVX512: return "AVX512";
    case CpuCapability::AVX2: return "AVX2";
    default: return "DEFAULT";
  }
}

// One kernel's builds.  An aggregate with a constant initializer (the DEFAULT build, in the
// op's own translation unit), so it is initialized before any dynamic initializer runs; the
// other capabilities' units fill their slots from their static initializers.
template <typename Fn>
struct CpuKernels {
  Fn builds[kCpuCapabilities];

  // The best build the running CPU (and ATEN_CPU_CAPABILITY) allows.
  Fn get() const {
    for (int c = static_cast<int>(cpu_capability()); c > 0; --c) {
      if (builds[c] != nullptr) return builds[c];
    }
    return builds[0];
  }
};

template <typename Fn>
struct RegisterCpuKernel {
  RegisterCpuKernel(CpuKernels<Fn>& kernels, CpuCapability capability, Fn fn) {
    kernels.builds[static_cast<int>(capability)] = fn;
  }
};

}  // namespace opwrap::rt
