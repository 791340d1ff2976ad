"""Schema types to C++ types, in the dispatcher's unboxed calling convention."""

from __future__ import annotations

from ..schema import Argument, BaseType, ClassType, FunctionSchema, ListType, OptionalType, Return, Type

_SCALARS = {
    "int": "int64_t", "SymInt": "c10::SymInt", "float": "double", "bool": "bool",
    "str": "c10::string_view", "Scalar": "at::Scalar", "ScalarType": "at::ScalarType",
    "Device": "at::Device", "Layout": "at::Layout", "MemoryFormat": "at::MemoryFormat",
    "Generator": "at::Generator",
}
_BY_REFERENCE = {"at::Scalar", "at::Generator"}


class UnsupportedType(Exception):
    pass


def argument_type(a: Argument) -> str:
    """The C++ parameter type of an argument, as the dispatcher passes it."""
    return _arg_type(a.type, mutable=a.is_write)


def _arg_type(t: Type, mutable: bool = False) -> str:
    if isinstance(t, BaseType):
        if t.name == "Tensor":
            return "at::Tensor&" if mutable else "const at::Tensor&"
        if t.name in _SCALARS:
            cpp = _SCALARS[t.name]
            return f"const {cpp}&" if cpp in _BY_REFERENCE else cpp
    if isinstance(t, OptionalType):
        e = t.elem
        if isinstance(e, BaseType) and e.name == "Tensor":
            return "const std::optional<at::Tensor>&"
        if isinstance(e, ListType) and e.elem == BaseType("int"):
            return "at::OptionalIntArrayRef"
        if isinstance(e, ListType) and e.elem == BaseType("SymInt"):
            return "at::OptionalSymIntArrayRef"
        if isinstance(e, BaseType) and e.name in _SCALARS:
            inner = _SCALARS[e.name]
            return f"const std::optional<{inner}>&" if inner in _BY_REFERENCE else f"std::optional<{inner}>"
    if isinstance(t, ListType):
        e = t.elem
        if e == BaseType("Tensor"):
            return "at::TensorList"
        if e == BaseType("int"):
            return "at::IntArrayRef"
        if e == BaseType("SymInt"):
            return "c10::SymIntArrayRef"
        if e == BaseType("float"):
            return "at::ArrayRef<double>"
        if e == BaseType("bool") and t.size is not None:
            return f"std::array<bool, {t.size}>"
        if e == OptionalType(BaseType("Tensor")):
            return "const c10::List<std::optional<at::Tensor>>&"
        if e == BaseType("Scalar"):
            return "at::ArrayRef<at::Scalar>"
    if isinstance(t, ClassType):
        return f"const c10::intrusive_ptr<{t.class_name}>&"
    raise UnsupportedType(str(t))


def value_type(t: Type) -> str:
    """The C++ type of a returned value."""
    if isinstance(t, BaseType):
        if t.name == "Tensor":
            return "at::Tensor"
        if t.name in _SCALARS:
            return _SCALARS[t.name]
    if isinstance(t, ListType) and t.elem == BaseType("Tensor"):
        return "std::vector<at::Tensor>"
    raise UnsupportedType(str(t))


def returns_type(schema: FunctionSchema) -> str:
    rets = schema.returns
    if not rets:
        return "void"
    if len(rets) == 1:
        return _return_type(rets[0])
    return "std::tuple<" + ", ".join(_return_type(r) for r in rets) + ">"


def dispatcher_signature(schema: FunctionSchema) -> str:
    """The function type of the op's typed dispatcher handle: `.typed<...>()`."""
    return returns_type(schema) + "(" + ", ".join(argument_type(a) for a in schema.arguments) + ")"


def _return_type(r: Return) -> str:
    if r.is_write and r.type == BaseType("Tensor"):
        return "at::Tensor&"
    return value_type(r.type)


def kernel_argument_type(a: Argument) -> str:
    """The parameter type the hand-written kernel template receives: SymInts arrive as
    concrete integers, everything else as the dispatcher passes it."""
    t = a.type
    if t == BaseType("SymInt"):
        return "int64_t"
    if isinstance(t, ListType) and t.elem == BaseType("SymInt"):
        return "at::IntArrayRef"
    return argument_type(a)


def kernel_argument_value(a: Argument, name: str) -> str:
    t = a.type
    if t == BaseType("SymInt"):
        return f"{name}.guard_int(__FILE__, __LINE__)"
    if isinstance(t, ListType) and t.elem == BaseType("SymInt"):
        return f"C10_AS_INTARRAYREF_SLOW({name})"
    return name
