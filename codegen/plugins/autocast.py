"""Autocast: `autocast: lower_precision | fp32 | promote` in a declaration gives the op
`AutocastCPU` and `AutocastCUDA` kernels that exclude the autocast key and redispatch with
their floating-point tensor inputs cast, as in the dispatcher tutorial (seed 004), with
torch's own eligibility rules (`at::autocast::cached_cast`: only float16/bfloat16/float32
tensors of the autocast device are cast; float64 and integers pass unchanged):

- lower_precision: to the autocast dtype of the device (bfloat16 on CPU, float16 on CUDA
  by default; whatever `torch.autocast(dtype=...)` set);
- fp32: to float32 (reductions and other precision-sensitive ops);
- promote: to the widest floating type among the inputs (ops that need one common dtype).

All autocast ops share one source, compiled in one of the CPU wrappers' units."""

from __future__ import annotations

from ..api import cpp
from ..core.names import Scope
from ..lang.schema import ListType, is_tensor, unwrap_optional
from ..front.fields import Enum, Field
from .base import Output, Plugin

POLICIES = {
    "lower_precision": "at::autocast::get_lower_precision_fp_from_device_type(device)",
    "fp32": "at::kFloat",
    "promote": "at::autocast::promote_type(at::autocast::get_lower_precision_fp_from_device_type(device), device, {args})",
}


class Autocast(Plugin):
    name = "autocast"
    fields = {"autocast": Field(Enum(*POLICIES, what="autocast policy"),
                                "`lower_precision` (float inputs to the autocast dtype), `fp32` (to float32) or `promote` "
                                "(to the widest input type): `AutocastCPU`/`AutocastCUDA` kernels that exclude the "
                                "autocast key, cast with `at::autocast::cached_cast` (torch's eligibility rules) and "
                                "redispatch.")}

    def validate(self, decl, lib, diag):
        policy = decl.extra_field("autocast")
        if policy is None:
            return
        loc = decl.field_loc("autocast")
        if decl.schema.is_mutable:
            diag.error(loc, f"{decl.name} writes its arguments in place; casting them under autocast would "
                       "write to a copy")
        elif not decl.tensor_inputs:
            diag.error(loc, f"{decl.name} has no Tensor input to cast")

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
            tensors = [a.name for a in s.arguments if is_tensor(unwrap_optional(a.type))
                       or (isinstance(a.type, ListType) and is_tensor(a.type.elem))]
            required = [ident[a.name] for a in s.arguments if is_tensor(a.type)]
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
