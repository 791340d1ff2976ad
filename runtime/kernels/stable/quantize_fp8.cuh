// CUDA kernel of opwrap::quantize_fp8 against torch's stable API: the CPU kernel's element
// function, a thread per element; the scale is read on the device (no synchronization).
#pragma once

#include "common.cuh"
#include "quantize_fp8.h"

namespace opwrap::kernels {

template <typename input_t, typename scale_t, typename result_t>
struct QuantizeFp8Stable {
  const input_t* in;
  const scale_t* scale;
  result_t* out;
  __device__ void operator()(int64_t i) const {
    out[i] = quantize_fp8_one<input_t, result_t>(in[i], static_cast<float>(*scale));
  }
};

template <typename input_t, typename scale_t, typename result_t>
void quantize_fp8_cuda(const torch::stable::Tensor& input, const torch::stable::Tensor& scale,
                       torch::headeronly::ScalarType /*dtype*/, torch::stable::Tensor& result) {
  stable::launch_elementwise(input, input.numel(), QuantizeFp8Stable<input_t, scale_t, result_t>{
      input.const_data_ptr<input_t>(), scale.const_data_ptr<scale_t>(), result.mutable_data_ptr<result_t>()});
}

}  // namespace opwrap::kernels
