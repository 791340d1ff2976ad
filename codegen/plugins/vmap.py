"""Batching rules for torch.vmap, registered with `torch.library.register_vmap` from a
generated Python module (`<package>._generated.vmap`, imported with the library).

- `pointwise: true`: the op is elementwise over its same-shaped tensor inputs, so one call
  on the whole batch is the batched result: batch dimensions move to the front and
  unbatched tensors are expanded to the batch size.
- `pointwise: <expression>`: elementwise with broadcasting, so batched tensors only need
  their batch dimension in front and size-1 dimensions after it up to the largest logical
  rank; unbatched tensors broadcast as they are.
- `vmap: module:function`: a hand-written rule with register_vmap's signature
  `(info, in_dims, *args) -> (outputs, out_dims)`.
- Otherwise vmap over the op raises a clear "no batching rule" error, rather than falling
  back to a slow per-example loop.
"""

from __future__ import annotations

from ..api import python as py
from ..api.names import py_string
from ..schema import BaseType
from ..fields import Field, PyTarget
from .base import Output, Plugin


class Vmap(Plugin):
    name = "vmap"
    fields = {
        "vmap": Field(PyTarget(), "a batching rule for other ops, `module:function` with "
                      "`torch.library.register_vmap`'s signature (e.g. `opwrap.batching:linear`). Ops with neither "
                      "raise \"no batching rule\" under vmap."),
    }

    def validate(self, decl, lib, diag):
        pointwise, rule = decl.pointwise, decl.extra_field("vmap")
        if pointwise and rule:
            diag.error(decl.field_loc("vmap"), "a pointwise op needs no 'vmap' rule")
        if pointwise:
            s = decl.schema
            if s.is_mutable:
                diag.error(decl.field_loc("pointwise"), "the pointwise batching rule is for ops that do not write "
                           "their arguments")
            if any(r.type != BaseType("Tensor") for r in s.returns):
                diag.error(decl.field_loc("pointwise"), "a pointwise op returns tensors")

    def emit(self, lib, ctx):
        ns = lib.namespace
        rules = []
        for d in lib.declarations:
            if not d.tensor_inputs or not d.kernels:
                continue
            s = d.schema
            rule = d.extra_field("vmap")
            op = f"{ns}::{d.op_name}"
            if any(a.kwarg_only for a in d.tensor_inputs):
                # torch.library.register_vmap refuses ops with keyword-only tensors (out=
                # overloads): registering would break the library's import.  vmap over them
                # raises torch's own "batching rule not implemented".
                continue
            if d.pointwise:
                packet = py.op_expression(f"torch.ops.{ns}", d.name, d.overload)
                broadcasts = d.expression is not None
                kind = "pointwise, broadcasting" if broadcasts else "pointwise"
                expr = f"_runtime.pointwise_rule({packet}, {len(s.returns)}, broadcasts={broadcasts})"
            elif rule:
                module, _, function = rule.partition(":")
                kind, expr = f"rule {rule}", f"_runtime.load_rule({module!r}, {function!r})"
            else:
                kind, expr = "no rule", f"_runtime.no_rule({op!r})"
            rules.append(dict(op=op, literal=py_string(op), kind=kind, expr=expr))
        template = "python/vmap.py.j2"
        yield Output("python/vmap.py", ctx.render(template, namespace=ns, rules=rules),
                     lib.sources + (ctx.template_source(template),))
