"""Schema types to C++ types, in the dispatcher's unboxed calling convention.

A thin view of the one type table (codegen/api/types.py) for emitters that want text."""

from __future__ import annotations

from ..lang.schema import Argument, FunctionSchema, Type
from . import types
from .types import UnsupportedType

__all__ = ["UnsupportedType", "argument_type", "value_type", "returns_type", "dispatcher_signature",
           "kernel_argument_type", "kernel_argument_value"]


def argument_type(a: Argument) -> str:
    """The C++ parameter type of an argument, as the dispatcher passes it."""
    return types.dispatcher_type(a)


def value_type(t: Type) -> str:
    """The C++ type of a value of schema type `t` held or returned by value."""
    r = types.row(t)
    if r.returned is None:
        raise UnsupportedType(str(t), "not a value type the generated C++ handles")
    return r.returned


def returns_type(schema: FunctionSchema) -> str:
    """The C++ return type of the op's wrapper (and of its typed dispatcher handle)."""
    return types.tuple_of([types.returned_type(r) for r in schema.returns])


def dispatcher_signature(schema: FunctionSchema) -> str:
    """The function type of the op's typed dispatcher handle: `.typed<...>()`."""
    return returns_type(schema) + "(" + ", ".join(argument_type(a) for a in schema.arguments) + ")"


def kernel_argument_type(a: Argument) -> str:
    """The parameter type the hand-written kernel template receives: SymInts arrive as
    concrete integers, everything else as the dispatcher passes it."""
    return types.kernel_type(a)


def kernel_argument_value(a: Argument, name: str) -> str:
    """The C++ expression passing the wrapper's `name` to the kernel."""
    return types.to_kernel(a, name)
