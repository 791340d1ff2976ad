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
"""

from __future__ import annotations

from dataclasses import dataclass

from ..api.types import Binding
from ..api.kernel import kernel_function, kernel_parameters
from ..core.names import CPP_KEYWORDS, camel_case
from ..core.targets import CPU, CPU_CAPABILITIES, CUDA
from .base import Output, Plugin


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
    params = tuple(kernel_parameters(decl))
    ident = decl.ident
    first = next(p.name for p in params if p.schema_name == rows.row_tensors[0])
    return RowwisePlan(
        op=f"{namespace}::{decl.op_name}", program=f"{camel_case(ident)}Row",
        params=params, kernel_type="void (*)(" + ", ".join(str(p.ctype) for p in params) + ")",
        loop=f"{ident}_rows", kernel=f"{ident}_rows_kernel", cpu_kernels=f"{ident}_rows_cpu_kernels",
        cpu_function=kernel_function(decl, CPU), cuda_function=kernel_function(decl, CUDA), cuda_kernel=f"{ident}_rows_cuda_kernel",
        cuda_launch=f"{ident}_rows_cuda_launch", cuda_args=f"{camel_case(ident)}RowArgs",
        registered=tuple((cap, f"{ident}_rows_{cap}_registered") for cap in CPU_CAPABILITIES),
        dtype_cases=tuple((dt.scalar_type, dt.cpp) for dt in decl.dtypes), first=first, row_dims=rows.row_dims)


def _loops(decl, p: RowwisePlan) -> dict:
    """What the loop templates lay out, decided here: per stage its reductions and row
    statements, per function its arguments over a row pointer (`x_<tensor>`) at `d`."""
    rows = decl.rows
    # Each element input's row: a row tensor's (scalar_t), or a column tensor's or cached
    # binding's buffer (opmath_t, CPU).
    local = {t: f"opwrap_x_{t}" for t in rows.element_inputs + tuple(b for b, _, _ in rows.cached)}
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

    # On CUDA every pass sees the element of each element input (row tensors, then column
    # tensors) as opwrap_v[k]; a cached binding is recomputed where it is used.
    index = {t: i for i, t in enumerate(rows.element_inputs)}

    def call_cuda(fn) -> str:
        return f"prog.{fn.name}(" + ", ".join(call_cuda(binders[t]) if t in binders else
                                              f"static_cast<opmath_t>(opwrap_v[{index[t]}])" for t in fn.inputs) + ")"

    stages = []
    for s in range(1, rows.stages + 1):
        reds = [dict(member=r.member, combiner=r.combiner, acc=f"opwrap_a{i}", vec=call(r.function, True),
                     scalar=call(r.function, False), cuda=call_cuda(r.function))
                for i, r in enumerate(rows.reductions) if r.stage == s]
        caches = [dict(row=local[b], vec=call(fn, True), scalar=call(fn, False)) for b, fn in rows.cached_in(s)]
        stages.append(dict(number=s, reductions=reds, caches=caches))
    outputs = []
    for o in rows.outputs:
        target = p.param(o.name)
        fn = o.function
        value = f"prog.template {fn.name}<opmath_t>()" if not fn.inputs else None
        outputs.append(dict(name=o.name, per_row=o.per_row, pointer=f"opwrap_p_{o.name}", tensor=target,
                            vec=call(fn, True) if fn.inputs else f"V({value})",
                            scalar=call(fn, False) if fn.inputs else value,
                            cuda=call_cuda(fn) if fn.inputs else value))
    def inputs(names):
        return [dict(name=t, tensor=p.param(t), pointer=f"opwrap_p_{t}", row=local.get(t)) for t in names]

    return dict(stages=stages, outputs=outputs, row_outputs=[o for o in outputs if not o["per_row"]], caches=[dict(name=b, row=local[b]) for b, _, _ in rows.cached],
                row_inputs=inputs(rows.row_tensors), column_inputs=inputs(rows.column_tensors),
                per_row_inputs=inputs(rows.per_row_tensors),
                scalars=[(name, conv.format(name=p.param(name))) for name, conv in rows.scalars],
                members=list(rows.per_row_tensors) + [name for name, _ in rows.scalars]
                + [r.member for r in rows.reductions] + list(rows.bindings),
                steps={s: rows.steps_of(s) for s in range(0, rows.stages + 1)})


class RowwiseKernels(Plugin):
    name = "rowwise"

    def validate(self, decl, lib, diag):
        rows = decl.rows
        if rows is None:
            return
        if not decl.dtypes and not decl.failed("dtypes"):
            diag.error(decl.loc, "missing 'dtypes': list the floating dtypes the program is computed for")
        odd = [dt.name for dt in decl.dtypes if not dt.rowwise]
        if odd:
            diag.error(decl.field_loc("dtypes"), f"row-wise programs compute in real floating dtypes that aten's "
                       f"vectorized loops take, not {', '.join(odd)}",
                       "a kernel of your own (`kernels:`) takes any dtype" if any(
                           d.is_floating and not d.vectorized for d in decl.dtypes) else "")
        if decl.dtype_vars or decl.dtype_rules:
            diag.error(decl.field_loc("dtypes"), "every tensor of a row-wise op has the dtype it dispatches on",
                       "a per-argument 'dtypes:' mapping or a 'dtype:' rule needs a hand-written kernel")
        for a in decl.schema.arguments:
            if a.name in CPP_KEYWORDS or a.name in ("Tv", "opmath_t", "scalar_t", "V", "prog", "d", "row"):
                diag.error(decl.func_loc, f"argument name '{a.name}' is reserved in generated row-wise kernels",
                           "rename it, or write the kernel by hand")

    def emit(self, lib, ctx):
        ns = lib.namespace
        for d in lib.declarations:
            if d.rows is None or d.rows.owner != d.ident:  # an out= overload: its functional op's kernels serve it
                continue
            p = plan(d, ns)
            common = dict(namespace=ns, decl=d, rows=d.rows, plan=p, program_header=f"{d.ident}_program.h",
                          **_loops(d, p))
            sources = lambda t: (d.path, ctx.template_source(t))  # noqa: E731
            yield Output(f"rowwise/{d.ident}.h", ctx.render("rowwise/kernel.h.j2", **common),
                         sources("rowwise/kernel.h.j2"))
            yield Output(f"rowwise/{d.ident}.cuh", ctx.render("rowwise/kernel.cuh.j2", **common),
                         sources("rowwise/kernel.cuh.j2"))
            yield Output(f"rowwise/{d.ident}_program.h", ctx.render("rowwise/program.h.j2", **common),
                         sources("rowwise/program.h.j2"))
            yield Output(f"cpu/{d.ident}.rowwise.cpp", ctx.render("rowwise/cpu.cpp.j2", **common),
                         sources("rowwise/cpu.cpp.j2"), "pointwise")
            for cap in CPU_CAPABILITIES:
                t = "pointwise/cpu_capability.cpp.j2"
                yield Output(f"cpu/{d.ident}.rowwise.{cap}.cpp",
                             ctx.render(t, **common, capability=cap, registered=dict(p.registered)[cap],
                                        header=f"../rowwise/{d.ident}_program.h"),
                             sources(t), f"pointwise.{cap}")
