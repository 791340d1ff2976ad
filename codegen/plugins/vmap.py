"""Batching rules for torch.vmap, registered with `torch.library.register_vmap` from a
generated Python module (`<package>._generated.vmap`, imported with the library).

- `pointwise: true`: the op is elementwise over its same-shaped tensor inputs, so one call
  on the whole batch is the batched result: batch dimensions move to the front and
  unbatched tensors are expanded to the batch size.
- `pointwise: <expression>`: elementwise with broadcasting, so batched tensors only need
  their batch dimension in front and size-1 dimensions after it up to the largest logical
  rank; unbatched tensors broadcast as they are.
- `rowwise: <program>`: a rule generated from the shape rule, which says which tensors are
  rows (their shape begins with the run of rows, `"*B"`: the batch is one more leading row
  dimension) and which are columns (the same for every row).  While no column is batched,
  one call on the whole batch: row tensors' batch dimensions to the front, unbatched ones
  expanded to the batch.  A batched column has no single-call form: one call per sample.
- `vmap: module:function`: a hand-written rule with register_vmap's signature
  `(info, in_dims, *args) -> (outputs, out_dims)`; on a row-wise op it replaces the
  generated one.
- out= overloads (keyword-only `Tensor(a!)` arguments), which `register_vmap` refuses: a
  kernel at the FuncTorchBatched key that calls the functional op (batched by its own rule)
  and copies into the out= arguments, or, without a functional op, a clear error.  (aten's
  own out= ops have no batching rule.)
- Otherwise vmap over the op raises a clear "no batching rule" error, rather than falling
  back to a slow per-example loop.

A shape rule alone does not make an op elementwise (a cumulative sum or a sort has the shape
rule `["*S"]` of an elementwise op), so no pointwise rule is inferred from one: an elementwise
op with hand-written kernels says so with `pointwise: true`.
"""

from __future__ import annotations

from ..api import python as py
from ..core.literals import py_string
from ..lang.schema import BaseType, is_list_of_tensors, is_tensor, unwrap_optional
from ..front.fields import Field, PyTarget
from .base import Output, Plugin


class Vmap(Plugin):
    name = "vmap"
    fields = {
        "vmap": Field(PyTarget(), "a batching rule, `module:function` with `torch.library.register_vmap`'s "
                      "signature (e.g. `opwrap.batching:linear`), for ops that are neither pointwise nor row-wise "
                      "(those get one from their declaration; on a row-wise op it replaces that one). Ops with none "
                      "raise \"no batching rule\" under vmap."),
    }

    def validate(self, decl, lib, diag):
        pointwise, rule = decl.pointwise, decl.extra_field("vmap")
        if pointwise and rule:
            diag.error(decl.field_loc("vmap"), "a pointwise op needs no 'vmap' rule")
        if rule and any(a.kwarg_only for a in _tensor_arguments(decl)):
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
            if not _tensor_arguments(d) or not d.devices:
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
            elif any(a.kwarg_only for a in _tensor_arguments(d)):
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
            elif d.rows is not None and not s.is_mutable:
                kind, expr = _rowwise(d, ns)
            else:
                kind, expr = "no rule", f"_runtime.no_rule({op!r})"
            rules.append(dict(op=op, literal=py_string(op), kind=kind, expr=expr, register=register))
        template = "python/vmap.py.j2"
        yield Output("python/vmap.py", ctx.render(template, namespace=ns, rules=rules),
                     lib.sources + (ctx.template_source(template),))


def _tensor_arguments(d) -> list:
    """The arguments vmap can batch: tensors, optional tensors and lists of them."""
    return [a for a in d.schema.arguments if is_tensor(unwrap_optional(a.type)) or is_list_of_tensors(a)]


def _rowwise(d, ns: str) -> tuple[str, str]:
    """The generated rule of a row-wise op: each positional argument's role from the shape
    rule (`d.rows`), "rows" (its shape begins with the run of rows), "column" or None."""
    rows = d.rows
    with_rows = set(rows.row_tensors) | set(rows.per_row_tensors)
    columns = set(rows.column_tensors)
    positional = [a.name for a in d.schema.arguments if not a.kwarg_only]
    roles = tuple("rows" if n in with_rows else "column" if n in columns else None for n in positional)
    packet = py.op_expression(f"torch.ops.{ns}", d.name, d.overload)
    batched_rows = ", ".join(n for n in positional if n in with_rows)
    kind = f"row-wise, one call with the batch in the rows of {batched_rows}"
    if columns:
        kind += f"; one call per sample where {' or '.join(n for n in positional if n in columns)} is batched"
    return kind, f"_runtime.rowwise_rule({packet}, {roles!r}, {len(d.schema.returns)})"
