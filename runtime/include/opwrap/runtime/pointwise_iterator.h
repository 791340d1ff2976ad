// The TensorIterator of generated pointwise kernels (templates/pointwise/wrapper.j2): aten's
// iterator, built so that a call costs what aten's own elementwise ops cost.
//
// - Outputs on the CPU are allocated as aten's structured CPU kernels allocate theirs
//   (at::detail::empty_cpu, without a dispatcher round trip through at::empty); other
//   devices take at::empty / at::empty_strided, as at::TensorIterator does.
// - No check runs before the build that the build does itself: TensorIterator computes the
//   broadcast shape and refuses shapes that do not broadcast, so check_broadcastable (the
//   message naming the op and the argument) runs only when the build has failed.
//
// Included through pointwise.h, and like it of internal linkage (an unnamed namespace): the
// CPU capability units include it too, compiled for AVX2 or AVX-512.
#pragma once

#include <ATen/EmptyTensor.h>
#include <ATen/TensorIterator.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <c10/util/Exception.h>

#include <initializer_list>
#include <string>
#include <utility>

#include <opwrap/runtime/checks.h>
#include <opwrap/runtime/torch_compat.h>

namespace opwrap::rt {
namespace {

class PointwiseIterator final : public at::TensorIteratorBase {
 public:
  const at::Tensor& maybe_get_output(int64_t output_idx) override {
    return operands_[output_idx].tensor();
  }

  // Called by TensorIteratorBase::build for each output once its shape, dtype and strides
  // are known.  Generated kernels pass undefined outputs only (out= overloads build an
  // at::TensorIterator, which resizes and casts a given output; this iterator refuses it).
  void set_output_raw_strided(int64_t output_idx, at::IntArrayRef sizes, at::IntArrayRef strides,
                              at::TensorOptions options OPWRAP_SET_OUTPUT_NAMES_PARAM) override {
    auto& op = operands_[output_idx];
    TORCH_INTERNAL_ASSERT(!op.tensor_base().defined(), "PointwiseIterator: outputs must be undefined");
    at::TensorBase out;
    if (options.device().is_cpu()) {
      out = strides.empty() ? at::detail::empty_cpu(sizes, options) : at::detail::empty_strided_cpu(sizes, strides, options);
    } else {
      out = strides.empty() ? at::empty(sizes, options) : at::empty_strided(sizes, strides, options);
    }
    op.tensor(c10::MaybeOwned<at::TensorBase>::owned(std::move(out)));
    op.current_dtype = op.target_dtype;
  }
};

// Builds `iter` from `config`.  When that fails, the error is the op's own message if the
// inputs' shapes do not broadcast (check_broadcastable throws it), and otherwise (an output
// too large to allocate, ...) the iterator's, with a line naming the op and `outputs` (as
// "output 'result'" or "outputs 'sin', 'cos'").
template <typename Iterator>
void build_pointwise(const char* op, const char* outputs, Iterator& iter, at::TensorIteratorConfig& config,
                     std::initializer_list<NamedTensor> inputs) {
  try {
    iter.build(config);
  } catch (c10::Error& e) {
    check_broadcastable(op, inputs);
    e.add_context(std::string(op) + ": while allocating " + outputs);
    throw;  // the same exception type (OutOfMemoryError stays one)
  }
}

}  // namespace
}  // namespace opwrap::rt
