// The functions of pointwise expressions (codegen/lang/pointwise.py), for both kinds of value a
// generated loop evaluates an expression over: a scalar (host and device code) and, on the
// CPU, an at::vec::Vectorized of one.  The generated text is the same for both.
//
// Everything here has internal linkage (an unnamed namespace): each kernel translation
// unit is compiled for one CPU capability (DEFAULT, AVX2, AVX-512), and a shared inline
// definition compiled with AVX-512 instructions must never be the one a DEFAULT loop calls.
//
// The TensorIterator the generated kernel wrappers build comes with it (pointwise_iterator.h).
#pragma once

#include <c10/macros/Macros.h>

#include <cmath>
#include <type_traits>

#include <opwrap/runtime/pointwise_iterator.h>

#if !defined(__CUDACC__) && !defined(__HIPCC__)
#include <ATen/OpMathType.h>
#include <ATen/cpu/vec/vec.h>
#include <ATen/native/cpu/Loops.h>

#include <cstring>
#include <numeric>
#include <tuple>
#define OPWRAP_PW_VECTORIZED 1
#endif

namespace opwrap::pw {
namespace {

template <typename T>
constexpr bool is_scalar_v = std::is_arithmetic_v<T>;

// The results of an expression with several (`sin(self), cos(self)`), in the order of the
// op's returns: scalars or Vectorized values, on the host and on the device.
template <typename T, int N>
struct Values {
  T v[N];
};

// ---------------------------------------------------------------- scalars
#define OPWRAP_PW_SCALAR_UNARY(name, expr)                                 \
  template <typename T, std::enable_if_t<is_scalar_v<T>, int> = 0>        \
  C10_HOST_DEVICE inline T name(T x) {                                     \
    return expr;                                                           \
  }

OPWRAP_PW_SCALAR_UNARY(neg, -x)
OPWRAP_PW_SCALAR_UNARY(abs, std::abs(x))
OPWRAP_PW_SCALAR_UNARY(exp, std::exp(x))
OPWRAP_PW_SCALAR_UNARY(expm1, std::expm1(x))
OPWRAP_PW_SCALAR_UNARY(log, std::log(x))
OPWRAP_PW_SCALAR_UNARY(log1p, std::log1p(x))
OPWRAP_PW_SCALAR_UNARY(log2, std::log2(x))
OPWRAP_PW_SCALAR_UNARY(log10, std::log10(x))
OPWRAP_PW_SCALAR_UNARY(sqrt, std::sqrt(x))
OPWRAP_PW_SCALAR_UNARY(rsqrt, T(1) / std::sqrt(x))
OPWRAP_PW_SCALAR_UNARY(reciprocal, T(1) / x)
OPWRAP_PW_SCALAR_UNARY(sin, std::sin(x))
OPWRAP_PW_SCALAR_UNARY(cos, std::cos(x))
OPWRAP_PW_SCALAR_UNARY(tan, std::tan(x))
OPWRAP_PW_SCALAR_UNARY(tanh, std::tanh(x))
OPWRAP_PW_SCALAR_UNARY(sigmoid, T(1) / (T(1) + std::exp(-x)))
OPWRAP_PW_SCALAR_UNARY(erf, std::erf(x))
OPWRAP_PW_SCALAR_UNARY(erfc, std::erfc(x))
OPWRAP_PW_SCALAR_UNARY(floor, std::floor(x))
OPWRAP_PW_SCALAR_UNARY(ceil, std::ceil(x))
OPWRAP_PW_SCALAR_UNARY(trunc, std::trunc(x))
#undef OPWRAP_PW_SCALAR_UNARY

// e^x, faster than exact: on the GPU, for float, 2^(x log2 e) by the multiprocessor's special
// function unit (__expf: within 2 + 1.2|x| ulp, 0 for x = -inf); elsewhere exact (the CPU's
// vectorized loops use at::vec's exp_u20, below).
template <typename T, std::enable_if_t<is_scalar_v<T>, int> = 0>
C10_HOST_DEVICE inline T fast_exp(T x) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<T, float>) return __expf(x);
#endif
  return std::exp(x);
}

