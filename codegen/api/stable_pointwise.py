"""The stable-ABI target's kernels of a `pointwise:` expression (docs/stable-abi.md, "Generated
pointwise kernels"): the same expression (codegen/lang/pointwise.py: its parser, type rules and
C++ text over a value type `Tv`), evaluated by loops written against torch's stable API alone.

Per op and device, `plan` decides every name and statement the templates lay out
(templates/stable/pointwise.cpp.j2, pointwise.cu.j2):

- the wrapper: each tensor defined and on the device (the first one's), then
  `opwrap::rt::pw::prepare` (<opwrap/stable/pointwise.h>): broadcasting, type promotion
  (integer inputs to the default float dtype in an op declared for floating dtypes only),
  the promoted dtype among the declared ones, inputs of another dtype converted, the outputs
  allocated in aten's elementwise layout, the loop's coalesced dimensions;
- the dtype switch, over the declared dtypes, into the loop of that element type;
- on the CPU, the loop: `opwrap::rt::pw::for_each` hands contiguous runs to a plain loop over
  restrict pointers that GCC vectorizes, compiled for several instruction sets
  (`OPWRAP_PW_CLONES`); half and bfloat16 compute in float, as the full target's;
- on CUDA, a grid-stride kernel over the same `Loop` (flat indexing where every operand is dense);
- an out= overload (`name.out(..., *, Tensor(a!) out)`, its functional op's expression): the
  loop writes into its out= argument, resized as aten resizes one, or into a temporary copied
  into it where it has another dtype or shares memory with an input.

Names: each argument has a C++ identifier of its own in the wrapper and loops (a Scope clear of
what the templates declare, `TEMPLATE_LOCALS`); the functor names them as the expression chose
(`Expression.idents`), as in the full target.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.literals import cpp_string
from ..core.names import Scope, camel_case, cpp_ident
from . import stable

# What the templates declare where the arguments are in scope: the wrapper's op name and
# prepared operands, the loops' element types, functor, lambdas' parameters and the kernel's index.
TEMPLATE_LOCALS = ("kOp", "m", "p", "op", "n", "i", "outs", "ins", "loop", "scalar_t", "opmath_t", "Tv",
                   "device_guard", "stream", "blocks")


@dataclass(frozen=True)
class StablePointwise:
    """Everything templates/stable/pointwise.{cpp,cu}.j2 lay out for one op on one device."""

    op: str  # namespace::name
    key: str  # CPU or CUDA
    wrapper: str  # the function TORCH_BOX boxes
    functor: str  # the expression's functor template (its text: templates/pointwise/functor.j2)
    members: tuple[str, ...]  # the functor's scalar members
    chunk: str  # the contiguous CPU loop / the CUDA kernel
    loop: str  # the loop over the prepared operands, for one element type
    params: str  # the wrapper's parameters, in the stable API's types
    returns: str
    checks: tuple[str, ...]  # the tensors' checks, the device guard
    named: str  # {{"self", self}, ...}: the inputs by name, for prepare's messages
    outputs: int
    inputs: tuple[str, ...]  # the tensor arguments' C++ identifiers, in schema order
    scalar_params: str  # the loop's parameters after the operands (the scalar arguments)
    scalar_args: str
    scalar_inits: str  # the functor's initializer list, in opmath_t
    float_op: bool  # integer inputs promote to the default float dtype
    dtype_cases: tuple[tuple[str, str], ...]  # (ScalarType enumerator, C++ element type)
    dtype_list: str
    dtype_names: str
    allocating: str  # "output 'result'", for the message of a failed allocation
    result: str  # the return statement
    out: str = ""  # an out= overload: prepare's arguments naming its out= argument (", &out, \"out\"")
    finish: str = ""  # ... and the statement writing the result into it


def plan(decl, namespace: str, key: str) -> StablePointwise:
    e, s = decl.expression, decl.schema
    scalars = dict(e.scalars)
    scalar_args = [a for a in s.arguments if a.name in scalars]
    members = tuple(e.ident(a.name) for a in scalar_args)
    functor = cpp_ident(f"{camel_case(decl.ident)}Op", members)
    symbols = dict(chunk=f"{decl.ident}_{'contiguous' if key == 'CPU' else 'kernel'}",
                   loop=f"{decl.ident}_{key.lower()}_loop", wrapper=f"{decl.ident}_{key.lower()}")
    scope = Scope((*TEMPLATE_LOCALS, functor, *symbols.values()))
    ident = {a.name: scope.name(a.name) for a in s.arguments}
    first = e.tensors[0]
    device = f"{stable.DEVICE_TYPE}::{key}"
    checks = [f"constexpr const char* kOp = {cpp_string(f'{namespace}::{decl.op_name}')};"]
    outs = [a.name for a in decl.out_arguments]  # an out= overload: one, checked as the inputs are
    for t in (*e.tensors, *outs):
        checks.append(f"opwrap::rt::check_tensor(kOp, {cpp_string(t)}, {ident[t]}, {device});")
        if t != first:
            checks.append(f"opwrap::rt::check_same_device(kOp, {cpp_string(t)}, {ident[t]}, {ident[first]}, "
                          f"{cpp_string(first)});")
    if key != "CPU":  # outputs are allocated (and the kernel runs) on the first tensor's device
        checks.append(f"const torch::stable::accelerator::DeviceGuard device_guard({ident[first]}.device().index());")
    outputs = len(e.results)
    names = outs or decl.return_names
    allocating = ("outputs " if outputs > 1 else "output ") + ", ".join(f"'{n}'" for n in names)
    tensor = stable.TENSOR
    returns = tensor if outputs == 1 else f"std::tuple<{', '.join([tensor] * outputs)}>"
    result = "return p.outputs[0];" if outputs == 1 else \
        "return std::make_tuple(" + ", ".join(f"p.outputs[{i}]" for i in range(outputs)) + ");"
    out = finish = ""
    if outs:  # (one out= argument and one return: check_declaration)
        out = f", &{ident[outs[0]]}, {cpp_string(outs[0])}"
        finish = f"opwrap::rt::pw::write_out(kOp, {cpp_string(outs[0])}, p, {ident[outs[0]]});"
        result = f"return {ident[outs[0]]};"
    return StablePointwise(
        op=f"{namespace}::{decl.op_name}", key=key, functor=functor, members=members, **symbols,
        params=", ".join(f"{stable.cpp_type(a)} {ident[a.name]}" for a in s.arguments), returns=returns,
        checks=tuple(checks), named="{" + ", ".join(f"{{{cpp_string(t)}, {ident[t]}}}" for t in e.tensors) + "}",
        outputs=outputs, inputs=tuple(ident[t] for t in e.tensors),
        scalar_params=", ".join(f"{stable.cpp_type(a)} {ident[a.name]}" for a in scalar_args),
        scalar_args=", ".join(ident[a.name] for a in scalar_args),
        scalar_inits=", ".join(f"static_cast<opmath_t>({ident[a.name]})" for a in scalar_args),  # int64_t, double, bool
        float_op=all(dt.is_floating for dt in decl.dtypes),
        dtype_cases=tuple((dt.scalar_type, dt.cpp) for dt in decl.dtypes),
        dtype_list="{" + ", ".join(f"{stable.SCALAR_TYPE}::{dt.scalar_type}" for dt in decl.dtypes) + "}",
        dtype_names=", ".join(dt.name for dt in decl.dtypes), allocating=cpp_string(allocating), result=result,
        out=out, finish=finish)
