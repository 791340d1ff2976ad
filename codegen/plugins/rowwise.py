"""Kernels from ``rowwise: <program>`` (see codegen/lang/rowwise.py for the language).

For each such op:

- ``rowwise/<op>_program.h``: the program as a struct holding one row's values, with a
  member template per element function (over a scalar or an ``at::vec::Vectorized``) and
  one member function per stage's row statements; and (for the CPU) the loop over rows:
  ``at::parallel_for`` over rows, each stage one vectorized pass over the row in the
  computation type (float for float16 and bfloat16, converted as they are loaded and stored).
- ``cpu/<op>.rowwise.cpp``, ``cpu/<op>.rowwise.AVX2.cpp``, ``cpu/<op>.rowwise.AVX512.cpp``:
  the loop built for each CPU capability, chosen at run time, as pointwise kernels are.
- ``rowwise/<op>.h``: the kernel template the generated CPU wrapper calls (its signature is
  the one a hand-written kernel would have): it calls the best build of the loop.
- ``rowwise/<op>.cuh``: the CUDA kernel (on ``opwrap/runtime/rowwise.cuh``): each row swept
  by a group of lanes, a block or a cluster of blocks, read once into registers and shared
  memory; each stage a pass over that copy reduced across the group; the computation in
  float for reduced types.

Everything else (checks, output allocation from the shape rule, dtype dispatch,
derivatives, the fake kernel) is what every op with kernels gets.

Names: an argument may have any name the schema allows.  The struct names each argument and
binding by the identifier its program chose (``RowProgram.idents``); the kernels and loops
by one ``Scope`` of this plugin (their parameters and the locals added here), clear of C++'s
keywords, of what the templates declare (``TEMPLATE_LOCALS``) and of the op's own symbols.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..api import rowwise_cuda
from ..api.types import Binding
from ..api.kernel import kernel_function, kernel_parameters
from ..core.names import Scope, camel_case, cpp_ident
from ..core.targets import CPU, CPU_CAPABILITIES, CUDA
from ..lang.rowwise import check_declaration
from .base import Output, Plugin
# What the templates (templates/rowwise/) declare where the kernels' parameters and the
# locals named here are in scope: the CPU loop's, and the CUDA kernel's and launch's
# (api/rowwise_cuda.py).
TEMPLATE_LOCALS = ("Tv", "V", "L", "grain", "begin", "end", "d", "h", "u", "a", "kChains", "kUnroll",
                   *rowwise_cuda.TEMPLATE_LOCALS)


@dataclass(frozen=True)
class RowwisePlan:
    op: str  # namespace::name
    program: str  # the struct template
    params: tuple[Binding, ...]  # the kernel's parameters
    kernel_type: str  # function pointer type of one build of the CPU loop
    loop: str  # the CPU loop template over scalar_t
    kernel: str  # the dtype switch over the loop (one per capability build)
    cpu_kernels: str  # the table of the builds
    cpu_function: str  # the kernel template the CPU wrapper calls (::ns::kernels::)
    cuda_function: str
    cuda_kernel: str  # the __global__ function
    cuda_launch: str  # its launch for one run length
    cuda_args: str  # the alias of its tensors' RowArgs
    registered: tuple[tuple[str, str], ...]  # (capability, its registration object)
    dtype_cases: tuple[tuple[str, str], ...]  # (at::ScalarType name, C++ type)
    first: str  # the C++ parameter of the first row tensor (its sizes give the rows)
    row_dims: int
    locals: tuple[tuple[str, str], ...] = ()  # (what, its C++ identifier): the loops' locals named here

    def local(self, what: str) -> str:
        return dict(self.locals)[what]

    def param(self, schema_name: str) -> str:
        return next(p.name for p in self.params if p.schema_name == schema_name)

    @property
    def param_list(self) -> str:
        return ", ".join(p.decl() for p in self.params)

    @property
    def arg_list(self) -> str:
        return ", ".join(p.name for p in self.params)


def plan(decl, namespace: str) -> RowwisePlan:
    rows = decl.rows
    ident = decl.ident
    # The struct's name is clear of its members and functions (no member may share it).
    program = cpp_ident(f"{camel_case(ident)}Row", _members(rows) + [f.name for f in rows.functions]
                        + list(rows.stage_functions) + [rows.count])
    symbols = dict(loop=f"{ident}_rows", kernel=f"{ident}_rows_kernel", cpu_kernels=f"{ident}_rows_cpu_kernels",
                   cpu_function=kernel_function(decl, CPU), cuda_function=kernel_function(decl, CUDA),
                   cuda_kernel=f"{ident}_rows_cuda_kernel", cuda_launch=f"{ident}_rows_cuda_launch",
                   cuda_args=f"{camel_case(ident)}RowArgs")
    registered = tuple((cap, f"{ident}_rows_{cap}_registered") for cap in CPU_CAPABILITIES)
    # One scope for the kernels and loops: their parameters first, then the locals named here.
    scope = Scope((*TEMPLATE_LOCALS, program, *symbols.values(), *(r for _, r in registered)))
    params = tuple(kernel_parameters(decl, scope))
    first = next(p.name for p in params if p.schema_name == rows.row_tensors[0])
    names = [("p", t) for t in rows.row_tensors + rows.column_tensors + rows.per_row_tensors + tuple(
        o.name for o in rows.outputs)] + [("x", t) for t in rows.element_inputs + tuple(b for b, _, _ in rows.cached)]
    named = [(f"{k}:{t}", scope.fresh(f"opwrap_{k}_{t}")) for k, t in names]
    named += [(f"buffer:{t}", scope.fresh(f"opwrap_x_{t}_buffer"))
              for t in rows.column_tensors + tuple(b for b, _, _ in rows.cached)]
    named += [(f"acc:{i}", scope.fresh(f"opwrap_a{i}")) for i in range(len(rows.reductions))]
    return RowwisePlan(
        op=f"{namespace}::{decl.op_name}", program=program,
        params=params, kernel_type="void (*)(" + ", ".join(str(p.ctype) for p in params) + ")", **symbols,
        registered=registered, dtype_cases=tuple((dt.scalar_type, dt.cpp) for dt in decl.dtypes), first=first,
        row_dims=rows.row_dims, locals=tuple(named))


def _members(rows) -> list[str]:
    """The struct's data members, in order (after the row's length)."""
    return ([rows.ident(t) for t in rows.per_row_tensors] + [rows.ident(name) for name, _ in rows.scalars]
            + [r.member for r in rows.reductions] + list(rows.bindings))


def cuda_kernel(decl, namespace: str, p: RowwisePlan) -> rowwise_cuda.RowCudaKernel:
    """The CUDA kernel's view (api/rowwise_cuda.py) in the full target's names."""
    rows = decl.rows
    tensors = rows.row_tensors + rows.column_tensors + rows.per_row_tensors + tuple(o.name for o in rows.outputs)
    return rowwise_cuda.kernel(
        decl, namespace=namespace, generated=f"::{namespace}::generated", program=p.program,
        names=dict(args=p.cuda_args, kernel=p.cuda_kernel, launch=p.cuda_launch, function=p.cuda_function),
        params=p.param_list, arguments={b.schema_name: b.name for b in p.params},
        pointers={t: p.local(f"p:{t}") for t in tensors},
        accs=[p.local(f"acc:{i}") for i in range(len(rows.reductions))],
        opmath="at::opmath_type", reductions="opwrap::rt::rowwise")


def _loops(decl, p: RowwisePlan) -> dict:
    """What the loop templates lay out, decided here: per stage its reductions and row
    statements, per function its arguments over a row pointer (`x_<tensor>`) at `d`."""
    rows = decl.rows
    # Each element input's row: a row tensor's (scalar_t), or a column tensor's or cached
    # binding's buffer (opmath_t, CPU).
    local = {t: p.local(f"x:{t}") for t in rows.element_inputs + tuple(b for b, _, _ in rows.cached)}
    binders = {b: fn for b, _, fn in rows.cached}
    in_opmath = set(binders) | set(rows.column_tensors)

    def call(fn, vec: bool) -> str:
        """The call of `fn` on the CPU: on half `h` of the step at element `d` (vec), or on
        element `d`.  A row tensor is scalar_t (converted as it is loaded); a column tensor
        (converted once a call) and a cached binding's buffer are opmath_t."""
        if vec:
            return f"prog.{fn.name}(" + ", ".join(
                f"V::loadu({local[t]} + d + h * V::size())" if t in in_opmath else f"L::load({local[t]} + d, h)"
                for t in fn.inputs) + ")"
        return f"prog.{fn.name}(" + ", ".join(
            f"{local[t]}[d]" if t in in_opmath else f"static_cast<opmath_t>({local[t]}[d])" for t in fn.inputs) + ")"

    stages = []
    for s in range(1, rows.stages + 1):
        reds = [dict(member=r.member, combiner=r.combiner, acc=p.local(f"acc:{i}"), vec=call(r.function, True),
                     scalar=call(r.function, False))
                for i, r in enumerate(rows.reductions) if r.stage == s]
        caches = [dict(row=local[b], vec=call(fn, True), scalar=call(fn, False)) for b, fn in rows.cached_in(s)]
        stages.append(dict(number=s, reductions=reds, caches=caches, function=rows.stage_functions[s]))
    outputs = []
    for o in rows.outputs:
        target = p.param(o.name)
        fn = o.function
        value = f"prog.template {fn.name}<opmath_t>()" if not fn.inputs else None
        outputs.append(dict(name=o.name, per_row=o.per_row, pointer=p.local(f"p:{o.name}"), tensor=target,
                            vec=call(fn, True) if fn.inputs else f"V({value})",
                            scalar=call(fn, False) if fn.inputs else value))
    def inputs(names):
        return [dict(name=t, member=rows.ident(t), tensor=p.param(t), pointer=p.local(f"p:{t}"), row=local.get(t),
                     buffer=p.local(f"buffer:{t}") if f"buffer:{t}" in dict(p.locals) else "") for t in names]

    # The struct's functions of the row's elements: each input a parameter, each binding a local.
    functions = [dict(name=fn.name, params=", ".join(f"Tv {rows.ident(t)}" for t in fn.inputs), bindings=fn.bindings,
                      value=fn.value) for fn in rows.functions]
    return dict(stages=stages, outputs=outputs, row_outputs=[o for o in outputs if not o["per_row"]],
                caches=[dict(name=b, row=local[b], buffer=p.local(f"buffer:{b}")) for b, _, _ in rows.cached],
                row_inputs=inputs(rows.row_tensors), column_inputs=inputs(rows.column_tensors),
                per_row_inputs=inputs(rows.per_row_tensors),
                scalars=[(rows.ident(name), conv.format(name=p.param(name))) for name, conv in rows.scalars],
                members=_members(rows), functions=functions, count=rows.count, stage0=rows.stage_functions[0],
                steps=[(rows.stage_functions[s], rows.steps_of(s)) for s in range(0, rows.stages + 1)])


