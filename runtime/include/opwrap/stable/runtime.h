// The run-time support of the stable-ABI target (docs/stable-abi.md): what a generated wrapper
// of that target calls.  It includes only torch's stable API (torch/csrc/stable,
// torch/headeronly) and opwrap's C kernel ABI, so a library built with it loads into every
// torch release from the one TORCH_TARGET_VERSION names on.
//
// The functions are those of <opwrap/runtime/checks.h> (the full ATen target), in the same
// namespace and with the same messages, taking torch::stable::Tensor: the shape rule's C++
// (codegen/lang/shapes.py) calls them by the same names in both targets; the shape arithmetic
// and the C ABI's Call are one text for both, <opwrap/shared/shape_arith.h> and
// <opwrap/shared/abi_call.h>, included here.  The two headers are never included into one
// translation unit.  A failed check throws std::runtime_error with
// the message alone, which torch raises as RuntimeError.
#pragma once

#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/DeviceType.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/HeaderOnlyArrayRef.h>

#include <opwrap/kernel_abi.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <exception>
#include <initializer_list>
#include <limits>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

// Hidden, as torch::stable is: a library never exports these (two libraries built against
// different torch headers must not share them).
HIDDEN_NAMESPACE_BEGIN(opwrap, rt)

using Tensor = torch::stable::Tensor;
using ScalarType = torch::headeronly::ScalarType;
using DeviceType = torch::headeronly::DeviceType;
using IntArrayRef = torch::headeronly::IntHeaderOnlyArrayRef;

// The message of every check: its pieces streamed, thrown as std::runtime_error.
template <typename... Args>
[[noreturn]] void fail(const Args&... args) {
  std::ostringstream out;
  ((out << args), ...);
  throw std::runtime_error(out.str());
}

#define OPWRAP_STABLE_CHECK(cond, ...) \
  do {                                 \
    if (!(cond)) ::opwrap::rt::fail(__VA_ARGS__); \
  } while (0)

// list_item, shape_add/sub/mul, floordiv, concat, rule_value, element_name, list_sum,
// check_list_input_length: the ATen target's too.
#define OPWRAP_RT_CHECK OPWRAP_STABLE_CHECK
#include <opwrap/shared/shape_arith.h>
#undef OPWRAP_RT_CHECK

inline std::string shape_str(IntArrayRef sizes) {
  std::string out = "[";
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(sizes[i]);
  }
  return out + "]";
}

inline std::string shape_str(const std::vector<int64_t>& sizes) { return shape_str(IntArrayRef(sizes)); }

// c10::DeviceTypeName(type, /*lower_case=*/true) of the device types a wrapper names.
inline const char* device_type_name(DeviceType type) {
  switch (type) {
    case DeviceType::CPU:
      return "cpu";
    case DeviceType::CUDA:
      return "cuda";
    default:
      return "device";
  }
}

// A device as c10::Device prints it: "cpu", "cuda:0".
inline std::string device_str(const Tensor& t) {
  const torch::stable::Device d = t.device();
  std::string out = device_type_name(d.type());
  if (d.type() != DeviceType::CPU && d.index() >= 0) out += ":" + std::to_string(d.index());
  return out;
}

inline const Tensor& check_tensor(const char* op, const char* arg, const Tensor& t, DeviceType device) {
  OPWRAP_STABLE_CHECK(t.defined(), op, ": argument '", arg, "' is an undefined tensor; expected a ",
                      device_type_name(device), " tensor");
  OPWRAP_STABLE_CHECK(t.device().type() == device, op, ": argument '", arg, "' is on ", device_str(t),
                      ", but this kernel expects all tensor arguments on ", device_type_name(device));
  return t;
}

inline void check_same_device(const char* op, const char* arg, const Tensor& t, const Tensor& reference,
                              const char* reference_name) {
  OPWRAP_STABLE_CHECK(t.device() == reference.device(), op, ": argument '", arg, "' is on ", device_str(t),
                      ", but '", reference_name, "' is on ", device_str(reference),
                      "; expected all tensors on one device");
}

inline void check_dtype_in(const char* op, const char* arg, const Tensor& t, std::initializer_list<ScalarType> allowed,
                           const char* names) {
  for (ScalarType s : allowed) {
    if (t.scalar_type() == s) return;
  }
  fail(op, ": argument '", arg, "' has dtype ", t.scalar_type(), ", but expected one of: ", names);
}

