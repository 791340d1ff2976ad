"""The one type table: what each schema type becomes in generated code.

As torchgen's ``api/types``, every generator asks this module (never a string built in a
plugin) what a schema type is in C++: one frozen ``TypeRow`` per schema type holds

- ``dispatcher``: the parameter type of the generated wrapper that ``m.impl`` registers
  (torch's unboxed calling convention; ``c10`` infers the schema from it, so it must be
  exactly what torch's boxing accepts);
- ``kernel``: the parameter type the hand-written kernel template receives, and
  ``to_kernel``: the C++ expression that turns the dispatcher's value ``{}`` into it
  (``SymInt`` arrives as ``int64_t`` through ``guard_int``, ``SymInt[]`` as ``IntArrayRef``);
- ``returned``: the C++ type of the value when an op returns it, ``kernel_returned``: what the
  kernel returns for it when the kernel makes it (``OutputSpec.made_by == "kernel"``), and
  ``from_kernel``: the expression that turns the kernel's value ``{}`` into ``returned``.

The Python side (annotations, fast-binding parsing, fake handling) adds its own columns to
the same rows.  ``row(type)`` looks a type up; an absent type is ``UnsupportedType``, which
validation reports at the schema with the type's name.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..schema import Argument, BaseType, ClassType, ListType, OptionalType, Return, Type


class UnsupportedType(Exception):
    """A schema type with no row: ``str(exc)`` is the type, ``exc.reason`` says why."""

    def __init__(self, type_text: str, reason: str = ""):
        super().__init__(type_text)
        self.reason = reason


@dataclass(frozen=True)
class TypeRow:
    schema: str  # the schema spelling: "int?", "SymInt[]", "Tensor(a!)", "bool[N]"
    dispatcher: str  # parameter type of the registered wrapper
    kernel: str = ""  # parameter type of the hand-written kernel ("": the dispatcher's)
    to_kernel: str = "{}"  # dispatcher value {} -> kernel value
    returned: str | None = None  # C++ return type (None: not a return type)
    kernel_returned: str | None = None  # what the kernel returns for it ("": `returned`)
    from_kernel: str = "{}"  # kernel's returned value {} -> `returned`
    doc: str = ""
    # The Python columns (set in _PYTHON below):
    python: str | None = None  # the annotation of the typed wrapper and `.pyi`
    fast: tuple[str, str] | None = None  # the fast binding's C++ local and its take_* parser (None: the Python wrapper takes the call)
    fake: str | None = None  # a kernel-made return in a fake kernel: "unbacked" (a data-dependent symbol) or None: none

    @property
    def kernel_type(self) -> str:
        return self.kernel or self.dispatcher

    @property
    def kernel_return_type(self) -> str | None:
        return self.kernel_returned or self.returned


def _rows(*rows: TypeRow) -> dict[str, TypeRow]:
    return {r.schema: r for r in rows}


_OPT = "std::optional<{}>"

# Every schema type the generated C++ handles.  Order is the docs' type table order.
TABLE: dict[str, TypeRow] = _rows(
    TypeRow("Tensor", "const at::Tensor&", returned="at::Tensor",
            doc="contiguous when the declaration's `contiguous` is true (the default)"),
    TypeRow("Tensor(a!)", "at::Tensor&", returned="at::Tensor&",
            doc="written in place; a non-contiguous one is computed in a contiguous copy and written back"),
    TypeRow("Tensor?", "const std::optional<at::Tensor>&", returned="std::optional<at::Tensor>",
            doc="std::nullopt, or a defined tensor (contiguous as above)"),
    TypeRow("Tensor(a!)?", "const std::optional<at::Tensor>&", doc="passed as given"),
    TypeRow("Tensor[]", "at::TensorList", returned="std::vector<at::Tensor>", doc="passed as given"),
    TypeRow("Tensor(a!)[]", "at::TensorList", doc="passed as given"),
    TypeRow("Tensor?[]", "const c10::List<std::optional<at::Tensor>>&", doc="passed as given"),
    TypeRow("int", "int64_t", returned="int64_t"),
    TypeRow("int?", "std::optional<int64_t>", returned="std::optional<int64_t>"),
    TypeRow("int[]", "at::IntArrayRef", returned="std::vector<int64_t>", doc="also int[N]"),
    TypeRow("int[]?", "at::OptionalIntArrayRef"),
    TypeRow("SymInt", "c10::SymInt", "int64_t", "{}.guard_int(__FILE__, __LINE__)", returned="c10::SymInt",
            kernel_returned="int64_t", from_kernel="c10::SymInt({})",
            doc="a symbolic size is guarded to its concrete value"),
    TypeRow("SymInt?", "std::optional<c10::SymInt>", "std::optional<int64_t>", "opwrap::rt::guard_int({})"),
    TypeRow("SymInt[]", "c10::SymIntArrayRef", "at::IntArrayRef", "C10_AS_INTARRAYREF_SLOW({})",
            returned="std::vector<c10::SymInt>", kernel_returned="std::vector<int64_t>",
            from_kernel="c10::fromIntArrayRefSlow({}).vec()", doc="also SymInt[N]"),
    TypeRow("SymInt[]?", "at::OptionalSymIntArrayRef", "at::OptionalIntArrayRef", "opwrap::rt::guard_ints({})"),
    TypeRow("SymBool", "c10::SymBool", "bool", "{}.guard_bool(__FILE__, __LINE__)", returned="c10::SymBool",
            kernel_returned="bool", from_kernel="c10::SymBool({})", doc="a symbolic bool is guarded to its value"),
    TypeRow("float", "double", returned="double"),
    TypeRow("float?", "std::optional<double>", returned="std::optional<double>"),
    TypeRow("float[]", "at::ArrayRef<double>", returned="std::vector<double>"),
    TypeRow("float[]?", "std::optional<at::ArrayRef<double>>"),
    TypeRow("bool", "bool", returned="bool"),
    TypeRow("bool?", "std::optional<bool>", returned="std::optional<bool>"),
    TypeRow("bool[N]", "std::array<bool, {n}>", doc="a sized list, e.g. bool[3]"),
    TypeRow("bool[]", "const c10::List<bool>&", returned="c10::List<bool>"),
    TypeRow("Scalar", "const at::Scalar&", returned="at::Scalar"),
    TypeRow("Scalar?", "const std::optional<at::Scalar>&", returned="std::optional<at::Scalar>"),
    TypeRow("Scalar[]", "at::ArrayRef<at::Scalar>"),
    TypeRow("str", "c10::string_view", returned="std::string", doc="returned as std::string"),
    TypeRow("str?", "std::optional<c10::string_view>", returned="std::optional<std::string>"),
    TypeRow("str[]", "at::ArrayRef<c10::string_view>", returned="std::vector<std::string>"),
    TypeRow("ScalarType", "at::ScalarType", returned="at::ScalarType"),
    TypeRow("ScalarType?", "std::optional<at::ScalarType>", returned="std::optional<at::ScalarType>"),
    TypeRow("Device", "at::Device", returned="at::Device"),
    TypeRow("Device?", "std::optional<at::Device>", returned="std::optional<at::Device>"),
    TypeRow("Layout", "at::Layout", returned="at::Layout"),
    TypeRow("Layout?", "std::optional<at::Layout>", returned="std::optional<at::Layout>"),
    TypeRow("MemoryFormat", "at::MemoryFormat", returned="at::MemoryFormat"),
    TypeRow("MemoryFormat?", "std::optional<at::MemoryFormat>", returned="std::optional<at::MemoryFormat>"),
    TypeRow("Generator", "at::Generator", returned="at::Generator"),
    TypeRow("Generator?", "std::optional<at::Generator>",
            doc="std::nullopt: the default generator (see random ops in the docs, kernels.md)"),
    TypeRow("Storage", "at::Storage", returned="at::Storage"),
    TypeRow("Stream", "c10::Stream", returned="c10::Stream"),
    TypeRow("QScheme", "at::QScheme", returned="at::QScheme"),
)

# The Python columns of the rows: the annotation (torch's meaning, in the public spellings
# `help()` shows), the fast binding's parser (runtime/include/opwrap/runtime/python_fast.h),
# and how a fake kernel makes a return that the kernel computes (codegen/pyruntime.py): only a
# SymInt can be a data-dependent symbol (torch makes an `int` or `float` return a plain number).
_SYMINT = "Union[int, torch.SymInt]"
_SCALAR = "Union[int, float, bool, complex]"
_DEVICE = "Union[torch.device, str, int]"
_PYTHON: dict[str, dict[str, object]] = {
    "Tensor": dict(python="Tensor", fast=("const at::Tensor*", "take_tensor")),
    "Tensor(a!)": dict(python="Tensor", fast=("const at::Tensor*", "take_tensor")),
    "Tensor?": dict(python="Optional[Tensor]", fast=("std::optional<at::Tensor>", "take_optional_tensor")),
    "Tensor(a!)?": dict(python="Optional[Tensor]", fast=("std::optional<at::Tensor>", "take_optional_tensor")),
    "Tensor[]": dict(python="Sequence[Tensor]", fast=("std::vector<at::Tensor>", "take_tensor_list")),
    "Tensor(a!)[]": dict(python="Sequence[Tensor]", fast=("std::vector<at::Tensor>", "take_tensor_list")),
    "Tensor?[]": dict(python="Sequence[Optional[Tensor]]"),
    "int": dict(python="int", fast=("int64_t", "take_int")),
    "int?": dict(python="Optional[int]", fast=("std::optional<int64_t>", "take_optional_int")),
    "int[]": dict(python="Sequence[int]", fast=("std::vector<int64_t>", "take_int_list")),
    "int[]?": dict(python="Optional[Sequence[int]]"),
    "SymInt": dict(python=_SYMINT, fast=("c10::SymInt", "take_symint"), fake="unbacked"),
    "SymBool": dict(python="Union[bool, torch.SymBool]"),
    "SymInt?": dict(python=f"Optional[{_SYMINT}]"),
    "SymInt[]": dict(python=f"Sequence[{_SYMINT}]", fast=("std::vector<c10::SymInt>", "take_symint_list")),
    "SymInt[]?": dict(python=f"Optional[Sequence[{_SYMINT}]]"),
    "float": dict(python="float", fast=("double", "take_double")),
    "float?": dict(python="Optional[float]", fast=("std::optional<double>", "take_optional_double")),
    "float[]": dict(python="Sequence[float]", fast=("std::vector<double>", "take_double_list")),
    "float[]?": dict(python="Optional[Sequence[float]]"),
    "bool": dict(python="bool", fast=("bool", "take_bool")),
    "bool?": dict(python="Optional[bool]", fast=("std::optional<bool>", "take_optional_bool")),
    "bool[N]": dict(python="Sequence[bool]"),
    "bool[]": dict(python="Sequence[bool]"),
    "Scalar": dict(python=_SCALAR, fast=("at::Scalar", "take_scalar")),
    "Scalar?": dict(python=f"Optional[{_SCALAR}]", fast=("std::optional<at::Scalar>", "take_optional_scalar")),
    "str": dict(python="str", fast=("c10::string_view", "take_string")),
    "str?": dict(python="Optional[str]", fast=("std::optional<c10::string_view>", "take_optional_string")),
    "str[]": dict(python="Sequence[str]"),
    "ScalarType": dict(python="torch.dtype", fast=("at::ScalarType", "take_dtype")),
    "ScalarType?": dict(python="Optional[torch.dtype]", fast=("std::optional<at::ScalarType>", "take_optional_dtype")),
    "Device": dict(python=_DEVICE),
    "Device?": dict(python=f"Optional[{_DEVICE}]", fast=("std::optional<at::Device>", "take_optional_device")),
    "Layout": dict(python="torch.layout", fast=("at::Layout", "take_layout")),
    "Layout?": dict(python="Optional[torch.layout]", fast=("std::optional<at::Layout>", "take_optional_layout")),
    "MemoryFormat": dict(python="torch.memory_format", fast=("at::MemoryFormat", "take_memory_format")),
    "MemoryFormat?": dict(python="Optional[torch.memory_format]",
                          fast=("std::optional<at::MemoryFormat>", "take_optional_memory_format")),
    "Generator": dict(python="torch.Generator"),
    "Generator?": dict(python="Optional[torch.Generator]", fast=("std::optional<at::Generator>", "take_optional_generator")),
    "Storage": dict(python="torch.UntypedStorage"),
    "Stream": dict(python="torch.Stream"),
    "QScheme": dict(python="torch.qscheme"),
    "Dimname": dict(python="str"),
    "Dimname?": dict(python="Optional[str]"),
    "Dimname[]": dict(python="Sequence[str]"),
    "Dimname[]?": dict(python="Optional[Sequence[str]]"),
}
TABLE = {k: replace(r, **_PYTHON.get(k, {})) for k, r in TABLE.items()}  # type: ignore[arg-type]

# Types torch's unboxed-kernel registration refuses (c10's make_boxed_from_unboxed_functor.h).
_REFUSED = {
    "Scalar[]?": "torch cannot register an unboxed kernel taking Scalar[] (use float[] or a Tensor)",
}


def type_key(t: Type, mutable: bool = False) -> str:
    """The table key of a type: a written-to Tensor (list) is ``Tensor(a!)``, ``int[2]`` is
    ``int[]`` and ``bool[3]`` is ``bool[N]``."""
    if isinstance(t, OptionalType):
        return type_key(t.elem, mutable) + "?"
    if isinstance(t, ListType):
        if t.size is not None and t.elem == BaseType("bool"):
            return "bool[N]"
        return type_key(t.elem, mutable) + "[]"
    if isinstance(t, BaseType) and t.name == "Tensor" and mutable:
        return "Tensor(a!)"
    return str(t)


def row(t: Type, mutable: bool = False) -> TypeRow:
    """The row of a schema type; ``mutable``: the value is written (``Tensor(a!)``)."""
    if isinstance(t, ClassType):
        cpp = f"const c10::intrusive_ptr<{t.class_name}>&"
        return TypeRow(str(t), cpp, returned=f"c10::intrusive_ptr<{t.class_name}>", doc="a custom class")
    key = type_key(t, mutable)
    r = TABLE.get(key)
    if r is None:
        raise UnsupportedType(str(t), _REFUSED.get(key, ""))
    if key == "bool[N]":
        n = t.elem.size if isinstance(t, OptionalType) else t.size  # type: ignore[union-attr]
        return TypeRow(f"bool[{n}]", r.dispatcher.format(n=n), doc=r.doc)
    return r


def argument_row(a: Argument) -> TypeRow:
    return row(a.type, a.is_write)


def return_row(r: Return) -> TypeRow:
    """A return's row; a written-to return is the argument it aliases, as `at::Tensor&`."""
    out = row(r.type, r.is_write)
    if out.returned is None:
        raise UnsupportedType(str(r.type), "not a return type the generated C++ handles")
    return out


