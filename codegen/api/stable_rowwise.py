"""The stable target's row-wise kernels (docs/stable-abi.md, "Generated row-wise kernels"): the
program of `rowwise:` (codegen/lang/rowwise.py's model, the same as the full target's) as plain
loops over contiguous rows, against torch's stable API and <opwrap/stable/rowwise.h> only.

What `plan` decides, the template (templates/stable/rowwise.h.j2) lays out:

- the program's struct (one row's values and its element functions, over a scalar: the
  computation type, float for float16 and bfloat16);
- the CPU loop: `torch::stable::parallel_for` over rows (about 32K elements a task); each pass a
  loop over each chunk of the row (kChunk elements) under `#pragma omp simd` with a reduction
  clause per reduction (OMP_REDUCTIONS; -fopenmp-simd, no OpenMP runtime), which GCC vectorizes
  at -O3 with the lanes' partial results in registers, a row tensor of float16 or bfloat16
  converted to float a chunk at a time (into a buffer of the task's, in L1; once at the row's
  start where the row is shorter than kDirectRow, one chunk that every loop reads: the inputs
  _once names, bfloat16's others read as they are) or, in a loop that calls no floating-point
  function an element, a bfloat16 row read as it is from rows of kDirectRow on (_direct; float16
  always converted: rowwise.h's kReadDirectly), a column tensor converted once a call, a cached
  binding (softmax's exponentials) in a row buffer; a loop that reads a row directly has a copy
  without the loop over chunks for a row of one chunk (float's, and the reduced types' buffers);
  a pass that only sums and reads directly (`lanes`) runs rows shorter than kShortRow 4 lanes at
  a time (the clause), a row of one chunk a vector's lanes at a time and a longer row four
  vectors' lanes a chunk, summed by a tree of vector additions (rowwise.h's sum_lanes) rather
  than the clause's scalar fold; the outputs one more `omp simd` loop, converted as they are
  stored (float16's into a float buffer a chunk at a time, converted with F16C). The loop is
  compiled for DEFAULT, AVX2 and AVX-512 (`#pragma GCC target`, in one unit, each with its
  vector's width) and chosen at run time;
- the CUDA kernel: the full target's (api/rowwise_cuda.py, templates/rowwise/cuda.j2, on the
  sweep both targets share: opwrap/shared/rowwise_cuda.cuh), in this target's names.

The wrapper (codegen/api/stable.py) checks, allocates and dispatches as for a hand-written
kernel, and calls `<owner>_rowwise_cpu<scalar_t>` or `<owner>_rowwise_cuda<scalar_t>` with the
schema's arguments and the outputs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..core.names import Scope, camel_case, cpp_ident
from . import rowwise_cuda
from .stable import TENSOR, cpp_type, rowwise_header, rowwise_kernel

# What the template declares where the kernels' parameters and the locals named here are in
# scope (loops, kernels, launches).
TEMPLATE_LOCALS = ("Tv", "W", "grain", "begin", "end", "d", "j", "k", "e", "row_loop", "generated", "kConvert",
                   "kVectorBytes", "opwrap_once", "opwrap_j0", "opwrap_ob",
                   *rowwise_cuda.TEMPLATE_LOCALS)


@dataclass(frozen=True)
class Tensor:
    name: str  # the schema's
    param: str  # the kernel's parameter
    pointer: str  # its data (scalar_t)
    row: str = ""  # in opmath_t (CPU): a row input's chunk (converted into `buffer` for reduced types), a column's or cached binding's row
    buffer: str = ""  # where a reduced type's row input chunk or column, or a cached binding, is held (CPU)
    local: str = ""  # a column's row as a parallel task's own local; a row input's row in scalar_t (CPU)
    member: str = ""  # a per-row input's member of the struct
    once: bool = True  # a row input: converted at the row's start where a reduced type's row is short (_once)


# A reduction's operator in a CPU pass's `#pragma omp simd reduction(...)` clause, by its
# combiner (opwrap::stable::rowwise::<combiner>); the ones that also or-reduce a NaN flag, as the
# clause's max and min do not propagate NaN (Max::result).
OMP_REDUCTIONS = {"Sum": "+", "Max": "max", "Min": "min"}
NAN_FLAGGED = {"Max", "Min"}


@dataclass(frozen=True)
class StableRowPlan:
    op: str  # namespace::name
    space: str  # the namespace of the op's loops and struct
    program: str  # the struct
    params: tuple[tuple[str, str], ...]  # (C++ type, name): the kernel's parameters
    first: str  # the first row tensor's parameter (its sizes give the rows)
    row_dims: int
    cpu_function: str
    count: str
    members: tuple[str, ...]
    functions: tuple[dict, ...]  # name, params, bindings, value
    steps: tuple[tuple[str, tuple[tuple[str, str], ...]], ...]  # (stage function, its statements)
    scalars: tuple[tuple[str, str], ...]  # (member, its value from the parameter)
    row_inputs: tuple[Tensor, ...]
    column_inputs: tuple[Tensor, ...]
    per_row_inputs: tuple[Tensor, ...]
    stages: tuple[dict, ...]  # number, function, reductions (member, combiner, omp, acc, value, nan, lanes, cpu),
    #   caches (row, cpu), inputs (the row inputs its loop reads), direct (_direct), lanes: a direct pass of sums,
    #   whose short rows run 4 lanes at a time (rowwise.h's kShortRow), rows of one chunk a
    #   vector's lanes at a time and longer rows four vectors' lanes a chunk (sum_lanes)
    caches: tuple[Tensor, ...]  # cached bindings: row (the buffer's pointer), buffer
    outputs: tuple[dict, ...]  # name, per_row, param, pointer, row, cpu, inputs, direct (_direct)
    cuda: rowwise_cuda.RowCudaKernel

    @property
    def param_list(self) -> str:
        return ", ".join(f"{t} {n}" for t, n in self.params)

    @property
    def arg_list(self) -> str:
        return ", ".join(n for _, n in self.params)

    @property
    def row_outputs(self) -> tuple[dict, ...]:
        return tuple(o for o in self.outputs if not o["per_row"])


def _direct(functions) -> bool:
    """Whether a CPU loop of `functions` reads a float16 or bfloat16 row input as it is,
    converting each element where it is used, when the row is long (rowwise.h's kDirectRow):
    where it calls no floating-point function an element.  Converted a chunk at a time into a
    float buffer first (load_row), such loops lost more than the conversion saved (one thread,
    AVX-512, bfloat16 rows of 4096, full target's time / stable's: layer_norm_backward 0.49x
    against 0.74x read directly, softmax_backward 0.53x against 0.85x); a loop of exp or log is
    faster from the buffer (log_softmax 1.03x against 0.77x), and so are short rows (layer_norm
    over rows of 128: 0.71x against 0.61x)."""
    return not any(fn.costly for fn in functions)


def _read(row_inputs: tuple[Tensor, ...], functions) -> tuple[tuple[Tensor, ...], bool]:
    """The row inputs that `functions` read (the ones a loop of them converts or points at),
    and whether the loop reads them directly on long rows (_direct); a loop that reads none has
    a single copy."""
    names = {n for fn in functions for n in fn.inputs}
    inputs = tuple(t for t in row_inputs if t.name in names)
    return inputs, bool(inputs) and _direct(functions)


def _once(row_inputs: tuple[Tensor, ...], stages: list[dict], outputs: list[dict]):
    """Which row inputs a short bfloat16 row (shorter than kDirectRow) converts into its buffer
    once, at the row's start (`once`; float16 converts every one: rowwise.h's kReadDirectly):
    those that a loop converting its inputs reads
    (one calling a floating-point function an element, _direct), or that three loops or more
    read.  The others are read as they are, converted where used, by loops that read directly:
    two loops reading a row converted once paid the buffer's store and loads for two reads
    (softmax_backward, bfloat16 rows of 128: 0.66x of the full target's speed converted once,
    0.78x read directly), where layer_norm's three reads of its input gain from it (0.82x
    against 0.77x).  The stages and outputs with their inputs' Tensors replaced."""
    loops = [(st["inputs"], st["direct"]) for st in stages] + [(o["inputs"], o["direct"]) for o in outputs
                                                              if not o["per_row"]]

    def once(t: Tensor) -> bool:
        reads = [direct for inputs, direct in loops if t in inputs]
        return len(reads) >= 3 or not all(reads)

    new = {t.name: replace(t, once=once(t)) for t in row_inputs}
    again = lambda inputs: tuple(new[t.name] for t in inputs)  # noqa: E731
    return (tuple(new.values()), [{**st, "inputs": again(st["inputs"])} for st in stages],
            [{**o, "inputs": again(o["inputs"])} for o in outputs])


