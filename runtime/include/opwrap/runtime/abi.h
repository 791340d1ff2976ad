// The C++ side of the C kernel ABI (opwrap/kernel_abi.h): what a generated wrapper uses to
// call a kernel behind it.  `Call` is one call's context (its callbacks: resize, parallel_for,
// set_error, workspace) and turns a failed status into the op's RuntimeError; `view`, `output`,
// `OptionalView`, `ListView` and `arg` turn the kernel's C++ arguments into their C types.
// Views point into the tensors, which outlive the call; nothing is copied.
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

inline void fill(opwrap_tensor& v, const at::Tensor& t) {
  v.data = const_cast<void*>(t.const_data_ptr());
  v.sizes = t.sizes().data();
  v.strides = t.strides().data();
  v.ndim = t.dim();
  v.dtype = static_cast<int32_t>(t.scalar_type());
  v.device_type = static_cast<int32_t>(t.device().type());
  v.device_index = t.device().index();
  v.reserved = 0;
}

// An input: read only, not resizable.
inline opwrap_tensor view(const at::Tensor& t) {
  opwrap_tensor v;
  fill(v, t);
  v.handle = nullptr;
  return v;
}

// A tensor written in place: its size is the caller's.
inline opwrap_tensor written(const at::Tensor& t) {
  return view(t);
}

// An output: the kernel may resize it (opwrap_resize) when its size depends on the data.
inline opwrap_tensor output(at::Tensor& t) {
  opwrap_tensor v;
  fill(v, t);
  v.handle = &t;
  return v;
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

// One call of a foreign kernel: its context, the error it reported, its scratch memory.
class Call {
 public:
  Call(const char* op, c10::DeviceType device_type, c10::DeviceIndex device_index, void* stream = nullptr)
      : op_(op) {
    ctx_.abi_version = OPWRAP_KERNEL_ABI_VERSION;
    ctx_.device_type = static_cast<int32_t>(device_type);
    ctx_.device_index = device_index;
    ctx_.num_threads = at::get_num_threads();
    ctx_.stream = stream;
    ctx_.op = op;
    ctx_.resize = &Call::resize;
    ctx_.parallel_for = &Call::parallel_for;
    ctx_.set_error = &Call::set_error;
    ctx_.workspace = &Call::workspace;
    ctx_.state = this;
  }
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;

  opwrap_context* context() { return &ctx_; }

  // The kernel's status: anything but OPWRAP_OK is the op's RuntimeError with the kernel's words.
  void check(int32_t status) {
    if (C10_LIKELY(status == OPWRAP_OK)) return;
    TORCH_CHECK(false, op_, ": ", error_.empty() ? "the kernel failed (status " + std::to_string(status) +
                                                       ") without a message"
                                                 : error_);
  }

 private:
  static Call& of(opwrap_context* ctx) { return *static_cast<Call*>(ctx->state); }

  static void set_error(opwrap_context* ctx, const char* message, int64_t len) {
    of(ctx).error_.assign(message, message + (len > 0 ? len : 0));
  }

  // Never throws into the kernel: a failure is the status and the message.
  static int32_t resize(opwrap_context* ctx, opwrap_tensor* out, int64_t ndim, const int64_t* sizes) {
    Call& call = of(ctx);
    try {
      TORCH_CHECK(out != nullptr && out->handle != nullptr,
                  "opwrap_resize: only an output the wrapper allocated can be resized");
      TORCH_CHECK(ndim >= 0 && (ndim == 0 || sizes != nullptr), "opwrap_resize: ndim ", ndim, " with no sizes");
      at::Tensor& t = *static_cast<at::Tensor*>(out->handle);
      t.resize_(at::IntArrayRef(sizes, static_cast<size_t>(ndim)));
      fill(*out, t);
      return OPWRAP_OK;
    } catch (const c10::Error& e) {
      call.error_ = e.what_without_backtrace();
      return OPWRAP_ERROR;
    } catch (const std::exception& e) {
      call.error_ = e.what();
      return OPWRAP_ERROR;
    }
  }

  // A byte tensor on the call's device, kept until the call returns.
  static void* workspace(opwrap_context* ctx, int64_t nbytes) {
    Call& call = of(ctx);
    try {
      TORCH_CHECK(nbytes >= 0, "opwrap_workspace: ", nbytes, " bytes");
      const c10::Device device(static_cast<c10::DeviceType>(ctx->device_type),
                               static_cast<c10::DeviceIndex>(ctx->device_index));
      call.scratch_.push_back(at::empty({nbytes > 0 ? nbytes : 1}, at::TensorOptions().dtype(at::kByte).device(device)));
      return call.scratch_.back().mutable_data_ptr();
    } catch (const c10::Error& e) {
      call.error_ = e.what_without_backtrace();
    } catch (const std::exception& e) {
      call.error_ = e.what();
    }
    return nullptr;
  }

  static void parallel_for(opwrap_context*, int64_t begin, int64_t end, int64_t grain, opwrap_range_fn fn,
                           void* data) {
    at::parallel_for(begin, end, grain, [&](int64_t b, int64_t e) { fn(data, b, e); });
  }

  opwrap_context ctx_{};
  const char* op_;
  std::string error_;
  std::vector<at::Tensor> scratch_;
};

}  // namespace opwrap::rt::abi
