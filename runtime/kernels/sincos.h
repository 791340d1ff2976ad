// The helper the derivative formula of opwrap::sincos calls (its kernels are generated from
// its pointwise expression).
#pragma once

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>

namespace opwrap::kernels {

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
