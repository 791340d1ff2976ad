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

The same row holds every other column a schema type needs, each required
(``missing_columns`` names those a row leaves out; ``None`` is a value, what it means is
``NONE_MEANS``): the Python annotation, the fast binding's parser, how a fake kernel makes a
kernel-made return, the C ABI's argument and return rows (codegen/api/abi.py), the C++ type
an autograd node saves it as, and the kind of test sample value (codegen/testing.py).
``row(type)`` looks a type up; an absent type is ``UnsupportedType``, which validation
reports at the schema with the type's name.

C++ types are values (torchgen's ``BaseCType``, ``ConstRefCType``, ``NamedCType``,
``Binding``): a ``CType`` is transformed (``const_ref``, ``ref``, ``pointer``, ``pointee``,
``optional``, ``value``), never cut or glued as text, and ``str()`` spells it; a ``Binding``
is one parameter (identifier, ``CType``, the schema name it is).  Templates receive their
spellings.  The rows keep the spellings (``CType.parse`` reads one).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..lang.schema import Argument, BaseType, ClassType, ListType, OptionalType, Return, Type


class UnsupportedType(Exception):
    """A schema type with no row: ``str(exc)`` is the type, ``exc.reason`` says why."""

    def __init__(self, type_text: str, reason: str = ""):
        super().__init__(type_text)
        self.reason = reason


# ------------------------------------------------------------- C++ types and bindings

@dataclass(frozen=True)
class CType:
    """`const base* &`: `base` qualified by const, a pointer and a reference (each optional)."""

    base: str  # the type name: "int64_t", "at::Tensor", "std::optional<at::Tensor>"
    is_const: bool = False
    is_pointer: bool = False
    is_ref: bool = False

    @staticmethod
    def parse(text: str) -> CType:
        """The type a C++ spelling names: `const` in front, then `*` and `&` at its end."""
        t = text.strip()
        const = t.startswith("const ")
        if const:
            t = t[len("const "):]
        ref = t.endswith("&")
        if ref:
            t = t[:-1].rstrip()
        pointer = t.endswith("*")
        if pointer:
            t = t[:-1].rstrip()
        return CType(t, const, pointer, ref)

    def __str__(self) -> str:
        return (("const " if self.is_const else "") + self.base + ("*" if self.is_pointer else "")
                + ("&" if self.is_ref else ""))

    def value(self) -> CType:
        """The type held by value: without const and reference (a pointer stays one)."""
        return CType(self.base, is_pointer=self.is_pointer)

    def const(self) -> CType:
        return replace(self, is_const=True)

    def ref(self) -> CType:
        assert not self.is_ref, self
        return replace(self, is_ref=True)

    def const_ref(self) -> CType:
        return self.const().ref()

    def pointer(self) -> CType:
        assert not (self.is_pointer or self.is_ref), self
        return replace(self, is_pointer=True)

    def pointee(self) -> CType:
        """What a pointer points to: `int64_t` for `int64_t*`."""
        assert self.is_pointer and not self.is_ref, self
        return replace(self, is_pointer=False)

    def optional(self) -> CType:
        """`std::optional<T>` of this type's value."""
        return CType(f"std::optional<{self.value()}>")


TENSOR = CType("at::Tensor")


@dataclass(frozen=True)
class Binding:
    """One parameter: `ctype name`, which is the argument or return `schema_name`."""

    name: str  # the C++ identifier
    ctype: CType
    schema_name: str

    def decl(self) -> str:
        """`T name`: the parameter as a declaration spells it."""
        return f"{self.ctype} {self.name}"


# ------------------------------------------------------------------------ the table

