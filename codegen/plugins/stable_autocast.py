"""The stable-ABI target's autocast (docs/stable-abi.md, "Autocast"): torch's stable C++ API
registers no kernel at an autocast key, so `python/autocast.py`, imported by the loader,
registers each op's `AutocastCPU` and `AutocastCUDA` kernels from Python
(`_runtime.register_autocast`), with the semantics of the full target's C++ kernels
(plugins/autocast.py): the same field and validation, and the same arguments cast and
promoted (codegen/api/autocast.py)."""

from __future__ import annotations

from ..api import autocast
from ..core.literals import py_string
from .base import Output, Plugin


class StableAutocast(Plugin):
    name = "stable-autocast"
    fields = {"autocast": autocast.FIELD}

    def validate(self, decl, lib, diag):
        autocast.validate(decl, diag)

    def emit(self, lib, ctx):
        kernels = []
        for d in lib.declarations:
            policy = d.extra_field("autocast")
            if policy is None:
                continue
            s = d.schema
            position = {a.name: i for i, a in enumerate(s.arguments)}
            kernels.append(dict(
                schema=str(s), policy=policy, op=f"{lib.namespace}::{d.op_name}",
                cast=repr(tuple((position[a.name], a.name) for a in autocast.cast_arguments(s))),
                promote=repr(tuple((position[a.name], a.name) for a in autocast.promote_arguments(s)))
                if policy == "promote" else "()",
            ))
        if kernels:
            template = "stable/autocast.py.j2"
            sources = tuple(sorted({d.path for d in lib.declarations if d.extra_field("autocast")}))
            yield Output("python/autocast.py", ctx.render(template, namespace=lib.namespace, kernels=kernels,
                                                            py_string=py_string),
                         sources + (ctx.template_source(template),))