// NaN-propagating, as torch.maximum and torch.minimum (x != x only for NaN); one instruction for
// float on sm_80 and later (max.NaN).
template <typename T, std::enable_if_t<is_scalar_v<T>, int> = 0>
C10_HOST_DEVICE inline T maximum(T a, T b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (std::is_same_v<T, float>) {
    float r;
    asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
  }
#endif
  return a != a ? a : (b != b ? b : (a > b ? a : b));
}
template <typename T, std::enable_if_t<is_scalar_v<T>, int> = 0>
C10_HOST_DEVICE inline T minimum(T a, T b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (std::is_same_v<T, float>) {
    float r;
    asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
  }
#endif
  return a != a ? a : (b != b ? b : (a < b ? a : b));
}
template <typename T, std::enable_if_t<is_scalar_v<T>, int> = 0>
C10_HOST_DEVICE inline T relu(T x) {
  return maximum(x, T(0));
}
template <typename T, std::enable_if_t<is_scalar_v<T>, int> = 0>
C10_HOST_DEVICE inline T clamp(T x, T lo, T hi) {
  return minimum(maximum(x, lo), hi);
}
template <typename T, std::enable_if_t<is_scalar_v<T>, int> = 0>
C10_HOST_DEVICE inline T pow(T a, T b) {
  return std::pow(a, b);
}
template <typename T, std::enable_if_t<is_scalar_v<T>, int> = 0>
C10_HOST_DEVICE inline T where(bool condition, T a, T b) {
  return condition ? a : b;
}

// sin(x) and cos(x) together: the pointwise compiler calls this where an expression takes
// both of one value, so they share one argument reduction.
template <typename T, std::enable_if_t<is_scalar_v<T>, int> = 0>
C10_HOST_DEVICE inline Values<T, 2> sincos(T x) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  T s, c;
  if constexpr (std::is_same_v<T, float>) {
    ::sincosf(x, &s, &c);
  } else {
    ::sincos(x, &s, &c);
  }
  return {{s, c}};
#else
  return {{std::sin(x), std::cos(x)}};
#endif
}

// ---------------------------------------------------------------- vectors (CPU)
#ifdef OPWRAP_PW_VECTORIZED
template <typename T>
using Vec = at::vec::Vectorized<T>;

#define OPWRAP_PW_VECTOR_METHOD(name, method) \
  template <typename T>                       \
  inline Vec<T> name(const Vec<T>& x) {       \
    return x.method();                        \
  }

// fast_exp: at::vec's exp_u20 (within 20 ulp, as aten's softmax computes it), with NaN kept NaN:
// exp_u20 gives inf for NaN in its AVX2 and AVX-512 builds (and so softmax over a row holding
// inf, exp(inf - inf) in it, summed to inf: 0 everywhere but NaN where the inf was, where
// torch.softmax and the scalar rest's std::exp give NaN throughout).
template <typename T>
inline Vec<T> fast_exp(const Vec<T>& x) {
  return Vec<T>::blendv(x.exp_u20(), x, x.isnan());
}

OPWRAP_PW_VECTOR_METHOD(neg, neg)
OPWRAP_PW_VECTOR_METHOD(abs, abs)
OPWRAP_PW_VECTOR_METHOD(exp, exp)
OPWRAP_PW_VECTOR_METHOD(expm1, expm1)
OPWRAP_PW_VECTOR_METHOD(log, log)
OPWRAP_PW_VECTOR_METHOD(log1p, log1p)
OPWRAP_PW_VECTOR_METHOD(log2, log2)
OPWRAP_PW_VECTOR_METHOD(log10, log10)
OPWRAP_PW_VECTOR_METHOD(sqrt, sqrt)
OPWRAP_PW_VECTOR_METHOD(rsqrt, rsqrt)
OPWRAP_PW_VECTOR_METHOD(reciprocal, reciprocal)
OPWRAP_PW_VECTOR_METHOD(sin, sin)
OPWRAP_PW_VECTOR_METHOD(cos, cos)
OPWRAP_PW_VECTOR_METHOD(tan, tan)
OPWRAP_PW_VECTOR_METHOD(tanh, tanh)
OPWRAP_PW_VECTOR_METHOD(erf, erf)
OPWRAP_PW_VECTOR_METHOD(erfc, erfc)
OPWRAP_PW_VECTOR_METHOD(floor, floor)
OPWRAP_PW_VECTOR_METHOD(ceil, ceil)
OPWRAP_PW_VECTOR_METHOD(trunc, trunc)
#undef OPWRAP_PW_VECTOR_METHOD

