// opwrap::mymatmul against torch's stable API: result = self @ other in the BLAS aten uses,
// through aten::mm.out (the full target's kernel calls at::mm_out).
#pragma once

#include "common.h"

namespace opwrap::kernels {

template <typename scalar_t>
void mymatmul_cpu(const torch::stable::Tensor& self, const torch::stable::Tensor& other,
                  torch::stable::Tensor& result) {
  stable::mm_out(result, self, other);
}

}  // namespace opwrap::kernels
