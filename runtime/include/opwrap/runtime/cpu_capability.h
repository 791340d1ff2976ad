// The first include of a generated CPU kernel translation unit: it compiles the unit for one
// CPU capability, as aten compiles its native/cpu kernels once per capability.
//
// The unit defines OPWRAP_CPU_CAPABILITY_AVX2 or OPWRAP_CPU_CAPABILITY_AVX512 before
// including this (nothing: DEFAULT).  Then, with GCC on x86-64:
//   - `#pragma GCC target` lets the compiler use those instructions for every function
//     defined after it: torch.utils.cpp_extension (and setuptools) give all sources one set
//     of flags, so the per-unit `-mavx2 -mfma` of aten's build is expressed in the source;
//   - the ISA macros the flags would define are defined (GCC's C++ front end preprocesses
//     before it applies the pragma), which is what sleef.h selects its vector functions by;
//   - CPU_CAPABILITY names at::vec's inline namespace (at::vec::AVX2::Vectorized), so
//     Vectorized code of different capabilities never shares a symbol.
// OPWRAP_CPU_CAPABILITY_BUILT is 0 where a capability cannot be built (another compiler or
// architecture); the unit is then empty and run-time dispatch uses the DEFAULT loop.
// Must come before any other include.
#pragma once

#if defined(OPWRAP_CPU_CAPABILITY_AVX2) || defined(OPWRAP_CPU_CAPABILITY_AVX512)
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define OPWRAP_CPU_CAPABILITY_BUILT 1
// First, compiled for every CPU: libstdc++'s allocator (and the std::move/std::forward it
// brings).  GCC 13 gives implicitly declared members of classes defined under the pragma
// (std::string's _Alloc_hider) no target, then refuses to inline the always_inline
// ~allocator compiled for the pragma's target into them ("target specific option
// mismatch").  Only this much: templates such as std::apply and std::get instantiated from
// headers included before the pragma keep the default target and cannot inline the
// vectorized lambdas they call, which slows the loops (docs/pointwise-and-rowwise.md).
#include <bits/allocator.h>
#if defined(OPWRAP_CPU_CAPABILITY_AVX512)
// aten's AVX512 flags: -mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma
#pragma GCC target("avx,avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt,avx512f,avx512bw,avx512vl,avx512dq")
#define CPU_CAPABILITY AVX512
#define CPU_CAPABILITY_AVX512
#ifndef __AVX512F__
#define __AVX512F__ 1
#define __AVX512BW__ 1
#define __AVX512VL__ 1
#define __AVX512DQ__ 1
#endif
#else
// aten's AVX2 flags: -mavx2 -mfma -mf16c (and bmi/lzcnt/popcnt, which every AVX2 CPU has)
#pragma GCC target("avx,avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt")
#define CPU_CAPABILITY AVX2
#define CPU_CAPABILITY_AVX2
#endif
#ifndef __AVX2__
#define __AVX__ 1
#define __AVX2__ 1
#define __FMA__ 1
#define __F16C__ 1
#endif
#else
#define OPWRAP_CPU_CAPABILITY_BUILT 0
#endif
#else  // DEFAULT: the flags the library is compiled with
#define OPWRAP_CPU_CAPABILITY_BUILT 1
#define CPU_CAPABILITY DEFAULT
#define CPU_CAPABILITY_DEFAULT
#endif