inline void check_same_dtype(const char* op, const char* arg, const Tensor& t, ScalarType expected,
                             const char* reference) {
  OPWRAP_STABLE_CHECK(t.scalar_type() == expected, op, ": argument '", arg, "' has dtype ", t.scalar_type(),
                      ", but expected ", expected, " (the dtype of '", reference, "')");
}

// An output whose dtype comes from a rule (`dtype: {result: dtype}`) and declares a dtype variable.
inline void check_output_dtype_in(const char* op, const char* name, ScalarType dtype, const char* rule,
                                  std::initializer_list<ScalarType> allowed, const char* names) {
  for (ScalarType s : allowed) {
    if (dtype == s) return;
  }
  fail(op, ": output '", name, "' would have dtype ", dtype, " (dtype: ", rule, "), but expected one of: ", names);
}

[[noreturn]] inline void unsupported_dtype(const char* op, const char* arg, ScalarType dtype, const char* names) {
  fail(op, ": dtype ", dtype, " of '", arg, "' is not supported; expected one of: ", names);
}

inline void check_rank(const char* op, const char* arg, const Tensor& t, int64_t rank, bool at_least,
                       const char* spec) {
  if (at_least) {
    OPWRAP_STABLE_CHECK(t.dim() >= rank, op, ": argument '", arg, "' must have at least ", rank, " dimensions ", spec,
                        ", but got ", t.dim(), " (shape ", shape_str(t.sizes()), ")");
  } else {
    OPWRAP_STABLE_CHECK(t.dim() == rank, op, ": argument '", arg, "' must have ", rank, " dimension",
                        rank == 1 ? "" : "s", " ", spec, ", but got ", t.dim(), " (shape ", shape_str(t.sizes()), ")");
  }
}

inline void check_size(const char* op, const char* arg, const Tensor& t, int64_t dim, int64_t expected,
                       const char* what) {
  const int64_t actual = t.size(dim);
  OPWRAP_STABLE_CHECK(actual == expected, op, ": argument '", arg, "' has size ", actual, " at dimension ",
                      dim < 0 ? dim + t.dim() : dim, ", but expected ", rule_value(what, std::to_string(expected)),
                      " (shape ", shape_str(t.sizes()), ")");
}

inline void check_run(const char* op, const char* arg, const Tensor& t, int64_t start, int64_t after,
                      IntArrayRef expected, const char* what) {
  const int64_t from = std::min<int64_t>(start, t.dim());
  const int64_t length = std::max<int64_t>(t.dim() - from - after, 0);
  const IntArrayRef actual = t.sizes().slice(from, length);
  const bool same = length == static_cast<int64_t>(expected.size()) &&
                    std::equal(actual.begin(), actual.end(), expected.begin());
  OPWRAP_STABLE_CHECK(same, op, ": argument '", arg, "' has dimensions ", shape_str(actual), " where *", what, " = ",
                      shape_str(expected), " was expected (shape ", shape_str(t.sizes()), ")");
}

inline void check_shape(const char* op, const char* arg, const Tensor& t, IntArrayRef expected, const char* what) {
  const IntArrayRef sizes = t.sizes();
  const bool same = sizes.size() == expected.size() && std::equal(sizes.begin(), sizes.end(), expected.begin());
  OPWRAP_STABLE_CHECK(same, op, ": argument '", arg, "' has shape ", shape_str(sizes), ", but expected ",
                      rule_value(what, shape_str(expected)));
}

inline void check_output_shape(const char* op, const char* out, IntArrayRef shape, const char* rule) {
  int64_t numel = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    OPWRAP_STABLE_CHECK(shape[i] >= 0, op, ": output '", out, "' would have negative size ", shape[i],
                        " at dimension ", i, " (shape ", shape_str(shape), " from ", rule, ")");
    OPWRAP_STABLE_CHECK(shape[i] == 0 || numel <= std::numeric_limits<int64_t>::max() / shape[i], op, ": output '",
                        out, "' of shape ", shape_str(shape), " (from ", rule, ") has more elements than int64 can count");
    numel *= shape[i];
  }
}

// Errors torch raises inside a generated wrapper gain the op and what it was doing: the parts
// of `what`, joined only when there is an error (a message built before the call cost a heap
// allocation on every call).
template <typename F, typename... What>
auto with_context(const char* op, F&& f, const What&... what) -> decltype(f()) {
  try {
    return f();
  } catch (const std::exception& e) {
    fail(e.what(), "\n", op, ": while ", what...);
  }
}

