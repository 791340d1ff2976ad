// Per-op CUDA architectures (`cuda_archs:` in a declaration): which architectures this
// translation unit's nvcc compiled for, and whether code for one of them runs on a device.
// No torch here: the rules are tested by compiling this header alone (tests/test_cuda_archs.py),
// and codegen/core/cuda_archs.py holds the same rules in Python.
//
// An architecture is a number as __CUDA_ARCH__ spells it (900 for 9.0), plus 1 for an
// arch-specific target (901 for 9.0a).  `codegen build` writes what it compiles for into
// <opwrap_cuda_build_archs.h> (OPWRAP_CUDA_BUILD_ARCHS: OPWRAP_CUDA_BUILT(arch, is PTX)
// entries); without that header, nvcc's own __CUDA_ARCH_LIST__ is taken as machine code.
#pragma once

#include <cstddef>
#include <string>

#if __has_include(<opwrap_cuda_build_archs.h>)
#include <opwrap_cuda_build_archs.h>
#endif

namespace opwrap::rt::cuda_archs {

struct Built {
  int arch;  // 900, 901 (9.0a)
  bool ptx;  // PTX (compiled by the driver for the device when loaded), or machine code
};

#if defined(OPWRAP_CUDA_BUILD_ARCHS)
#define OPWRAP_CUDA_BUILT(arch, ptx) Built{arch, ptx != 0},
inline constexpr Built kBuilt[] = {OPWRAP_CUDA_BUILD_ARCHS};
#undef OPWRAP_CUDA_BUILT
#elif defined(__CUDA_ARCH_LIST__)
inline constexpr int kListed[] = {__CUDA_ARCH_LIST__};
inline constexpr std::size_t kListedSize = sizeof(kListed) / sizeof(int);
struct BuiltList {
  Built items[kListedSize];
};
inline constexpr BuiltList listed() {
  BuiltList out{};
  for (std::size_t i = 0; i < kListedSize; ++i) out.items[i] = Built{kListed[i], false};
  return out;
}
inline constexpr BuiltList kBuiltList = listed();
inline constexpr const Built (&kBuilt)[kListedSize] = kBuiltList.items;
#else
inline constexpr Built kBuilt[] = {Built{0, false}};  // nothing known: no architecture is 0
#endif

constexpr int major_of(int arch) { return arch / 100; }
constexpr int minor_of(int arch) { return arch / 10 % 10; }
constexpr bool specific(int arch) { return arch % 10 == 1; }

// A declared architecture keeps a built one: the same major version and at least its minor;
// an arch-specific declaration (9.0a) keeps only itself.
constexpr bool keeps(int declared, int built) {
  if (specific(declared)) return built == declared;
  return major_of(built) == major_of(declared) && minor_of(built) >= minor_of(declared);
}

// Code compiled for `built` runs on a device of compute capability major.minor: machine code
// on the same major version and a later or equal minor; PTX on any later device; an
// arch-specific target on exactly its own.
constexpr bool runs_on(Built built, int major, int minor) {
  const int bm = major_of(built.arch), bn = minor_of(built.arch);
  if (specific(built.arch)) return bm == major && bn == minor;
  if (built.ptx) return bm < major || (bm == major && bn <= minor);
  return bm == major && bn <= minor;
}

template <std::size_t N, std::size_t M>
constexpr bool supported(const int (&declared)[N], const Built (&built)[M], int major, int minor) {
  for (const Built& b : built) {
    if (b.arch == 0) continue;
    bool kept = false;
    for (int d : declared) kept = kept || keeps(d, b.arch);
    if (kept && runs_on(b, major, minor)) return true;
  }
  return false;
}

inline std::string name(int arch) {
  return std::to_string(major_of(arch)) + "." + std::to_string(minor_of(arch)) + (specific(arch) ? "a" : "");
}

template <std::size_t N>
inline std::string names(const int (&archs)[N]) {
  std::string out;
  for (int a : archs) out += (out.empty() ? "" : ", ") + name(a);
  return out;
}

// The built architectures, or (with `declared`) those of them the declaration keeps.
template <std::size_t M>
inline std::string names(const Built (&built)[M], const int* declared = nullptr, std::size_t n = 0) {
  std::string out;
  for (const Built& b : built) {
    bool kept = declared == nullptr;
    for (std::size_t i = 0; i < n; ++i) kept = kept || keeps(declared[i], b.arch);
    if (b.arch != 0 && kept) out += (out.empty() ? "" : ", ") + name(b.arch) + (b.ptx ? " (PTX)" : "");
  }
  return out.empty() ? "none" : out;
}

}  // namespace opwrap::rt::cuda_archs
