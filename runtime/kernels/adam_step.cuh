// CUDA kernel of opwrap::adam_step: a launch per parameter tensor, a thread per element, each
// computing AdamUpdate (adam_step.h, shared with the CPU) with the step's constants from the
// step count on the device (no synchronization to read it).
#pragma once

#include <opwrap/runtime/cuda.cuh>

#include "adam_step.h"

namespace opwrap::kernels {

template <typename scalar_t, typename step_t>
struct AdamStepCuda {
  using opmath_t = at::opmath_type<scalar_t>;
  AdamUpdate<scalar_t> update;
  const step_t* step;
  double lr, beta1, beta2;
  __device__ void operator()(int64_t i) const {
    const AdamCoefficients c = AdamCoefficients::at_step(static_cast<double>(*step), lr, beta1, beta2);
    update(i, static_cast<opmath_t>(c.step_size), static_cast<opmath_t>(c.bias_correction2_sqrt));
  }
};

template <typename scalar_t, typename step_t>
void adam_step_cuda(at::TensorList params, at::TensorList exp_avgs, at::TensorList exp_avg_sqs, at::TensorList grads,
                    at::TensorList state_steps, double lr, double beta1, double beta2, double weight_decay, double eps,
                    bool maximize) {
  for (size_t i = 0; i < params.size(); ++i) {
    rt::cuda::launch_elementwise(params[i].numel(), AdamStepCuda<scalar_t, step_t>{
        adam_update<scalar_t>(params[i], exp_avgs[i], exp_avg_sqs[i], grads[i], beta1, beta2, weight_decay, eps, maximize),
        state_steps[i].const_data_ptr<step_t>(), lr, beta1, beta2});
  }
}

}  // namespace opwrap::kernels