// A contiguous tensor of `shape`: torch::stable::empty's, without its call of aten::empty
// through the dispatcher by name (torch_call_dispatcher: the operator's lookup, a boxed stack
// converted to IValues and back), which was a third of a small op's call.  The stable C shim's
// aoti_torch_empty_strided calls at::empty_strided itself; the strides are at::empty's
// (contiguous, a dimension of size 0 counted as 1).  Its dtype and device codes are c10's
// ScalarType and DeviceType values, as the header-only enums' are.
inline Tensor empty_contiguous(IntArrayRef shape, ScalarType dtype, const torch::stable::Device& device) {
  constexpr size_t kInline = 8;
  int64_t inline_strides[kInline];
  std::vector<int64_t> more;
  int64_t* strides = inline_strides;
  if (shape.size() > kInline) {
    more.resize(shape.size());
    strides = more.data();
  }
  int64_t step = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = step;
    step *= std::max<int64_t>(shape[i], 1);
  }
  const int64_t ndim = static_cast<int64_t>(shape.size());
  const int64_t* sizes = shape.data();
  const int32_t dtype_code = static_cast<int32_t>(dtype), device_type = static_cast<int32_t>(device.type()),
                device_index = static_cast<int32_t>(device.index());
  AtenTensorHandle handle = nullptr;  // (an error's message quotes the call: short names)
  STABLE_TORCH_ERROR_CODE_CHECK(
      aoti_torch_empty_strided(ndim, sizes, strides, dtype_code, device_type, device_index, &handle));
  return Tensor(handle);
}

// An output allocated from its shape rule, on the device of the tensor the op dispatches on.
inline Tensor empty(const char* op, const char* out, IntArrayRef shape, ScalarType dtype,
                    const torch::stable::Device& device) {
  return with_context(op, [&] { return empty_contiguous(shape, dtype, device); }, "allocating output '", out, "'");
}

// The kernel's contiguous view of an argument: itself when contiguous, else a copy.
inline Tensor contiguous(const char* op, const char* arg, const Tensor& t) {
  if (t.is_contiguous()) return t;
  return with_context(op, [&] { return torch::stable::contiguous(t); }, "making a contiguous copy of argument '", arg,
                      "'");
}

inline std::optional<Tensor> contiguous(const char* op, const char* arg, const std::optional<Tensor>& t) {
  if (!t.has_value() || !t->defined()) return std::nullopt;
  return contiguous(op, arg, *t);
}

// A `Tensor[]` as the kernel sees it (checks.h's ContiguousList): the given list when every
// element is contiguous, else a copy of it whose non-contiguous elements are contiguous copies
// (`xs[1]` in messages); for a written list, `write_back` copies those back after the kernel.
class ContiguousList {
 public:
  ContiguousList(const char* op, const char* arg, const std::vector<Tensor>& ts) : given_(&ts) {
    for (size_t i = 0; i < ts.size(); ++i) {
      if (!ts[i].defined() || ts[i].is_contiguous()) continue;
      if (copies_.empty()) copies_ = ts;
      copies_[i] = contiguous(op, element_name(arg, i).c_str(), ts[i]);
    }
  }

  const std::vector<Tensor>& list() const { return copies_.empty() ? *given_ : copies_; }

  void write_back(const std::vector<Tensor>& targets) const;  // below, beside write_back of one tensor

 private:
  const std::vector<Tensor>* given_;
  std::vector<Tensor> copies_;  // empty: every element was contiguous
};

// ---- arguments written in place (checks.h's, with the same messages) ----------------------
// aten's has_internal_overlap and get_overlap_status, from what the stable API tells of a
// tensor (its data pointer, sizes, strides and element size): a tensor of a non-overlapping,
// dense layout spans one range of bytes, so two such tensors share memory exactly when their
// ranges meet; the tensors of other layouts are aten's "too hard" cases, which it lets pass.
inline bool non_overlapping_and_dense(const Tensor& t) {
  const IntArrayRef sizes = t.sizes(), strides = t.strides();
  std::vector<int64_t> dims;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] != 1) dims.push_back(static_cast<int64_t>(d));
  }
  std::sort(dims.begin(), dims.end(), [&](int64_t a, int64_t b) { return strides[a] < strides[b]; });
  int64_t expected = 1;
  for (int64_t d : dims) {
    if (strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}

// aten::has_internal_overlap(t) == MemOverlap::Yes: a dimension of more than one element and stride 0.
inline bool has_internal_overlap(const Tensor& t) {
  if (non_overlapping_and_dense(t)) return false;
  const IntArrayRef sizes = t.sizes(), strides = t.strides();
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] > 1 && strides[d] == 0) return true;
  }
  return false;
}

