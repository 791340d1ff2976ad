// Support code for generated kernels: argument checks whose messages name the op, the
// argument and what was expected.  Header-only, and it includes nothing beyond
// ATen/core/Tensor.h and two small ATen headers, so generated translation units stay cheap to
// compile.
#pragma once

#include <ATen/MemoryOverlap.h>
#include <ATen/ops/empty.h>
#include <ATen/core/List.h>
#include <ATen/core/Tensor.h>
#include <c10/core/SymIntArrayRef.h>
#include <c10/util/Exception.h>
#include <c10/util/OptionalArrayRef.h>
#include <opwrap/runtime/shape_checks.h>
#include <opwrap/runtime/shape_str.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace opwrap::rt {

// list_item, shape_add/sub/mul, floordiv, concat, rule_value, element_name, list_sum,
// check_list_input_length: the stable target's too.
using IntArrayRef = c10::IntArrayRef;
#define OPWRAP_RT_CHECK TORCH_CHECK
#include <opwrap/shared/shape_arith.h>
#undef OPWRAP_RT_CHECK

inline const at::Tensor& check_tensor(const char* op, const char* arg, const at::Tensor& t,
                                      c10::DeviceType device) {
  TORCH_CHECK(t.defined(), op, ": argument '", arg, "' is an undefined tensor; expected a ",
              c10::DeviceTypeName(device, /*lower_case=*/true), " tensor");
  TORCH_CHECK(t.device().type() == device, op, ": argument '", arg, "' is on ", t.device(),
              ", but this kernel expects all tensor arguments on ",
              c10::DeviceTypeName(device, /*lower_case=*/true));
  return t;
}

// Every tensor argument on the same device as the first (cuda:0 and cuda:1 do not mix).
inline void check_same_device(const char* op, const char* arg, const at::Tensor& t, const at::Tensor& reference,
                              const char* reference_name) {
  TORCH_CHECK(t.device() == reference.device(), op, ": argument '", arg, "' is on ", t.device(),
              ", but '", reference_name, "' is on ", reference.device(), "; expected all tensors on one device");
}

inline void check_dtype_in(const char* op, const char* arg, const at::Tensor& t,
                           std::initializer_list<at::ScalarType> allowed, const char* names) {
  for (auto s : allowed) {
    if (t.scalar_type() == s) return;
  }
  TORCH_CHECK(false, op, ": argument '", arg, "' has dtype ", t.scalar_type(),
              ", but expected one of: ", names);
}

inline void check_same_dtype(const char* op, const char* arg, const at::Tensor& t,
                             at::ScalarType expected, const char* reference) {
  TORCH_CHECK(t.scalar_type() == expected, op, ": argument '", arg, "' has dtype ",
              t.scalar_type(), ", but expected ", expected, " (the dtype of '", reference, "')");
}

[[noreturn]] inline void unsupported_dtype(const char* op, const char* arg, at::ScalarType dtype,
                                           const char* names) {
  TORCH_CHECK(false, op, ": dtype ", dtype, " of '", arg, "' is not supported; expected one of: ",
              names);
}

// Pointwise ops: the inputs' shapes broadcast (as torch.broadcast_shapes).  Generated pointwise
// kernels call it when their TensorIterator failed to build (pointwise_iterator.h), so it
// runs only to name the argument whose shape does not broadcast.
struct NamedTensor {
  const char* name;
  const at::Tensor& tensor;
};

inline void check_broadcastable(const char* op, std::initializer_list<NamedTensor> inputs) {
  std::vector<int64_t> shape;
  const char* shaped_by = nullptr;
  for (const NamedTensor& in : inputs) {
    const c10::IntArrayRef sizes = in.tensor.sizes();
    if (sizes.size() > shape.size()) shape.insert(shape.begin(), sizes.size() - shape.size(), 1);
    for (size_t i = 0; i < sizes.size(); ++i) {
      int64_t& have = shape[shape.size() - sizes.size() + i];
      const int64_t size = sizes[i];
      if (size == have || size == 1) continue;
      TORCH_CHECK(have == 1, op, ": argument '", in.name, "' has shape ", shape_str(sizes),
                  ", which does not broadcast with '", shaped_by, "' (broadcast so far: ", shape_str(shape), ")");
      have = size;
    }
    if (shaped_by == nullptr) shaped_by = in.name;
  }
}

