// Support of the stable target's generated row-wise kernels (codegen/api/stable_rowwise.py,
// templates/stable/rowwise.h.j2): the reductions, the CPU capability a loop is chosen for at run
// time (the accumulators a pass keeps and their fold are <opwrap/stable/rowwise_accumulator.h>,
// built once per capability; the CUDA kernel's sweep is the full target's:
// <opwrap/stable/rowwise_cuda.cuh>).  The functions of the program language, and the
// conversions of float16 and bfloat16, are the pointwise kernels' (<opwrap/stable/math.h>),
// written so that the loops calling them vectorize.
// Torch's stable API and the C++ standard library only: no at::vec.
//
// Internal linkage throughout (unnamed namespaces): each loop is compiled once per CPU
// capability under `#pragma GCC target`, and must call its own copies.
#pragma once

#include <opwrap/stable/math.h>

#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string_view>
#include <type_traits>
#include <utility>

namespace opwrap::stable::rowwise {
namespace {

using opwrap::pw::opmath_t;  // float for float16 and bfloat16, as at::opmath_type

// A reduction: its identity and how two partial results combine (max and min propagate NaN).
struct Sum {
  template <typename T>
  static C10_HOST_DEVICE T identity() {
    return T(0);
  }
  template <typename T>
  static C10_HOST_DEVICE T combine(T a, T b) {
    return a + b;
  }
};
struct Max {
  template <typename T>
  static C10_HOST_DEVICE T identity() {
    return -std::numeric_limits<T>::infinity();
  }
  template <typename T>
  static C10_HOST_DEVICE T combine(T a, T b) {
    return opwrap::pw::maximum(a, b);
  }
};
struct Min {
  template <typename T>
  static C10_HOST_DEVICE T identity() {
    return std::numeric_limits<T>::infinity();
  }
  template <typename T>
  static C10_HOST_DEVICE T combine(T a, T b) {
    return opwrap::pw::minimum(a, b);
  }
};

#if !defined(__CUDACC__) && !defined(__HIPCC__)
// The values of T in a vector of `vector_bytes`.
template <typename T>
constexpr int lanes(int vector_bytes) {
  return vector_bytes / static_cast<int>(sizeof(T));
}

// W accumulators folded to one value, pairwise: each level a loop of a constant length (a loop
// over the levels was not unrolled, and folded 64 floats one at a time).  The generated loops
// fold in vectors (<opwrap/stable/rowwise_accumulator.h>); this is its fallback for compilers
// without GCC's vector extensions.
template <typename R, typename T, int W>
inline T fold(T (&acc)[W]) {
  if constexpr (W == 1) {
    return acc[0];
  } else {
    for (int j = 0; j < W / 2; ++j) acc[j] = R::combine(acc[j], acc[j + W / 2]);
    return fold<R>(reinterpret_cast<T(&)[W / 2]>(acc));
  }
}

// n elements at p in the computation type: p itself where scalar_t is it, else converted
// into `buffer` (n elements).
template <typename scalar_t>
inline const opmath_t<scalar_t>* load_row(const scalar_t* p, int64_t n, opmath_t<scalar_t>* buffer) {
  if constexpr (std::is_same_v<scalar_t, opmath_t<scalar_t>>) {
    return p;
  } else if constexpr (std::is_same_v<scalar_t, c10::Half>) {
    opwrap::pw::to_float(p, buffer, n);  // F16C where the CPU has it
    return buffer;
  } else {
    for (int64_t i = 0; i < n; ++i) buffer[i] = opwrap::pw::load(p[i]);
    return buffer;
  }
}

// The CPU builds of a loop: which one this CPU runs (<opwrap/stable/math.h>).
using opwrap::pw::Capability;
using opwrap::pw::capability;
#endif  // !__CUDACC__

}  // namespace
}  // namespace opwrap::stable::rowwise
