"""The fast eager call path: a CPython extension module (`<package>._generated._fast`, built
beside the op library) with one METH_FASTCALL function per op that unpacks its arguments,
calls the typed dispatcher handle with the GIL released and wraps the result.  Calls it
cannot take exactly (keywords, tensor-likes with `__torch_function__`, a TorchFunctionMode,
an argument of another type) go to the op's Python wrapper, which handles everything.
`opwrap.ops` binds each public name to its fast function and registers the Python wrapper
with `torch.compiler.substitute_in_graph`, so torch.compile traces the wrapper.

Only the types the fast path unpacks get a binding; other ops keep their Python wrapper.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..api import cpp
from ..schema import Argument, BaseType, ListType, OptionalType
from .base import Output, Plugin
from .fake import python_params
from .python_ops import doc_lines
from .registration import cpp_string

# schema type -> (C++ local type, take_* function)
_TAKE = {
    "Tensor": ("const at::Tensor*", "take_tensor"),
    "Tensor?": ("std::optional<at::Tensor>", "take_optional_tensor"),
    "float": ("double", "take_double"),
    "int": ("int64_t", "take_int"),
    "SymInt": ("c10::SymInt", "take_symint"),
    "bool": ("bool", "take_bool"),
    "Scalar": ("at::Scalar", "take_scalar"),
    "int[]": ("std::vector<int64_t>", "take_int_list"),
}


def _key(t) -> str | None:
    if isinstance(t, BaseType):
        return t.name
    if isinstance(t, OptionalType) and t.elem == BaseType("Tensor"):
        return "Tensor?"
    if isinstance(t, ListType) and t.elem == BaseType("int") and t.size is None:
        return "int[]"
    return None


def _default(a: Argument) -> str | None:
    """The C++ value of an argument's default, or None when the fast path cannot supply it."""
    d = a.default
    key = _key(a.type)
    if d is None:
        return None
    if d.kind == "none" and key == "Tensor?":
        return "std::nullopt"
    if d.kind == "bool" and key in ("bool", "Scalar"):
        return "true" if d.value else "false"
    if d.kind in ("int", "float") and key in ("int", "SymInt", "float", "Scalar"):
        return repr(d.value) if d.kind == "float" else str(d.value)
    if d.kind == "list" and key == "int[]":
        return "{" + ", ".join(str(v) for v in d.value) + "}"
    return None


@dataclass(frozen=True)
class Binding:
    name: str
    op_name: str
    overload: str
    op_type: str
    min_args: int  # positional arguments the caller must give
    max_args: int  # positional arguments the caller may give
    unpack: tuple[str, ...]
    call_args: str
    result: tuple[str, ...]
    schema: str
    doc: str  # the docstring, as a C string literal, led by the text signature


def plan(decl, index: int, namespace: str) -> Binding | None:
    s = decl.schema
    if any(_key(a.type) not in _TAKE for a in s.arguments):
        return None
    if any(r.type != BaseType("Tensor") for r in s.returns) or not s.returns:
        return None
    positional = [a for a in s.arguments if not a.kwarg_only]
    keyword = [a for a in s.arguments if a.kwarg_only]
    if any(a.default is not None and _default(a) is None for a in s.arguments) or any(a.default is None for a in keyword):
        return None
    required = sum(1 for a in positional if a.default is None)
    unpack, call = [], []
    for i, a in enumerate(s.arguments):
        ctype, take = _TAKE[_key(a.type)]
        var = f"{a.name}_"
        if a.kwarg_only:
            unpack.append(f"{ctype} {var} = {_default(a)};")
        elif a.default is not None:
            unpack.append(f"{ctype} {var} = {_default(a)};")
            unpack.append(f"if (nargs > {i} && !opwrap::py::{take}(args[{i}], {var})) return fallback({index}, args, nargsf, kwnames);")
        else:
            init = " = nullptr" if ctype.endswith("*") else "{}"
            unpack.append(f"{ctype} {var}{init};")
            unpack.append(f"if (!opwrap::py::{take}(args[{i}], {var})) return fallback({index}, args, nargsf, kwnames);")
        if ctype.endswith("*"):
            call.append(f"const_cast<at::Tensor&>(*{var})" if a.is_write else f"*{var}")
        else:
            call.append(var)
    # How much data the call touches, to decide whether to release the GIL around it.
    sizes = [f"{a.name}_->numel()" for a in s.arguments if _key(a.type) == "Tensor"]
    gil = f"opwrap::py::NoGil no_gil({' + '.join(sizes) or '0'});"
    rets = s.returns
    if len(rets) == 1 and s.aliased_argument(rets[0]) is not None:
        arg = s.aliased_argument(rets[0])
        pos = s.arguments.index(arg)
        result = (f"{{ {gil} op.call({', '.join(call)}); }}",
                  f"Py_INCREF(args[{pos}]);", f"return args[{pos}];")
    elif len(rets) == 1:
        result = ("at::Tensor result;", f"{{ {gil} result = op.call({', '.join(call)}); }}",
                  "return THPVariable_Wrap(std::move(result));")
    else:
        n = len(rets)
        result = (f"{cpp.returns_type(s)} result;", f"{{ {gil} result = op.call({', '.join(call)}); }}",
                  f"PyObject* values = PyTuple_New({n});", "if (values == nullptr) return nullptr;")
        result += tuple(f"PyTuple_SET_ITEM(values, {i}, THPVariable_Wrap(std::move(std::get<{i}>(result))));" for i in range(n))
        result += (f"return wrap_result({index}, values);",)
    op_type = cpp.dispatcher_signature(s)
    return Binding(decl.ident, decl.name, decl.overload, op_type, required, len(positional), tuple(unpack),
                   ", ".join(call), result, str(s), cpp_string(docstring(decl, namespace)))


def docstring(decl, namespace: str) -> str:
    """The Python wrapper's docstring, led by a text signature so inspect.signature works."""
    return f"{decl.ident}({python_params(decl.schema)})\n--\n\n" + "\n".join(doc_lines(decl, namespace))


class PythonFast(Plugin):
    name = "python-fast"

    def emit(self, lib, ctx):
        bindings = []
        for d in lib.declarations:
            b = plan(d, len(bindings), lib.namespace)
            if b is not None:
                bindings.append(b)
        template = "python/fast.cpp.j2"
        yield Output("python/_fast.cpp", ctx.render(template, namespace=lib.namespace, bindings=bindings),
                     lib.sources + (ctx.template_source(template),))
