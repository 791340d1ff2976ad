// CUDA kernel of opwrap::dropout: the draws are aten's (bernoulli_ from the given CUDA
// generator, else the default one, Philox as torch's CUDA random ops draw), the rest a fused
// expression of aten ops.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>

#include <optional>

#include "dropout.h"

namespace opwrap::kernels {

template <typename scalar_t>
void dropout_cuda(const at::Tensor& self, double p, const std::optional<at::Generator>& generator, at::Tensor& out,
                  at::Tensor& mask) {
  TORCH_CHECK(p >= 0 && p < 1, "opwrap::dropout: argument 'p' must lie in [0, 1), but got ", p);
  const at::Tensor keep = at::empty_like(self).bernoulli_(1.0 - p, generator);
  mask.copy_(keep);
  out.copy_(self * keep * (1.0 / (1.0 - p)));
}

}  // namespace opwrap::kernels
