// The C++ side of the C kernel ABI (opwrap/kernel_abi.h): what a generated wrapper uses to
// call a kernel behind it.  `Call` is one call's context (its callbacks: resize, parallel_for,
// set_error, workspace) and turns a failed status into the op's RuntimeError; `view`, `output`,
// `OptionalView`, `ListView` and `arg` turn the kernel's C++ arguments into their C types.
// Views point into the tensors, which outlive the call; nothing is copied.  `Call`, `view` and
// `output` are <opwrap/shared/abi_call.h>, which the stable target shares; here are ATen's types
// and the few calls that differ.
#pragma once

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>
#include <c10/util/string_view.h>

#include <opwrap/kernel_abi.h>

#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <vector>

namespace opwrap::rt::abi {

static_assert(OPWRAP_UINT8 == static_cast<int>(at::ScalarType::Byte) &&
                  OPWRAP_INT8 == static_cast<int>(at::ScalarType::Char) &&
                  OPWRAP_INT16 == static_cast<int>(at::ScalarType::Short) &&
                  OPWRAP_INT32 == static_cast<int>(at::ScalarType::Int) &&
                  OPWRAP_INT64 == static_cast<int>(at::ScalarType::Long) &&
                  OPWRAP_FLOAT16 == static_cast<int>(at::ScalarType::Half) &&
                  OPWRAP_FLOAT32 == static_cast<int>(at::ScalarType::Float) &&
                  OPWRAP_FLOAT64 == static_cast<int>(at::ScalarType::Double) &&
                  OPWRAP_BOOL == static_cast<int>(at::ScalarType::Bool) &&
                  OPWRAP_BFLOAT16 == static_cast<int>(at::ScalarType::BFloat16) &&
                  OPWRAP_COMPLEX32 == static_cast<int>(at::ScalarType::ComplexHalf) &&
                  OPWRAP_COMPLEX64 == static_cast<int>(at::ScalarType::ComplexFloat) &&
                  OPWRAP_COMPLEX128 == static_cast<int>(at::ScalarType::ComplexDouble) &&
                  OPWRAP_FLOAT8_E5M2 == static_cast<int>(at::ScalarType::Float8_e5m2) &&
                  OPWRAP_FLOAT8_E4M3FN == static_cast<int>(at::ScalarType::Float8_e4m3fn) &&
                  OPWRAP_FLOAT8_E5M2FNUZ == static_cast<int>(at::ScalarType::Float8_e5m2fnuz) &&
                  OPWRAP_FLOAT8_E4M3FNUZ == static_cast<int>(at::ScalarType::Float8_e4m3fnuz) &&
                  OPWRAP_UINT16 == static_cast<int>(at::ScalarType::UInt16) &&
                  OPWRAP_UINT32 == static_cast<int>(at::ScalarType::UInt32) &&
                  OPWRAP_UINT64 == static_cast<int>(at::ScalarType::UInt64) &&
                  OPWRAP_FLOAT8_E8M0FNU == static_cast<int>(at::ScalarType::Float8_e8m0fnu),
              "opwrap/kernel_abi.h's dtype codes are c10::ScalarType's");
static_assert(OPWRAP_CPU == static_cast<int>(c10::DeviceType::CPU) &&
                  OPWRAP_CUDA == static_cast<int>(c10::DeviceType::CUDA),
              "opwrap/kernel_abi.h's device codes are c10::DeviceType's");

using Tensor = at::Tensor;
using DeviceType = c10::DeviceType;

inline int32_t num_threads() { return at::get_num_threads(); }

inline void resize_output(at::Tensor& t, const int64_t* sizes, int64_t ndim) {
  t.resize_(at::IntArrayRef(sizes, static_cast<size_t>(ndim)));
}

inline at::Tensor allocate_workspace(int32_t device_type, int32_t device_index, int64_t nbytes) {
  const c10::Device device(static_cast<c10::DeviceType>(device_type), static_cast<c10::DeviceIndex>(device_index));
  return at::empty({nbytes}, at::TensorOptions().dtype(at::kByte).device(device));
}

inline void run_parallel_for(int64_t begin, int64_t end, int64_t grain, opwrap_range_fn fn, void* data) {
  at::parallel_for(begin, end, grain, [&](int64_t b, int64_t e) { fn(data, b, e); });
}

inline std::string error_message(const std::exception& e) {
  if (const auto* error = dynamic_cast<const c10::Error*>(&e)) return error->what_without_backtrace();
  return e.what();
}

#define OPWRAP_RT_CHECK TORCH_CHECK
#include <opwrap/shared/abi_call.h>
#undef OPWRAP_RT_CHECK

// A tensor written in place: its size is the caller's.
inline opwrap_tensor written(const at::Tensor& t) {
  return view(t);
}

// A `Tensor?`: NULL when absent or undefined.
class OptionalView {
 public:
  explicit OptionalView(const std::optional<at::Tensor>& t) : present_(t.has_value() && t->defined()) {
    if (present_) view_ = view(*t);
  }
  const opwrap_tensor* get() const { return present_ ? &view_ : nullptr; }
  opwrap_tensor* get() { return present_ ? &view_ : nullptr; }