// The dtype the inputs promote to must be one the op is instantiated for.  The message is
// built only when the check fails (promoted_dtype_error).
[[noreturn]] C10_NOINLINE inline void promoted_dtype_error(const char* op, std::initializer_list<NamedTensor> inputs,
                                                         at::ScalarType dtype, const char* allowed_names) {
  std::string from;
  for (const NamedTensor& in : inputs) {
    from += std::string(from.empty() ? "" : ", ") + "'" + in.name + "' " + c10::toString(in.tensor.scalar_type());
  }
  TORCH_CHECK(false, op, ": the inputs (", from, ") compute in dtype ", dtype,
              ", which is not supported; expected one of: ", allowed_names);
}

inline void check_promoted_dtype(const char* op, std::initializer_list<NamedTensor> inputs, at::ScalarType dtype,
                                 std::initializer_list<at::ScalarType> allowed, const char* allowed_names) {
  for (at::ScalarType a : allowed) {
    if (a == dtype) return;
  }
  promoted_dtype_error(op, inputs, dtype, allowed_names);
}

inline void check_rank(const char* op, const char* arg, const at::Tensor& t, int64_t rank,
                       bool at_least, const char* spec) {
  if (at_least) {
    TORCH_CHECK(t.dim() >= rank, op, ": argument '", arg, "' must have at least ", rank,
                " dimensions ", spec, ", but got ", t.dim(), " (shape ", shape_str(t.sizes()), ")");
  } else {
    TORCH_CHECK(t.dim() == rank, op, ": argument '", arg, "' must have ", rank, " dimension",
                rank == 1 ? "" : "s", " ", spec, ", but got ", t.dim(), " (shape ", shape_str(t.sizes()), ")");
  }
}

inline void check_size(const char* op, const char* arg, const at::Tensor& t, int64_t dim,
                       int64_t expected, const char* what) {
  const int64_t actual = t.size(dim);
  TORCH_CHECK(actual == expected, op, ": argument '", arg, "' has size ", actual,
              " at dimension ", dim < 0 ? dim + t.dim() : dim, ", but expected ",
              rule_value(what, std::to_string(expected)), " (shape ", shape_str(t.sizes()), ")");
}

// The run of dimensions [start, dim - after) of `t` is `expected` (a run bound by an earlier
// input): as many dimensions, the same sizes.
inline void check_run(const char* op, const char* arg, const at::Tensor& t, int64_t start, int64_t after,
                      c10::IntArrayRef expected, const char* what) {
  const int64_t from = std::min<int64_t>(start, t.dim());
  const int64_t length = std::max<int64_t>(t.dim() - from - after, 0);
  const auto actual = t.sizes().slice(from, length);
  TORCH_CHECK(length == static_cast<int64_t>(expected.size()) && actual == expected, op,
              ": argument '", arg, "' has dimensions ", shape_str(actual), " where *", what, " = ",
              shape_str(expected), " was expected (shape ", shape_str(t.sizes()), ")");
}

inline void check_shape(const char* op, const char* arg, const at::Tensor& t,
                        c10::IntArrayRef expected, const char* what) {
  TORCH_CHECK(t.sizes() == expected, op, ": argument '", arg, "' has shape ", shape_str(t.sizes()),
              ", but expected ", rule_value(what, shape_str(expected)));
}

inline void check_output_shape(const char* op, const char* out, c10::IntArrayRef shape,
                               const char* rule) {
  int64_t numel = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    TORCH_CHECK(shape[i] >= 0, op, ": output '", out, "' would have negative size ", shape[i],
                " at dimension ", i, " (shape ", shape_str(shape), " from ", rule, ")");
    TORCH_CHECK(shape[i] == 0 || numel <= std::numeric_limits<int64_t>::max() / shape[i], op,
                ": output '", out, "' of shape ", shape_str(shape), " (from ", rule,
                ") has more elements than int64 can count");
    numel *= shape[i];
  }
}