template <typename T>
inline Vec<T> sigmoid(const Vec<T>& x) {
  return (Vec<T>(T(1)) + x.neg().exp()).reciprocal();
}
template <typename T>
inline Vec<T> maximum(const Vec<T>& a, const Vec<T>& b) {
  return at::vec::maximum(a, b);
}
template <typename T>
inline Vec<T> minimum(const Vec<T>& a, const Vec<T>& b) {
  return at::vec::minimum(a, b);
}
template <typename T>
inline Vec<T> relu(const Vec<T>& x) {
  return at::vec::maximum(x, Vec<T>(T(0)));
}
template <typename T>
inline Vec<T> clamp(const Vec<T>& x, const Vec<T>& lo, const Vec<T>& hi) {
  return at::vec::minimum(at::vec::maximum(x, lo), hi);
}
template <typename T>
inline Vec<T> pow(const Vec<T>& a, const Vec<T>& b) {
  return a.pow(b);
}
// Sleef's sincos where at::vec uses Sleef for sin and cos (AVX2, AVX-512; the same accuracy as
// its sin() and cos(): 3.5 ulp for float, 1 ulp for double), else at::vec's sin() and cos().
#if defined(CPU_CAPABILITY_AVX512)
#define OPWRAP_PW_SLEEF_SINCOS_F Sleef_sincosf16_u35
#define OPWRAP_PW_SLEEF_SINCOS_D Sleef_sincosd8_u10
#elif defined(CPU_CAPABILITY_AVX2)
#define OPWRAP_PW_SLEEF_SINCOS_F Sleef_sincosf8_u35
#define OPWRAP_PW_SLEEF_SINCOS_D Sleef_sincosd4_u10
#endif
template <typename T>
inline Values<Vec<T>, 2> sincos(const Vec<T>& x) {
#ifdef OPWRAP_PW_SLEEF_SINCOS_F
  if constexpr (std::is_same_v<T, float>) {
    const auto r = OPWRAP_PW_SLEEF_SINCOS_F(x);
    return {{Vec<T>(r.x), Vec<T>(r.y)}};
  } else if constexpr (std::is_same_v<T, double>) {
    const auto r = OPWRAP_PW_SLEEF_SINCOS_D(x);
    return {{Vec<T>(r.x), Vec<T>(r.y)}};
  }
#undef OPWRAP_PW_SLEEF_SINCOS_F
#undef OPWRAP_PW_SLEEF_SINCOS_D
#endif
  return {{x.sin(), x.cos()}};
}

// A vector comparison is a mask with all bits of the true lanes set.
template <typename T>
inline Vec<T> where(const Vec<T>& mask, const Vec<T>& a, const Vec<T>& b) {
  return Vec<T>::blendv(b, a, mask);
}

