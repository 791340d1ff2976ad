// CUDA kernel of opwrap::quantize_fp8: the CPU kernel's element function
// (quantize_fp8_one, __host__ __device__), a thread per element; the scale is read on the
// device, so the call does not synchronize.
#pragma once

#include <opwrap/runtime/cuda.cuh>

#include "quantize_fp8.h"

namespace opwrap::kernels {

template <typename input_t, typename scale_t, typename result_t>
struct QuantizeFp8 {
  const input_t* in;
  const scale_t* scale;
  result_t* out;
  __device__ void operator()(int64_t i) const {
    out[i] = quantize_fp8_one<input_t, result_t>(in[i], static_cast<float>(*scale));
  }
};

template <typename input_t, typename scale_t, typename result_t>
void quantize_fp8_cuda(const at::Tensor& input, const at::Tensor& scale, at::ScalarType /*dtype*/,
                       at::Tensor& result) {
  rt::cuda::launch_elementwise(input.numel(), QuantizeFp8<input_t, scale_t, result_t>{
      input.const_data_ptr<input_t>(), scale.const_data_ptr<scale_t>(), result.mutable_data_ptr<result_t>()});
}

}  // namespace opwrap::kernels
