// Support of the stable target's generated row-wise kernels (codegen/api/stable_rowwise.py,
// templates/stable/rowwise.h.j2): the reductions, a row in the computation type, the CPU
// capability a loop is chosen for at run time (the CUDA kernel's sweep is the full target's:
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
#include <cstring>
#include <limits>
#include <memory>
#include <string_view>
#include <type_traits>

namespace opwrap::stable::rowwise {
namespace {

using opwrap::pw::opmath_t;  // float for float16 and bfloat16, as at::opmath_type

// A reduction: its identity and how two partial results combine (max and min propagate NaN).
// On the CPU a pass over a row is a loop over each chunk of kChunk elements under `#pragma omp
// simd` with a reduction clause per reduction (templates/stable/rowwise.h.j2; -fopenmp-simd: no
// OpenMP runtime): `step` is one lane's update; the clause combines the lanes' partial results
// with its operator ("+", "max", "min") into the value so far, a chunk at a time; `result` is
// the row's value.  The clause's max and min are not NaN-propagating (a lane's `step` drops a
// NaN), so a max or min pass also or-reduces whether a value was NaN, and `result` is NaN then.
//
// Why chunks: a lane's partial sum adds its values one after another, so a row of 65536 floats
// summed in 16 lanes (AVX-512) had 4096 additions' rounding in each, and softmax's error there
// was 1.1e-5 (3.2e-5 in 4 lanes, the default build; the full target's at::vec loops 4e-6).  In
// chunks of 512 a lane adds at most 128 values (2.3e-6), and each chunk's fold of the lanes
// costs a few instructions.
constexpr int64_t kChunk = 512;

// From this row length on, a loop that calls no floating-point function an element reads a
// bfloat16 row input as it is, converting each element where it is used (codegen's
// stable_rowwise._direct says which loops and why; float16 never: kReadDirectly below); the
// other loops read a chunk converted into a float buffer first (load_row).  Measured: bfloat16
// layer_norm_backward and softmax_backward gain from rows of 512 on, layer_norm loses below.
constexpr int64_t kDirectRow = 512;
// A shorter row is one chunk: its start converts the row inputs into the buffers once, each
// loop then reads them there (bfloat16's inputs that _once leaves out are read as they are,
// short_row).
static_assert(kDirectRow <= kChunk, "rows shorter than kDirectRow must be one chunk");

// Whether those loops read a row of this type as it is: bfloat16, whose conversion is a shift;
// not float16, whose rows the loops read converted into a buffer (load_row: F16C, 16 elements an
// instruction in the AVX-512 build), as GCC converts each float16 element it reads with integer
// operations (softmax_backward over float16 rows of 1024, one thread, AVX-512: 0.20x of the full
// target's speed read directly).
template <typename scalar_t>
constexpr bool kReadDirectly = !std::is_same_v<scalar_t, c10::Half>;

// Below this row length, a pass of those loops that only sums runs 4 lanes at a time (`omp simd
// simdlen(4)`, a reduction clause); from it on, a vector's lanes at a time (sum_lanes).
// At a vector's width (16 floats) GCC 12 runs such a row mostly in the loop's scalar rest and
// folds the 16 lanes with 16 dependent adds after it; rows of 8 to 24, full target's time /
// stable's, one thread, AVX-512: float32 layer_norm 0.57x-0.61x against 0.72x-1.18x in 4
// lanes, bfloat16 softmax_backward 0.59x-0.73x against 0.81x-1.68x.  A vector's lanes summed
// by sum_lanes lose to 4 lanes on bfloat16 rows of 16 (softmax_backward 0.75x against 1.9x).
// From rows of 32 on, for loops of exp or log at any length, and for softmax's max pass
// (float32 rows of 16: 1.14x against 0.45x), 4 lanes are slower.
constexpr int64_t kShortRow = 32;

struct Sum {
  template <typename T>
  static C10_HOST_DEVICE T identity() {
    return T(0);
  }
  template <typename T>
  static C10_HOST_DEVICE T combine(T a, T b) {
    return a + b;
  }
  template <typename T>
  static T step(T acc, T v) {
    return acc + v;
  }
  template <typename T>
  static T result(T acc, bool /*nan*/) {
    return acc;
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
  template <typename T>
  static T step(T acc, T v) {
    return v > acc ? v : acc;
  }
  template <typename T>
  static T result(T acc, bool nan) {
    return nan ? std::numeric_limits<T>::quiet_NaN() : acc;
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
  template <typename T>
  static T step(T acc, T v) {
    return v < acc ? v : acc;
  }
  template <typename T>
  static T result(T acc, bool nan) {
    return nan ? std::numeric_limits<T>::quiet_NaN() : acc;
  }
};

#if !defined(__CUDACC__) && !defined(__HIPCC__)
// n elements at p in the computation type: p itself where scalar_t is it, else converted
// into `buffer` (n elements): a column once a call, and a row input's chunk (kChunk) before
// each loop reads it, so that the omp simd loops read floats only (mixing bfloat16 loads and
// float arithmetic, GCC chose vectors that left rows of 16 at 0.4x to 0.7x).
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

// The sum of W lanes (W a power of two), which a pass of sums only (a direct pass: codegen's
// stable_rowwise.plan) adds up a vector's lanes at a time (four vectors' over a chunk of a row
// longer than one chunk: four chains of additions), each lane its own partial sum: folded
// as a tree of vector additions, halves added until four lanes are left.  The loops' `omp simd`
// reduction clauses leave that fold to GCC 12, which stores the vector and adds its 16 lanes one
// after another, 16 dependent scalar additions a chunk: most of the time of a row of 32 floats
// (one thread, AVX-512, float32 softmax_backward over rows of 32: 0.59x of the full target's
// speed with the clause).  GCC's vector extensions, so that each CPU build's loop inlines the
// fold with its own vectors (always_inline: compiled here for the default target).
#if defined(__GNUC__)
template <int W, typename T, typename V>
[[gnu::always_inline]] inline T sum_vector(const V& v) {
  if constexpr (W == 2) {
    return v[0] + v[1];
  } else if constexpr (W == 4) {
    return (v[0] + v[2]) + (v[1] + v[3]);
  } else {
    typedef T Half __attribute__((vector_size(W / 2 * sizeof(T))));
    Half a;
    Half b;
    std::memcpy(&a, &v, sizeof a);
    std::memcpy(&b, reinterpret_cast<const char*>(&v) + sizeof a, sizeof b);
    const Half sum = a + b;
    return sum_vector<W / 2, T>(sum);
  }
}
#endif
template <int W, typename T>
[[gnu::always_inline]] inline T sum_lanes(const T* lanes) {
  static_assert(W > 0 && (W & (W - 1)) == 0, "a vector's lanes are a power of two");
  if constexpr (W == 1) {
    return lanes[0];
  } else {
#if defined(__GNUC__)
    typedef T Vector __attribute__((vector_size(W * sizeof(T))));
    Vector v;
    std::memcpy(&v, lanes, sizeof v);
    return sum_vector<W, T>(v);
#else
    T half[W / 2];
    for (int k = 0; k < W / 2; ++k) half[k] = lanes[k] + lanes[k + W / 2];
    return sum_lanes<W / 2>(half);
#endif
  }
}

// A short row input that the row's start does not convert (codegen's stable_rowwise._once), as a
// loop reads it: the row itself (kReadDirectly), else the buffer the row's start converted it into.
template <typename scalar_t>
inline auto short_row(const scalar_t* row, const opmath_t<scalar_t>* buffer) {
  if constexpr (kReadDirectly<scalar_t>) {
    return row;
  } else {
    return buffer;
  }
}

// The CPU builds of a loop: which one this CPU runs (<opwrap/stable/math.h>).
using opwrap::pw::Capability;
using opwrap::pw::capability;
#endif  // !__CUDACC__

}  // namespace
}  // namespace opwrap::stable::rowwise
