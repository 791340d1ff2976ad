// CUDA kernel of opwrap::quantize_fp8 against torch's stable API: ../quantize_fp8_one.h's
// functor, as in the full target.
#pragma once

#include "common.cuh"
#include "quantize_fp8.h"

namespace opwrap::kernels {

template <typename input_t, typename scale_t, typename result_t>
void quantize_fp8_cuda(const torch::stable::Tensor& input, const torch::stable::Tensor& scale,
                       torch::headeronly::ScalarType /*dtype*/, torch::stable::Tensor& result) {
  stable::launch_elementwise(input, input.numel(), QuantizeFp8<input_t, scale_t, result_t>{
      input.const_data_ptr<input_t>(), scale.const_data_ptr<scale_t>(), result.mutable_data_ptr<result_t>()});
}

}  // namespace opwrap::kernels
