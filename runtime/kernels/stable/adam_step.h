// opwrap::adam_step against torch's stable API: one Adam step over written tensor lists, as
// torch._fused_adam_ with amsgrad=False, element by element in the op's math type (float for
// bfloat16), as ../adam_step.h computes it in the full target (whose AVX2 loop for float32 and
// bfloat16 this one leaves to the compiler's vectorizer: see adam_range).
#pragma once

#include "common.h"

#include <opwrap/stable/math.h>
#include <opwrap/stable/pointwise.h>
#include <torch/headeronly/macros/Macros.h>
#include <torch/headeronly/util/BFloat16.h>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

namespace opwrap::kernels {

// The type each element is computed in: float for a reduced type (at::opmath_type's rule).
template <typename scalar_t>
using adam_opmath_t = std::conditional_t<std::is_same_v<scalar_t, c10::BFloat16>, float, scalar_t>;

// step_size = lr / (1 - beta1^t) and sqrt(1 - beta2^t), in double, from step t.
struct AdamStepCoefficients {
  double step_size, bias_correction2_sqrt;
  C10_HOST_DEVICE static AdamStepCoefficients at_step(double t, double lr, double beta1, double beta2) {
    return {lr / (1 - ::pow(beta1, t)), ::sqrt(1 - ::pow(beta2, t))};
  }
};

// One element's update (shared with adam_step.cuh).
template <typename scalar_t>
struct AdamElement {
  using opmath_t = adam_opmath_t<scalar_t>;
  scalar_t* param;
  scalar_t* exp_avg;
  scalar_t* exp_avg_sq;
  const scalar_t* grad;
  opmath_t beta1, beta2, weight_decay, eps;
  bool maximize;

  // pw::load and pw::store: bfloat16 converted in integer arithmetic, which vectorizes (c10's
  // conversions, with their branches, keep a loop scalar).
  C10_HOST_DEVICE void operator()(int64_t i, opmath_t step_size, opmath_t bias_correction2_sqrt) const {
    using opwrap::pw::load;
    using opwrap::pw::store;
    const opmath_t p = load(param[i]);
    opmath_t g = load(grad[i]);
    if (maximize) g = -g;
    if (weight_decay != opmath_t(0)) g += weight_decay * p;  // Adam's L2 term (not AdamW's decoupled one)
    opmath_t m = load(exp_avg[i]);
    m += (opmath_t(1) - beta1) * (g - m);
    const opmath_t v = beta2 * load(exp_avg_sq[i]) + (opmath_t(1) - beta2) * g * g;
    exp_avg[i] = store<scalar_t>(m);
    exp_avg_sq[i] = store<scalar_t>(v);
    param[i] = store<scalar_t>(p - step_size * m / (std::sqrt(v) / bias_correction2_sqrt + eps));
  }
};

template <typename scalar_t>
AdamElement<scalar_t> adam_element(const torch::stable::Tensor& param, const torch::stable::Tensor& exp_avg,
                                   const torch::stable::Tensor& exp_avg_sq, const torch::stable::Tensor& grad,
                                   double beta1, double beta2, double weight_decay, double eps, bool maximize) {
  using opmath_t = adam_opmath_t<scalar_t>;
  return {param.mutable_data_ptr<scalar_t>(), exp_avg.mutable_data_ptr<scalar_t>(),
          exp_avg_sq.mutable_data_ptr<scalar_t>(), grad.const_data_ptr<scalar_t>(), static_cast<opmath_t>(beta1),
          static_cast<opmath_t>(beta2), static_cast<opmath_t>(weight_decay), static_cast<opmath_t>(eps), maximize};
}

// Elements [begin, end), compiled once per instruction set (OPWRAP_PW_CLONES: the generated
// pointwise loops' AVX2 and AVX-512 builds, chosen when the library loads).  A reduced type
// goes through float buffers a chunk at a time: its elements converted in loops of their own,
// then the float update, then the results converted back.  In one loop, converting and
// computing together, GCC (12) vectorizes none of it ("unsupported data-type float": the
// loop's 16-bit and 32-bit vectors do not fit one vectorization factor); the results are the
// same, each computed in float and rounded once.
template <typename scalar_t>
OPWRAP_PW_CLONES void adam_range(const AdamElement<scalar_t> u, adam_opmath_t<scalar_t> step_size,
                                 adam_opmath_t<scalar_t> correction, int64_t begin, int64_t end) {
  if constexpr (std::is_same_v<adam_opmath_t<scalar_t>, scalar_t>) {
    for (int64_t j = begin; j < end; ++j) u(j, step_size, correction);
  } else {
    using opwrap::pw::load;
    using opwrap::pw::store;
    using opmath_t = adam_opmath_t<scalar_t>;
    constexpr int64_t kChunk = 512;  // 4 buffers of 2 KB: in L1
    opmath_t p[kChunk], m[kChunk], v[kChunk], g[kChunk];
    const AdamElement<opmath_t> f{p, m, v, g, u.beta1, u.beta2, u.weight_decay, u.eps, u.maximize};
    for (int64_t j0 = begin; j0 < end; j0 += kChunk) {
      const int64_t n = std::min(kChunk, end - j0);
      for (int64_t i = 0; i < n; ++i) p[i] = load(u.param[j0 + i]);
      for (int64_t i = 0; i < n; ++i) m[i] = load(u.exp_avg[j0 + i]);
      for (int64_t i = 0; i < n; ++i) v[i] = load(u.exp_avg_sq[j0 + i]);
      for (int64_t i = 0; i < n; ++i) g[i] = load(u.grad[j0 + i]);
      for (int64_t i = 0; i < n; ++i) f(i, step_size, correction);
      for (int64_t i = 0; i < n; ++i) u.param[j0 + i] = store<scalar_t>(p[i]);
      for (int64_t i = 0; i < n; ++i) u.exp_avg[j0 + i] = store<scalar_t>(m[i]);
      for (int64_t i = 0; i < n; ++i) u.exp_avg_sq[j0 + i] = store<scalar_t>(v[i]);
    }
  }
}

template <typename scalar_t, typename step_t>
void adam_step_cpu(const std::vector<torch::stable::Tensor>& params, const std::vector<torch::stable::Tensor>& exp_avgs,
                   const std::vector<torch::stable::Tensor>& exp_avg_sqs, const std::vector<torch::stable::Tensor>& grads,
                   const std::vector<torch::stable::Tensor>& state_steps, double lr, double beta1, double beta2,
                   double weight_decay, double eps, bool maximize) {
  using opmath_t = adam_opmath_t<scalar_t>;
  for (size_t i = 0; i < params.size(); ++i) {
    const double t = static_cast<double>(*state_steps[i].const_data_ptr<step_t>());
    const AdamStepCoefficients c = AdamStepCoefficients::at_step(t, lr, beta1, beta2);
    const auto step_size = static_cast<opmath_t>(c.step_size);
    const auto correction = static_cast<opmath_t>(c.bias_correction2_sqrt);
    const AdamElement<scalar_t> update = adam_element<scalar_t>(params[i], exp_avgs[i], exp_avg_sqs[i], grads[i],
                                                                beta1, beta2, weight_decay, eps, maximize);
    torch::stable::parallel_for(0, params[i].numel(), 32768, [&](int64_t begin, int64_t end) {
      adam_range(update, step_size, correction, begin, end);
    });
  }
}

}  // namespace opwrap::kernels