 private:
  bool present_;
  opwrap_tensor view_{};
};

// A `Tensor[]`: one view per tensor, alive as long as this.
class ListView {
 public:
  explicit ListView(at::TensorList ts) {
    views_.reserve(ts.size());
    for (const at::Tensor& t : ts) views_.push_back(view(t));
  }
  opwrap_tensor_list get() const { return {views_.data(), static_cast<int64_t>(views_.size())}; }

 private:
  std::vector<opwrap_tensor> views_;
};

inline int64_t arg(int64_t v) { return v; }
inline double arg(double v) { return v; }
inline bool arg(bool v) { return v; }
inline int32_t arg(at::ScalarType v) { return static_cast<int32_t>(v); }
inline opwrap_int_array arg(at::IntArrayRef v) { return {v.data(), static_cast<int64_t>(v.size())}; }
inline opwrap_float_array arg(at::ArrayRef<double> v) { return {v.data(), static_cast<int64_t>(v.size())}; }
inline opwrap_string arg(c10::string_view v) { return {v.data(), static_cast<int64_t>(v.size())}; }
inline opwrap_optional_int arg(const std::optional<int64_t>& v) { return {v.value_or(0), v.has_value()}; }
inline opwrap_optional_float arg(const std::optional<double>& v) { return {v.value_or(0.0), v.has_value()}; }
inline opwrap_optional_bool arg(const std::optional<bool>& v) { return {v.value_or(false), v.has_value()}; }
inline opwrap_optional_dtype arg(const std::optional<at::ScalarType>& v) {
  return {v.has_value() ? static_cast<int32_t>(*v) : -1, v.has_value()};
}
inline opwrap_optional_int_array arg(at::OptionalIntArrayRef v) {
  if (!v.has_value()) return {nullptr, 0, false};
  return {v->data(), static_cast<int64_t>(v->size()), true};
}
inline opwrap_optional_string arg(const std::optional<c10::string_view>& v) {
  if (!v.has_value()) return {nullptr, 0, false};
  return {v->data(), static_cast<int64_t>(v->size()), true};
}
inline opwrap_scalar arg(const at::Scalar& v) {
  if (v.isBoolean()) return {v.toBool() ? 1.0 : 0.0, v.toBool() ? 1 : 0, OPWRAP_SCALAR_BOOL};
  if (v.isIntegral(false)) return {static_cast<double>(v.toLong()), v.toLong(), OPWRAP_SCALAR_INT};
  return {v.toDouble(), static_cast<int64_t>(v.toDouble()), OPWRAP_SCALAR_FLOAT};
}

}  // namespace opwrap::rt::abi
