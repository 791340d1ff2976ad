// Hand-written kernel of opwrap::dropout: one Bernoulli draw per element from the given
// generator (else the default CPU generator), under its mutex, as aten's CPU kernels draw.
#pragma once

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/DistributionsHelper.h>
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <mutex>
#include <optional>

namespace opwrap::kernels {

template <typename scalar_t>
void dropout_cpu(const at::Tensor& self, double p, const std::optional<at::Generator>& generator, at::Tensor& out,
                 at::Tensor& mask) {
  TORCH_CHECK(p >= 0 && p < 1, "opwrap::dropout: argument 'p' must lie in [0, 1), but got ", p);
  auto* gen = at::get_generator_or_default<at::CPUGeneratorImpl>(generator, at::detail::getDefaultCPUGenerator());
  const scalar_t* in = self.const_data_ptr<scalar_t>();
  scalar_t* o = out.mutable_data_ptr<scalar_t>();
  bool* m = mask.mutable_data_ptr<bool>();
  const double scale = 1.0 / (1.0 - p);
  std::lock_guard<std::mutex> lock(gen->mutex_);
  at::bernoulli_distribution<double> keep(1.0 - p);
  for (int64_t i = 0; i < self.numel(); ++i) {
    m[i] = keep(gen);
    o[i] = m[i] ? static_cast<scalar_t>(static_cast<double>(in[i]) * scale) : scalar_t(0);
  }
}

}  // namespace opwrap::kernels