def dispatcher_type(a: Argument) -> str:
    return argument_row(a).dispatcher


def kernel_type(a: Argument) -> str:
    return argument_row(a).kernel_type


def to_kernel(a: Argument, value: str) -> str:
    return argument_row(a).to_kernel.format(value)


def returned_type(r: Return) -> str:
    return return_row(r).returned  # type: ignore[return-value]


def kernel_returned_type(r: Return) -> str:
    return return_row(r).kernel_return_type  # type: ignore[return-value]


def from_kernel(r: Return, value: str) -> str:
    return return_row(r).from_kernel.format(value)


def tuple_of(types: list[str]) -> str:
    """`void`, the one type, or `std::tuple<...>`: a C++ return type holding `types`."""
    if not types:
        return "void"
    if len(types) == 1:
        return types[0]
    return "std::tuple<" + ", ".join(types) + ">"


def markdown_table() -> str:
    """The type table of the docs (kernels.md, written at docs build time through
    opwrap_codegen.reference), from the rows: what the kernel receives and returns for each
    schema type, and the Python wrapper's annotation."""
    def code(text: str | None) -> str:
        return f"`{text}`" if text else "-"

    lines = ["| schema type | the kernel receives | the kernel returns | Python |", "|---|---|---|---|"]
    for r in TABLE.values():
        if r.to_kernel != "{}":
            received = f"`{r.kernel_type}` (from `{r.dispatcher}`)"
        else:
            received = code(r.kernel_type.format(n="N"))
        returned = r.kernel_return_type
        if r.schema == "Tensor(a!)":
            returned_text = "- (the wrapper returns the argument)"
        elif returned and r.from_kernel != "{}":
            returned_text = f"`{returned}` (as `{r.returned}`)"
        else:
            returned_text = code(returned)
        lines.append(f"| `{r.schema}` | {received} | {returned_text} | {code(getattr(r, 'python', None))} |")
    return "\n".join(lines)
