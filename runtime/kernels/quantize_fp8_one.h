// One element of opwrap::quantize_fp8 (and the CUDA functor over it), shared by its kernels in both targets (quantize_fp8.h
// against ATen, stable/quantize_fp8.h against the stable API, and their CUDA kernels): divided
// by the scale in float, clamped to the float8 type's finite range (the float8 conversion
// itself would give NaN or infinity past it) and rounded to nearest even.  It includes no
// torch header: its includer has C10_HOST_DEVICE and c10's float8 types from its target's own.
#pragma once

#include <cstdint>
#include <limits>

#ifndef C10_HOST_DEVICE
#error "include c10/macros/Macros.h or torch/headeronly/macros/Macros.h before quantize_fp8_one.h"
#endif

namespace opwrap::kernels {

template <typename input_t, typename result_t>
C10_HOST_DEVICE inline result_t quantize_fp8_one(input_t x, float scale) {
  const float hi = static_cast<float>(std::numeric_limits<result_t>::max());
  const float v = static_cast<float>(x) / scale;
  return result_t(v != v ? v : (v < -hi ? -hi : (v > hi ? hi : v)));  // NaN stays NaN
}

#ifdef __CUDACC__
// Their CUDA kernels' functor: a thread per element; the scale is read on the device, so a
// call does not synchronize.
template <typename input_t, typename scale_t, typename result_t>
struct QuantizeFp8 {
  const input_t* in;
  const scale_t* scale;
  result_t* out;
  __device__ void operator()(int64_t i) const {
    out[i] = quantize_fp8_one<input_t, result_t>(in[i], static_cast<float>(*scale));
  }
};
#endif

}  // namespace opwrap::kernels
