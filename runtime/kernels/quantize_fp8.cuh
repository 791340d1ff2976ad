// CUDA kernel of opwrap::quantize_fp8: quantize_fp8_one.h's functor (the CPU kernel's element
// function, a thread per element; the scale read on the device, so no synchronization).
#pragma once

#include <opwrap/runtime/cuda.cuh>

#include "quantize_fp8.h"

namespace opwrap::kernels {

template <typename input_t, typename scale_t, typename result_t>
void quantize_fp8_cuda(const at::Tensor& input, const at::Tensor& scale, at::ScalarType /*dtype*/,
                       at::Tensor& result) {
  rt::cuda::launch_elementwise(input.numel(), QuantizeFp8<input_t, scale_t, result_t>{
      input.const_data_ptr<input_t>(), scale.const_data_ptr<scale_t>(), result.mutable_data_ptr<result_t>()});
}

}  // namespace opwrap::kernels
