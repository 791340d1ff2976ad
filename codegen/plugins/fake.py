"""Fake kernels for torch.compile and torch.export: `torch.library.register_fake` functions
built from the same shape rule and dtype rule that allocate the real outputs, so the two
cannot disagree.  The TORCH_LIBRARY block names their module with `m.set_python_module`,
so loading the shared library alone is enough for torch to find them."""

from __future__ import annotations

import keyword
from dataclasses import replace

from ..dtypes import DTYPES
from ..schema import ListType
from ..shapes import dynamic_sizes, python_input_checks, python_output_shape
from .base import Output, Plugin
from .registration import cpp_string


def fake_module(lib) -> str:
    return f"{lib.config.python_package}._generated.fake"


def python_params(schema) -> str:
    parts, kw = [], False
    for a in schema.arguments:
        if a.kwarg_only and not kw:
            parts.append("*")
            kw = True
        parts.append(a.name + (f"={a.default.python()}" if a.default is not None else ""))
    return ", ".join(parts)


class FakeKernels(Plugin):
    name = "fake"

    def validate(self, decl, lib, diag):
        for a in decl.schema.arguments:
            if keyword.iskeyword(a.name):
                diag.error(decl.func_loc, f"argument name '{a.name}' is a Python keyword; fake kernels and "
                           "Python wrappers cannot name it")

    def transform(self, lib, diag):
        """Every op with a generated fake kernel is declared pt2_compliant_tag: its fake kernel
        comes from the same shape rule as its real outputs, and codegen.testing's opcheck
        suite (run by the library's tests) checks the claim for every op and dtype."""
        return replace(lib, declarations=tuple(
            replace(d, tags=d.tags + ("pt2_compliant_tag",)) if d.kernels and "pt2_compliant_tag" not in d.tags else d
            for d in lib.declarations))

    def library_block(self, lib):
        if any(d.kernels or d.extra_field("method") for d in lib.declarations):
            yield f"m.set_python_module({cpp_string(fake_module(lib))});"

    def emit(self, lib, ctx):
        from .classes import method_call  # classes imports this module for python_params

        functions = []
        pointwise = False
        for d in lib.declarations:
            op = f"{lib.namespace}::{d.op_name}"
            s = d.schema
            if d.extra_field("method"):  # a method call on a custom class: the fake class runs it
                arg, method = method_call(d)
                others = ", ".join(a.name for a in s.arguments if a.name != arg)
                functions.append(dict(op=op, ident=d.ident, params=python_params(s), schema=str(s),
                                      body=[f"return {arg}.{method}({others})"]))
                continue
            if not d.kernels:
                continue
            if d.expression is not None:  # aten's elementwise rule: broadcast shapes, promoted dtype
                names = d.expression.tensors
                allowed = "(" + ", ".join(dt.python for dt in d.dtypes) + ",)"
                float_op = all(dt.is_floating for dt in d.dtypes)
                functions.append(dict(op=op, ident=d.ident, params=python_params(s), schema=str(s), body=[
                    f"return _pointwise({op!r}, {names!r}, ({''.join(n + ', ' for n in names)}), {allowed}, "
                    f"{', '.join(dt.name for dt in d.dtypes)!r}, float_op={float_op})"]))
                pointwise = True
                continue
            body: list[str] = []
            tensors = [a for a in d.tensor_inputs if not isinstance(a.type, ListType)]
            required = [a for a in tensors if not a.is_optional]
            if required:
                first = required[0].name
                allowed = "(" + ", ".join(dt.python for dt in d.dtypes) + ",)"
                names = ", ".join(dt.name for dt in d.dtypes)
                body.append(f"torch._check({first}.dtype in {allowed}, lambda: f\"{op}: argument '{first}' has dtype "
                            f"{{{first}.dtype}}, but expected one of: {names}\")")
                for a in tensors[1:] if tensors[0] is required[0] else tensors:
                    if a.name == first:
                        continue
                    guard = f"{a.name} is None or " if a.is_optional else ""
                    body.append(f"torch._check({guard}{a.name}.dtype == {first}.dtype, lambda: f\"{op}: argument "
                                f"'{a.name}' has dtype {{{a.name}.dtype}}, but expected {{{first}.dtype}} (the dtype of '{first}')\")")
                    body.append(f"torch._check({guard}{a.name}.device == {first}.device, lambda: f\"{op}: argument "
                                f"'{a.name}' is on {{{a.name}.device}}, but '{first}' is on {{{first}.device}}\")")
            if d.shape_plan is not None:
                body.extend(python_input_checks(d.shape_plan, op, s))
            results = []
            for size in dynamic_sizes(o.shape for o in d.outputs() if o.shape is not None):
                body.append(f"{size} = torch.library.get_ctx().new_dynamic_size()  # data-dependent")
            for o in d.outputs():
                name, rule, shape = o.name, o.dtype, o.shape
                if o.aliases is not None:
                    results.append(o.aliases)
                    continue
                dtype = DTYPES[rule].python if rule in DTYPES else f"{rule}.dtype"
                shape_expr = python_output_shape(shape) if shape is not None else f"list({d.like}.shape)"
                device = f"{required[0].name}.device" if required else '"cpu"'
                body.append(f"{name}_shape = {shape_expr}")
                body.append(f"for _size in {name}_shape:")
                body.append(f"    torch._check(_size >= 0, lambda: f\"{op}: output '{name}' would have negative size "
                            f"{{_size}} (shape {{{name}_shape}})\")")
                body.append(f"{name} = torch.empty({name}_shape, dtype={dtype}, device={device})")
                results.append(name)
            body.append("return " + (", ".join(results) if results else "None"))
            functions.append(dict(op=op, ident=d.ident, params=python_params(s), schema=str(s), body=body))
        template = "python/fake.py.j2"
        yield Output("python/fake.py", ctx.render(template, namespace=lib.namespace, functions=functions, pointwise=pointwise),
                     lib.sources + (ctx.template_source(template),))
