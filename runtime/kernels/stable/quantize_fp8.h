// opwrap::quantize_fp8 against torch's stable API: each element divided by the scale in
// float, clamped to the float8 type's finite range and rounded to nearest even, as
// ../quantize_fp8.h does in the full target.
#pragma once

#include "common.h"

#include <torch/headeronly/macros/Macros.h>
#include <torch/headeronly/util/Float8_e4m3fn.h>
#include <torch/headeronly/util/Float8_e4m3fnuz.h>
#include <torch/headeronly/util/Float8_e5m2.h>
#include <torch/headeronly/util/Float8_e5m2fnuz.h>

#include "../quantize_fp8_one.h"

namespace opwrap::kernels {

template <typename input_t, typename scale_t, typename result_t>
void quantize_fp8_cpu(const torch::stable::Tensor& input, const torch::stable::Tensor& scale,
                      torch::headeronly::ScalarType /*dtype*/, torch::stable::Tensor& result) {
  const input_t* in = input.const_data_ptr<input_t>();
  const float s = static_cast<float>(*scale.const_data_ptr<scale_t>());
  result_t* out = result.mutable_data_ptr<result_t>();
  torch::stable::parallel_for(0, input.numel(), 32768, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = quantize_fp8_one<input_t, result_t>(in[i], s);
  });
}

}  // namespace opwrap::kernels