// The bytes [lo, hi) that a tensor's elements span (strides are not negative in torch).
struct ByteSpan {
  uintptr_t lo = 0, hi = 0;
};

inline ByteSpan byte_span(const Tensor& t) {
  const IntArrayRef sizes = t.sizes(), strides = t.strides();
  int64_t last = 0;
  for (size_t d = 0; d < sizes.size(); ++d) last += (sizes[d] - 1) * strides[d];
  const auto lo = reinterpret_cast<uintptr_t>(t.data_ptr());
  return {lo, lo + static_cast<uintptr_t>((last + 1) * static_cast<int64_t>(t.element_size()))};
}

// aten::get_overlap_status(a, b) is Full or Partial: the same tensor, or two dense tensors
// whose bytes meet.
inline bool overlaps(const Tensor& a, const Tensor& b) {
  if (a.numel() == 0 || b.numel() == 0 || a.data_ptr() == nullptr || b.data_ptr() == nullptr) return false;
  if (a.get() == b.get() || (a.data_ptr() == b.data_ptr() && a.sizes().equals(b.sizes()) &&
                             a.strides().equals(b.strides()) && a.scalar_type() == b.scalar_type())) {
    return true;
  }
  if (!non_overlapping_and_dense(a) || !non_overlapping_and_dense(b)) return false;
  const ByteSpan x = byte_span(a), y = byte_span(b);
  return x.lo < y.hi && y.lo < x.hi;
}

// An argument written in place must not have elements that share memory (an expanded tensor).
inline void check_writable(const char* op, const char* arg, const Tensor& t) {
  OPWRAP_STABLE_CHECK(!has_internal_overlap(t), op, ": argument '", arg,
                      "' is written in place, but some of its elements share memory (an expanded or "
                      "stride-0 tensor); clone() it first");
}

// An argument written in place must not share memory with an input the kernel reads, nor with
// another argument it writes (`other_written`).
inline void check_no_overlap(const char* op, const char* written, const Tensor& w, const char* other,
                             const Tensor& in, bool other_written = false) {
  OPWRAP_STABLE_CHECK(!overlaps(w, in), op, ": argument '", written, "' is written in place, but shares memory with ",
                      other_written ? "argument '" : "input '", other, other_written ? "', also written" : "'",
                      "; pass a copy (clone()) of one of them");
}

// The same checks over several arguments, tensor lists among them, each element named `arg[i]`
// (checks.h's check_no_overlaps): sorted by the first byte each tensor spans and swept once.
class OverlapArg {
 public:
  OverlapArg(const char* name, bool written, const Tensor& t) : name_(name), written_(written), one_(&t) {}
  OverlapArg(const char* name, bool written, const std::optional<Tensor>& t)
      : name_(name), written_(written), optional_(&t) {}
  OverlapArg(const char* name, bool written, const std::vector<Tensor>& ts)
      : name_(name), written_(written), list_(&ts) {}

  const char* name() const { return name_; }
  bool written() const { return written_; }
  bool listed() const { return list_ != nullptr; }

  template <typename F>
  void for_each(F&& f) const {
    if (one_ != nullptr) {
      if (one_->defined()) f(size_t{0}, *one_);
    } else if (optional_ != nullptr) {
      if (optional_->has_value() && (*optional_)->defined()) f(size_t{0}, **optional_);
    } else {
      for (size_t i = 0; i < list_->size(); ++i) {
        if ((*list_)[i].defined()) f(i, (*list_)[i]);
      }
    }
  }

 private:
  const char* name_;
  bool written_;
  const Tensor* one_ = nullptr;
  const std::optional<Tensor>* optional_ = nullptr;
  const std::vector<Tensor>* list_ = nullptr;
};

