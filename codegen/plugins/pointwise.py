"""Kernels from ``pointwise: <expression>`` (see codegen/lang/pointwise.py for the language).

For each such op:

- ``pointwise/<op>.h``: the expression as a functor over a value type that is a scalar or
  an ``at::vec::Vectorized``; every loop below evaluates this one text.
- ``cpu/<op>.cpp``: the CPU kernel.  The wrapper checks devices and that the shapes
  broadcast, builds an ``at::TensorIterator`` (broadcasting, type promotion, strided and
  non-contiguous inputs, output allocation, as aten's elementwise ops), checks the
  promoted dtype and calls the best build of the loop for this CPU.  The loop is
  ``opwrap::pw::cpu_kernel_vec`` (aten's ``cpu_kernel_vec``, whose short rows against an
  operand broadcast over them run several rows at once) with a scalar and a Vectorized
  lambda; reduced-precision types compute in float through
  ``convert_to_float``/``convert_from_float``; TensorIterator parallelizes with
  ``at::parallel_for``.  This unit holds the DEFAULT build of the loop.
- ``cpu/<op>.AVX2.cpp`` and ``cpu/<op>.AVX512.cpp``: the same loop compiled for those
  capabilities (runtime/include/opwrap/runtime/cpu_capability.h), registered into the
  wrapper's table and chosen at run time (cpu_dispatch.h).
- ``cuda/<op>.cu``: the same wrapper for CUDA, with ``at::native::gpu_kernel`` over the
  scalar functor (vectorized loads, 32-bit indexing splits and launch configuration are
  aten's), except where every tensor is contiguous but inputs broadcast along the leading
  dimensions (a bias): there opwrap's loop (runtime/include/opwrap/runtime/pointwise_cuda.cuh)
  loads 16-byte vectors and the broadcast inputs by column, which gpu_kernel does not.

Names: an argument may have any name the schema allows.  The functor names each argument by
the identifier its expression chose (``Expression.idents``); the loops and the wrappers by
one ``Scope`` of this plugin (``PointwisePlan.idents``), clear of C++'s keywords, of what the
templates declare (``TEMPLATE_LOCALS``) and of the op's own symbols; the templates print them.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..api import cpp, types
from .base import Output, Plugin
from ..api.kernel import device_checks, device_guard
from ..core.names import Scope, camel_case, cpp_ident
from ..core.literals import cpp_string
from ..core.cuda_archs import arch_restriction
from ..core.targets import CPU, CPU_CAPABILITIES, CUDA, Device
from ..lang.pointwise import check_declaration

# What the templates (templates/pointwise/) declare where the arguments of the loops and
# wrappers are in scope: the loops' types, functor and iterator, the lambdas' parameter `x`,
# the wrapper's kOp and device guard, the CUDA kernel's architectures.
TEMPLATE_LOCALS = ("kOp", "iter", "op", "x", "Vec", "Tv", "scalar_t", "opmath_t", "kArchs", "device_guard")


@dataclass(frozen=True)
class PointwisePlan:
    """Every name and statement the pointwise templates lay out for one op."""

    op: str  # namespace::name
    functor: str  # the expression's functor template
    params: str  # the op's C++ parameter list
    tensors: tuple[str, ...]  # the iterator's inputs
    scalar_params: str  # the loop's extra parameters (the scalar arguments)
    scalar_args: str  # ... as passed
    scalar_inits: str  # the functor's initializer list from them, in opmath_t
    members: tuple[str, ...]  # the functor's scalar members
    kernel_type: str  # function pointer type of one loop build
    float_op: bool  # integer inputs promote to the default float dtype
    dtype_cases: tuple[tuple[str, str], ...]  # (at::ScalarType name, C++ type)
    dtype_list: str  # {at::ScalarType::Float, ...}
    dtype_names: str
    loop: str = ""  # the CPU loop template over scalar_t
    kernel: str = ""  # one build of the loop: the dtype switch (CPU), or the CUDA launch's
    launch: str = ""  # the CUDA launch template
    cpu_kernels: str = ""  # the table of the CPU builds, chosen at run time
    cpu_wrapper: str = ""  # the functions m.impl registers
    cuda_wrapper: str = ""
    registered: tuple[tuple[str, str], ...] = ()  # (capability, its registration object)
    outputs: int = 1  # the returns, each computed by one value of the expression
    out: str = ""  # an out= overload: the argument the result is written to (its loops are the functional op's)
    idents: tuple[tuple[str, str], ...] = ()  # each argument's C++ identifier in the loops and wrappers
    inputs: tuple[str, ...] = ()  # the C++ identifiers of `tensors`
    out_ident: str = ""  # ... of `out`
    out_locals: tuple[str, ...] = ()  # the wrapper's outputs, before the iterator allocates them
    halves: tuple[tuple[str, str, str], ...] = ()  # (tensor, its two float halves): reduced types' vectorized loop

    def ident(self, name: str) -> str:
        """The C++ identifier of argument `name` in the loops and wrappers."""
        return dict(self.idents)[name]


def plan(decl, namespace: str) -> PointwisePlan:
    e = decl.expression
    s = decl.schema
    scalars = dict(e.scalars)
    scalar_args = [a for a in s.arguments if a.name in scalars]
    members = tuple(e.ident(a.name) for a in scalar_args)
    # The functor's name is clear of its members (a member may not share its class's name).
    functor = cpp_ident(f"{camel_case(decl.ident)}Op", members)
    fp = f"void (*)(at::TensorIteratorBase&{''.join(', ' + cpp.argument_type(a) for a in scalar_args)})"
    # An out= overload runs its functional op's loops (the same expression): its own units
    # hold only the wrapper.
    loops = decl.name if decl.out_arguments else decl.ident
    symbols = dict(loop=f"{loops}_loop", kernel=f"{loops}_kernel", launch=f"{loops}_launch",
                   cpu_kernels=f"{loops}_cpu_kernels", cpu_wrapper=f"{decl.ident}_cpu",
                   cuda_wrapper=f"{decl.ident}_cuda")
    registered = tuple((cap, f"{decl.ident}_{cap}_registered") for cap in CPU_CAPABILITIES)
    # One scope for the loops and wrappers: the arguments first, then the locals added here.
    scope = Scope((*TEMPLATE_LOCALS, functor, *symbols.values(), *(r for _, r in registered)))
    ident = {a.name: scope.name(a.name) for a in s.arguments}
    return PointwisePlan(
        op=f"{namespace}::{decl.op_name}", functor=functor,
        params=", ".join(f"{cpp.argument_type(a)} {ident[a.name]}" for a in s.arguments),
        tensors=e.tensors, scalar_params=", ".join(f"{cpp.argument_type(a)} {ident[a.name]}" for a in scalar_args),
        scalar_args=", ".join(ident[a.name] for a in scalar_args),
        scalar_inits=", ".join(scalars[a.name].format(name=ident[a.name]) for a in scalar_args), members=members,
        kernel_type=fp, float_op=all(dt.is_floating for dt in decl.dtypes),
        dtype_cases=tuple((dt.scalar_type, dt.cpp) for dt in decl.dtypes),
        dtype_list="{" + ", ".join(f"at::ScalarType::{dt.scalar_type}" for dt in decl.dtypes) + "}",
        dtype_names=", ".join(dt.name for dt in decl.dtypes), **symbols, registered=registered,
        outputs=len(e.results), out=decl.out_arguments[0].name if decl.out_arguments else "",
        idents=tuple(ident.items()), inputs=tuple(ident[t] for t in e.tensors),
        out_ident=ident[decl.out_arguments[0].name] if decl.out_arguments else "",
        out_locals=tuple(scope.fresh(f"opwrap_out{i}") for i in range(len(e.results))),
        halves=tuple((t, scope.fresh(f"{ident[t]}0"), scope.fresh(f"{ident[t]}1")) for t in e.tensors))


def wrapper(decl, p: PointwisePlan, device: Device) -> dict:
    """The statements of one device's kernel that Python decides: argument checks and the loop call."""
    first = p.tensors[0]
    checks = [f"constexpr const char* kOp = {cpp_string(p.op)};"]
    for t in p.tensors + ((p.out,) if p.out else ()):
        checks.extend(device_checks(t, p.ident(t), p.ident(first), cpp_string(first), device))
    checks.extend(device_guard(p.ident(first), device))
    # The inputs by name, for the messages of the checks that TensorIterator's build and the
    # promoted dtype get (opwrap::rt::build_pointwise checks broadcasting only when the build failed).
    named = "{" + ", ".join(f'{{{cpp_string(t)}, {p.ident(t)}}}' for t in p.tensors) + "}"
    args = "iter" + (", " + p.scalar_args if p.scalar_args else "")
    # The CPU loop is chosen among its capability builds at run time; the CUDA one is one kernel.
    call = f"{p.cpu_kernels}.get()({args})" if device is CPU else f"{p.kernel}({args})"
    returns = str(types.TENSOR.ref()) if p.out else types.tuple_of([str(types.TENSOR)] * p.outputs)  # outputs >= 1
    outputs = (p.out,) if p.out else decl.return_names
    allocating = ("outputs " if len(outputs) > 1 else "output ") + ", ".join(f"'{n}'" for n in outputs)
    return dict(device=device.key, checks=checks, named=named, call=call, returns=returns, allocating=cpp_string(allocating),
                function=p.cpu_wrapper if device is CPU else p.cuda_wrapper)


