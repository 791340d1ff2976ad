// What the bundled library's kernels written against torch's stable API share
// (docs/stable-abi.md, "Kernels for both targets"): each op's header here is its kernel in the
// stable target, beside the one in runtime/kernels/ written against ATen for the full target.
#pragma once

#include <opwrap/stable/runtime.h>

#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>

#include <array>
#include <cstdint>
#include <vector>

namespace opwrap::kernels::stable {

// result = self @ other through the dispatcher (aten::mm.out: the BLAS aten uses), as the full
// target's kernel calls at::mm_out; the stable API has matmul but no out= form of it.
inline void mm_out(const torch::stable::Tensor& result, const torch::stable::Tensor& self,
                   const torch::stable::Tensor& other) {
  std::array<StableIValue, 3> stack{torch::stable::detail::from(self), torch::stable::detail::from(other),
                                    torch::stable::detail::from(result)};
  opwrap::rt::call_returning_written("aten::mm", "out", stack);
}

// `t` resized to `sizes` (aten::resize_: its elements' values are then the kernel's to write).
inline void resize(torch::stable::Tensor& t, const std::vector<int64_t>& sizes) {
  opwrap::rt::abi::resize_output(t, sizes.data(), static_cast<int64_t>(sizes.size()));
}

}  // namespace opwrap::kernels::stable
