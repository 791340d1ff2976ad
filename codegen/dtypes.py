"""The dtypes a declaration may name, and how each is spelled in C++ and Python."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DType:
    name: str  # the torch name: float32
    scalar_type: str  # the c10::ScalarType enumerator: Float
    cpp: str  # the C++ element type: float
    is_floating: bool = False
    is_complex: bool = False

    @property
    def python(self) -> str:
        return f"torch.{self.name}"

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
)}

# Named groups, in the spirit of AT_DISPATCH_FLOATING_TYPES_AND2 and friends.
GROUPS: dict[str, tuple[str, ...]] = {
    "floating": ("float32", "float64", "float16", "bfloat16"),
    "integral": ("uint8", "int8", "int16", "int32", "int64"),
    "complex": ("complex64", "complex128"),
}
GROUPS["all"] = GROUPS["floating"] + GROUPS["integral"]