inline void check_no_overlaps(const char* op, std::initializer_list<OverlapArg> args) {
  struct Span {
    ByteSpan bytes;
    const Tensor* t;
    const OverlapArg* arg;
    size_t index;
  };
  const auto name = [](const Span& s) { return s.arg->listed() ? element_name(s.arg->name(), s.index) : std::string(s.arg->name()); };
  std::vector<Span> spans;
  for (const OverlapArg& a : args) {
    a.for_each([&](size_t i, const Tensor& t) {
      if (a.written() && has_internal_overlap(t)) {
        const std::string n = a.listed() ? element_name(a.name(), i) : std::string(a.name());
        fail(op, ": argument '", n, "' is written in place, but some of its elements share memory "
             "(an expanded or stride-0 tensor); clone() it first");
      }
      if (t.numel() == 0 || t.data_ptr() == nullptr) return;
      spans.push_back({byte_span(t), &t, &a, i});
    });
  }
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.bytes.lo != b.bytes.lo ? a.bytes.lo < b.bytes.lo : a.arg != b.arg ? a.arg < b.arg : a.index < b.index;
  });
  std::vector<const Span*> open;
  for (const Span& s : spans) {
    open.erase(std::remove_if(open.begin(), open.end(), [&](const Span* o) { return o->bytes.hi <= s.bytes.lo; }),
               open.end());
    for (const Span* o : open) {
      if (!o->arg->written() && !s.arg->written()) continue;  // two inputs may share memory
      const Span& w = o->arg->written() ? *o : s;
      const Span& other = &w == o ? s : *o;
      check_no_overlap(op, name(w).c_str(), *w.t, name(other).c_str(), *other.t, other.arg->written());
    }
    open.push_back(&s);
  }
}

// After a kernel wrote into a contiguous copy of a non-contiguous argument written in place.
inline void write_back(const Tensor& target, const Tensor& written) {
  if (target.data_ptr() == written.data_ptr()) return;
  Tensor t = target;
  torch::stable::copy_(t, written);
}

inline void write_back(const std::optional<Tensor>& target, const std::optional<Tensor>& written) {
  if (target.has_value() && target->defined() && written.has_value()) write_back(*target, *written);
}

inline void ContiguousList::write_back(const std::vector<Tensor>& targets) const {
  for (size_t i = 0; i < copies_.size(); ++i) {
    if (targets[i].defined()) opwrap::rt::write_back(targets[i], copies_[i]);
  }
}

// out= arguments: the result's dtype, and resized to the shape rule's shape as
// at::native::resize_output does: left alone when of the right shape, resized when empty, and
// resized with aten's warning when it had elements.  (aten::_resize_output_ has only a Meta
// kernel, so the warning comes from an aten op whose out= path is resize_output: expand_copy.out
// of a 0-d tensor, whose values the kernel then overwrites; only on that rare path.)
inline void check_out_dtype(const char* op, const char* arg, const Tensor& out, ScalarType expected) {
  OPWRAP_STABLE_CHECK(out.scalar_type() == expected, op, ": out= argument '", arg, "' has dtype ",
                      out.scalar_type(), ", but the result has dtype ", expected);
}

// Calls aten op `name`.`overload` that returns one of its own (written) arguments, with `stack`
// holding its arguments; the handle the dispatcher returns in stack[0] is released (held in a
// Tensor that goes out of scope): a call that dropped it kept the tensor alive for ever.
template <size_t N>
inline void call_returning_written(const char* name, const char* overload, std::array<StableIValue, N>& stack) {
  TORCH_ERROR_CODE_CHECK(torch_call_dispatcher(name, overload, stack.data(), TORCH_ABI_VERSION));
  (void)torch::stable::detail::to<Tensor>(stack[0]);
}

inline void resize_output(const char* op, const char* arg, const Tensor& out, const std::vector<int64_t>& shape) {
  if (out.sizes().equals(IntArrayRef(shape))) return;
  with_context(op, [&] {
    if (out.numel() == 0) {
      std::array<StableIValue, 3> stack{torch::stable::detail::from(out), torch::stable::detail::from(shape),
                                        torch::stable::detail::from(std::nullopt)};
      call_returning_written("aten::resize_", "", stack);
      return;
    }
    const std::vector<int64_t> scalar;
    const Tensor one = torch::stable::empty(IntArrayRef(scalar), out.scalar_type(), std::nullopt, out.device());
    std::array<StableIValue, 4> stack{torch::stable::detail::from(one), torch::stable::detail::from(shape),
                                      torch::stable::detail::from(false), torch::stable::detail::from(out)};
    call_returning_written("aten::expand_copy", "out", stack);
  }, "resizing out= argument '", arg, "'");
}