// ---------------------------------------------------------------- CPU loops
// Short rows against an operand broadcast over them (a bias [C] against x [R, C], C small).
//
// TensorIterator coalesces every dimension it can, but not the rows of such an iterator:
// the bias's outer stride is 0, so for_each calls the 2-D loop with rows of C elements, and
// aten's vectorized inner loop (at::native::vectorized_loop) runs whole steps of two
// Vectorized only, the rest of each row scalar: with C = 16 floats and AVX-512 (a step of
// 32) every element is computed by the scalar loop.  aten's own x + bias runs the same way.
//
// BroadcastRows wraps a 2-D loop of for_each (aten's VectorizedLoop2d, or the loop of
// several outputs below) and, where every operand is either laid out flat over the two
// dimensions (rows of C contiguous elements, one after the other: x, the output) or
// broadcast over the rows (outer stride 0: the bias), copies the broadcast operands' row
// `rows` times into a small buffer on the stack (a tile, a few KiB) and hands the wrapped
// loop runs of `rows` rows at once, every operand contiguous.  The inner loop is still
// aten's, over runs of `rows * C` elements, a multiple of its step where that fits.  Other
// layouts (a row longer than half a tile, a non-contiguous operand, a broadcast output,
// inner-dimension broadcasts, which aten's loop vectorizes itself) go to the wrapped loop as
// they come.  This is the one layout TensorIterator leaves to the loop; a hand-rolled
// vector loop over `i % C` would duplicate at::vec's loads, conversions and tails.
template <typename scalar_t, int kTensors, int kOut, typename Loop2d>
struct BroadcastRows {
  Loop2d loop;

  static constexpr int64_t kSize = sizeof(scalar_t);
  static constexpr int64_t kTileBytes = 8192;
  static constexpr int64_t kTile = kTileBytes / kSize;  // elements of one tile
  // The inner loop's step: two Vectorized at once (at::native::vectorized_loop).
  static constexpr int64_t kStep = 2 * at::vec::Vectorized<scalar_t>::size();

  void operator()(char** base, const int64_t* strides, int64_t size0, int64_t size1) {
    const int64_t* outer = strides + kTensors;
    bool flat = size0 > 0 && size1 > 1 && 2 * size0 <= kTile;
    bool broadcast[kTensors] = {};
    bool any = false;
    for (int k = 0; k < kTensors && flat; ++k) {
      if (k >= kOut && outer[k] == 0) {
        broadcast[k] = any = true;
      } else {
        flat = strides[k] == kSize && outer[k] == size0 * kSize;
      }
    }
    if (!flat || !any) {
      loop(base, strides, size0, size1);
      return;
    }
    // Rows per run: as many as a tile holds, a multiple of those that make whole steps.
    int64_t rows = kTile / size0;
    const int64_t whole = kStep / std::gcd(size0, kStep);
    if (rows >= whole) rows -= rows % whole;
    rows = std::min(rows, size1);
    const int64_t n = rows * size0;
    alignas(64) char tiles[kTensors - kOut][kTileBytes];
    char* data[kTensors];
    int64_t run_strides[2 * kTensors];
    for (int k = 0; k < kTensors; ++k) {
      data[k] = base[k];
      run_strides[k] = kSize;
      run_strides[kTensors + k] = n * kSize;
      if (broadcast[k]) {
        char* tile = tiles[k - kOut];
        for (int64_t c = 0; c < size0; ++c) std::memcpy(tile + c * kSize, base[k] + c * strides[k], kSize);
        for (int64_t r = 1; r < rows; ++r) std::memcpy(tile + r * size0 * kSize, tile, size0 * kSize);
        data[k] = tile;
        run_strides[kTensors + k] = 0;
      }
    }
    const int64_t runs = size1 / rows;
    loop(data, run_strides, n, runs);
    if (const int64_t rest = size1 - runs * rows) {
      for (int k = 0; k < kTensors; ++k) {
        if (!broadcast[k]) data[k] += runs * n * kSize;
      }
      loop(data, run_strides, rest * size0, 1);
    }
  }
};

// at::native::cpu_kernel_vec, with its 2-D loop (VectorizedLoop2d) run through BroadcastRows.
template <typename scalar_t, typename ScalarOp, typename VecOp>
void cpu_kernel_vec(at::TensorIteratorBase& iter, const ScalarOp& sop, const VecOp& vop) {
  using traits = function_traits<ScalarOp>;
  constexpr int kTensors = traits::arity + 1;
  TORCH_INTERNAL_ASSERT(iter.ninputs() == traits::arity);
  TORCH_INTERNAL_ASSERT(iter.noutputs() == 1);
  TORCH_INTERNAL_ASSERT(!at::native::needs_dynamic_casting<ScalarOp>::check(iter));
  using Loop = at::native::VectorizedLoop2d<ScalarOp, VecOp>;
  iter.for_each(BroadcastRows<scalar_t, kTensors, 1, Loop>{Loop(sop, vop)}, at::internal::GRAIN_SIZE);
  iter.cast_outputs();
}