class RowwiseKernels(Plugin):
    name = "rowwise"

    def validate(self, decl, lib, diag):
        check_declaration(decl, diag, "real floating dtypes that aten's vectorized loops take",
                          "a kernel of your own (`kernels:`) takes any dtype"
                          if any(d.is_floating and not d.vectorized for d in decl.dtypes) else "")

    def emit(self, lib, ctx):
        ns = lib.namespace
        for d in lib.declarations:
            if d.rows is None or d.rows.owner != d.ident:  # an out= overload: its functional op's kernels serve it
                continue
            p = plan(d, ns)
            common = dict(namespace=ns, decl=d, rows=d.rows, plan=p, program_header=f"{d.ident}_program.h",
                          cuda=cuda_kernel(d, ns, p), **_loops(d, p))
            sources = lambda t: (d.path, ctx.template_source(t))  # noqa: E731
            yield Output(f"rowwise/{d.ident}.h", ctx.render("rowwise/kernel.h.j2", **common),
                         sources("rowwise/kernel.h.j2"))
            yield Output(f"rowwise/{d.ident}.cuh", ctx.render("rowwise/kernel.cuh.j2", **common),
                         sources("rowwise/kernel.cuh.j2"))
            yield Output(f"rowwise/{d.ident}_program.h", ctx.render("rowwise/program.h.j2", **common),
                         sources("rowwise/program.h.j2"))
            yield Output(f"cpu/{d.ident}.rowwise.cpp", ctx.render("rowwise/cpu.cpp.j2", **common),
                         sources("rowwise/cpu.cpp.j2"), "pointwise", precompiled=True)  # the DEFAULT build: see pointwise.py
            for cap in CPU_CAPABILITIES:
                t = "pointwise/cpu_capability.cpp.j2"
                yield Output(f"cpu/{d.ident}.rowwise.{cap}.cpp",
                             ctx.render(t, **common, capability=cap, registered=dict(p.registered)[cap],
                                        header=f"../rowwise/{d.ident}_program.h"),
                             sources(t), f"pointwise.{cap}")
