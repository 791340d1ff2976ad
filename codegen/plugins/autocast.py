"""Autocast: `autocast: lower_precision | fp32 | promote` in a declaration gives the op
`AutocastCPU` and `AutocastCUDA` kernels that exclude the autocast key and redispatch with
their floating-point tensor inputs cast, as in the dispatcher tutorial (seed 004), with
torch's own eligibility rules (`at::autocast::cached_cast`: only float16/bfloat16/float32
tensors of the autocast device are cast; float64 and integers pass unchanged):

- lower_precision: to the autocast dtype of the device (bfloat16 on CPU, float16 on CUDA
  by default; whatever `torch.autocast(dtype=...)` set);
- fp32: to float32 (reductions and other precision-sensitive ops);
- promote: to the widest floating type among the inputs (ops that need one common dtype).

All autocast ops share one source, compiled in one of the CPU wrappers' units.  The field, its
validation and the arguments cast are codegen/api/autocast.py's, shared with the stable
target's Python kernels (plugins/stable_autocast.py)."""

from __future__ import annotations

from ..api import autocast, cpp
from ..core.names import Scope
from .base import Output, Plugin

# The dtype each policy casts to, in C++ (the keys are api/autocast.POLICIES).
POLICIES = {
    "lower_precision": "at::autocast::get_lower_precision_fp_from_device_type(device)",
    "fp32": "at::kFloat",
    "promote": "at::autocast::promote_type(at::autocast::get_lower_precision_fp_from_device_type(device), device, {args})",
}


class Autocast(Plugin):
    name = "autocast"
    fields = {"autocast": autocast.FIELD}

    def validate(self, decl, lib, diag):
        autocast.validate(decl, diag)

    def emit(self, lib, ctx):
        ns = lib.namespace
        kernels = []
        for d in lib.declarations:
            policy = d.extra_field("autocast")
            if policy is None:
                continue
            s = d.schema
            scope = Scope(("op", "no_autocast", "to", "device"))
            ident = {a.name: scope.name(a.name) for a in s.arguments}
            tensors = [a.name for a in autocast.cast_arguments(s)]
            required = [ident[a.name] for a in autocast.promote_arguments(s)]
            to = POLICIES[policy].format(args=", ".join(required))
            call = ", ".join(f"at::autocast::cached_cast(to, {ident[a.name]}, device)" if a.name in tensors
                             else ident[a.name] for a in s.arguments)
            kernels.append(dict(
                decl=d, policy=policy, to=to, call=call, function=f"{d.ident}_autocast",
                params=", ".join(f"{cpp.argument_type(a)} {ident[a.name]}" for a in s.arguments),
                returns=cpp.returns_type(s),
                op_type=cpp.dispatcher_signature(s),
            ))
        if kernels:
            template = "autocast/autocast.cpp.j2"
            # In the CPU wrappers' units, after torch's precompiled headers, which it would
            # otherwise parse again (docs/architecture.md, "Unity units").
            yield Output("autocast/autocast.cpp", ctx.render(template, namespace=ns, kernels=kernels),
                         tuple(sorted({k["decl"].path for k in kernels})) + (ctx.template_source(template),),
                         unit="cpu", precompiled=True)