// Errors torch raises inside a generated wrapper (an allocation that fails, a byte count past
// int64) gain a line naming the op and what it was doing.
template <typename F>
auto with_context(const char* op, const char* what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (c10::Error& e) {
    e.add_context(std::string(op) + ": while " + what);
    throw;  // the same exception type (OutOfMemoryError stays one)
  }
}

// An output allocated from its shape rule.
inline at::Tensor empty(const char* op, const char* out, c10::IntArrayRef shape, const at::TensorOptions& options) {
  const std::string what = std::string("allocating output '") + out + "'";
  return with_context(op, what.c_str(), [&] { return at::empty(shape, options); });
}

// An argument written in place must not have elements that share memory (an expanded
// tensor): the kernel would write one location several times.
inline void check_writable(const char* op, const char* arg, const at::Tensor& t) {
  TORCH_CHECK(at::has_internal_overlap(t) != at::MemOverlap::Yes, op, ": argument '", arg,
              "' is written in place, but some of its elements share memory (an expanded or "
              "stride-0 tensor); clone() it first");
}

// An argument written in place must not share memory with an input the kernel reads (the
// kernel would read values it has already overwritten), nor with another argument it writes
// (`other_written`: one of the two writes would be lost).
inline void check_no_overlap(const char* op, const char* written, const at::TensorImpl* w, const char* other,
                             const at::TensorImpl* in, bool other_written = false) {
  const auto status = at::get_overlap_status(w, in);
  TORCH_CHECK(status != at::MemOverlapStatus::Full && status != at::MemOverlapStatus::Partial, op,
              ": argument '", written, "' is written in place, but shares memory with ",
              other_written ? "argument '" : "input '", other, other_written ? "', also written" : "'",
              "; pass a copy (clone()) of one of them");
}

inline void check_no_overlap(const char* op, const char* written, const at::Tensor& w, const char* other,
                             const at::Tensor& in, bool other_written = false) {
  check_no_overlap(op, written, w.unsafeGetTensorImpl(), other, in.unsafeGetTensorImpl(), other_written);
}

// The same checks over the tensors of several arguments, tensor lists among them, each element
// named `arg[i]`: every written element has no self-overlapping elements (check_writable), and
// shares no memory with any other tensor given (of another argument, or another element of its
// own list).  The tensors are sorted by the first byte they span and swept once, so only those
// whose spans intersect are compared (an optimizer step over thousands of parameters costs a
// sort, not every pair); get_overlap_status then decides, as for two tensors.
class OverlapArg {
 public:
  OverlapArg(const char* name, bool written, const at::Tensor& t) : name_(name), written_(written), one_(&t) {}
  OverlapArg(const char* name, bool written, const std::optional<at::Tensor>& t)
      : name_(name), written_(written), optional_(&t) {}
  OverlapArg(const char* name, bool written, at::TensorList ts) : name_(name), written_(written), list_(ts), is_list_(true) {}
  OverlapArg(const char* name, bool written, const c10::List<std::optional<at::Tensor>>& ts)
      : name_(name), written_(written), optional_list_(&ts) {}

  const char* name() const { return name_; }
  bool written() const { return written_; }
  bool listed() const { return is_list_ || optional_list_ != nullptr; }

  // f(index in the list (0 for a single tensor), the tensor) for each defined tensor.
  template <typename F>
  void for_each(F&& f) const {
    if (one_ != nullptr) {
      if (one_->defined()) f(size_t{0}, one_->unsafeGetTensorImpl());
    } else if (optional_ != nullptr) {
      if (optional_->has_value() && (*optional_)->defined()) f(size_t{0}, (*optional_)->unsafeGetTensorImpl());
    } else if (is_list_) {
      for (size_t i = 0; i < list_.size(); ++i) {
        if (list_[i].defined()) f(i, list_[i].unsafeGetTensorImpl());
      }
    } else {
      for (size_t i = 0; i < optional_list_->size(); ++i) {
        const std::optional<at::Tensor> t = optional_list_->get(i);  // the list holds the tensor
        if (t.has_value() && t->defined()) f(i, t->unsafeGetTensorImpl());
      }
    }
  }

