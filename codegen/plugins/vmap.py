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
- out= overloads (keyword-only `Tensor(a!)` arguments), which `register_vmap` refuses: a
  kernel at the FuncTorchBatched key that calls the functional op (batched by its own rule)
  and copies into the out= arguments, or, without a functional op, a clear error.  (aten's
  own out= ops have no batching rule.)
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
        if rule and any(a.kwarg_only for a in decl.tensor_inputs):
            diag.error(decl.field_loc("vmap"), "an op with keyword-only tensor arguments takes no 'vmap' rule "
                       "(torch.library.register_vmap refuses them); an out= overload is batched through its "
                       "functional op's rule")
        if pointwise and not decl.out_arguments:  # an out= overload is batched through its functional op
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
            register = "register_vmap"
            functional = py.functional_of(d, lib.declarations)
            if d.out_arguments and functional is not None:
                packet = py.op_expression(f"torch.ops.{ns}", functional.name, functional.overload)
                outs = "(" + ", ".join(py_string(a.name) for a in d.out_arguments) + ",)"
                kind, expr = f"functional op {functional.op_name}, copied into out=", \
                    f"_runtime.out_rule({py_string(op)}, {packet}, {outs})"
                register = "register_batched"
            elif any(a.kwarg_only for a in d.tensor_inputs):
                # torch.library.register_vmap refuses keyword-only tensors: registering would
                # break the library's import.  A kernel of our own says what is missing.
                kind, expr, register = "no rule", f"_runtime.no_out_rule({py_string(op)})", "register_batched"
            elif d.pointwise:
                packet = py.op_expression(f"torch.ops.{ns}", d.name, d.overload)
                broadcasts = d.expression is not None
                kind = "pointwise, broadcasting" if broadcasts else "pointwise"
                expr = f"_runtime.pointwise_rule({packet}, {len(s.returns)}, broadcasts={broadcasts})"
            elif rule:
                module, _, function = rule.partition(":")
                kind, expr = f"rule {rule}", f"_runtime.load_rule({module!r}, {function!r})"
            else:
                kind, expr = "no rule", f"_runtime.no_rule({op!r})"
            rules.append(dict(op=op, literal=py_string(op), kind=kind, expr=expr, register=register))
        template = "python/vmap.py.j2"
        yield Output("python/vmap.py", ctx.render(template, namespace=ns, rules=rules),
                     lib.sources + (ctx.template_source(template),))