def out_overload(decl, p: PointwisePlan, device: Device, wrapped: dict) -> dict:
    """What the out= overload's unit for `device` declares of its functional op's loop: the CPU
    builds' table (chosen at run time), or the CUDA kernel's entry point."""
    if device is CPU:
        return dict(runs="loops", includes=(), runtime_includes=("opwrap/runtime/cpu_dispatch.h",), key=device.key,
                    kernel_comment=f"The builds of the functional op's loop (cpu/{decl.name}.cpp and its capability units).",
                    kernel_declaration=f"extern opwrap::rt::CpuKernels<{p.kernel_type}> {p.cpu_kernels}",
                    wrapper=wrapped)
    scalars = f", {p.scalar_params}" if p.scalar_params else ""
    return dict(runs="CUDA kernel", includes=("ATen/TensorIterator.h", *device.includes), runtime_includes=(),
                key=device.key, kernel_comment=f"Defined in cuda/{decl.name}.cu.",
                kernel_declaration=f"void {p.kernel}(at::TensorIteratorBase& iter{scalars})", wrapper=wrapped)


class PointwiseKernels(Plugin):
    name = "pointwise"

    def validate(self, decl, lib, diag):
        check_declaration(decl, lib, diag)

    def emit(self, lib, ctx):
        ns = lib.namespace
        for d in lib.declarations:
            if d.expression is None:
                continue
            p = plan(d, ns)
            e, t = d.expression, [p.ident(n) for n in p.tensors]
            common = dict(namespace=ns, decl=d, expr=e, plan=p, header=f"../pointwise/{d.ident}.h",
                          tensor_params=", ".join(f"Tv {e.ident(n)}" for n in p.tensors),
                          scalar_params=", ".join(f"scalar_t {n}" for n in t),
                          vec_params=", ".join(f"Vec {n}" for n in t),
                          opmath_args=", ".join(f"static_cast<opmath_t>({n})" for n in t),
                          plain_args=", ".join(t), halves=[", ".join(h[i] for h in p.halves) for i in (1, 2)],
                          splits=[(p.ident(n), h0, h1) for n, h0, h1 in p.halves],
                          indexed=", ".join(f"x[{i}]" for i in range(len(t))),
                          result_type="Tv" if p.outputs == 1 else f"opwrap::pw::Values<Tv, {p.outputs}>",
                          cpu=wrapper(d, p, CPU), cuda=wrapper(d, p, CUDA))
            if p.out:  # an out= overload: a wrapper around its functional op's loops, on each device
                template = "pointwise/out.j2"
                for device, wrapped in ((CPU, common["cpu"]), (CUDA, common["cuda"])):
                    yield Output(f"{device.unit}/{d.ident}{device.suffix}",
                                 ctx.render(template, **common, out=out_overload(d, p, device, wrapped)),
                                 (d.path, ctx.template_source(template)), device.unit, precompiled=device.precompiled)
                continue
            # Unity groups: the DEFAULT wrappers and loops, each capability's loops, and the
            # CUDA kernels (with the other CUDA ops).  A capability's unit starts with its
            # first source's prelude, which sets the instruction set for all of them; the
            # DEFAULT unit sets none, so it may start with the precompiled torch header (which
            # holds neither at::vec nor TensorIterator: their CPU_CAPABILITY comes after it).
            for path, template, extra, unit, precompiled in (
                (f"pointwise/{d.ident}.h", "pointwise/op.h.j2", {}, None, False),
                (f"cpu/{d.ident}.cpp", "pointwise/cpu.cpp.j2", {}, "pointwise", True),
                *((f"cpu/{d.ident}.{cap}.cpp", "pointwise/cpu_capability.cpp.j2", {"capability": cap, "registered": dict(p.registered)[cap]},
                   f"pointwise.{cap}", False) for cap in CPU_CAPABILITIES),
                (f"cuda/{d.ident}.cu", "pointwise/cuda.cu.j2", {"arch": arch_restriction(d)}, "cuda", False),
            ):
                yield Output(path, ctx.render(template, **common, **extra), (d.path, ctx.template_source(template)), unit,
                             precompiled=precompiled)
