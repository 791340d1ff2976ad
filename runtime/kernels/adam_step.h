// Hand-written kernel of opwrap::adam_step: one Adam step over lists of parameters, moments
// and gradients, as torch._fused_adam_ computes it (amsgrad off).  The wrapper has checked
// every element's device and dtype, the shape rule (every list as long as params, the i-th
// elements of params[i]'s shape, each step 0-d), that no written element shares memory with any
// other element or argument, and passes contiguous elements (a non-contiguous written one is a
// copy that the wrapper writes back).
#pragma once

#include <ATen/OpMathType.h>
#include <ATen/core/Tensor.h>
#include <c10/macros/Macros.h>
#include <c10/util/Exception.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "common.h"

// The AVX2 loop, where common.h's OPWRAP_AVX2_CLONES allows it, in the CPU build only (the
// CUDA unit includes this header for AdamUpdate; nvcc need not read x86 intrinsics).
#if OPWRAP_AVX2_CLONES && !defined(__CUDACC__)
#define OPWRAP_ADAM_AVX2 1
#include <immintrin.h>
#else
#define OPWRAP_ADAM_AVX2 0
#endif

namespace opwrap::kernels {

// The per-tensor constants of a step t, in double as torch computes them: lr / (1 - beta1^t)
// and sqrt(1 - beta2^t).
struct AdamCoefficients {
  double step_size, bias_correction2_sqrt;
  C10_HOST_DEVICE static AdamCoefficients at_step(double t, double lr, double beta1, double beta2) {
    return {lr / (1 - ::pow(beta1, t)), ::sqrt(1 - ::pow(beta2, t))};
  }
};

// The update of element i, in opmath_t (float for bfloat16, as torch's fused kernels): the
// moments are stored in scalar_t, and the parameter is updated from the unrounded ones.
template <typename scalar_t>
struct AdamUpdate {
  using opmath_t = at::opmath_type<scalar_t>;
  scalar_t* param;
  scalar_t* exp_avg;
  scalar_t* exp_avg_sq;
  const scalar_t* grad;
  opmath_t beta1, beta2, weight_decay, eps;
  bool maximize;

  C10_HOST_DEVICE void operator()(int64_t i, opmath_t step_size, opmath_t bias_correction2_sqrt) const {
    const opmath_t p = param[i];
    opmath_t g = grad[i];
    if (maximize) g = -g;
    if (weight_decay != opmath_t(0)) g += weight_decay * p;  // Adam's L2 term (not AdamW's decoupled one)
    opmath_t m = exp_avg[i];
    m += (opmath_t(1) - beta1) * (g - m);
    const opmath_t v = beta2 * opmath_t(exp_avg_sq[i]) + (opmath_t(1) - beta2) * g * g;
    exp_avg[i] = static_cast<scalar_t>(m);
    exp_avg_sq[i] = static_cast<scalar_t>(v);
    param[i] = static_cast<scalar_t>(p - step_size * m / (::sqrt(v) / bias_correction2_sqrt + eps));
  }
};

template <typename scalar_t>
AdamUpdate<scalar_t> adam_update(const at::Tensor& param, const at::Tensor& exp_avg, const at::Tensor& exp_avg_sq,
                                 const at::Tensor& grad, double beta1, double beta2, double weight_decay, double eps,
                                 bool maximize) {
  using opmath_t = at::opmath_type<scalar_t>;
  return {param.mutable_data_ptr<scalar_t>(), exp_avg.mutable_data_ptr<scalar_t>(),
          exp_avg_sq.mutable_data_ptr<scalar_t>(), grad.const_data_ptr<scalar_t>(), static_cast<opmath_t>(beta1),
          static_cast<opmath_t>(beta2), static_cast<opmath_t>(weight_decay), static_cast<opmath_t>(eps), maximize};
}

#if OPWRAP_ADAM_AVX2
// Eight floats from float or bfloat16 memory (a bfloat16 is a float's top half), and back (to
// the nearest bfloat16, ties to even, a NaN a NaN: c10::BFloat16's rounding).
__attribute__((target("avx2,fma"))) inline __m256 adam_load8(const float* p) { return _mm256_loadu_ps(p); }

__attribute__((target("avx2,fma"))) inline __m256 adam_load8(const c10::BFloat16* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

__attribute__((target("avx2,fma"))) inline void adam_store8(float* p, __m256 v) { _mm256_storeu_ps(p, v); }

__attribute__((target("avx2,fma"))) inline void adam_store8(c10::BFloat16* p, __m256 v) {
  const __m256i u = _mm256_castps_si256(v);
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7FFF)), odd), 16);
  r = _mm256_blendv_epi8(r, _mm256_set1_epi32(0x7FC0), _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
  const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0xD8);  // 16 bits a lane, in order
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(packed));
}

