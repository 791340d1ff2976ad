"""The stable target's row-wise kernels (docs/stable-abi.md, "Generated row-wise kernels"):
per op with a `rowwise:` program, `<cpp_dir>/rowwise/<op>.h`, the program's CPU loop (built for
each CPU capability, chosen at run time) and CUDA kernel against torch's stable API
(codegen/api/stable_rowwise.py decides, templates/stable/rowwise.h.j2 lays out).  The stable
wrappers (plugins/stable.py) include it and call its kernels as they call a hand-written one.

The declaration's rules are the full target's (plugins/rowwise.py): the program computes in a
real floating dtype and every tensor has the dtype the op dispatches on."""

from __future__ import annotations

from ..api import stable_rowwise
from ..core.targets import Target
from ..lang.rowwise import check_declaration
from .base import Output, Plugin


class StableRowwise(Plugin):
    name = "stable-rowwise"

    def __init__(self, target: Target):
        self.target = target

    def validate(self, decl, lib, diag):
        check_declaration(decl, diag, "real floating dtypes", "a kernel of your own (`kernels:`) takes any dtype")

    def emit(self, lib, ctx):
        template = "stable/rowwise.h.j2"
        for d in lib.declarations:
            if d.rows is None or d.rows.owner != d.ident:  # an out= overload: its functional op's kernels serve it
                continue
            text = ctx.render(template, namespace=lib.namespace, decl=d, rows=d.rows,
                              plan=stable_rowwise.plan(d, lib.namespace))
            yield Output(f"{self.target.cpp_dir}/rowwise/{d.ident}.h", text, (d.path, ctx.template_source(template)))
