"""The dtype rules: which dtypes each tensor argument may have, and where each return's
dtype comes from.  One model, rendered to C++ (the kernel wrapper's checks, dispatch and
output allocation) and to Python (the fake kernel), so both follow one rule.

**Dtype variables.**  `dtypes:` is either a list (or group) that every tensor shares, or a
mapping from tensor arguments and returns to their own lists:

    dtypes: {weight: floating, indices: [int32, int64], offsets: indices}

Each list is a *dtype variable*: the kernel is a template with one type parameter per
variable (`scalar_t` for the first tensor argument's, `<owner>_t` for the others, in schema
order) and is instantiated for every combination.  A value naming another tensor argument
shares that argument's variable (`offsets: indices`).  Tensor arguments the mapping leaves
out share the first tensor argument's variable.  A return given its own list is typed too:
its dtype comes from its `dtype:` rule at run time (a `ScalarType` argument, say) and the
kernel is instantiated over it, so `to_dtype(Tensor self, ScalarType dtype)` gets
`template <typename scalar_t, typename result_t>`.

**Return dtype rules** (`dtype: {<return>: <rule>}`):

    float32                 a dtype name
    self                    the dtype of a tensor argument
    dtype                   a `ScalarType` argument
    dtype or self           a `ScalarType?` argument, else a tensor argument's dtype
    dtype or default        a `ScalarType?` argument, else torch.get_default_dtype()
    weights or int64        an optional tensor's dtype where it is given, else a dtype name,
                            a required tensor's dtype or `default`
    promote(a, b)           the promotion of tensor arguments, as torch.result_type does it
    promote_integers(self)  a tensor argument's dtype, integral and bool ones promoted to
                            int64 (aten's `promote_integers`: sum, prod, cumsum)
    dtype or promote_integers(self)   a `ScalarType?` argument, else the above (torch.sum)

An optional tensor may own a variable too, with the dtype the kernel is instantiated for
when it is not given: `weights: {dtypes: [float32, float64], absent: float32}` (`absent`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping

from ..core.dtypes import DTYPES, DType
from .schema import BaseType, FunctionSchema, OptionalType, is_tensor, unwrap_optional


@dataclass(frozen=True)
class DTypeVar:
    """One dtype variable: the C++ template parameter `name`, the argument or return whose
    dtypes it lists (`owner`; "" for an op with no tensor at all), and those dtypes; for an
    optional tensor, `absent`: the dtype when it is not given."""

    name: str
    owner: str
    dtypes: tuple[DType, ...]
    absent: DType | None = None


@dataclass(frozen=True)
class DTypeRule:
    """Where a return's dtype comes from.

    kind: "dtype" (names = (dtype name,)), "tensor" (names = (tensor argument,)),
    "arg" (names = (ScalarType argument,); `fallback`: for a `ScalarType?` argument, the
    tensor argument or "default" used when it is None), "given" (names = (optional tensor,);
    `fallback`: a dtype name, a required tensor or "default", used when it is not given),
    "promote" (names = tensor arguments), "integers" (names = (tensor argument,): its dtype,
    an integral or bool one promoted to int64).  `integers` on an "arg" rule: its tensor
    fallback is promoted so (`dtype or promote_integers(self)`)."""

    kind: str
    names: tuple[str, ...]
    fallback: str = ""
    integers: bool = False

    @property
    def text(self) -> str:
        if self.kind == "promote":
            return f"promote({', '.join(self.names)})"
        if self.kind == "integers":
            return f"promote_integers({self.names[0]})"
        if self.fallback:
            return f"{self.names[0]} or " + (f"promote_integers({self.fallback})" if self.integers else self.fallback)
        return self.names[0]

    @property
    def fixed(self) -> DType | None:
        """The dtype, when the rule names one."""
        return DTYPES[self.names[0]] if self.kind == "dtype" else None

    @property
    def tensors(self) -> tuple[str, ...]:
        """The tensor arguments the rule reads."""
        if self.kind in ("tensor", "promote", "integers"):
            return self.names
        fallback = (self.fallback,) if self.fallback not in ("", "default") and self.fallback not in DTYPES else ()
        if self.kind == "given":
            return self.names + fallback
        return fallback if self.kind == "arg" else ()


class RuleError(Exception):
    """A dtype rule that does not parse or does not fit the schema; `column` is where in
    the rule's text (0-based)."""

    def __init__(self, message: str, column: int = 0, hint: str = ""):
        super().__init__(message)
        self.column = column
        self.hint = hint


