// Support of generated row-wise kernels (codegen/rowwise.py, templates/rowwise/): the
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

// One row (or column) of a tensor of scalar_t in the computation type opmath_t: the data
// itself when the types are the same, else a conversion into a buffer kept across rows.
template <typename scalar_t>
class Row {
 public:
  using opmath_t = at::opmath_type<scalar_t>;
  static constexpr bool kSame = std::is_same_v<scalar_t, opmath_t>;
  using VS = at::vec::Vectorized<scalar_t>;
  using VM = at::vec::Vectorized<opmath_t>;

  // `n` values from `p`, to read.
  const opmath_t* load(const scalar_t* p, int64_t n) {
    if constexpr (kSame) {
      return p;
    } else {
      buffer_.resize(static_cast<size_t>(n));
      opmath_t* out = buffer_.data();
      int64_t i = 0;
      for (; i + VS::size() <= n; i += VS::size()) {  // explicitly vectorized: at::vec::convert is a scalar loop here
        const auto [lo, hi] = at::vec::convert_to_float<scalar_t>(VS::loadu(p + i));
        lo.store(out + i);
        hi.store(out + i + VM::size());
      }
      for (; i < n; ++i) out[i] = static_cast<opmath_t>(p[i]);
      return out;
    }
  }
  // Where to write `n` values bound for `p` (store() puts them there).
  opmath_t* target(scalar_t* p, int64_t n) {
    if constexpr (kSame) {
      return p;
    } else {
      buffer_.resize(static_cast<size_t>(n));
      return buffer_.data();
    }
  }
  void store(scalar_t* p, int64_t n) {
    if constexpr (!kSame) {
      const opmath_t* in = buffer_.data();
      int64_t i = 0;
      for (; i + VS::size() <= n; i += VS::size()) {
        at::vec::convert_from_float<scalar_t>(VM::loadu(in + i), VM::loadu(in + i + VM::size())).store(p + i);
      }
      for (; i < n; ++i) p[i] = static_cast<scalar_t>(in[i]);
    }
  }

 private:
  std::vector<opmath_t> buffer_;
};

// Writes n values of a row to `dst`: vec(d) gives the Vectorized<opmath_t> of elements
// [d, d + size), scalar(d) one element.  Reduced types are converted as they are stored,
// two float vectors to one of scalar_t, with no pass over a buffer.
template <typename scalar_t, typename VecFn, typename ScalarFn>
void write_row(scalar_t* dst, int64_t n, const VecFn& vec, const ScalarFn& scalar) {
  using opmath_t = at::opmath_type<scalar_t>;
  using VS = at::vec::Vectorized<scalar_t>;
  using VM = at::vec::Vectorized<opmath_t>;
  int64_t d = 0;
  if constexpr (std::is_same_v<scalar_t, opmath_t>) {
    for (; d + VM::size() <= n; d += VM::size()) vec(d).store(dst + d);
  } else {
    for (; d + VS::size() <= n; d += VS::size()) {
      at::vec::convert_from_float<scalar_t>(vec(d), vec(d + VM::size())).store(dst + d);
    }
  }
  for (; d < n; ++d) dst[d] = static_cast<scalar_t>(scalar(d));
}
#endif  // OPWRAP_PW_VECTORIZED

}  // namespace
}  // namespace opwrap::rt::rowwise
