// Hand-written kernel of opwrap::sincos, and the helper its derivative formula calls.
#pragma once

#include <ATen/OpMathType.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>

#include "common.h"

#include <cmath>

namespace opwrap::kernels {

// The math, shared with sincos.cuh.
template <typename scalar_t>
struct SinCos {
  const scalar_t* x;
  scalar_t* s;
  scalar_t* c;
  C10_HOST_DEVICE void operator()(int64_t i) const {
    const auto v = static_cast<at::opmath_type<scalar_t>>(x[i]);
    s[i] = static_cast<scalar_t>(std::sin(v));
    c[i] = static_cast<scalar_t>(std::cos(v));
  }
};

template <typename scalar_t>
void sincos_cpu(const at::Tensor& self, at::Tensor& sin, at::Tensor& cos) {
  parallel_elementwise(self.numel(), SinCos<scalar_t>{self.const_data_ptr<scalar_t>(), sin.mutable_data_ptr<scalar_t>(),
                                                      cos.mutable_data_ptr<scalar_t>()});
}

// d(sin)/dx = cos and d(cos)/dx = -sin.  The declaration turns materialize_grads off, so the
// gradient of an unused output arrives undefined and contributes nothing (no zeros are made).
inline at::Tensor sincos_backward(const at::Tensor& grad_sin, const at::Tensor& grad_cos, const at::Tensor& sin,
                                  const at::Tensor& cos) {
  if (grad_sin.defined() && grad_cos.defined()) {
    return grad_sin * cos - grad_cos * sin;
  }
  if (grad_sin.defined()) {
    return grad_sin * cos;
  }
  return -(grad_cos * sin);
}

}  // namespace opwrap::kernels
