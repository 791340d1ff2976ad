"""The dtypes a declaration may name, and how each is spelled in C++ and Python.

Every `torch.dtype` that a CPU or CUDA kernel template can be instantiated for, in every
torch release opwrap supports (2.11 on): the float8 formats included, whose kernels receive
c10's float8 types (`c10::Float8_e4m3fn`, ...: arithmetic through float, `__host__
__device__`).  Left out, and why: the quantized dtypes (`qint8`, ... need a quantizer, not
a dtype), the packed and opaque ones (`float4_e2m1fn_x2`, `bits8`, ...: torch converts no
other dtype to them, so no sample or reference can be made), and the sub-byte integers
(`int1` ... `uint7`: c10 has no C++ type for them).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DType:
    name: str  # the torch name: float32
    scalar_type: str  # the c10::ScalarType enumerator: Float
    cpp: str  # the C++ element type: float
    is_floating: bool = False
    is_complex: bool = False
    # Whether aten's vectorized elementwise loops (at::vec::Vectorized, TensorIterator's
    # type promotion) take it: the generated pointwise and row-wise kernels need that.
    vectorized: bool = True

    @property
    def python(self) -> str:
        return f"torch.{self.name}"

    @property
    def pointwise(self) -> bool:
        """Whether generated pointwise kernels take it: a real dtype aten's loops vectorize."""
        return self.vectorized and not self.is_complex and self.name != "bool"

    @property
    def rowwise(self) -> bool:
        """Whether generated row-wise kernels take it: a real floating dtype aten vectorizes."""
        return self.pointwise and self.is_floating

    @property
    def differentiable(self) -> bool:
        """Whether autograd tracks tensors of this dtype (torch's isDifferentiableType)."""
        return self.is_floating or self.is_complex


DTYPES: dict[str, DType] = {d.name: d for d in (
    DType("float32", "Float", "float", is_floating=True),
    DType("float64", "Double", "double", is_floating=True),
    DType("float16", "Half", "at::Half", is_floating=True),
    DType("bfloat16", "BFloat16", "at::BFloat16", is_floating=True),
    DType("uint8", "Byte", "uint8_t"),
    DType("int8", "Char", "int8_t"),
    DType("int16", "Short", "int16_t"),
    DType("int32", "Int", "int32_t"),
    DType("int64", "Long", "int64_t"),
    DType("bool", "Bool", "bool"),
    DType("complex64", "ComplexFloat", "c10::complex<float>", is_complex=True),
    DType("complex128", "ComplexDouble", "c10::complex<double>", is_complex=True),
    DType("complex32", "ComplexHalf", "c10::complex<c10::Half>", is_complex=True, vectorized=False),
    DType("uint16", "UInt16", "uint16_t", vectorized=False),
    DType("uint32", "UInt32", "uint32_t", vectorized=False),
    DType("uint64", "UInt64", "uint64_t", vectorized=False),
    DType("float8_e4m3fn", "Float8_e4m3fn", "c10::Float8_e4m3fn", is_floating=True, vectorized=False),
    DType("float8_e5m2", "Float8_e5m2", "c10::Float8_e5m2", is_floating=True, vectorized=False),
    DType("float8_e4m3fnuz", "Float8_e4m3fnuz", "c10::Float8_e4m3fnuz", is_floating=True, vectorized=False),
    DType("float8_e5m2fnuz", "Float8_e5m2fnuz", "c10::Float8_e5m2fnuz", is_floating=True, vectorized=False),
    DType("float8_e8m0fnu", "Float8_e8m0fnu", "c10::Float8_e8m0fnu", is_floating=True, vectorized=False),
)}

# Named groups, in the spirit of AT_DISPATCH_FLOATING_TYPES_AND2 and friends.
GROUPS: dict[str, tuple[str, ...]] = {
    "floating": ("float32", "float64", "float16", "bfloat16"),
    "integral": ("uint8", "int8", "int16", "int32", "int64"),
    "complex": ("complex64", "complex128"),
    "float8": ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu"),
    "unsigned": ("uint8", "uint16", "uint32", "uint64"),
}
GROUPS["all"] = GROUPS["floating"] + GROUPS["integral"]

# What each group is, beside what it holds (describe_group).
_GROUP_NOTES: dict[str, str] = {
    "floating": "AT_DISPATCH_FLOATING_TYPES_AND2(Half, BFloat16)",
    "integral": "AT_DISPATCH_INTEGRAL_TYPES",
    "complex": "AT_DISPATCH_COMPLEX_TYPES",
    "float8": "c10::Float8_*",
    "unsigned": "uint8 and aten's barebones unsigned types",
    "all": "floating and integral, AT_DISPATCH_ALL_TYPES_AND2(Half, BFloat16): not bool, complex, float8, uint16, "
           "uint32 or uint64",
}


def describe_group(name: str) -> str:
    """`name` = its dtypes (what it is), for the docs and messages."""
    return f"`{name}` = {', '.join(GROUPS[name])} ({_GROUP_NOTES[name]})"


def markdown_table() -> str:
    """The dtypes as a Markdown table (the docs' `<!-- table: dtypes -->`): each one's
    c10::ScalarType, the C++ type its kernels receive, its groups, and whether generated
    pointwise and row-wise kernels take it."""
    rows = ["| dtype | `c10::ScalarType` | kernel type (`scalar_t`, ...) | groups | pointwise, row-wise |",
            "|---|---|---|---|---|"]
    for d in DTYPES.values():
        groups = ", ".join(f"`{g}`" for g, members in GROUPS.items() if d.name in members) or "-"
        generated = ", ".join(k for k, ok in (("pointwise", d.pointwise), ("row-wise", d.rowwise)) if ok) \
            or "no: a kernel of your own"
        rows.append(f"| `{d.name}` | `{d.scalar_type}` | `{d.cpp}` | {groups} | {generated} |")
    return "\n".join(rows) + "\n"
