// CUDA kernel of opwrap::adam_step against torch's stable API: a launch per tensor of the
// lists, a thread per element; each reads its step on the device (no synchronization).
#pragma once

#include "adam_step.h"
#include "common.cuh"

namespace opwrap::kernels {

template <typename scalar_t, typename step_t>
struct AdamStepStable {
  using opmath_t = adam_opmath_t<scalar_t>;
  AdamElement<scalar_t> update;
  const step_t* step;
  double lr, beta1, beta2;
  __device__ void operator()(int64_t i) const {
    const AdamStepCoefficients c = AdamStepCoefficients::at_step(static_cast<double>(*step), lr, beta1, beta2);
    update(i, static_cast<opmath_t>(c.step_size), static_cast<opmath_t>(c.bias_correction2_sqrt));
  }
};

template <typename scalar_t, typename step_t>
void adam_step_cuda(const std::vector<torch::stable::Tensor>& params, const std::vector<torch::stable::Tensor>& exp_avgs,
                    const std::vector<torch::stable::Tensor>& exp_avg_sqs, const std::vector<torch::stable::Tensor>& grads,
                    const std::vector<torch::stable::Tensor>& state_steps, double lr, double beta1, double beta2,
                    double weight_decay, double eps, bool maximize) {
  for (size_t i = 0; i < params.size(); ++i) {
    stable::launch_elementwise(params[i], params[i].numel(), AdamStepStable<scalar_t, step_t>{
        adam_element<scalar_t>(params[i], exp_avgs[i], exp_avg_sqs[i], grads[i], beta1, beta2, weight_decay, eps,
                               maximize),
        state_steps[i].const_data_ptr<step_t>(), lr, beta1, beta2});
  }
}

}  // namespace opwrap::kernels