def plan(decl, namespace: str) -> StableRowPlan:
    rows = decl.rows
    ident = decl.ident
    members = ([rows.ident(t) for t in rows.per_row_tensors] + [rows.ident(n) for n, _ in rows.scalars]
               + [r.member for r in rows.reductions] + list(rows.bindings))
    program = cpp_ident(f"{camel_case(ident)}Row", members + [f.name for f in rows.functions]
                        + list(rows.stage_functions) + [rows.count])
    space = f"{ident}_rows"
    scope = Scope((*TEMPLATE_LOCALS, program, space))
    params = [(cpp_type(a), scope.name(a.name)) for a in decl.schema.arguments]
    made = [o for o in decl.outputs() if o.made_by == "wrapper"]  # a row-wise op returns new tensors
    outs = [(f"{TENSOR}&", scope.fresh(o.name)) for o in made]
    param = {a.name: n for a, (_, n) in zip(decl.schema.arguments, params)}
    param.update({o.name: n for o, (_, n) in zip(made, outs)})

    def tensor(name: str, **kw) -> Tensor:
        return Tensor(name, param[name], scope.fresh(f"opwrap_p_{name}"), **kw)

    row_inputs = tuple(tensor(t, row=scope.fresh(f"opwrap_x_{t}"), buffer=scope.fresh(f"opwrap_b_{t}"),
                              local=scope.fresh(f"opwrap_r_{t}")) for t in rows.row_tensors)
    column_inputs = tuple(tensor(t, row=scope.fresh(f"opwrap_x_{t}"), buffer=scope.fresh(f"opwrap_b_{t}"),
                                 local=scope.fresh(f"opwrap_c_{t}")) for t in rows.column_tensors)
    per_row_inputs = tuple(tensor(t, member=rows.ident(t)) for t in rows.per_row_tensors)
    caches = tuple(Tensor(b, "", "", row=scope.fresh(f"opwrap_x_{b}"), buffer=scope.fresh(f"opwrap_b_{b}"))
                   for b, _, _ in rows.cached)
    local = {t.name: t.row for t in row_inputs + caches} | {t.name: t.local for t in column_inputs}

    def call(fn) -> str:
        """`fn` of element e on the CPU, in a loop over a chunk of the row (j = e - c0): a row
        tensor's chunk is in opmath_t (its own elements, or converted into a buffer of
        kChunk for the reduced types), a column tensor (converted once a call) and a cached
        binding are whole rows of opmath_t."""
        return f"prog.{fn.name}(" + ", ".join(
            f"opwrap::pw::load({local[t]}[j])" if t in rows.row_tensors else f"{local[t]}[e]"
            for t in fn.inputs) + ")"

    accs = [scope.fresh(f"opwrap_a{i}") for i in range(len(rows.reductions))]
    values = [scope.fresh(f"opwrap_v{i}") for i in range(len(rows.reductions))]
    nans = [scope.fresh(f"opwrap_nan{i}") if r.combiner in NAN_FLAGGED else None for i, r in enumerate(rows.reductions)]
    lanes = [scope.fresh(f"opwrap_l{i}") for i in range(len(rows.reductions))]
    stages = []
    for s in range(1, rows.stages + 1):
        reds = [dict(member=r.member, combiner=r.combiner, omp=OMP_REDUCTIONS[r.combiner], acc=accs[i],
                     value=values[i], nan=nans[i], lanes=lanes[i], cpu=call(r.function))
                for i, r in enumerate(rows.reductions) if r.stage == s]
        cached = [dict(row=local[b], cpu=call(fn)) for b, fn in rows.cached_in(s)]
        fns = [r.function for r in rows.reductions if r.stage == s] + [fn for _, fn in rows.cached_in(s)]
        inputs, direct = _read(row_inputs, fns)
        stages.append(dict(number=s, reductions=reds, caches=cached, function=rows.stage_functions[s], inputs=inputs,
                           direct=direct, lanes=direct and all(r["combiner"] == "Sum" for r in reds)))
    outputs = []
    for o in rows.outputs:
        fn = o.function
        value = f"prog.template {fn.name}<opmath_t>()" if not fn.inputs else None
        inputs, direct = _read(row_inputs, [fn])
        outputs.append(dict(name=o.name, per_row=o.per_row, param=param[o.name],
                            pointer=scope.fresh(f"opwrap_p_{o.name}"), row=scope.fresh(f"opwrap_o_{o.name}"),
                            cpu=call(fn) if fn.inputs else value, inputs=inputs, direct=direct))
    row_inputs, stages, outputs = _once(row_inputs, stages, outputs)
    functions = tuple(dict(name=fn.name, params=", ".join(f"Tv {rows.ident(t)}" for t in fn.inputs),
                           bindings=fn.bindings, value=fn.value) for fn in rows.functions)
    cuda = rowwise_cuda.kernel(
        decl, namespace=namespace, generated=f"::{namespace}::generated::{space}", program=program,
        names=dict(args=scope.fresh(f"{camel_case(ident)}RowArgs"), kernel=scope.fresh(f"{ident}_rows_cuda_kernel"),
                   launch=scope.fresh(f"{ident}_rows_cuda_launch"), function=rowwise_kernel(decl, "CUDA")),
        params=", ".join(f"{t} {n}" for t, n in params + outs), arguments=param,
        pointers={**{t.name: t.pointer for t in row_inputs + column_inputs + per_row_inputs},
                  **{o["name"]: o["pointer"] for o in outputs}},
        accs=accs,
        opmath="opwrap::stable::rowwise::opmath_t", reductions="opwrap::stable::rowwise")
    return StableRowPlan(
        op=f"{namespace}::{decl.op_name}", space=space, program=program, params=tuple(params + outs), cuda=cuda,
        first=param[rows.row_tensors[0]], row_dims=rows.row_dims, cpu_function=rowwise_kernel(decl, "CPU"),
        count=rows.count, members=tuple(members), functions=functions,
        steps=tuple((rows.stage_functions[s], rows.steps_of(s)) for s in range(rows.stages + 1)),
        scalars=tuple((rows.ident(n), conv.format(name=param[n])) for n, conv in rows.scalars),
        row_inputs=row_inputs, column_inputs=column_inputs, per_row_inputs=per_row_inputs, stages=tuple(stages),
        caches=caches, outputs=tuple(outputs))


__all__ = ["StableRowPlan", "plan"]