// The 2-D loop of an expression with several results (at::native::cpu_kernel_vec takes
// one): vectorized over contiguous rows as cpu_kernel_vec is, scalar elsewhere.  `sop(const
// opmath_t* x)` and `vop(const Vectorized<opmath_t>* x)` take the inputs in the iterator's
// order and return Values of kOut; reduced floating types compute in float, each
// Vectorized<scalar_t> as two halves.
template <typename scalar_t, int kOut, int kIn, typename ScalarOp, typename VecOp>
struct OutputsLoop2d {
  ScalarOp sop;
  VecOp vop;

  void operator()(char** base, const int64_t* strides, int64_t size0, int64_t size1) const {
    char* data[kOut + kIn];
    for (int k = 0; k < kOut + kIn; ++k) data[k] = base[k];
    for (int64_t r = 0; r < size1; ++r) {
      row(data, strides, size0);
      for (int k = 0; k < kOut + kIn; ++k) data[k] += strides[kOut + kIn + k];
    }
  }

  void row(char** data, const int64_t* strides, int64_t n) const {
    using opmath_t = at::opmath_type<scalar_t>;
    using V = at::vec::Vectorized<scalar_t>;
    using VM = at::vec::Vectorized<opmath_t>;
    constexpr int64_t kSize = sizeof(scalar_t);
    bool contiguous = true;
    for (int k = 0; k < kOut + kIn; ++k) contiguous = contiguous && strides[k] == kSize;
    int64_t i = 0;
    if (contiguous) {
      for (; i + V::size() <= n; i += V::size()) {
        if constexpr (c10::is_reduced_floating_point_v<scalar_t>) {
          VM lo[kIn], hi[kIn];
          for (int k = 0; k < kIn; ++k) {
            std::tie(lo[k], hi[k]) = at::vec::convert_to_float<scalar_t>(V::loadu(data[kOut + k] + i * kSize));
          }
          const auto a = vop(lo);
          const auto b = vop(hi);
          for (int k = 0; k < kOut; ++k) {
            at::vec::convert_from_float<scalar_t>(a.v[k], b.v[k]).store(data[k] + i * kSize);
          }
        } else {
          V x[kIn];
          for (int k = 0; k < kIn; ++k) x[k] = V::loadu(data[kOut + k] + i * kSize);
          const auto r = vop(x);
          for (int k = 0; k < kOut; ++k) r.v[k].store(data[k] + i * kSize);
        }
      }
    }
    for (; i < n; ++i) {
      opmath_t x[kIn];
      for (int k = 0; k < kIn; ++k) {
        x[k] = static_cast<opmath_t>(*reinterpret_cast<const scalar_t*>(data[kOut + k] + i * strides[kOut + k]));
      }
      const auto r = sop(x);
      for (int k = 0; k < kOut; ++k) *reinterpret_cast<scalar_t*>(data[k] + i * strides[k]) = static_cast<scalar_t>(r.v[k]);
    }
  }
};

// The CPU loop of an expression with several results: TensorIterator's for_each (parallel,
// any strides) over OutputsLoop2d, through BroadcastRows.
template <typename scalar_t, int kOut, int kIn, typename ScalarOp, typename VecOp>
void cpu_kernel_outputs(at::TensorIteratorBase& iter, const ScalarOp& sop, const VecOp& vop) {
  using Loop = OutputsLoop2d<scalar_t, kOut, kIn, ScalarOp, VecOp>;
  iter.for_each(BroadcastRows<scalar_t, kOut + kIn, kOut, Loop>{Loop{sop, vop}}, at::internal::GRAIN_SIZE);
}
#endif  // OPWRAP_PW_VECTORIZED

}  // namespace

// What a row program computes once a row (codegen/lang/rowwise.py, ROW_FUNCTIONS): here the
// same functions.
namespace per_row {
using namespace ::opwrap::pw;
}  // namespace per_row
}  // namespace opwrap::pw
