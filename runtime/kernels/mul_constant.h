// Hand-written kernel of opwrap::mul_constant.
#pragma once

#include <ATen/OpMathType.h>
#include <ATen/core/Tensor.h>

#include "common.h"

namespace opwrap::kernels {

// The math, shared with mul_constant.cuh.
template <typename scalar_t>
struct MulConstant {
  using opmath_t = at::opmath_type<scalar_t>;
  const scalar_t* a;
  opmath_t c;
  scalar_t* out;
  C10_HOST_DEVICE void operator()(int64_t i) const {
    out[i] = static_cast<scalar_t>(static_cast<opmath_t>(a[i]) * c);
  }
};

template <typename scalar_t>
void mul_constant_cpu(const at::Tensor& self, double constant, at::Tensor& result) {
  using opmath_t = at::opmath_type<scalar_t>;
  parallel_elementwise(result.numel(), MulConstant<scalar_t>{self.const_data_ptr<scalar_t>(),
                                                             static_cast<opmath_t>(constant),
                                                             result.mutable_data_ptr<scalar_t>()});
}

}  // namespace opwrap::kernels
