// Hand-written kernel of opwrap::myadd.  The generated wrapper has checked devices, dtypes
// and shapes, made the inputs contiguous and allocated `result`.
#pragma once

#include <ATen/OpMathType.h>
#include <ATen/core/Tensor.h>

#include "common.h"

namespace opwrap::kernels {

// The math, shared with myadd.cuh.
template <typename scalar_t>
struct MyAdd {
  const scalar_t* a;
  const scalar_t* b;
  scalar_t* out;
  C10_HOST_DEVICE void operator()(int64_t i) const {
    using opmath_t = at::opmath_type<scalar_t>;
    out[i] = static_cast<scalar_t>(static_cast<opmath_t>(a[i]) + static_cast<opmath_t>(b[i]));
  }
};

template <typename scalar_t>
void myadd_cpu(const at::Tensor& self, const at::Tensor& other, at::Tensor& result) {
  parallel_elementwise(result.numel(), MyAdd<scalar_t>{self.const_data_ptr<scalar_t>(), other.const_data_ptr<scalar_t>(),
                                                      result.mutable_data_ptr<scalar_t>()});
}

}  // namespace opwrap::kernels
