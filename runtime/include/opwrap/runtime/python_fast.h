// Argument unpacking for the generated fast Python bindings (vectorcall, METH_FASTCALL).
// Each `take_*` returns false when the object is not what the fast path handles; the
// binding then calls the op's Python wrapper, which handles everything (keywords,
// __torch_function__, modes, conversions) and raises the proper error.
#pragma once

#include <Python.h>

#include <ATen/PythonTorchFunctionTLS.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>
#include <torch/csrc/Device.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/Generator.h>
#include <torch/csrc/Layout.h>
#include <torch/csrc/MemoryFormat.h>
#include <torch/csrc/autograd/python_variable.h>

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace opwrap::py {

// A tensor that needs no __torch_function__ handling: torch.Tensor itself or nn.Parameter
// (THPVariable_CheckExact takes both); subclasses take the Python path.  TorchFunctionModes
// are checked once per call.
inline bool take_tensor(PyObject* obj, const at::Tensor*& out) {
  if (!THPVariable_CheckExact(obj)) return false;
  out = &THPVariable_Unpack(obj);
  return true;
}

inline bool take_optional_tensor(PyObject* obj, std::optional<at::Tensor>& out) {
  if (obj == Py_None) {
    out = std::nullopt;
    return true;
  }
  const at::Tensor* t = nullptr;
  if (!take_tensor(obj, t)) return false;
  out = *t;
  return true;
}

inline bool take_double(PyObject* obj, double& out) {
  if (PyFloat_CheckExact(obj)) {
    out = PyFloat_AS_DOUBLE(obj);
    return true;
  }
  if (PyLong_CheckExact(obj)) {
    out = PyLong_AsDouble(obj);
    if (out == -1.0 && PyErr_Occurred()) {
      PyErr_Clear();
      return false;
    }
    return true;
  }
  return false;
}

// The keyword arguments of a vectorcall (`values`, named by `kwnames`) into the slots of the
// op's arguments, found by their Python names: false when a name is none of them or an
// argument is given twice (the caller's fallback then raises Python's TypeError).
template <size_t N>
inline bool take_keywords(PyObject* const* values, PyObject* kwnames, const char* const (&names)[N],
                          PyObject* (&slots)[N]) {
  const Py_ssize_t n = PyTuple_GET_SIZE(kwnames);
  for (Py_ssize_t k = 0; k < n; ++k) {
    PyObject* key = PyTuple_GET_ITEM(kwnames, k);
    size_t i = 0;
    while (i < N && PyUnicode_CompareWithASCIIString(key, names[i]) != 0) ++i;
    if (i == N || slots[i] != nullptr) return false;
    slots[i] = values[k];
  }
  return true;
}

inline bool take_int(PyObject* obj, int64_t& out) {
  if (!PyLong_CheckExact(obj)) return false;
  int overflow = 0;
  out = PyLong_AsLongLongAndOverflow(obj, &overflow);
  return overflow == 0 && !(out == -1 && PyErr_Occurred());
}

inline bool take_symint(PyObject* obj, c10::SymInt& out) {
  int64_t v = 0;
  if (!take_int(obj, v)) return false;
  out = c10::SymInt(v);
  return true;
}

inline bool take_bool(PyObject* obj, bool& out) {
  if (obj != Py_True && obj != Py_False) return false;
  out = obj == Py_True;
  return true;
}

inline bool take_scalar(PyObject* obj, at::Scalar& out) {
  if (PyBool_Check(obj)) {
    out = at::Scalar(obj == Py_True);
    return true;
  }
  if (PyFloat_CheckExact(obj)) {
    out = at::Scalar(PyFloat_AS_DOUBLE(obj));
    return true;
  }
  int64_t v = 0;
  if (take_int(obj, v)) {
    out = at::Scalar(v);
    return true;
  }
  return false;
}

inline bool take_int_list(PyObject* obj, std::vector<int64_t>& out) {
  if (!PyList_CheckExact(obj) && !PyTuple_CheckExact(obj)) return false;
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
  PyObject** items = PySequence_Fast_ITEMS(obj);
  out.resize(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    if (!take_int(items[i], out[static_cast<size_t>(i)])) return false;
  }
  return true;
}

inline bool take_double_list(PyObject* obj, std::vector<double>& out) {
  if (!PyList_CheckExact(obj) && !PyTuple_CheckExact(obj)) return false;
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
  PyObject** items = PySequence_Fast_ITEMS(obj);
  out.resize(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    if (!take_double(items[i], out[static_cast<size_t>(i)])) return false;
  }
  return true;
}

inline bool take_symint_list(PyObject* obj, std::vector<c10::SymInt>& out) {
  if (!PyList_CheckExact(obj) && !PyTuple_CheckExact(obj)) return false;
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
  PyObject** items = PySequence_Fast_ITEMS(obj);
  out.clear();
  out.reserve(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    int64_t v = 0;
    if (!take_int(items[i], v)) return false;
    out.emplace_back(v);
  }
  return true;
}

// A list or tuple of plain tensors (no __torch_function__ subclass among them).
inline bool take_tensor_list(PyObject* obj, std::vector<at::Tensor>& out) {
  if (!PyList_CheckExact(obj) && !PyTuple_CheckExact(obj)) return false;
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
  PyObject** items = PySequence_Fast_ITEMS(obj);
  out.clear();
  out.reserve(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    const at::Tensor* t = nullptr;
    if (!take_tensor(items[i], t)) return false;
    out.push_back(*t);
  }
  return true;
}

// A str, as a view of its UTF-8 buffer (owned by the object, which outlives the call).
inline bool take_string(PyObject* obj, c10::string_view& out) {
  if (!PyUnicode_CheckExact(obj)) return false;
  Py_ssize_t n = 0;
  const char* data = PyUnicode_AsUTF8AndSize(obj, &n);
  if (data == nullptr) {
    PyErr_Clear();
    return false;
  }
  out = c10::string_view(data, static_cast<size_t>(n));
  return true;
}

inline bool take_dtype(PyObject* obj, at::ScalarType& out) {
  if (!THPDtype_Check(obj)) return false;
  out = reinterpret_cast<THPDtype*>(obj)->scalar_type;
  return true;
}

inline bool take_layout(PyObject* obj, at::Layout& out) {
  if (!THPLayout_Check(obj)) return false;
  out = reinterpret_cast<THPLayout*>(obj)->layout;
  return true;
}

inline bool take_memory_format(PyObject* obj, at::MemoryFormat& out) {
  if (!THPMemoryFormat_Check(obj)) return false;
  out = reinterpret_cast<THPMemoryFormat*>(obj)->memory_format;
  return true;
}

// A torch.device (a str or an int is for the Python wrapper, which parses it as torch does).
// at::Device has no default value, so only the optional form is unpacked here.
inline bool take_optional_device(PyObject* obj, std::optional<at::Device>& out) {
  if (obj == Py_None) {
    out = std::nullopt;
    return true;
  }
  if (!THPDevice_Check(obj)) return false;
  out = reinterpret_cast<THPDevice*>(obj)->device;
  return true;
}

inline bool take_generator(PyObject* obj, at::Generator& out) {
  if (THPGeneratorClass == nullptr || Py_TYPE(obj) != reinterpret_cast<PyTypeObject*>(THPGeneratorClass)) return false;
  out = reinterpret_cast<THPGenerator*>(obj)->cdata;
  return true;
}

// None, or what `take` takes.
template <typename T, typename Take>
inline bool take_optional(PyObject* obj, std::optional<T>& out, Take take) {
  if (obj == Py_None) {
    out = std::nullopt;
    return true;
  }
  T value{};
  if (!take(obj, value)) return false;
  out = std::move(value);
  return true;
}

inline bool take_optional_int(PyObject* obj, std::optional<int64_t>& out) { return take_optional(obj, out, take_int); }
inline bool take_optional_double(PyObject* obj, std::optional<double>& out) { return take_optional(obj, out, take_double); }
inline bool take_optional_bool(PyObject* obj, std::optional<bool>& out) { return take_optional(obj, out, take_bool); }
inline bool take_optional_scalar(PyObject* obj, std::optional<at::Scalar>& out) { return take_optional(obj, out, take_scalar); }
inline bool take_optional_string(PyObject* obj, std::optional<c10::string_view>& out) {
  return take_optional(obj, out, take_string);
}
inline bool take_optional_dtype(PyObject* obj, std::optional<at::ScalarType>& out) { return take_optional(obj, out, take_dtype); }
inline bool take_optional_layout(PyObject* obj, std::optional<at::Layout>& out) { return take_optional(obj, out, take_layout); }
inline bool take_optional_memory_format(PyObject* obj, std::optional<at::MemoryFormat>& out) {
  return take_optional(obj, out, take_memory_format);
}
inline bool take_optional_generator(PyObject* obj, std::optional<at::Generator>& out) {
  return take_optional(obj, out, take_generator);
}

// Returned values to Python objects (new references; nullptr with an exception set on failure).
inline PyObject* wrap(at::Tensor value) { return THPVariable_Wrap(std::move(value)); }
inline PyObject* wrap(bool value) { return PyBool_FromLong(value ? 1 : 0); }
inline PyObject* wrap(int64_t value) { return PyLong_FromLongLong(value); }
inline PyObject* wrap(double value) { return PyFloat_FromDouble(value); }
inline PyObject* wrap(const c10::SymInt& value) { return PyLong_FromLongLong(value.expect_int()); }

inline PyObject* wrap(std::vector<at::Tensor> values) {
  PyObject* list = PyList_New(static_cast<Py_ssize_t>(values.size()));
  if (list == nullptr) return nullptr;
  for (size_t i = 0; i < values.size(); ++i) {
    PyObject* item = THPVariable_Wrap(std::move(values[i]));
    if (item == nullptr) {
      Py_DECREF(list);
      return nullptr;
    }
    PyList_SET_ITEM(list, static_cast<Py_ssize_t>(i), item);
  }
  return list;
}

// Releases the GIL around the dispatcher call, as torch's own bindings do, when the call
// has enough data to take a while: for a few elements, releasing and taking back the GIL
// would cost more than the kernel (docs/python.md, "Fast path"), and nobody waits on so
// short a hold.
constexpr int64_t kGilReleaseElements = 1 << 14;

struct NoGil {
  PyThreadState* state;
  explicit NoGil(int64_t elements) : state(elements >= kGilReleaseElements ? PyEval_SaveThread() : nullptr) {}
  NoGil(const NoGil&) = delete;
  NoGil& operator=(const NoGil&) = delete;
  ~NoGil() {
    if (state != nullptr) PyEval_RestoreThread(state);
  }
};

}  // namespace opwrap::py