// AdamUpdate over [begin, end), eight elements at a time (float and bfloat16, computing in
// float); returns where it stopped (the scalar loop does the rest).  The sqrt of a vector is
// one instruction here, where the scalar loop's std::sqrt keeps GCC from vectorizing (errno).
template <typename scalar_t>
__attribute__((target("avx2,fma"))) int64_t adam_update_avx2(const AdamUpdate<scalar_t>& u, float step_size,
                                                             float bias_correction2_sqrt, int64_t begin, int64_t end) {
  const __m256 one_minus_beta1 = _mm256_set1_ps(1.0f - u.beta1), beta2 = _mm256_set1_ps(u.beta2);
  const __m256 one_minus_beta2 = _mm256_set1_ps(1.0f - u.beta2), decay = _mm256_set1_ps(u.weight_decay);
  const __m256 eps = _mm256_set1_ps(u.eps), size = _mm256_set1_ps(step_size);
  const __m256 correction = _mm256_set1_ps(bias_correction2_sqrt), sign = _mm256_set1_ps(-0.0f);
  const bool decayed = u.weight_decay != 0.0f;
  int64_t i = begin;
  for (; i + 8 <= end; i += 8) {
    const __m256 p = adam_load8(u.param + i);
    __m256 g = adam_load8(u.grad + i);
    if (u.maximize) g = _mm256_xor_ps(g, sign);
    if (decayed) g = _mm256_fmadd_ps(decay, p, g);
    __m256 m = adam_load8(u.exp_avg + i);
    m = _mm256_fmadd_ps(one_minus_beta1, _mm256_sub_ps(g, m), m);
    const __m256 v = _mm256_fmadd_ps(one_minus_beta2, _mm256_mul_ps(g, g), _mm256_mul_ps(beta2, adam_load8(u.exp_avg_sq + i)));
    adam_store8(u.exp_avg + i, m);
    adam_store8(u.exp_avg_sq + i, v);
    const __m256 denom = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(v), correction), eps);
    adam_store8(u.param + i, _mm256_sub_ps(p, _mm256_div_ps(_mm256_mul_ps(size, m), denom)));
  }
  return i;
}
#endif

template <typename scalar_t, typename step_t>
void adam_step_cpu(at::TensorList params, at::TensorList exp_avgs, at::TensorList exp_avg_sqs, at::TensorList grads,
                   at::TensorList state_steps, double lr, double beta1, double beta2, double weight_decay, double eps,
                   bool maximize) {
  using opmath_t = at::opmath_type<scalar_t>;
  for (size_t i = 0; i < params.size(); ++i) {
    const double t = static_cast<double>(*state_steps[i].const_data_ptr<step_t>());
    const AdamCoefficients c = AdamCoefficients::at_step(t, lr, beta1, beta2);
    const opmath_t step_size = static_cast<opmath_t>(c.step_size);
    const opmath_t bias_correction2_sqrt = static_cast<opmath_t>(c.bias_correction2_sqrt);
    const AdamUpdate<scalar_t> update =
        adam_update<scalar_t>(params[i], exp_avgs[i], exp_avg_sqs[i], grads[i], beta1, beta2, weight_decay, eps, maximize);
    at::parallel_for(0, params[i].numel(), kGrainSize, [&](int64_t begin, int64_t end) {
      const AdamUpdate<scalar_t> u = update;  // a local copy: its fields stay in registers
      int64_t j = begin;
#if OPWRAP_ADAM_AVX2
      if constexpr (std::is_same_v<scalar_t, float> || std::is_same_v<scalar_t, c10::BFloat16>) {
        static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
        if (avx2) j = adam_update_avx2(u, step_size, bias_correction2_sqrt, begin, end);
      }
#endif
      for (; j < end; ++j) u(j, step_size, bias_correction2_sqrt);
    });
  }
}

}  // namespace opwrap::kernels
