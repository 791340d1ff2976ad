// Shapes and int lists as text for error messages: "[2, 3]", "[]", the text torch prints.
//
// The runtime's messages do not stream an ArrayRef (t.sizes(), an IntArrayRef, a
// std::vector<int64_t> wrapped in one) into TORCH_CHECK, c10::str or an ostream: such a
// message can crash the process (docs/robustness.md, "Symbols").  c10's
// `operator<<(std::ostream&, ArrayRef<T>)` (c10/util/ArrayRef.h) is a function template that
// is not declared inline, so -fvisibility-inlines-hidden does not hide it: wherever the
// compiler keeps it out of line (which depends on the compiler version and -O level), the
// library exports `c10::operator<< <long>` as a weak, default-visibility symbol, and its calls
// go through the PLT, where the dynamic linker may bind them to another library's definition
// of the same symbol, compiled by another compiler from other headers.  shape_str() builds the
// same text from std::to_string and std::string (libstdc++'s own, shared with torch) and is
// inline, so -fvisibility-inlines-hidden keeps it local to the library that includes it.
#pragma once

#include <c10/core/SymInt.h>
#include <c10/core/SymIntArrayRef.h>
#include <c10/util/ArrayRef.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace opwrap::rt {

// "[2, 3]" (a std::vector<int64_t> converts to IntArrayRef too).
inline std::string shape_str(c10::IntArrayRef sizes) {
  const int64_t* data = sizes.data();
  const size_t n = sizes.size();
  std::string out = "[";
  for (size_t i = 0; i < n; ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(data[i]);
  }
  out += ']';
  return out;
}

// A SymInt as c10's operator<< for SymInt prints it: its value, or its symbolic node's text
// ("s0", "2*s1").
inline std::string symint_str(const c10::SymInt& s) {
  return s.is_heap_allocated() ? s.toSymNodeImplUnowned()->str() : std::to_string(s.as_int_unchecked());
}

// "[s0, 3]".
inline std::string shape_str(c10::SymIntArrayRef sizes) {
  const c10::SymInt* data = sizes.data();
  const size_t n = sizes.size();
  std::string out = "[";
  for (size_t i = 0; i < n; ++i) {
    if (i > 0) out += ", ";
    out += symint_str(data[i]);
  }
  out += ']';
  return out;
}

}  // namespace opwrap::rt
