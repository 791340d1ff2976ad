"""The stable-ABI target's kernels of `pointwise:` expressions (docs/stable-abi.md, "Generated
pointwise kernels"; codegen/api/stable_pointwise.py decides them):

- ``stable/cpu/<op>.cpp``: the expression's functor (the full target's text,
  templates/pointwise/functor.j2), its contiguous loop compiled for several instruction sets, the
  wrapper (checks, broadcasting, promotion, allocation: <opwrap/stable/pointwise.h>) and the dtype
  switch, registered with `STABLE_TORCH_LIBRARY_IMPL(<ns>, CPU, m)`; in unit group `stable`;
- ``stable/cuda/<op>.cu``: the same functor in a grid-stride kernel, registered for CUDA; in
  group `stable.cuda` (compiled by nvcc where CUDA is built).

The declaration's checks are the full target's (codegen/lang/pointwise.py, `check_declaration`);
what the stable target lacks besides is codegen/api/stable.py's `problems`."""

from __future__ import annotations

from ..api import stable, stable_pointwise
from ..core.targets import CPU, CUDA, Target
from ..lang.pointwise import check_declaration
from .base import Output, Plugin


class StablePointwise(Plugin):
    name = "stable-pointwise"

    def __init__(self, target: Target):
        self.target = target

    def validate(self, decl, lib, diag):
        if decl.expression is not None:
            check_declaration(decl, lib, diag)

    def emit(self, lib, ctx):
        for d in lib.declarations:
            if d.expression is None or stable.problems(d):
                continue
            e = d.expression
            for device, template, group in ((CPU, "stable/pointwise.cpp.j2", "stable"),
                                            (CUDA, "stable/pointwise.cu.j2", f"stable.{CUDA.unit}")):
                p = stable_pointwise.plan(d, lib.namespace, device.key)
                outs = [f"out{i}" for i in range(p.outputs)]
                ins = [f"in{j}" for j in range(len(p.inputs))]
                loads = (", ".join(f"opwrap::pw::load({t}[i])" for t in ins) if device == CPU else
                         ", ".join(f"opwrap::pw::load(reinterpret_cast<const scalar_t*>(loop.data[{p.outputs + j}])"
                                   f"[off[{p.outputs + j}]])" for j in range(len(ins))))
                text = ctx.render(
                    template, namespace=lib.namespace, decl=d, expr=e, plan=p, target=self.target, outs=outs, ins=ins,
                    loads=loads, float_loads=", ".join(f"{t}_f[i]" for t in ins), value_types="opmath_t, a scalar (float for half and bfloat16)",
                    chunk_args=", ".join([f"outs[{i}]" for i in range(p.outputs)] + [f"ins[{j}]" for j in range(len(ins))]),
                    tensor_params=", ".join(f"Tv {e.ident(n)}" for n in e.tensors),
                    result_type="Tv" if p.outputs == 1 else f"opwrap::pw::Values<Tv, {p.outputs}>")
                yield Output(f"{self.target.cpp_dir}/{device.unit}/{d.ident}{device.suffix}", text,
                             (d.path, ctx.template_source(template)), unit=group)
