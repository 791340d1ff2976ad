// Hand-written kernel of opwrap::quantize_fp8: one instantiation per input dtype and float8
// result dtype (c10::Float8_e4m3fn, c10::Float8_e5m2 and their fnuz forms).  Each element is
// divided by the scale in float, clamped to the float8 type's finite range (the float8
// conversion itself would give NaN or infinity past it) and rounded to nearest even.
#pragma once

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <c10/macros/Macros.h>

#include "quantize_fp8_one.h"

#include <cstdint>
#include <limits>

namespace opwrap::kernels {

template <typename input_t, typename scale_t, typename result_t>
void quantize_fp8_cpu(const at::Tensor& input, const at::Tensor& scale, at::ScalarType /*dtype*/, at::Tensor& result) {
  const input_t* in = input.const_data_ptr<input_t>();
  const float s = static_cast<float>(*scale.const_data_ptr<scale_t>());
  result_t* out = result.mutable_data_ptr<result_t>();
  at::parallel_for(0, input.numel(), 32768, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = quantize_fp8_one<input_t, result_t>(in[i], s);
  });
}

}  // namespace opwrap::kernels