class _Missing:
    """The value of a required column a row leaves out (`missing_columns` names it)."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


@dataclass(frozen=True)
class AbiRow:
    """One schema type at the C ABI (codegen/api/abi.py).  `kind` says how the wrapper passes it:

    - ``tensor``: `const opwrap_tensor*` to a view of the (contiguous) input;
    - ``written``: `opwrap_tensor*` to a view of a tensor written in place (not resizable);
    - ``optional``: `const opwrap_tensor*`, NULL when absent;
    - ``list``: `opwrap_tensor_list` of views;
    - ``value``: `opwrap::rt::abi::arg(value)`, by value (runtime/include/opwrap/runtime/abi.h).
    """

    c: str  # the C parameter type
    rust_ffi: str  # its Rust FFI type (the generated bindings' `#[repr(C)]` types)
    rust: str  # the safe Rust parameter type ({T}: the element type)
    to_rust: str  # the Rust expression turning the FFI value {} into the safe one (`ctx` in scope)
    kind: str = "value"


@dataclass(frozen=True)
class ReturnRow:
    """A non-Tensor return a kernel behind the C ABI computes: a pointer it writes, after the outputs."""

    c: str
    rust_ffi: str
    rust: str


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
    # The required columns: every row gives each one (`missing_columns`); None is a value,
    # and what it means is NONE_MEANS[column].
    python: str | None = MISSING  # the annotation of the typed wrapper and `.pyi`
    fast: tuple[str, str] | None = MISSING  # the fast binding's C++ local and its take_* parser
    fake: str | None = MISSING  # a kernel-made return in a fake kernel: "unbacked" (a data-dependent symbol)
    abi: AbiRow | None = MISSING  # the argument at the C ABI (codegen/api/abi.py)
    abi_return: ReturnRow | None = MISSING  # a kernel-made return at the C ABI
    saveable: str | None = MISSING  # the C++ type of the autograd node's member saving it for a formula
    sample: str | None = MISSING  # the test sample value (codegen/testing.py), one of SAMPLES
    # How a saved value is stored and given back, as torchgen's autograd Functions do: the
    # member is assigned `save` of the value ({}), and a formula sees a local of type
    # `unpacked` ("": a const reference to the member).
    save: str = "{}"
    unpacked: str = ""

    @property
    def kernel_type(self) -> str:
        return self.kernel or self.dispatcher

    @property
    def kernel_return_type(self) -> str | None:
        return self.kernel_returned or self.returned


# What None means in each required column.
NONE_MEANS = {
    "python": "no annotation of its own: it is built from the element's (python.annotation)",
    "fast": "the fast binding does not parse it: the Python wrapper takes the call",
    "fake": "a fake kernel cannot make it when the kernel computes it from the data",
    "abi": "a kernel behind the C ABI cannot take it",
    "abi_return": "a kernel behind the C ABI cannot return it",
    "saveable": "a backward formula cannot name it (not saved on the node)",
    "sample": "no sample value: a test leaves the argument out (its default), or cannot make the op's samples",
}
REQUIRED_COLUMNS = tuple(NONE_MEANS)
# The sample values (codegen/testing.py makes them): of an optional type, its element's.
SAMPLES = {
    "tensor": "a tensor of the argument's shape contract",
    "tensors": "a list of one to three tensors of the argument's shape contract",
    "int": "an integer in [1, 4]",
    "ints": "a list of integers in [1, 4] (its size, or one to three of them)",
    "float": "1.5, or 0.5 in the samples that change every value",
    "bool": "False, or True in the samples that change every value",
    "str": "'' (an op's `prepare` gives a real one)",
    "dtype": "the dtype of the return whose rule reads it, else the sample's dtype",
    "generator": "a seeded torch.Generator",
}


def missing_columns(r: TypeRow) -> list[str]:
    """The required columns row `r` leaves out, in the record's order ([]: none)."""
    missing = [c for c in REQUIRED_COLUMNS if getattr(r, c) is MISSING]
    if r.sample is not MISSING and r.sample is not None and r.sample not in SAMPLES:
        missing.append(f"sample (not one of {', '.join(SAMPLES)}: {r.sample!r})")
    return missing


def _rows(*rows: TypeRow) -> dict[str, TypeRow]:
    incomplete = {r.schema: missing_columns(r) for r in rows if missing_columns(r)}
    if incomplete:
        raise TypeError("type rows without required columns: "
                        + "; ".join(f"{k}: {', '.join(v)}" for k, v in incomplete.items()))
    return {r.schema: r for r in rows}