inline int64_t bind_linear(const char* op, const char* arg, const Tensor& t, int64_t dim, int64_t a, int64_t b,
                           const char* what, const char* var) {
  const int64_t size = t.size(dim);
  const int64_t at = dim < 0 ? dim + t.dim() : dim;
  OPWRAP_STABLE_CHECK(a != 0, op, ": argument '", arg, "' has size ", size, " at dimension ", at, ", but expected ",
                      what, ", which cannot give ", var, ": its factor is 0 (shape ", shape_str(t.sizes()), ")");
  int64_t rest;
  OPWRAP_STABLE_CHECK(!__builtin_sub_overflow(size, b, &rest), op, ": a shape expression overflows int64: ", size,
                      " - ", b);
  if (rest % a != 0) {
    if (b != 0) {
      fail(op, ": argument '", arg, "' has size ", size, " at dimension ", at, ", but expected ", what, " (", size,
           " - ", b, " = ", rest, " is not divisible by ", a, ") (shape ", shape_str(t.sizes()), ")");
    }
    fail(op, ": argument '", arg, "' has size ", size, " at dimension ", at, ", but expected ", what, " (", size,
         " is not divisible by ", a, ") (shape ", shape_str(t.sizes()), ")");
  }
  const int64_t x = rest / a;
  OPWRAP_STABLE_CHECK(x >= 0, op, ": argument '", arg, "' has size ", size, " at dimension ", at, ", but expected ",
                      what, " (", var, " = ", x, " would be negative) (shape ", shape_str(t.sizes()), ")");
  return x;
}

// Tensor lists' shape rules, as <opwrap/runtime/shape_checks.h> has them for the ATen target:
// a list's element, names and runs its first element binds (-1 and an unbound Run until then)
// and the others check (element_name and list_sum are <opwrap/shared/shape_arith.h>'s).
inline const Tensor& element(const std::vector<Tensor>& list, size_t i) { return list[i]; }

inline void bind_or_check(const char* op, const char* arg, const Tensor& t, int64_t dim, int64_t& var,
                          const char* what) {
  if (var < 0) {
    var = t.size(dim);
    return;
  }
  check_size(op, arg, t, dim, var, what);
}

inline void bind_or_check_linear(const char* op, const char* arg, const Tensor& t, int64_t dim, int64_t a, int64_t b,
                                 const char* what, const char* name, int64_t& var) {
  if (var < 0) {
    var = bind_linear(op, arg, t, dim, a, b, what, name);
    return;
  }
  int64_t expected;
  OPWRAP_STABLE_CHECK(!__builtin_mul_overflow(a, var, &expected) && !__builtin_add_overflow(expected, b, &expected),
                      op, ": a shape expression overflows int64: ", a, " * ", var, " + ", b);
  const int64_t size = t.size(dim);
  OPWRAP_STABLE_CHECK(size == expected, op, ": argument '", arg, "' has size ", size, " at dimension ",
                      dim < 0 ? dim + t.dim() : dim, ", but expected ", what, " = ", expected, " (shape ",
                      shape_str(t.sizes()), ")");
}

inline void require_bound(const char* op, const char* list, int64_t var, const char* name, const char* spec) {
  OPWRAP_STABLE_CHECK(var >= 0, op, ": argument '", list, "' holds no tensor, but its shape ", spec, " must give ",
                      name);
}

struct Run {
  std::vector<int64_t> dims;
  bool bound = false;
  operator IntArrayRef() const { return IntArrayRef(dims); }
};

inline void bind_or_check_run(const char* op, const char* arg, const Tensor& t, int64_t start, int64_t after,
                              Run& var, const char* what) {
  if (!var.bound) {
    const IntArrayRef run = t.sizes().slice(start, t.dim() - start - after);  // the rank was checked before
    var.dims.assign(run.begin(), run.end());
    var.bound = true;
    return;
  }
  check_run(op, arg, t, start, after, var, what);
}

inline void require_bound(const char* op, const char* list, const Run& var, const char* name, const char* spec) {
  OPWRAP_STABLE_CHECK(var.bound, op, ": argument '", list, "' holds no tensor, but its shape ", spec, " must give *",
                      name);
}

// Ops whose tensors are all lists (or optional) dispatch on the first tensor given; its name in
// messages is the list's and the element's (`xs[2]`), or the argument's (checks.h's Given).
struct Given {
  Tensor tensor;
  std::string name;
  bool found = false;
};