 private:
  const char* name_;
  bool written_;
  const at::Tensor* one_ = nullptr;
  const std::optional<at::Tensor>* optional_ = nullptr;
  at::TensorList list_;
  bool is_list_ = false;
  const c10::List<std::optional<at::Tensor>>* optional_list_ = nullptr;
};

inline void check_no_overlaps(const char* op, std::initializer_list<OverlapArg> args) {
  struct Span {
    uintptr_t lo, hi;  // the bytes from the first element to one past the last
    at::TensorImpl* t;
    const OverlapArg* arg;
    size_t index;
  };
  const auto name = [](const Span& s) { return s.arg->listed() ? element_name(s.arg->name(), s.index) : std::string(s.arg->name()); };
  std::vector<Span> spans;
  for (const OverlapArg& a : args) {
    a.for_each([&](size_t i, at::TensorImpl* t) {
      if (a.written() && at::has_internal_overlap(t) == at::MemOverlap::Yes) {
        const std::string n = a.listed() ? element_name(a.name(), i) : std::string(a.name());
        TORCH_CHECK(false, op, ": argument '", n, "' is written in place, but some of its elements share memory "
                    "(an expanded or stride-0 tensor); clone() it first");
      }
      if (t->numel() == 0 || !t->has_storage()) return;
      int64_t last = 0;  // the offset of the last element, in elements (strides are not negative in torch)
      for (int64_t d = 0; d < t->dim(); ++d) last += (t->sizes()[d] - 1) * t->strides()[d];
      const auto lo = reinterpret_cast<uintptr_t>(t->data());
      spans.push_back({lo, lo + static_cast<uintptr_t>((last + 1) * t->itemsize()), t, &a, i});
    });
  }
  // by address, then in argument order: of two written tensors at one address, the first argument's is named first
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.lo != b.lo ? a.lo < b.lo : a.arg != b.arg ? a.arg < b.arg : a.index < b.index;
  });
  std::vector<const Span*> open;  // the spans seen so far that reach past the current one's start
  for (const Span& s : spans) {
    open.erase(std::remove_if(open.begin(), open.end(), [&](const Span* o) { return o->hi <= s.lo; }), open.end());
    for (const Span* o : open) {
      if (!o->arg->written() && !s.arg->written()) continue;  // two inputs may share memory
      const Span& w = o->arg->written() ? *o : s;
      const Span& other = &w == o ? s : *o;
      check_no_overlap(op, name(w).c_str(), w.t, name(other).c_str(), other.t, other.arg->written());
    }
    open.push_back(&s);
  }
}

// The kernel's contiguous view of an argument: the tensor itself when it is contiguous, else
// a copy (which can fail for a huge expanded tensor: the error then names the argument).
inline at::Tensor contiguous(const char* op, const char* arg, const at::Tensor& t) {
  if (t.is_contiguous()) return t;
  const std::string what = std::string("making a contiguous copy of argument '") + arg + "'";
  return with_context(op, what.c_str(), [&] { return t.contiguous(); });
}

inline std::optional<at::Tensor> contiguous(const char* op, const char* arg, const std::optional<at::Tensor>& t) {
  if (!t.has_value() || !t->defined()) return std::nullopt;
  return contiguous(op, arg, *t);
}

// After a kernel wrote into a contiguous copy of a non-contiguous in-place argument.
inline void write_back(at::Tensor& target, const at::Tensor& written) {
  if (!target.is_same(written)) target.copy_(written);
}