# The columns shared by many rows.  Python annotations are torch's meaning, in the public
# spellings `help()` shows; the fast binding's parsers are runtime/include/opwrap/runtime/python_fast.h;
# only a SymInt can be a data-dependent symbol in a fake kernel (torch makes an `int` or
# `float` return a plain number, codegen/pyruntime.py).
_SYMINT = "Union[int, torch.SymInt]"
_SCALAR = "Union[int, float, bool, complex]"
_DEVICE = "Union[torch.device, str, int]"
_TENSOR_ABI = AbiRow("const opwrap_tensor*", "*const RawTensor", "TensorRef<'_, {T}>",
                     "TensorRef::<{T}>::from_raw({})", "tensor")
_INT_ABI = AbiRow("int64_t", "i64", "i64", "{}")
_OPT_INT_ABI = AbiRow("opwrap_optional_int", "OptionalInt", "Option<i64>", "{}.get()")
_INTS_ABI = AbiRow("opwrap_int_array", "IntArray", "&[i64]", "{}.as_slice()")
_OPT_INTS_ABI = AbiRow("opwrap_optional_int_array", "OptionalIntArray", "Option<&[i64]>", "{}.get()")
_BOOL_ABI = AbiRow("bool", "bool", "bool", "{}")
_INT_RETURN = ReturnRow("int64_t*", "*mut i64", "i64")
_BOOL_RETURN = ReturnRow("bool*", "*mut bool", "bool")
# The required columns of a type nothing but the C++ wrapper handles.
_NONE = dict(fast=None, fake=None, abi=None, abi_return=None, saveable=None, sample=None)


def _none(**columns) -> dict:
    return {**_NONE, **columns}


