// Hand-written kernel of opwrap::mul_constant.
#pragma once

#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>

#include "common.h"

namespace opwrap::kernels {

template <typename scalar_t>
void mul_constant_cpu(const at::Tensor& self, double constant, at::Tensor& result) {
  using opmath_t = at::opmath_type<scalar_t>;
  const auto c = static_cast<opmath_t>(constant);
  const scalar_t* a = self.const_data_ptr<scalar_t>();
  scalar_t* out = result.mutable_data_ptr<scalar_t>();
  at::parallel_for(0, result.numel(), opwrap::kernels::kGrainSize, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      out[i] = static_cast<scalar_t>(static_cast<opmath_t>(a[i]) * c);
    }
  });
}

}  // namespace opwrap::kernels
