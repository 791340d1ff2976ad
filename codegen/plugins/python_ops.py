"""The typed Python surface: `<package>.ops`, one function per op with its signature from
the schema (defaults, keyword-only arguments, Optional, Sequence[int], a NamedTuple for
named multiple returns), its docstring from `doc:` plus the facts `help()` should show, and
a `.pyi` beside it.  Each function honours `__torch_function__` on its tensor-like
arguments (and TorchFunctionModes) exactly as `torch.*` functions do, passing itself as
`func`, then calls the op through its `OpOverload`."""

from __future__ import annotations

import textwrap

from ..api import python as py
from .base import Output, Plugin


def doc_lines(decl, ns: str) -> list[str]:
    d = decl.derivatives
    if d is None:
        diff = "no (derivative not implemented)" if decl.tensor_inputs else "no (no tensor input)"
    elif not d.differentiable:
        diff = "no (its outputs are not differentiable)"
    else:
        inputs = [n for f in d.formulas if f.differentiable for n in f.inputs]
        diff = "yes, with respect to " + ", ".join(inputs)
        diff += "; once (no double backward)" if d.once_differentiable else "; twice (double backward works)"
    lines = textwrap.wrap(decl.doc, 88) if decl.doc else []
    lines += ["", f"Schema: {ns}::{decl.schema}",
              "Dtypes: " + ", ".join(dt.name for dt in decl.dtypes),
              "Devices: " + ", ".join(k for k, _ in decl.kernels),
              f"Differentiable: {diff}"]
    autocast = decl.extra_field("autocast")
    if autocast:
        lines.append(f"Autocast: {autocast}")
    return lines


class PythonOps(Plugin):
    name = "python-ops"

    def validate(self, decl, lib, diag):
        try:
            py.parameters(decl.schema)
            py.return_annotation(decl.schema, decl.ident)
            for r in decl.schema.returns:  # named results' NamedTuple fields too
                py.annotation(r.type)
        except py.UnsupportedType as e:
            diag.error(decl.func_loc, f"type {e} has no Python annotation in the typed wrappers")

    def emit(self, lib, ctx):
        ns = lib.namespace
        functions = []
        for d in lib.declarations:
            s = d.schema
            relevant = [a.name for a in py.tensor_like_arguments(s)]
            named = py.has_named_returns(s)
            functions.append(dict(
                name=d.ident, op=f"{d.name}.{d.overload or 'default'}", params=", ".join(py.parameters(s)),
                returns=py.return_annotation(s, d.ident),
                doc="\n".join(("    " + line) if line else "" for line in doc_lines(d, ns)),
                relevant=relevant, args=", ".join(a.name for a in s.arguments),
                call=", ".join(py.call_arguments(s)),
                result_class=py.result_class(s, d.ident) if named else "",
                fields=[(r.name, py.annotation(r.type)) for r in s.returns] if named else [],
            ))
        common = dict(namespace=ns, package=lib.config.python_package, functions=functions)
        for template, path in (("python/ops.py.j2", "python/ops.py"), ("python/ops.pyi.j2", "python/ops.pyi")):
            yield Output(path, ctx.render(template, **common), lib.sources + (ctx.template_source(template),))