def _is_single_tensor(a) -> bool:
    return is_tensor(unwrap_optional(a.type))


def _is_scalar_type(a) -> bool:
    return unwrap_optional(a.type) == BaseType("ScalarType")


_NAME = r"[A-Za-z_][A-Za-z0-9_]*"


def parse_rule(text: str, schema: FunctionSchema, return_name: str) -> DTypeRule:
    """The rule `text` for return `return_name`, checked against `schema`."""
    text = text.strip()
    tensors = [a.name for a in schema.arguments if _is_single_tensor(a) and not a.is_optional]
    m = re.fullmatch(rf"promote\s*\((.*)\)", text)
    if m:
        names = [n.strip() for n in m.group(1).split(",")]
        if len(names) < 2:
            raise RuleError("promote(...) needs two or more tensor arguments", text.find("(") + 1)
        at = m.start(1)
        for n in names:
            col = text.find(n, at)
            if n not in tensors:
                raise RuleError(f"'{n}' is not a required Tensor argument of {schema.name}", max(col, 0),
                                "promote(...) takes required Tensor arguments")
            at = col + len(n)
        if len(set(names)) != len(names):
            raise RuleError("promote(...) names an argument twice", m.start(1))
        return DTypeRule("promote", tuple(names))
    m = re.fullmatch(rf"promote_integers\s*\(\s*({_NAME})\s*\)", text)
    if m:
        if m.group(1) not in tensors:
            raise RuleError(f"'{m.group(1)}' is not a required Tensor argument of {schema.name}", m.start(1),
                            "promote_integers(x) is the dtype of Tensor argument x, an integral or bool one int64")
        return DTypeRule("integers", (m.group(1),))
    m = re.fullmatch(rf"({_NAME})\s+or\s+promote_integers\s*\(\s*({_NAME})\s*\)", text)
    if m:
        arg, fallback = m.group(1), m.group(2)
        a = schema.argument(arg)
        if a is None or not _is_scalar_type(a) or not isinstance(a.type, OptionalType):
            raise RuleError(f"'{arg}' is not a ScalarType? argument of {schema.name}", 0,
                            "'<dtype argument> or promote_integers(<Tensor argument>)' takes a 'ScalarType?' argument")
        if fallback not in tensors:
            raise RuleError(f"'{fallback}' is not a required Tensor argument of {schema.name}", m.start(2))
        return DTypeRule("arg", (arg,), fallback, integers=True)
    m = re.fullmatch(rf"({_NAME})\s+or\s+({_NAME})", text)
    if m:
        arg, fallback = m.group(1), m.group(2)
        a = schema.argument(arg)
        if a is not None and _is_single_tensor(a) and a.is_optional:  # its dtype where given
            if fallback != "default" and fallback not in tensors and fallback not in DTYPES:
                raise RuleError(f"the fallback '{fallback}' is neither a dtype, 'default' nor a required Tensor "
                                "argument", m.start(2), "the dtype when the optional tensor is not given")
            return DTypeRule("given", (arg,), fallback)
        if a is None or not _is_scalar_type(a) or not isinstance(a.type, OptionalType):
            raise RuleError(f"'{arg}' is neither a ScalarType? argument nor an optional Tensor argument of "
                            f"{schema.name}", 0, "'<dtype argument> or <fallback>' takes a 'ScalarType?' argument, "
                            "'<optional tensor> or <fallback>' a 'Tensor?' argument")
        if fallback != "default" and fallback not in tensors:
            raise RuleError(f"the fallback '{fallback}' is neither 'default' nor a required Tensor argument",
                            m.start(2), "'default' is torch.get_default_dtype()")
        return DTypeRule("arg", (arg,), fallback)
    if not re.fullmatch(_NAME, text):
        raise RuleError(f"dtype of '{return_name}' must be a dtype name, a Tensor argument, a ScalarType argument, "
                        f"'<ScalarType? argument> or <Tensor argument | default>', 'promote(a, b, ...)' or "
                        f"'promote_integers(a)', "
                        f"not '{text}'")
    if text in DTYPES:
        return DTypeRule("dtype", (text,))
    a = schema.argument(text)
    if a is not None and _is_scalar_type(a):
        if isinstance(a.type, OptionalType):
            raise RuleError(f"'{text}' is optional: say what the dtype is when it is None",
                            hint=f"write '{text} or <Tensor argument>' or '{text} or default'")
        return DTypeRule("arg", (text,))
    if text in tensors:
        return DTypeRule("tensor", (text,))
    if a is not None and _is_single_tensor(a):
        raise RuleError(f"'{text}' is an optional Tensor argument: say what the dtype is when it is not given",
                        hint=f"write '{text} or <dtype | Tensor argument | default>'")
    raise RuleError(f"dtype of '{return_name}' must be a dtype name, a Tensor argument or a ScalarType argument, "
                    f"not '{text}'")