# Every schema type the generated C++ handles.  Order is the docs' type table order.
TABLE: dict[str, TypeRow] = _rows(
    TypeRow("Tensor", "const at::Tensor&", returned="at::Tensor",
            doc="contiguous when the declaration's `contiguous` is true (the default)",
            **_none(python="Tensor", fast=("const at::Tensor*", "take_tensor"), abi=_TENSOR_ABI, sample="tensor")),
    TypeRow("Tensor(a!)", "at::Tensor&", returned="at::Tensor&",
            doc="written in place; a non-contiguous one is computed in a contiguous copy and written back",
            **_none(python="Tensor", fast=("const at::Tensor*", "take_tensor"), sample="tensor",
                    abi=AbiRow("opwrap_tensor*", "*mut RawTensor", "TensorMut<'_, {T}>",
                               "TensorMut::<{T}>::from_raw({}, ctx)", "written"))),
    TypeRow("Tensor?", "const std::optional<at::Tensor>&", returned="std::optional<at::Tensor>",
            doc="std::nullopt, or a defined tensor (contiguous as above)",
            **_none(python="Optional[Tensor]", fast=("std::optional<at::Tensor>", "take_optional_tensor"),
                    sample="tensor", abi=AbiRow("const opwrap_tensor*", "*const RawTensor", "Option<TensorRef<'_, {T}>>",
                                                "TensorRef::<{T}>::from_optional({})", "optional"))),
    TypeRow("Tensor(a!)?", "const std::optional<at::Tensor>&", doc="passed as given",
            **_none(python="Optional[Tensor]", fast=("std::optional<at::Tensor>", "take_optional_tensor"),
                    sample="tensor", abi=AbiRow("opwrap_tensor*", "*mut RawTensor", "Option<TensorMut<'_, {T}>>",
                                                "TensorMut::<{T}>::from_optional({}, ctx)", "optional"))),
    TypeRow("Tensor[]", "at::TensorList", returned="std::vector<at::Tensor>",
            doc="elements contiguous as a Tensor's (a list holding contiguous copies where some are not)",
            **_none(python="Sequence[Tensor]", fast=("std::vector<at::Tensor>", "take_tensor_list"), sample="tensors",
                    abi=AbiRow("opwrap_tensor_list", "RawTensorList", "TensorList<'_, {T}>",
                               "TensorList::<{T}>::from_raw({})", "list"))),
    TypeRow("Tensor(a!)[]", "at::TensorList",
            doc="written in place, element by element; non-contiguous elements are computed in contiguous copies "
                "and written back",
            **_none(python="Sequence[Tensor]", fast=("std::vector<at::Tensor>", "take_tensor_list"), sample="tensors")),
    TypeRow("Tensor?[]", "const c10::List<std::optional<at::Tensor>>&", doc="passed as given",
            **_none(python="Sequence[Optional[Tensor]]", sample="tensors")),
    TypeRow("int", "int64_t", returned="int64_t",
            **_none(python="int", fast=("int64_t", "take_int"), abi=_INT_ABI, abi_return=_INT_RETURN,
                    saveable="int64_t", sample="int")),
    TypeRow("int?", "std::optional<int64_t>", returned="std::optional<int64_t>",
            **_none(python="Optional[int]", fast=("std::optional<int64_t>", "take_optional_int"), abi=_OPT_INT_ABI,
                    saveable="std::optional<int64_t>", sample="int")),
    TypeRow("int[]", "at::IntArrayRef", returned="std::vector<int64_t>", doc="also int[N]", save="{}.vec()",
            **_none(python="Sequence[int]", fast=("std::vector<int64_t>", "take_int_list"), abi=_INTS_ABI,
                    saveable="std::vector<int64_t>", sample="ints")),
    TypeRow("int[]?", "at::OptionalIntArrayRef", doc="also int[N]?", unpacked="at::OptionalIntArrayRef",
            **_none(python="Optional[Sequence[int]]", abi=_OPT_INTS_ABI, saveable="c10::OptionalArray<int64_t>",
                    sample="ints")),
    TypeRow("SymInt", "c10::SymInt", "int64_t", "{}.guard_int(__FILE__, __LINE__)", returned="c10::SymInt",
            kernel_returned="int64_t", from_kernel="c10::SymInt({})",
            doc="a symbolic size is guarded to its concrete value",
            **_none(python=_SYMINT, fast=("c10::SymInt", "take_symint"), fake="unbacked", abi=_INT_ABI,
                    abi_return=_INT_RETURN, saveable="c10::SymInt", sample="int")),
    TypeRow("SymInt?", "std::optional<c10::SymInt>", "std::optional<int64_t>", "opwrap::rt::guard_int({})",
            **_none(python=f"Optional[{_SYMINT}]", abi=_OPT_INT_ABI, saveable="std::optional<c10::SymInt>",
                    sample="int")),
    TypeRow("SymInt[]", "c10::SymIntArrayRef", "at::IntArrayRef", "C10_AS_INTARRAYREF_SLOW({})",
            returned="std::vector<c10::SymInt>", kernel_returned="std::vector<int64_t>",
            from_kernel="c10::fromIntArrayRefSlow({}).vec()", doc="also SymInt[N]", save="{}.vec()",
            **_none(python=f"Sequence[{_SYMINT}]", fast=("std::vector<c10::SymInt>", "take_symint_list"),
                    abi=_INTS_ABI, saveable="std::vector<c10::SymInt>", sample="ints")),
    TypeRow("SymInt[]?", "at::OptionalSymIntArrayRef", "at::OptionalIntArrayRef", "opwrap::rt::guard_ints({})",
            unpacked="at::OptionalSymIntArrayRef",
            **_none(python=f"Optional[Sequence[{_SYMINT}]]", abi=_OPT_INTS_ABI,
                    saveable="c10::OptionalArray<c10::SymInt>", sample="ints")),
    TypeRow("SymBool", "c10::SymBool", "bool", "{}.guard_bool(__FILE__, __LINE__)", returned="c10::SymBool",
            kernel_returned="bool", from_kernel="c10::SymBool({})", doc="a symbolic bool is guarded to its value",
            **_none(python="Union[bool, torch.SymBool]", abi=_BOOL_ABI, abi_return=_BOOL_RETURN,
                    saveable="c10::SymBool")),
    TypeRow("float", "double", returned="double",
            **_none(python="float", fast=("double", "take_double"), abi=AbiRow("double", "f64", "f64", "{}"),
                    abi_return=ReturnRow("double*", "*mut f64", "f64"), saveable="double", sample="float")),
    TypeRow("float?", "std::optional<double>", returned="std::optional<double>",
            **_none(python="Optional[float]", fast=("std::optional<double>", "take_optional_double"),
                    abi=AbiRow("opwrap_optional_float", "OptionalFloat", "Option<f64>", "{}.get()"),
                    saveable="std::optional<double>", sample="float")),
    TypeRow("float[]", "at::ArrayRef<double>", returned="std::vector<double>", save="{}.vec()",
            **_none(python="Sequence[float]", fast=("std::vector<double>", "take_double_list"),
                    abi=AbiRow("opwrap_float_array", "FloatArray", "&[f64]", "{}.as_slice()"),
                    saveable="std::vector<double>")),
    TypeRow("float[]?", "std::optional<at::ArrayRef<double>>", unpacked="std::optional<at::ArrayRef<double>>",
            **_none(python="Optional[Sequence[float]]", saveable="c10::OptionalArray<double>")),
    TypeRow("bool", "bool", returned="bool",
            **_none(python="bool", fast=("bool", "take_bool"), abi=_BOOL_ABI, abi_return=_BOOL_RETURN,
                    saveable="bool", sample="bool")),
    TypeRow("bool?", "std::optional<bool>", returned="std::optional<bool>",
            **_none(python="Optional[bool]", fast=("std::optional<bool>", "take_optional_bool"),
                    abi=AbiRow("opwrap_optional_bool", "OptionalBool", "Option<bool>", "{}.get()"),
                    saveable="std::optional<bool>", sample="bool")),
    TypeRow("bool[N]", "std::array<bool, {n}>", doc="a sized list, e.g. bool[3]",
            **_none(python="Sequence[bool]", saveable="std::array<bool, {n}>")),
    TypeRow("bool[]", "const c10::List<bool>&", returned="c10::List<bool>", save="{}.copy()",
            **_none(python="Sequence[bool]", saveable="c10::List<bool>")),
    TypeRow("Scalar", "const at::Scalar&", returned="at::Scalar",
            **_none(python=_SCALAR, fast=("at::Scalar", "take_scalar"), abi=AbiRow("opwrap_scalar", "Scalar", "Scalar", "{}"),
                    saveable="at::Scalar", sample="float")),
    TypeRow("Scalar?", "const std::optional<at::Scalar>&", returned="std::optional<at::Scalar>",
            **_none(python=f"Optional[{_SCALAR}]", fast=("std::optional<at::Scalar>", "take_optional_scalar"),
                    saveable="std::optional<at::Scalar>", sample="float")),
    TypeRow("Scalar[]", "at::ArrayRef<at::Scalar>", save="{}.vec()",
            **_none(python=None, saveable="std::vector<at::Scalar>")),
    TypeRow("str", "c10::string_view", returned="std::string", doc="returned as std::string", save="std::string({})",
            **_none(python="str", fast=("c10::string_view", "take_string"),
                    abi=AbiRow("opwrap_string", "Str", "&str", "{}.as_str()"), saveable="std::string", sample="str")),
    TypeRow("str?", "std::optional<c10::string_view>", returned="std::optional<std::string>",
            save="opwrap::rt::saved_string({})",
            **_none(python="Optional[str]", fast=("std::optional<c10::string_view>", "take_optional_string"),
                    abi=AbiRow("opwrap_optional_string", "OptionalStr", "Option<&str>", "{}.get()"),
                    saveable="std::optional<std::string>", sample="str")),
    # Strings of its own, not views: a boxed call (torch.ops from Python) converts the list
    # into a vector the kernel's ArrayRef points at, and views would point into the list's
    # strings, which c10 frees before the kernel runs (ASan: heap-use-after-free).
    TypeRow("str[]", "at::ArrayRef<std::string>", returned="std::vector<std::string>",
            save="{}.vec()",
            **_none(python="Sequence[str]", saveable="std::vector<std::string>")),
    TypeRow("ScalarType", "at::ScalarType", returned="at::ScalarType",
            **_none(python="torch.dtype", fast=("at::ScalarType", "take_dtype"),
                    abi=AbiRow("int32_t", "i32", "DType", "DType({})"), saveable="at::ScalarType", sample="dtype")),
    TypeRow("ScalarType?", "std::optional<at::ScalarType>", returned="std::optional<at::ScalarType>",
            **_none(python="Optional[torch.dtype]", fast=("std::optional<at::ScalarType>", "take_optional_dtype"),
                    abi=AbiRow("opwrap_optional_dtype", "OptionalDType", "Option<DType>", "{}.get()"),
                    saveable="std::optional<at::ScalarType>", sample="dtype")),
    TypeRow("Device", "at::Device", returned="at::Device", **_none(python=_DEVICE, saveable="at::Device")),
    TypeRow("Device?", "std::optional<at::Device>", returned="std::optional<at::Device>",
            **_none(python=f"Optional[{_DEVICE}]", fast=("std::optional<at::Device>", "take_optional_device"),
                    saveable="std::optional<at::Device>")),
    TypeRow("Layout", "at::Layout", returned="at::Layout",
            **_none(python="torch.layout", fast=("at::Layout", "take_layout"), saveable="at::Layout")),
    TypeRow("Layout?", "std::optional<at::Layout>", returned="std::optional<at::Layout>",
            **_none(python="Optional[torch.layout]", fast=("std::optional<at::Layout>", "take_optional_layout"),
                    saveable="std::optional<at::Layout>")),
    TypeRow("MemoryFormat", "at::MemoryFormat", returned="at::MemoryFormat",
            **_none(python="torch.memory_format", fast=("at::MemoryFormat", "take_memory_format"),
                    saveable="at::MemoryFormat")),
    TypeRow("MemoryFormat?", "std::optional<at::MemoryFormat>", returned="std::optional<at::MemoryFormat>",
            **_none(python="Optional[torch.memory_format]",
                    fast=("std::optional<at::MemoryFormat>", "take_optional_memory_format"),
                    saveable="std::optional<at::MemoryFormat>")),
    TypeRow("Generator", "at::Generator", returned="at::Generator",
            **_none(python="torch.Generator", saveable="at::Generator", sample="generator")),
    TypeRow("Generator?", "std::optional<at::Generator>",
            doc="std::nullopt: the default generator (see random ops in the docs, kernels.md)",
            **_none(python="Optional[torch.Generator]", fast=("std::optional<at::Generator>", "take_optional_generator"),
                    saveable="std::optional<at::Generator>", sample="generator")),
    TypeRow("Storage", "at::Storage", returned="at::Storage",
            **_none(python="torch.UntypedStorage", saveable="at::Storage")),
    TypeRow("Stream", "c10::Stream", returned="c10::Stream", **_none(python="torch.Stream", saveable="c10::Stream")),
    TypeRow("QScheme", "at::QScheme", returned="at::QScheme", **_none(python="torch.qscheme", saveable="at::QScheme")),
)

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
        return TypeRow(str(t), cpp, returned=f"c10::intrusive_ptr<{t.class_name}>", doc="a custom class",
                       **_none(python=None, saveable=f"c10::intrusive_ptr<{t.class_name}>"))
    key = type_key(t, mutable)
    r = TABLE.get(key)
    if r is None:
        raise UnsupportedType(str(t), _REFUSED.get(key, ""))
    if key == "bool[N]":
        n = t.elem.size if isinstance(t, OptionalType) else t.size  # type: ignore[union-attr]
        return replace(r, schema=f"bool[{n}]", dispatcher=r.dispatcher.format(n=n), saveable=r.saveable.format(n=n))
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
        lines.append(f"| `{r.schema}` | {received} | {returned_text} | {code(r.python)} |")
    return "\n".join(lines)