// SymInt arguments as the kernel receives them (codegen/api/types.py): a symbolic value is
// guarded to its concrete one, as SymInt::guard_int does for a plain SymInt.
inline std::optional<int64_t> guard_int(const std::optional<c10::SymInt>& v) {
  if (!v.has_value()) return std::nullopt;
  return v->guard_int(__FILE__, __LINE__);
}

inline at::OptionalIntArrayRef guard_ints(at::OptionalSymIntArrayRef v) {
  if (!v.has_value()) return std::nullopt;
  return C10_AS_INTARRAYREF_SLOW(*v);
}

// Ops whose tensors are all optional or lists dispatch on the first tensor given; its name in
// messages is the argument's, or the list's and the element's (`xs[2]`).
struct Given {
  at::Tensor tensor;
  std::string name;
};

inline void find_given(Given& out, const char* name, const at::Tensor& t) {
  if (!out.tensor.defined() && t.defined()) out = {t, name};
}
inline void find_given(Given& out, const char* name, const std::optional<at::Tensor>& t) {
  if (t.has_value()) find_given(out, name, *t);
}
inline void find_given(Given& out, const char* name, at::TensorList ts) {
  for (size_t i = 0; i < ts.size() && !out.tensor.defined(); ++i) {
    if (ts[i].defined()) out = {ts[i], element_name(name, i)};
  }
}
inline void find_given(Given& out, const char* name, const c10::List<std::optional<at::Tensor>>& ts) {
  for (size_t i = 0; i < ts.size() && !out.tensor.defined(); ++i) {
    const std::optional<at::Tensor> t = ts.get(i);
    if (t.has_value() && t->defined()) out = {*t, element_name(name, i)};
  }
}

// `names`: the arguments' names, one for each of `tensors`, in order.
template <typename... Ts>
Given first_given(const char* op, std::initializer_list<const char*> names, const Ts&... tensors) {
  Given out;
  const char* const* name = names.begin();
  (find_given(out, *name++, tensors), ...);
  TORCH_CHECK(out.tensor.defined(), op, ": expected at least one tensor argument to dispatch on, but none was given");
  return out;
}

// A tensor the kernel made and returned: defined, on the kernel's device, and of the dtype the
// declaration's rule gives (when it has one).
inline void check_result(const char* op, const char* name, const at::Tensor& t, c10::DeviceType device) {
  TORCH_CHECK(t.defined(), op, ": the kernel returned an undefined tensor as '", name, "'");
  TORCH_CHECK(t.device().type() == device, op, ": the kernel returned '", name, "' on ", t.device(),
              ", but it runs on ", c10::DeviceTypeName(device, /*lower_case=*/true));
}

inline void check_result(const char* op, const char* name, const std::vector<at::Tensor>& ts,
                         c10::DeviceType device) {
  for (const at::Tensor& t : ts) check_result(op, name, t, device);
}

inline void check_result_dtype(const char* op, const char* name, const at::Tensor& t, at::ScalarType expected) {
  TORCH_CHECK(t.scalar_type() == expected, op, ": the kernel returned '", name, "' of dtype ", t.scalar_type(),
              ", but the declaration says ", expected);
}

inline void check_result_dtype(const char* op, const char* name, const std::vector<at::Tensor>& ts,
                               at::ScalarType expected) {
  for (size_t i = 0; i < ts.size(); ++i) {
    const std::string element = std::string(name) + "[" + std::to_string(i) + "]";
    check_result_dtype(op, element.c_str(), ts[i], expected);
  }
}

// out= arguments and outputs whose dtype comes from a rule (codegen/lang/dtype_rules.py).
inline void check_out_dtype(const char* op, const char* arg, const at::Tensor& out, at::ScalarType expected) {
  TORCH_CHECK(out.scalar_type() == expected, op, ": out= argument '", arg, "' has dtype ", out.scalar_type(),
              ", but the result has dtype ", expected);
}

inline void check_output_dtype_in(const char* op, const char* name, at::ScalarType dtype, const char* rule,
                                  std::initializer_list<at::ScalarType> allowed, const char* names) {
  for (auto s : allowed) {
    if (dtype == s) return;
  }
  TORCH_CHECK(false, op, ": output '", name, "' would have dtype ", dtype, " (dtype: ", rule,
              "), but expected one of: ", names);
}