# ---------------------------------------------------------------------------- rendering
def render_cpp(rule: DTypeRule, names: Mapping[str, str]) -> str:
    """The C++ `at::ScalarType` of `rule`; `names` maps argument names to C++ expressions."""
    n = lambda x: names.get(x, x)  # noqa: E731
    if rule.kind == "dtype":
        return f"at::ScalarType::{DTYPES[rule.names[0]].scalar_type}"
    if rule.kind == "tensor":
        return f"{n(rule.names[0])}.scalar_type()"
    if rule.kind == "promote":
        return f"opwrap::rt::result_type({{{', '.join(n(x) for x in rule.names)}}})"
    if rule.kind == "integers":
        return _cpp_integers(f"{n(rule.names[0])}.scalar_type()")
    if rule.kind == "given":  # an optional tensor (std::optional<at::Tensor>)
        t, fb = n(rule.names[0]), rule.fallback
        other = (f"at::ScalarType::{DTYPES[fb].scalar_type}" if fb in DTYPES else
                 "c10::get_default_dtype_as_scalartype()" if fb == "default" else f"{n(fb)}.scalar_type()")
        return f"({t}.has_value() && {t}->defined() ? {t}->scalar_type() : {other})"
    arg = n(rule.names[0])
    if not rule.fallback:
        return arg
    if rule.fallback == "default":
        return f"{arg}.value_or(c10::get_default_dtype_as_scalartype())"
    if rule.integers:
        return f"{arg}.value_or({_cpp_integers(f'{n(rule.fallback)}.scalar_type()')})"
    return f"{arg}.value_or({n(rule.fallback)}.scalar_type())"


def _cpp_integers(dtype: str) -> str:
    """`dtype` (an at::ScalarType expression), int64 when integral or bool."""
    return f"(c10::isIntegralType({dtype}, /*includeBool=*/true) ? at::ScalarType::Long : {dtype})"


def render_python(rule: DTypeRule, names: Mapping[str, str] | None = None) -> str:
    """A Python expression of the `torch.dtype` of `rule` (the fake kernel's)."""
    names = names or {}
    n = lambda x: names.get(x, x)  # noqa: E731
    if rule.kind == "dtype":
        return DTYPES[rule.names[0]].python
    if rule.kind == "tensor":
        return f"{n(rule.names[0])}.dtype"
    if rule.kind == "promote":
        if len(rule.names) == 2:
            return f"torch.result_type({n(rule.names[0])}, {n(rule.names[1])})"
        return ("torch._prims_common.elementwise_dtypes(" + ", ".join(n(x) for x in rule.names)
                + ", type_promotion_kind=torch._prims_common.ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT)[1]")
    if rule.kind == "integers":
        return _python_integers(f"{n(rule.names[0])}.dtype")
    arg = n(rule.names[0])
    if not rule.fallback:
        return arg
    other = ("torch.get_default_dtype()" if rule.fallback == "default" else DTYPES[rule.fallback].python
             if rule.fallback in DTYPES else _python_integers(f"{n(rule.fallback)}.dtype") if rule.integers
             else f"{n(rule.fallback)}.dtype")
    return f"({arg}.dtype if {arg} is not None else {other})" if rule.kind == "given" else \
        f"({arg} if {arg} is not None else {other})"


def _python_integers(dtype: str) -> str:
    """`dtype` (a torch.dtype expression), torch.int64 when integral or bool."""
    return f"_runtime.promote_integers({dtype})"


def template_parameter(owner: str, first: bool) -> str:
    return "scalar_t" if first else f"{owner}_t"


__all__ = ["DTypeVar", "DTypeRule", "RuleError", "parse_rule", "render_cpp", "render_python", "template_parameter"]
