// Hand-written kernel of opwrap::sincos, and the helper its derivative formula calls.
#pragma once

#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>

#include "common.h"

#include <cmath>

namespace opwrap::kernels {

template <typename scalar_t>
void sincos_cpu(const at::Tensor& self, at::Tensor& sin, at::Tensor& cos) {
  using opmath_t = at::opmath_type<scalar_t>;
  const scalar_t* x = self.const_data_ptr<scalar_t>();
  scalar_t* s = sin.mutable_data_ptr<scalar_t>();
  scalar_t* c = cos.mutable_data_ptr<scalar_t>();
  at::parallel_for(0, self.numel(), kGrainSize, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const auto v = static_cast<opmath_t>(x[i]);
      s[i] = static_cast<scalar_t>(std::sin(v));
      c[i] = static_cast<scalar_t>(std::cos(v));
    }
  });
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
