"""Schema types to Python annotations, as torch's own stubs spell them."""

from __future__ import annotations

from ..schema import Argument, BaseType, ClassType, FunctionSchema, ListType, OptionalType, Type

_SCALARS = {
    "Tensor": "Tensor", "int": "int", "SymInt": "Union[int, torch.SymInt]", "float": "float", "bool": "bool",
    "str": "str", "Scalar": "Union[int, float, bool, complex]", "ScalarType": "torch.dtype",
    "Device": "Union[torch.device, str, int]", "Layout": "torch.layout", "MemoryFormat": "torch.memory_format",
    "Generator": "torch.Generator",
}


class UnsupportedType(Exception):
    pass


def annotation(t: Type) -> str:
    if isinstance(t, BaseType) and t.name in _SCALARS:
        return _SCALARS[t.name]
    if isinstance(t, ClassType):
        return "torch.ScriptObject"
    if isinstance(t, OptionalType):
        return f"Optional[{annotation(t.elem)}]"
    if isinstance(t, ListType):
        inner = annotation(t.elem)
        return f"Sequence[{inner}]"
    raise UnsupportedType(str(t))


def parameters(schema: FunctionSchema) -> list[str]:
    """`name: Annotation = default` for each argument, with `*` before keyword-only ones."""
    out, kw = [], False
    for a in schema.arguments:
        if a.kwarg_only and not kw:
            out.append("*")
            kw = True
        text = f"{a.name}: {annotation(a.type)}"
        if a.default is not None:
            text += f" = {a.default.python()}"
        out.append(text)
    return out


def call_arguments(schema: FunctionSchema) -> list[str]:
    """How the wrapper passes its parameters on: positionally, keyword-only ones by name."""
    return [f"{a.name}={a.name}" if a.kwarg_only else a.name for a in schema.arguments]


def has_named_returns(schema: FunctionSchema) -> bool:
    return len(schema.returns) > 1 and all(r.name for r in schema.returns)


def result_class(schema: FunctionSchema, ident: str) -> str:
    return "".join(p.capitalize() for p in ident.split("_")) + "Result"


def return_annotation(schema: FunctionSchema, ident: str) -> str:
    rets = schema.returns
    if not rets:
        return "None"
    if len(rets) == 1:
        return annotation(rets[0].type)
    if has_named_returns(schema):
        return result_class(schema, ident)
    return "Tuple[" + ", ".join(annotation(r.type) for r in rets) + "]"


def tensor_like_arguments(schema: FunctionSchema) -> list[Argument]:
    """The arguments that may carry `__torch_function__` (tensors, optional tensors, lists)."""
    from ..schema import is_tensor, unwrap_optional

    out = []
    for a in schema.arguments:
        t = unwrap_optional(a.type)
        if is_tensor(t) or (isinstance(t, ListType) and is_tensor(t.elem)):
            out.append(a)
    return out
