// Shape arithmetic of the shape rule's C++ (codegen/lang/shapes.py), one text for both targets:
// the +, - and * of shape expressions in int64 with overflow checked (a signed overflow is
// undefined behaviour, and a wrapped size would be silently wrong; GCC's and Clang's builtins,
// since c10::mul_overflows has a signed overload only in recent torch), floor division,
// list indexing and concatenation of size lists; and what the messages of both targets share:
// a rule's text with its value, a list element's name, sums over a list, and the length of a
// list shaped after another.
//
// Torch-free, and not a header of its own: <opwrap/runtime/checks.h> (the ATen target) and
// <opwrap/stable/runtime.h> (the stable target) include it inside their namespace opwrap::rt,
// after the standard headers it uses (<cstdint>, <initializer_list>, <string>, <vector>), with the two
// things that differ between them defined: `IntArrayRef`, the target's list of sizes, and
// `OPWRAP_RT_CHECK(cond, ...)`, the target's check (its message pieces streamed).  So the
// functions keep each target's namespace, visibility and error type, and one message.

inline int64_t list_item(IntArrayRef list, int64_t i) {
  const int64_t n = static_cast<int64_t>(list.size());
  OPWRAP_RT_CHECK(i >= -n && i < n, "index ", i, " out of range for a list of ", n, " sizes");
  return list[i < 0 ? i + n : i];
}

inline int64_t shape_add(const char* op, int64_t a, int64_t b) {
  int64_t out;
  OPWRAP_RT_CHECK(!__builtin_add_overflow(a, b, &out), op, ": a shape expression overflows int64: ", a, " + ", b);
  return out;
}

inline int64_t shape_sub(const char* op, int64_t a, int64_t b) {
  int64_t out;
  OPWRAP_RT_CHECK(!__builtin_sub_overflow(a, b, &out), op, ": a shape expression overflows int64: ", a, " - ", b);
  return out;
}

inline int64_t shape_mul(const char* op, int64_t a, int64_t b) {
  int64_t out;
  OPWRAP_RT_CHECK(!__builtin_mul_overflow(a, b, &out), op, ": a shape expression overflows int64: ", a, " * ", b);
  return out;
}

inline int64_t floordiv(int64_t a, int64_t b) {
  OPWRAP_RT_CHECK(b != 0, "division by zero in a shape expression");
  const int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

inline std::vector<int64_t> concat(std::initializer_list<IntArrayRef> pieces) {
  std::vector<int64_t> out;
  for (IntArrayRef p : pieces) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// "what = value", or the value alone where the rule's text is that number ("expected 5", not
// "expected 5 = 5").
inline std::string rule_value(const char* what, const std::string& value) {
  return value == what ? value : std::string(what) + " = " + value;
}

// An input tensor list whose shape rule gives one shape per element of another list
// (`grads: "[p.shape for p in params]"`) holds as many tensors as that rule's length.
inline void check_list_input_length(const char* op, const char* arg, size_t size, int64_t expected,
                                    const char* what, const char* rule) {
  OPWRAP_RT_CHECK(static_cast<int64_t>(size) == expected, op, ": argument '", arg, "' holds ", size, " tensor",
                  size == 1 ? "" : "s", ", but expected ", rule_value(what, std::to_string(expected)),
                  " (its shape is ", rule, ")");
}

// `tensors[2]`: the name of a list's element in messages.
inline std::string element_name(const char* list, size_t i) {
  return std::string(list) + "[" + std::to_string(i) + "]";
}

// `sum(<f(x)> for x in list)` over any list a range-for walks (a tensor list, an int[]),
// overflow-checked.  The ATen target adds an overload for a Tensor?[] that leaves its None
// elements out.
template <typename List, typename F>
int64_t list_sum(const char* op, const List& list, F&& f) {
  int64_t out = 0;
  for (const auto& x : list) {
    const int64_t v = f(x);
    OPWRAP_RT_CHECK(!__builtin_add_overflow(out, v, &out), op, ": a shape expression overflows int64 in a sum");
  }
  return out;
}
