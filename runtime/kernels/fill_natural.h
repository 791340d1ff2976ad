// Hand-written kernel of opwrap::fill_natural: 0, 1, 2, ... in row-major order.
// The Rust article keeps this body behind an `extern "C"` symbol; any language that can
// export one works the same way, since the generated wrapper only calls this template.
#pragma once

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>

#include "common.h"

namespace opwrap::kernels {

template <typename scalar_t>
void fill_natural_cpu(at::IntArrayRef /*size*/, at::Tensor& result) {
  scalar_t* out = result.mutable_data_ptr<scalar_t>();
  at::parallel_for(0, result.numel(), opwrap::kernels::kGrainSize, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = static_cast<scalar_t>(i);
  });
}

}  // namespace opwrap::kernels