inline void find_given(Given& out, const char* name, const std::optional<Tensor>& t) {
  if (!out.found && t.has_value() && t->defined()) out = {*t, name, true};
}
inline void find_given(Given& out, const char* name, const std::vector<Tensor>& ts) {
  for (size_t i = 0; i < ts.size() && !out.found; ++i) {
    if (ts[i].defined()) out = {ts[i], element_name(name, i), true};
  }
}

// `names`: the arguments' names, one for each of `tensors`, in order.
template <typename... Ts>
Given first_given(const char* op, std::initializer_list<const char*> names, const Ts&... tensors) {
  Given out;
  const char* const* name = names.begin();
  (find_given(out, *name++, tensors), ...);
  OPWRAP_STABLE_CHECK(out.found, op, ": expected at least one tensor argument to dispatch on, but none was given");
  return out;
}

// Tensor lists: every element defined, on the device (and, off the CPU, the device of the tensor
// the op dispatches on), with the dtype of the list's dtype variable.
inline void check_list(const char* op, const char* arg, const std::vector<Tensor>& ts, DeviceType device,
                       const Tensor& first, const char* first_name, std::initializer_list<ScalarType> allowed,
                       const char* names, ScalarType expected, const char* reference) {
  for (size_t i = 0; i < ts.size(); ++i) {
    const std::string element = std::string(arg) + "[" + std::to_string(i) + "]";
    check_tensor(op, element.c_str(), ts[i], device);
    if (device != DeviceType::CPU) check_same_device(op, element.c_str(), ts[i], first, first_name);
    check_dtype_in(op, element.c_str(), ts[i], allowed, names);
    check_same_dtype(op, element.c_str(), ts[i], expected, reference);
  }
}

// `index: {indices: weight.size(0)}`: every value of an integer tensor lies in [low, high),
// checked on the CPU before the kernel reads memory through it (on CUDA a check would
// synchronize the stream: kernels assert, as aten's do).
template <typename T>
void index_extremes(const Tensor& t, int64_t& min, int64_t& max) {
  const T* p = static_cast<const T*>(t.const_data_ptr());
  min = max = static_cast<int64_t>(p[0]);
  for (int64_t i = 1, n = t.numel(); i < n; ++i) {
    const int64_t v = static_cast<int64_t>(p[i]);
    min = v < min ? v : min;
    max = v > max ? v : max;
  }
}

inline void check_index(const char* op, const char* arg, const Tensor& t, int64_t low, int64_t high,
                        const char* rule) {
  const ScalarType dtype = t.scalar_type();
  int64_t min = 0, max = 0;
  const Tensor c = t.numel() > 0 ? contiguous(op, arg, t) : t;
  switch (dtype) {
    case ScalarType::Byte: if (t.numel()) index_extremes<uint8_t>(c, min, max); break;
    case ScalarType::Char: if (t.numel()) index_extremes<int8_t>(c, min, max); break;
    case ScalarType::Short: if (t.numel()) index_extremes<int16_t>(c, min, max); break;
    case ScalarType::Int: if (t.numel()) index_extremes<int32_t>(c, min, max); break;
    case ScalarType::Long: if (t.numel()) index_extremes<int64_t>(c, min, max); break;
    case ScalarType::UInt16: if (t.numel()) index_extremes<uint16_t>(c, min, max); break;
    case ScalarType::UInt32: if (t.numel()) index_extremes<uint32_t>(c, min, max); break;
    case ScalarType::UInt64: if (t.numel()) index_extremes<uint64_t>(c, min, max); break;
    default:
      fail(op, ": argument '", arg, "' holds indices, so it must have an integer dtype, not ", dtype);
  }
  if (t.numel() == 0) return;
  OPWRAP_STABLE_CHECK(min >= low && max < high, op, ": argument '", arg, "' holds ", (min < low ? min : max),
                      ", out of range: its values must lie in [", low, ", ", high, ") (index: ", rule, ")");
}

// A tensor list's bound is every element's (`offsets[2]` in messages).
inline void check_index(const char* op, const char* arg, const std::vector<Tensor>& ts, int64_t low, int64_t high,
                        const char* rule) {
  for (size_t i = 0; i < ts.size(); ++i) {
    check_index(op, (std::string(arg) + "[" + std::to_string(i) + "]").c_str(), ts[i], low, high, rule);
  }
}

#ifdef USE_CUDA
// The current CUDA stream of a device (a cudaStream_t), given to CUDA C kernels.
inline void* current_cuda_stream(int32_t device_index) {
  void* stream = nullptr;
  TORCH_ERROR_CODE_CHECK(aoti_torch_get_current_cuda_stream(device_index, &stream));
  return stream;
}
#endif

