"""The typed Python surface: `<package>.ops`, one function per op with its signature from
the schema (defaults, keyword-only arguments, Optional, Sequence[int], a result class for
named multiple returns), its docstring from `doc:` plus the facts `help()` should show, and
a `.pyi` beside it.  Each function honours `__torch_function__` on its tensor-like
arguments (and TorchFunctionModes) exactly as `torch.*` functions do, passing itself as
`func`, then calls the op through its `OpOverload`.

Types and names come from codegen/api/python.py: an argument named like a Python keyword
(`from`) is the parameter `from_`, and is passed to the op by its schema name.

An out= overload (`name.out(..., *, Tensor(a!) out) -> Tensor(a!)`) has its own function,
`ops.name_out`, and the functional op's function takes `out=` as torch's functions do (a
tuple for several outputs) and then calls the overload."""

from __future__ import annotations

from ..api import python as py
from ..core.literals import py_string
from ..core.targets import target_named
from .base import Output, Plugin


class PythonOps(Plugin):
    name = "python-ops"

    def validate(self, decl, lib, diag):
        try:
            py.python_signature(decl, decl.ident)
        except py.UnsupportedType as e:
            diag.error(decl.func_loc, f"type {e} has no Python annotation in the typed wrappers")

    def emit(self, lib, ctx):
        ns = lib.namespace
        names = py.function_names(lib.declarations)
        out_overloads = py.out_overloads(lib.declarations)
        functions = []
        # A target whose autograd is registered from Python: each wrapper calls its op through
        # _runtime.func_call under torch.func's transforms (pyruntime.func_call says why).
        python_autograd = not target_named(lib.config.target).cpp_autograd
        for d in lib.declarations:
            sig = py.python_signature(d, names[d.ident], out_overloads.get(d.ident))
            o = out_overloads.get(d.ident) if sig.out is not None else None
            functions.append(dict(
                out_op=py.op_expression("_ops", o.name, o.overload) if o is not None else "",
                out_call=sig.out_call() if o is not None else "",
                name=sig.name, op=py.op_expression("_ops", d.name, d.overload), params=sig.parameters(),
                func_op=py_string(f"{ns}::{d.op_name}") if python_autograd else "",
                returns=sig.returns, doc="\n".join(("    " + line) if line else "" for line in py.doc_lines(d, ns)),
                relevant=", ".join(sig.relevant) + ("," if len(sig.relevant) == 1 else ""),
                wrapper_call=sig.wrapper_call(), call=sig.op_call(), result_class=sig.result_class,
                fields=sig.fields, item_type="Tensor" if all(a == "Tensor" for _, a in sig.fields) else "object", field_names=", ".join(py_string(f) for f, _ in sig.fields) + ("," if len(sig.fields) == 1 else ""),
            ))
        common = dict(namespace=ns, package=lib.config.python_package, functions=functions)
        for template, path in (("python/ops.py.j2", "python/ops.py"), ("python/ops.pyi.j2", "python/ops.pyi")):
            yield Output(path, ctx.render(template, **common), lib.sources + (ctx.template_source(template),))

