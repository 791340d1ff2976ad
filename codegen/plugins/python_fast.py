"""The fast eager call path: a CPython extension module (`<package>._generated._fast`, built
beside the op library) with one METH_FASTCALL function per op that unpacks its arguments,
calls the typed dispatcher handle with the GIL released and wraps the result.  Calls it
cannot take exactly (tensor-likes with `__torch_function__`, a TorchFunctionMode,
an argument of another type) go to the op's Python wrapper, which handles everything.
Keyword arguments are taken by the wrapper's parameter names (`from_` for a schema's `from`);
a name that is none of them, or an argument given twice, goes to the wrapper, which raises
Python's TypeError.
`opwrap.ops` binds each public name to its fast function and registers the Python wrapper
with `torch.compiler.substitute_in_graph`, so torch.compile traces the wrapper.

Which types the fast path unpacks is the type table's `fast` column (codegen/api/types.py;
the `take_*` parsers are in runtime/include/opwrap/runtime/python_fast.h); an op with an
argument of another type, a default it cannot write in C++, or a return it cannot wrap
keeps its Python wrapper.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..api import cpp, types
from ..api import python as py
from ..core.names import cpp_ident
from ..core.literals import cpp_string
from ..lang.schema import Argument, BaseType, ListType, OptionalType, Return
from .base import Output, Plugin

# The names fast.cpp.j2 declares at file scope (an op's function must not take them) and
# inside each function (an argument's local must not).
FILE_SCOPE = frozenset({"kOps", "twins", "result_types", "fallback", "wrap_result", "install", "methods", "module",
                        "PyInit__fast"})
FUNCTION_SCOPE = frozenset({"args", "nargsf", "kwnames", "nargs", "op", "result", "values", "no_gil", "item",
                            "keywords", "slots", "i"})
# Returned types the fast path wraps (opwrap::py::wrap).
_WRAPPED = {"Tensor", "int", "SymInt", "float", "bool", "Tensor[]"}


def _fast(a: Argument) -> tuple[str, str] | None:
    try:
        return types.argument_row(a).fast
    except types.UnsupportedType:
        return None


def _default(a: Argument) -> str | None:
    """The C++ value of an argument's default, or None when the fast path cannot supply it."""
    d = a.default
    if d is None:
        return None
    t = a.type
    base = t.elem if isinstance(t, OptionalType) else t
    if d.kind == "none":
        return "std::nullopt" if isinstance(t, OptionalType) else None
    if isinstance(base, ListType):
        if d.kind != "list" or base.elem not in (BaseType("int"), BaseType("SymInt"), BaseType("float")):
            return None
        items = [_number(v) for v in d.value]
        return None if any(x is None for x in items) else "{" + ", ".join(items) + "}"  # type: ignore[arg-type]
    name = base.name if isinstance(base, BaseType) else ""
    if d.kind == "bool" and name in ("bool", "Scalar"):
        return "true" if d.value else "false"
    if d.kind in ("int", "float") and name in ("int", "SymInt", "float", "Scalar"):
        return _number(d.value)
    if d.kind == "str" and name == "str":
        return cpp_string(str(d.value))
    if d.kind == "enum" and name in ("ScalarType", "Layout", "MemoryFormat"):  # c10's codes (schema.py)
        return f"static_cast<at::{name}>({int(d.value)})"  # type: ignore[call-overload]
    if d.kind == "enum" and name == "int":  # `int reduction=Mean`
        return str(d.value)
    return None


def _number(v: object) -> str | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    if isinstance(v, float):
        text = repr(v)
        return text if text not in ("inf", "-inf", "nan") else None
    return str(v)


def _wrapped(r: Return) -> bool:
    return str(r.type) in _WRAPPED


@dataclass(frozen=True)
class Binding:
    name: str  # the Python name (opwrap.ops.<name>), as a C string literal
    symbol: str  # the C++ function
    op_name: str  # "ns::name", as a C string literal
    overload: str  # as a C string literal
    op_type: str
    max_args: int  # positional arguments the caller may give
    arity: int  # the op's arguments
    keywords: str  # their Python names (the wrapper's parameters), as a C++ initializer
    unpack: tuple[str, ...]
    result: tuple[str, ...]
    schema: str
    doc: str  # the docstring, as a C string literal, led by the text signature