namespace abi {

// The C kernel ABI's dtype and device codes are c10's, which headeronly's enums share.
static_assert(OPWRAP_FLOAT32 == static_cast<int>(ScalarType::Float) &&
                  OPWRAP_FLOAT64 == static_cast<int>(ScalarType::Double) &&
                  OPWRAP_INT64 == static_cast<int>(ScalarType::Long) &&
                  OPWRAP_BFLOAT16 == static_cast<int>(ScalarType::BFloat16) &&
                  OPWRAP_FLOAT8_E8M0FNU == static_cast<int>(ScalarType::Float8_e8m0fnu),
              "opwrap/kernel_abi.h's dtype codes are c10::ScalarType's");
static_assert(OPWRAP_CPU == static_cast<int>(DeviceType::CPU) && OPWRAP_CUDA == static_cast<int>(DeviceType::CUDA),
              "opwrap/kernel_abi.h's device codes are c10::DeviceType's");

// What <opwrap/shared/abi_call.h> (fill, view, output, Call) asks of the target.
inline int32_t num_threads() { return static_cast<int32_t>(torch::stable::get_num_threads()); }

// aten::resize_ through the dispatcher (the stable API has no resize_ of its own).
inline void resize_output(Tensor& t, const int64_t* sizes, int64_t ndim) {
  const std::vector<int64_t> shape(sizes, sizes + ndim);
  std::array<StableIValue, 3> stack{torch::stable::detail::from(t), torch::stable::detail::from(shape),
                                    torch::stable::detail::from(std::nullopt)};
  call_returning_written("aten::resize_", "", stack);
}

inline Tensor allocate_workspace(int32_t device_type, int32_t device_index, int64_t nbytes) {
  const torch::stable::Device device(static_cast<DeviceType>(device_type),
                                     static_cast<torch::stable::DeviceIndex>(device_index));
  const std::vector<int64_t> size{nbytes};
  return torch::stable::empty(size, ScalarType::Byte, std::nullopt, device);
}

inline void run_parallel_for(int64_t begin, int64_t end, int64_t grain, opwrap_range_fn fn, void* data) {
  torch::stable::parallel_for(begin, end, grain, [&](int64_t b, int64_t e) { fn(data, b, e); });
}

inline std::string error_message(const std::exception& e) { return e.what(); }

#define OPWRAP_RT_CHECK OPWRAP_STABLE_CHECK
#include <opwrap/shared/abi_call.h>
#undef OPWRAP_RT_CHECK

// A tensor written in place: its size is the caller's.
inline opwrap_tensor written(const Tensor& t) { return view(t); }

class OptionalView {
 public:
  explicit OptionalView(const std::optional<Tensor>& t) : present_(t.has_value() && t->defined()) {
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
  explicit ListView(const std::vector<Tensor>& ts) {
    views_.reserve(ts.size());
    for (const Tensor& t : ts) views_.push_back(view(t));
  }
  opwrap_tensor_list get() const { return {views_.data(), static_cast<int64_t>(views_.size())}; }

 private:
  std::vector<opwrap_tensor> views_;
};

inline int64_t arg(int64_t v) { return v; }
inline double arg(double v) { return v; }
inline bool arg(bool v) { return v; }
inline int32_t arg(ScalarType v) { return static_cast<int32_t>(v); }
inline opwrap_int_array arg(IntArrayRef v) { return {v.data(), static_cast<int64_t>(v.size())}; }
inline opwrap_string arg(std::string_view v) { return {v.data(), static_cast<int64_t>(v.size())}; }
inline opwrap_optional_int arg(const std::optional<int64_t>& v) { return {v.value_or(0), v.has_value()}; }
inline opwrap_optional_float arg(const std::optional<double>& v) { return {v.value_or(0.0), v.has_value()}; }
inline opwrap_optional_bool arg(const std::optional<bool>& v) { return {v.value_or(false), v.has_value()}; }
inline opwrap_optional_dtype arg(const std::optional<ScalarType>& v) {
  return {v.has_value() ? static_cast<int32_t>(*v) : -1, v.has_value()};
}
inline opwrap_optional_int_array arg(const std::optional<IntArrayRef>& v) {
  if (!v.has_value()) return {nullptr, 0, false};
  return {v->data(), static_cast<int64_t>(v->size()), true};
}

}  // namespace abi
HIDDEN_NAMESPACE_END(opwrap, rt)
