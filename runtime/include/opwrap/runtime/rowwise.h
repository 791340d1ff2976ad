// Support of generated row-wise kernels (codegen/lang/rowwise.py, templates/rowwise/): the
// reductions over a row, for scalars (host and device) and at::vec::Vectorized values, and
// (on the CPU) the row in the computation type.
//
// Internal linkage throughout, as pointwise.h: each CPU kernel unit is compiled for one CPU
// capability and must call its own copies.
#pragma once

#include <c10/macros/Macros.h>

#include <limits>
#include <type_traits>
#include <vector>

#include <opwrap/runtime/pointwise.h>

#if OPWRAP_PW_VECTORIZED
#include <ATen/OpMathType.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
#endif

namespace opwrap::rt::rowwise {
namespace {

// A reduction: its identity and how two partial results combine.  max and min propagate
// NaN, as torch.amax and torch.amin.
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
    return T(-std::numeric_limits<double>::infinity());
  }
  template <typename T>
  static C10_HOST_DEVICE T combine(T a, T b) {
    return opwrap::pw::maximum(a, b);
  }
};

struct Min {
  template <typename T>
  static C10_HOST_DEVICE T identity() {
    return T(std::numeric_limits<double>::infinity());
  }
  template <typename T>
  static C10_HOST_DEVICE T combine(T a, T b) {
    return opwrap::pw::minimum(a, b);
  }
};

#if OPWRAP_PW_VECTORIZED
// The lanes of `v` reduced to one value.
template <typename R, typename T>
T reduce_lanes(const at::vec::Vectorized<T>& v) {
  return at::vec::vec_reduce_all<T>([](at::vec::Vectorized<T> a, at::vec::Vectorized<T> b) { return R::combine(a, b); },
                                    v);
}

// Independent accumulators a reduction pass keeps (a multiple of Lanes' kHalves): enough
// adds in flight to hide an add's latency on current x86 and Arm cores.
constexpr int kChains = 4;

// kChains accumulators reduced to one value (pairwise, then across lanes).
template <typename R, typename T>
T reduce_chains(const at::vec::Vectorized<T> (&acc)[kChains]) {
  at::vec::Vectorized<T> a = R::combine(R::combine(acc[0], acc[1]), R::combine(acc[2], acc[3]));
  return reduce_lanes<R>(a);
}

// How a loop over a row of scalar_t reads it in the computation type opmath_t: in steps of
// kStep elements, each kHalves vectors of opmath_t (two for float16 and bfloat16: one
// Vectorized<scalar_t> converted to two Vectorized<float>, as aten's reduced-type loops do).
template <typename scalar_t>
struct Lanes {
  using opmath_t = at::opmath_type<scalar_t>;
  using VS = at::vec::Vectorized<scalar_t>;
  using VM = at::vec::Vectorized<opmath_t>;
  static constexpr bool kSame = std::is_same_v<scalar_t, opmath_t>;
  static constexpr int kHalves = kSame ? 1 : 2;
  static constexpr int64_t kStep = VM::size() * kHalves;
  static_assert(kSame || VS::size() == kStep, "a reduced-type vector converts to two float vectors");

  // Half h of the step at p.
  static VM load(const scalar_t* p, int h) {
    if constexpr (kSame) {
      return VM::loadu(p);
    } else {
      const auto [lo, hi] = at::vec::convert_to_float<scalar_t>(VS::loadu(p));
      return h == 0 ? lo : hi;
    }
  }
};

// A column operand (the same for every row, n elements) in the computation type: the
// tensor's own data when scalar_t is opmath_t, else converted once (at::vec::convert) into
// `buffer`, so that the row loops do not convert it again on every row.
template <typename scalar_t>
const at::opmath_type<scalar_t>* in_opmath(const scalar_t* p, int64_t n, std::vector<at::opmath_type<scalar_t>>& buffer) {
  if constexpr (Lanes<scalar_t>::kSame) {
    return p;
  } else {
    buffer.resize(static_cast<size_t>(n));
    at::vec::convert(p, buffer.data(), n);
    return buffer.data();
  }
}

// Writes n values of a row to `dst`: vec(d, h) gives half h of the step at element d (see
// Lanes), scalar(d) one element.  Reduced types are converted as they are stored.
template <typename scalar_t, typename VecFn, typename ScalarFn>
void write_row(scalar_t* dst, int64_t n, const VecFn& vec, const ScalarFn& scalar) {
  using L = Lanes<scalar_t>;
  int64_t d = 0;
  for (; d + L::kStep <= n; d += L::kStep) {
    if constexpr (L::kSame) {
      vec(d, 0).store(dst + d);
    } else {
      at::vec::convert_from_float<scalar_t>(vec(d, 0), vec(d, 1)).store(dst + d);
    }
  }
  for (; d < n; ++d) dst[d] = static_cast<scalar_t>(scalar(d));
}
#endif  // OPWRAP_PW_VECTORIZED

}  // namespace
}  // namespace opwrap::rt::rowwise