def plan(decl, index: int, namespace: str, function: str, symbol: str, out_overload=None) -> Binding | None:
    s = decl.schema
    parsers = [_fast(a) for a in s.arguments]
    if any(p is None for p in parsers):
        return None
    if any(a.default is not None and _default(a) is None for a in s.arguments):
        return None
    aliased = [s.aliased_argument(r) for r in s.returns]
    if any(al is not None for al in aliased) and len(s.returns) != 1:
        return None
    if any(al is None and not _wrapped(r) for r, al in zip(s.returns, aliased)):
        return None
    positional = [a for a in s.arguments if not a.kwarg_only]
    sig = py.python_signature(decl, function, out_overload)  # its doc shows the wrapper's out= too
    taken = set(FUNCTION_SCOPE)
    unpack, call, sizes = [], [], []
    for i, (a, parser) in enumerate(zip(s.arguments, parsers)):
        ctype, take = parser  # type: ignore[misc]
        var = cpp_ident(f"{a.name}_", taken)
        taken.add(var)
        # slots[i]: the argument as the caller gave it (positionally or by keyword), or null.
        if a.default is not None:
            unpack.append(f"{ctype} {var} = {_default(a)};")
            unpack.append(f"if (slots[{i}] != nullptr && !opwrap::py::{take}(slots[{i}], {var})) "
                          f"return fallback({index}, args, nargsf, kwnames);")
        else:
            init = " = nullptr" if ctype.endswith("*") else "{}"
            unpack.append(f"{ctype} {var}{init};")
            unpack.append(f"if (slots[{i}] == nullptr || !opwrap::py::{take}(slots[{i}], {var})) "
                          f"return fallback({index}, args, nargsf, kwnames);")
        if ctype.endswith("*"):
            call.append(f"const_cast<at::Tensor&>(*{var})" if a.is_write else f"*{var}")
            sizes.append(f"{var}->numel()")
        else:
            call.append(var)
    # How much data the call touches, to decide whether to release the GIL around it.
    gil = f"opwrap::py::NoGil no_gil({' + '.join(sizes) or '0'});"
    args = ", ".join(call)
    rets = s.returns
    if not rets:
        result = (f"{{ {gil} op.call({args}); }}", "Py_RETURN_NONE;")
    elif aliased[0] is not None:
        pos = s.arguments.index(aliased[0])
        result = (f"{{ {gil} op.call({args}); }}", f"Py_INCREF(slots[{pos}]);", f"return slots[{pos}];")
    elif len(rets) == 1:
        result = (f"{cpp.returns_type(s)} result;", f"{{ {gil} result = op.call({args}); }}",
                  "return opwrap::py::wrap(std::move(result));")
    else:
        n = len(rets)
        result = (f"{cpp.returns_type(s)} result;", f"{{ {gil} result = op.call({args}); }}",
                  f"PyObject* values = PyTuple_New({n});", "if (values == nullptr) return nullptr;")
        for i in range(n):
            result += (f"PyObject* item{i} = opwrap::py::wrap(std::move(std::get<{i}>(result)));",
                       f"if (item{i} == nullptr) {{ Py_DECREF(values); return nullptr; }}",
                       f"PyTuple_SET_ITEM(values, {i}, item{i});")
        result += (f"return wrap_result({index}, values);",)
    doc = f"{function}({sig.parameters(annotated=False)})\n--\n\n" + "\n".join(py.doc_lines(decl, namespace))
    return Binding(cpp_string(function), symbol, cpp_string(f"{namespace}::{decl.name}"), cpp_string(decl.overload),
                   cpp.dispatcher_signature(s), len(positional), len(s.arguments),
                   "{" + ", ".join(cpp_string(a.ident) for a in sig.args) + "}", tuple(unpack), result, str(s),
                   cpp_string(doc))


class PythonFast(Plugin):
    name = "python-fast"

    def emit(self, lib, ctx):
        functions = py.function_names(lib.declarations)
        out_overloads = py.out_overloads(lib.declarations)
        bindings: list[Binding] = []
        symbols = set(FILE_SCOPE)
        for d in lib.declarations:
            symbol = cpp_ident(functions[d.ident], symbols)
            try:
                b = plan(d, len(bindings), lib.namespace, functions[d.ident], symbol, out_overloads.get(d.ident))
            except types.UnsupportedType:  # a type the C++ side reports; the op keeps its Python wrapper
                b = None
            if b is not None:
                symbols.add(symbol)
                bindings.append(b)
        template = "python/fast.cpp.j2"
        yield Output("python/_fast.cpp", ctx.render(template, namespace=lib.namespace, bindings=bindings),
                     lib.sources + (ctx.template_source(template),))