// Tensor lists: every element defined, on the device (and, off the CPU, the device of the
// tensor the op dispatches on), with the dtype of the list's dtype variable.
inline at::ScalarType list_dtype(at::TensorList ts, at::ScalarType fallback) {
  return ts.empty() ? fallback : ts[0].scalar_type();
}

inline at::ScalarType list_dtype(const c10::List<std::optional<at::Tensor>>& ts, at::ScalarType fallback) {
  for (size_t i = 0; i < ts.size(); ++i) {
    const std::optional<at::Tensor> t = ts.get(i);
    if (t.has_value() && t->defined()) return t->scalar_type();
  }
  return fallback;
}

inline void check_list_element(const char* op, const char* arg, size_t i, const at::Tensor& t, c10::DeviceType device,
                               const at::Tensor& first, const char* first_name,
                               std::initializer_list<at::ScalarType> allowed, const char* names,
                               at::ScalarType expected, const char* reference) {
  const std::string element = std::string(arg) + "[" + std::to_string(i) + "]";
  check_tensor(op, element.c_str(), t, device);
  if (device != c10::DeviceType::CPU && first.defined()) check_same_device(op, element.c_str(), t, first, first_name);
  check_dtype_in(op, element.c_str(), t, allowed, names);
  check_same_dtype(op, element.c_str(), t, expected, reference);
}

inline void check_list(const char* op, const char* arg, at::TensorList ts, c10::DeviceType device,
                       const at::Tensor& first, const char* first_name, std::initializer_list<at::ScalarType> allowed,
                       const char* names, at::ScalarType expected, const char* reference) {
  for (size_t i = 0; i < ts.size(); ++i) {
    check_list_element(op, arg, i, ts[i], device, first, first_name, allowed, names, expected, reference);
  }
}

inline void check_list(const char* op, const char* arg, const c10::List<std::optional<at::Tensor>>& ts,
                       c10::DeviceType device, const at::Tensor& first, const char* first_name,
                       std::initializer_list<at::ScalarType> allowed, const char* names, at::ScalarType expected,
                       const char* reference) {
  for (size_t i = 0; i < ts.size(); ++i) {
    const std::optional<at::Tensor> t = ts.get(i);
    if (t.has_value() && t->defined()) {
      check_list_element(op, arg, i, *t, device, first, first_name, allowed, names, expected, reference);
    }
  }
}

// The kernel's contiguous view of a tensor list (`contiguous: true`): the list itself when every
// element is contiguous, else a copy of it whose non-contiguous elements are contiguous copies;
// a written list's copies are written back after the kernel (write_back).
class ContiguousList {
 public:
  ContiguousList(const char* op, const char* arg, at::TensorList ts) : given_(ts) {
    for (size_t i = 0; i < ts.size(); ++i) {
      if (!ts[i].defined() || ts[i].is_contiguous()) continue;
      if (copies_.empty()) copies_.assign(ts.begin(), ts.end());
      copies_[i] = contiguous(op, element_name(arg, i).c_str(), ts[i]);
    }
  }

  at::TensorList list() const { return copies_.empty() ? given_ : at::TensorList(copies_); }

  void write_back(at::TensorList targets) const {
    for (size_t i = 0; i < copies_.size(); ++i) {
      if (!targets[i].is_same(copies_[i])) targets[i].copy_(copies_[i]);
    }
  }

 private:
  at::TensorList given_;
  std::vector<at::Tensor> copies_;  // empty: every element was contiguous
};

// An optional argument written in place (`Tensor(b!)?`), computed in a contiguous copy.
inline void write_back(const std::optional<at::Tensor>& target, const std::optional<at::Tensor>& written) {
  if (target.has_value() && target->defined() && written.has_value() && !target->is_same(*written)) {
    target->copy_(*written);
  }
}

}  // namespace opwrap::rt
