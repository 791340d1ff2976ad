// out= arguments: resized to the shape rule's shape by aten's own at::native::resize_output
// (which warns when it resizes a tensor that is not empty, and leaves a tensor of the right
// shape alone), with the op and the argument named on failure.  Included only by the
// wrappers of out= overloads.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/native/Resize.h>

#include <string>
#include <vector>

#include <opwrap/runtime/checks.h>

namespace opwrap::rt {

inline void resize_output(const char* op, const char* arg, const at::Tensor& out, const std::vector<int64_t>& shape) {
  const std::string what = std::string("resizing out= argument '") + arg + "'";
  with_context(op, what.c_str(), [&] { return at::native::resize_output(out, shape); });
}

}  // namespace opwrap::rt
