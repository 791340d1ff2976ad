"""The CUDA kernel of a `rowwise:` program, one for both targets: what templates/rowwise/cuda.j2
lays out on the shared sweep (runtime/include/opwrap/shared/rowwise_cuda.cuh), decided here.

Each row is swept by a group of lanes, a block or a cluster of blocks, read once into registers
(and shared memory for long rows); each stage one pass over that copy, reduced across the
group; then the row's outputs.  The full target (plugins/rowwise.py) and the stable target
(api/stable_rowwise.py) differ only in names: the program struct's namespace, the computation
type's template (`at::opmath_type` against the stable runtime's `opmath_t`), the reductions'
namespace, the entry function's parameters (at::Tensor against torch::stable::Tensor) and the
locals each chose; `kernel` takes those and gives the template one `RowCudaKernel`.
"""

from __future__ import annotations

from dataclasses import dataclass

# What templates/rowwise/cuda.j2 declares where the kernels' parameters and the names given to
# `kernel` are in scope: a plan's Scope keeps its names clear of these.
TEMPLATE_LOCALS = ("opmath_t", "scalar_t", "D", "rows", "start", "row", "prog", "i", "args", "kVec", "vec", "launch",
                   "kRun", "kLong", "runs", "layout", "Sweep", "sweep", "group_index", "base", "active",
                   "opwrap_shared", "opwrap_tail", "opwrap_v", "opwrap_o")


@dataclass(frozen=True)
class CudaTensor:
    tensor: str  # the entry function's parameter
    pointer: str = ""  # a per-row tensor's data, the kernel's parameter
    member: str = ""  # a per-row input's member of the program struct


@dataclass(frozen=True)
class CudaOutput:
    tensor: str
    pointer: str
    per_row: bool
    value: str  # C++ of one element (a row output) or of the row's value (a per-row one)


@dataclass(frozen=True)
class CudaReduction:
    member: str
    combiner: str
    acc: str
    value: str


@dataclass(frozen=True)
class CudaStage:
    number: int
    function: str
    reductions: tuple[CudaReduction, ...]


@dataclass(frozen=True)
class RowCudaKernel:
    op: str  # namespace::name
    generated: str  # the namespace of the program struct and the kernel, qualified (::ns::generated)
    program: str  # the struct template
    args: str  # the alias of its tensors' RowArgs
    kernel: str  # the __global__ function
    launch: str  # its launch for one run length
    function: str  # the entry: the kernel template the CUDA wrapper calls (::ns::kernels::)
    params: str  # the entry's parameter list
    first: str  # the first row tensor's parameter (its sizes give the rows)
    row_dims: int
    opmath: str  # the computation type's template: opmath<scalar_t>
    reductions: str  # the namespace of the reductions (Sum, Max, Min)
    count: str
    stage0: str
    scalars: tuple[tuple[str, str], ...]  # (member, its value from the parameter)
    row_inputs: tuple[CudaTensor, ...]
    column_inputs: tuple[CudaTensor, ...]
    per_row_inputs: tuple[CudaTensor, ...]
    outputs: tuple[CudaOutput, ...]
    stages: tuple[CudaStage, ...]

    @property
    def row_outputs(self) -> tuple[CudaOutput, ...]:
        return tuple(o for o in self.outputs if not o.per_row)


def element_call(rows, fn) -> str:
    """`fn` of the element a pass sees: each element input (the row tensors, then the column
    tensors) as `opwrap_v[k]`, converted to opmath_t; a cached binding recomputed where it is
    used (a pass keeps no row buffer on the GPU)."""
    index = {t: i for i, t in enumerate(rows.element_inputs)}
    binders = {b: f for b, _, f in rows.cached}

    def call(f) -> str:
        return f"prog.{f.name}(" + ", ".join(
            call(binders[t]) if t in binders else f"static_cast<opmath_t>(opwrap_v[{index[t]}])"
            for t in f.inputs) + ")"
    return call(fn)


def kernel(decl, *, namespace: str, generated: str, program: str, names: dict[str, str], params: str,
           arguments: dict[str, str], pointers: dict[str, str], accs: list[str], opmath: str,
           reductions: str) -> RowCudaKernel:
    """The kernel of `decl`'s program.  `names`: the symbols args, kernel, launch and function;
    `arguments`: each argument's and output's entry parameter, by schema name; `pointers`:
    the kernel parameter of each per-row tensor; `accs`: each reduction's accumulator, in the
    program's order."""
    rows = decl.rows

    def value(fn) -> str:
        return element_call(rows, fn) if fn.inputs else f"prog.template {fn.name}<opmath_t>()"

    def inputs(names_):
        return tuple(CudaTensor(arguments[t], pointers.get(t, ""), rows.ident(t) if t in rows.per_row_tensors else "")
                     for t in names_)
    stages = tuple(CudaStage(s, rows.stage_functions[s], tuple(
        CudaReduction(r.member, r.combiner, accs[i], value(r.function))
        for i, r in enumerate(rows.reductions) if r.stage == s)) for s in range(1, rows.stages + 1))
    outputs = tuple(CudaOutput(arguments[o.name], pointers.get(o.name, ""), o.per_row, value(o.function))
                    for o in rows.outputs)
    return RowCudaKernel(
        op=f"{namespace}::{decl.op_name}", generated=generated, program=program, params=params,
        first=arguments[rows.row_tensors[0]], row_dims=rows.row_dims, opmath=opmath, reductions=reductions,
        count=rows.count, stage0=rows.stage_functions[0],
        scalars=tuple((rows.ident(n), conv.format(name=arguments[n])) for n, conv in rows.scalars),
        row_inputs=inputs(rows.row_tensors), column_inputs=inputs(rows.column_tensors),
        per_row_inputs=inputs(rows.per_row_tensors), outputs=outputs, stages=stages, **names)


__all__ = ["RowCudaKernel", "TEMPLATE_LOCALS", "element_call", "kernel"]
