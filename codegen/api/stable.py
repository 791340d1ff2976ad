"""The stable-ABI target's wrapper of one op (docs/stable-abi.md): what it takes, which checks
it makes, what it allocates, how it calls the kernel, and what a declaration asks that the
target cannot express yet.

The generated C++ includes only torch's stable API and <opwrap/stable/runtime.h>, whose
`opwrap::rt` functions are <opwrap/runtime/checks.h>'s with the same messages, taking
`torch::stable::Tensor`: so the shape rule's C++ (codegen/lang/shapes.py) and the C kernel ABI's
argument passing (codegen/api/abi.py) are the full target's own text.

The wrapper calls a kernel behind the C ABI (C, Rust, CUDA C: the full target's symbols,
unchanged), or a hand-written C++ kernel against the stable API, `stable_signature`:
`template <typename scalar_t> void <kernel>(<arguments>, torch::stable::Tensor& <output>...)`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..core.dtypes import DTYPES
from ..lang.schema import Argument, BaseType, is_tensor, unwrap_optional
from ..lang.shapes import cpp_input_checks, cpp_output_shape, render_cpp, variables
from . import abi
from .kernel import overlap_checks, written_header
from ..core.targets import DEVICES
from ..core.names import Scope
from ..core.literals import cpp_string

TENSOR = "torch::stable::Tensor"
SCALAR_TYPE = "torch::headeronly::ScalarType"
DEVICE_TYPE = "torch::headeronly::DeviceType"
INT_LIST = "torch::headeronly::IntHeaderOnlyArrayRef"

# A schema type (its text, a list's size dropped) as the wrapper and the kernel take it:
# what STABLE_TORCH_LIBRARY's TORCH_BOX unboxes.  A type not here is a declaration error.
TYPES: dict[str, str] = {
    "Tensor": f"const {TENSOR}&",
    "Tensor?": f"const std::optional<{TENSOR}>&",
    "Tensor[]": f"const std::vector<{TENSOR}>&",
    "int": "int64_t",
    "float": "double",
    "bool": "bool",
    "str": "std::string_view",
    "ScalarType": SCALAR_TYPE,
    "int[]": INT_LIST,
    "int?": "std::optional<int64_t>",
    "float?": "std::optional<double>",
    "bool?": "std::optional<bool>",
    "ScalarType?": f"std::optional<{SCALAR_TYPE}>",
    "int[]?": f"std::optional<{INT_LIST}>",
    # torch's IValue conversion treats a SymInt as an int (a concrete one: under tracing the
    # fake kernel sees the symbols, the kernel never does)
    "SymInt": "int64_t",
    "SymInt?": "std::optional<int64_t>",
    "SymInt[]": INT_LIST,
    "SymInt[]?": f"std::optional<{INT_LIST}>",
}

# Schema types TORCH_BOX cannot unbox in the oldest claimed release, and why.
UNBOXABLE: dict[str, str] = {
    "Scalar": "torch's stable ABI cannot pass a Scalar: in every claimed release a call fails converting it "
              "('Not yet supported conversion from IValue to StableIValue for schema type: Scalar'), and "
              "torch/csrc/stable has no Scalar type",
    "Generator": "torch::stable::Generator exists from torch 2.13, and the stable target compiles for torch 2.11 "
                 "(TORCH_TARGET_VERSION), whose stable API cannot unbox a Generator",
}

# The value returns a kernel behind the C ABI makes (through a pointer), as the wrapper returns them.
RETURNED: dict[str, str] = {"int": "int64_t", "SymInt": "int64_t", "float": "double", "bool": "bool"}

# What the target's wrappers receive from the pipeline's locals (templates/stable/op.cpp.j2).
TEMPLATE_LOCALS = ("kOp", "m")

# The devices the target builds wrappers for (codegen/core/targets.py's rows of the same keys).
DEVICE_KEYS = ("CPU", "CUDA")


def type_key(a: Argument) -> str:
    return re.sub(r"\[\d+\]", "[]", str(a.type))


def cpp_type(a: Argument) -> str:
    return TYPES[type_key(a)]


def kernel_header(decl, key: str = "CPU") -> str:
    """The hand-written C++ kernel's header of `decl` for dispatch key `key`, relative to the
    kernels directory: `<op>.h` on the CPU, `<op>.cuh` (or `cuda_header:`) for CUDA, as in the
    full target."""
    return written_header(decl, next(d for d in DEVICES if d.key == key))


def signature_in(target: str, decl, key: str = "CPU") -> tuple[str, str]:
    """(the declaration a hand-written C++ kernel of `decl` for `key` has in target `target`,
    its return type): against torch::stable::Tensor in the stable target, at::Tensor in the
    full one (kernel.kernel_signature)."""
    if target == "stable":
        return stable_signature(decl, key), "void"
    from .kernel import kernel_return_type, kernel_signature
    return kernel_signature(decl, key), kernel_return_type(decl)


def stable_signature(decl, key: str = "CPU") -> str:
    """The declaration a hand-written stable C++ kernel must have: one type parameter per dtype
    variable, the schema's arguments (TYPES), then one `torch::stable::Tensor&` per output."""
    scope = Scope()
    params = [f"{cpp_type(a)} {scope.name(a.name)}" for a in decl.schema.arguments]
    params += [f"{TENSOR}& {scope.fresh(o.name)}" for o in decl.outputs()]
    tparams = ", ".join(f"typename {v.name}" for v in decl.variables)
    return f"template <{tparams}> void {decl.kernel(key)}({', '.join(params)})"


def rowwise_kernel(decl, key: str) -> str:
    """The kernel generated from a row-wise program (api/stable_rowwise.py) that the wrapper for
    dispatch key `key` calls: an out= overload's is its functional op's."""
    return f"{decl.rows.owner}_rowwise_{key.lower()}"


def rowwise_header(decl) -> str:
    """Its header, from the wrappers' folders (`<cpp_dir>/cpu/`, `<cpp_dir>/cuda/`)."""
    return f"../rowwise/{decl.rows.owner}.h"


@dataclass(frozen=True)
class Problem:
    """Something a declaration asks that the stable target cannot express: where, what, a hint."""

    field: str  # the declaration field to point at ("" the schema)
    message: str
    hint: str = "build this library in the full ATen target ([tool.codegen] target = \"aten\")"


FULL_TARGET = Problem.hint


def problems(decl) -> list[Problem]:
    """Every feature of `decl` the stable target lacks, each naming what the stable API has not."""
    out: list[Problem] = []
    if decl.expression is not None:  # generated kernels (`pointwise: true` beside a kernel only says it is elementwise)
        out.extend(pointwise_problems(decl))
    if out or decl.expression is not None:  # what else it lacks follows from the generated kernels it cannot have
        return out
    if decl.extra_field("method"):
        out.append(Problem("method", "the stable target has no custom classes (the stable API has no "
                           "torch::CustomClassHolder)"))
    if decl.split_types:
        out.append(Problem("split_types", "the stable target compiles each op in one unit; 'split_types' is for "
                           "the full target's C++ kernel templates", "leave 'split_types' out"))
    for key in decl.devices:
        if key not in DEVICE_KEYS:
            out.append(Problem("kernels", f"the stable target builds CPU and CUDA kernels only; '{key}' kernels "
                               "need a device row of their own"))
    for a in decl.schema.arguments:
        base = re.sub(r"[?\[\]\d]", "", str(a.type))
        if type_key(a) not in TYPES and base in UNBOXABLE:
            out.append(Problem("", f"argument '{a.name}' of type {a.type}: {UNBOXABLE[base]}",
                               "declare it `float` or `int`" if base == "Scalar" else FULL_TARGET))
        elif type_key(a) not in TYPES:
            out.append(Problem("", f"argument '{a.name}' of type {a.type}: the stable target takes "
                               f"{', '.join(TYPES)} so far"))
    if not any(is_tensor(unwrap_optional(a.type)) or type_key(a) == "Tensor[]" for a in decl.schema.arguments):
        out.append(Problem("", "the stable target dispatches on the tensor arguments, and this op has none: ops "
                           "without a tensor input (factories) are not generated for it yet"))
    foreign_only = all(decl.foreign_kernel(k) is not None for k in decl.devices)
    for o, r in zip(decl.outputs(), decl.schema.returns):
        if str(r.type) in RETURNED:
            if not foreign_only:
                out.append(Problem("", f"return '{o.name}' of type {r.type}: in the stable target a value return is "
                                   "made by a kernel behind the C ABI so far (a C++ kernel returns void)"))
        elif r.type != BaseType("Tensor"):
            out.append(Problem("", f"return '{o.name}' of type {r.type}: the stable target returns tensors and "
                               f"{', '.join(RETURNED)} so far"))
        elif o.made_by == "alias":  # a written argument, returned as it is (an out= one resized: plan)
            continue
        elif o.made_by != "wrapper":
            out.append(Problem("shape", f"return '{o.name}' has no shape rule: the stable target allocates every "
                               "output from its shape rule ('shape:' or 'like:') so far"))
        elif o.shape is not None and o.shape.reduce is not None:
            out.append(Problem("shape", f"return '{o.name}': the stable target has no reduction shape rule "
                               f"({o.shape.text}) so far"))
        elif o.dtype_rule is not None and not _renders(decl, o.dtype_rule):
            out.append(Problem("dtype", f"return '{o.name}': the stable target takes a dtype name, a Tensor "
                               "argument, a ScalarType argument or an optional one ('dtype or x') as a dtype rule "
                               f"so far, not '{o.dtype_rule.text}'"))
    readable = {a.name for a in decl.schema.arguments
                if (is_tensor(a.type) and not a.is_optional) or type_key(a) == "Tensor[]"}
    readable |= {v.owner for v in decl.variables if v.absent is not None}  # an optional tensor's, else `absent`
    if dict(decl.dtype_owners).keys() - readable - {o.name for o in decl.outputs() if o.made_by == "wrapper"}:
        out.append(Problem("dtypes", "the stable target reads every dtype variable from a required Tensor "
                           "argument or a return it allocates so far"))
    if decl.foreign_kernel("CPU") is None and decl.kernel("CPU") is None and decl.rows is None and not out:
        out.append(Problem("kernels", "the stable target needs a CPU kernel"))
    return out


def pointwise_problems(decl) -> list[Problem]:
    """What of a pointwise declaration the stable target cannot generate yet (its kernels:
    codegen/api/stable_pointwise.py)."""
    out = []
    for a in decl.schema.arguments:
        if a.name in dict(decl.expression.scalars) and type_key(a) not in TYPES:
            out.append(Problem("", f"argument '{a.name}' of type {a.type}: the stable target's pointwise "
                           f"kernels take int, SymInt, float and bool scalars so far"))
    return out


@dataclass(frozen=True)
class StableCall:
    """Everything templates/stable/op.cpp.j2 lays out for one op."""

    key: str  # the dispatch key it is registered for
    wrapper: str  # the function TORCH_BOX boxes
    params: str
    returns: str
    checks: tuple[str, ...]  # argument checks, shape contracts, allocation, contiguous copies, the ABI's setup
    dispatch: tuple[str, ...]  # the dtype switch calling the kernel
    result: str  # the return statement ("": none)
    epilogue: tuple[str, ...]  # after the kernel: written arguments computed in a contiguous copy, written back
    includes: tuple[str, ...]  # the kernel's header (or its symbols' prototypes)
    defines: tuple[str, ...] = ()  # macros defined before any header (CUDA: USE_CUDA, for the CUDA shim)


def plan(decl, namespace: str, key: str = "CPU") -> StableCall:
    """Decide every statement of the stable wrapper of `decl` (which `problems` has passed), in
    the order of the wrapper's phases: the tensors' checks, the device guard, the shape rule's
    contracts, the outputs, the kernel's inputs, the call."""
    s = decl.schema
    scope = Scope(TEMPLATE_LOCALS)
    ident = {a.name: scope.name(a.name) for a in s.arguments}
    dtype_local: dict[str, tuple[str, str]] = {}  # variable -> (local, C++ naming where it was read from)
    checks = [f"constexpr const char* kOp = {cpp_string(f'{namespace}::{decl.op_name}')};"]
    first = _tensor_checks(decl, ident, key, dtype_local, scope, checks)
    if key != "CPU":  # outputs are allocated (and the kernel runs) on the first tensor's device
        checks.append(f"const torch::stable::accelerator::DeviceGuard device_guard({first}.device().index());")
    names = dict(ident)
    if decl.shape_plan is not None:
        for v in sorted(variables(decl.shape_plan)):
            if s.argument(v) is None:
                names[v] = scope.fresh(v)
        checks.extend(cpp_input_checks(decl.shape_plan, "kOp", s, names))
    if key == "CPU":  # on a GPU the kernel asserts (a check here would synchronize the stream)
        checks.extend(_index_checks(decl, names))
    dispatched = dtype_local[decl.variables[0].name][0]
    outputs, aliased = [], {}
    outs = {a.name for a in decl.out_arguments}
    for o in decl.outputs():
        if o.made_by == "alias":  # an argument written in place, returned as it is
            aliased[o.name] = ident[o.aliases]
            if o.aliases in outs:
                checks.extend(_out_argument(decl, o, ident, names, dispatched, dtype_local, scope))
            continue
        if o.made_by != "wrapper":  # a value the kernel returns (RETURNED)
            continue
        dtype = _owned_dtype(decl, o, _output_dtype(o, ident, dispatched), dtype_local, scope, checks)
        out, shape = scope.fresh(o.name), scope.fresh(f"{o.name}_shape")
        rule = o.shape.text if o.shape is not None else "like " + decl.like
        expr = cpp_output_shape(o.shape, names) if o.shape is not None else f"{ident[decl.like]}.sizes().vec()"
        checks.append(f"const std::vector<int64_t> {shape} = {expr};")
        checks.append(f"opwrap::rt::check_output_shape(kOp, {cpp_string(o.name)}, {shape}, {cpp_string(rule)});")
        checks.append(f"{TENSOR} {out} = opwrap::rt::empty(kOp, {cpp_string(o.name)}, {shape}, {dtype}, "
                      f"{first}.device());")
        outputs.append(out)
    checks.extend(overlap_checks(decl, ident))
    args, epilogue = [], []
    for a in s.arguments:
        name = ident[a.name]
        if type_key(a) == "Tensor[]" and decl.contiguous:
            # each non-contiguous element a contiguous copy; a written list's copied back after the kernel
            c = scope.fresh(f"{name}_c")
            checks.append(f"const opwrap::rt::ContiguousList {c}(kOp, {cpp_string(a.name)}, {name});")
            if a.is_write:
                epilogue.append(f"{c}.write_back({name});")
            args.append(f"{c}.list()")
        elif is_tensor(unwrap_optional(a.type)) and (decl.contiguous or a.is_write):
            # a written one is a local the kernel may take as `Tensor&` (an out= argument in
            # place of its functional op's output), computed in a contiguous copy written back
            c = scope.fresh(f"{name}_c")
            held = f"std::optional<{TENSOR}>" if a.is_optional else TENSOR
            value = f"opwrap::rt::contiguous(kOp, {cpp_string(a.name)}, {name})" if decl.contiguous else name
            checks.append(f"{'' if a.is_write else 'const '}{held} {c} = {value};")
            if a.is_write and decl.contiguous:
                epilogue.append(f"opwrap::rt::write_back({name}, {c});")
            args.append(c)
        else:
            args.append(name)
    call, header, returned = _kernel_call(decl, namespace, key, first, (*args, *outputs), scope, checks)
    made, values = iter(outputs), iter(returned)
    results = [next(values) if str(r.type) in RETURNED else aliased[n] if n in aliased else next(made)
               for r, n in zip(s.returns, decl.return_names)]
    types = [RETURNED.get(str(r.type), TENSOR) for r in s.returns]
    returns = "void" if not results else types[0] if len(results) == 1 else f"std::tuple<{', '.join(types)}>"
    result = "" if not results else f"return {results[0]};" if len(results) == 1 else \
        f"return std::make_tuple({', '.join(results)});"
    return StableCall(
        key=key, wrapper=f"{decl.ident}_{key.lower()}", defines=("USE_CUDA",) if key == "CUDA" else (),
        params=", ".join(f"{cpp_type(a)} {ident[a.name]}" for a in s.arguments),
        returns=returns, checks=tuple(checks), dispatch=tuple(_switch(decl, dtype_local, call)), result=result,
        epilogue=tuple(epilogue), includes=(header,))


def _renders(decl, rule) -> bool:
    """Whether `_output_dtype` renders dtype rule `rule`: a dtype name, a tensor, a ScalarType
    argument, or an optional tensor or ScalarType? whose fallback is a dtype name or a required
    tensor (not the default dtype, which the stable API cannot read)."""
    if rule.kind in ("dtype", "tensor"):
        return True
    if rule.kind not in ("arg", "given") or rule.integers:
        return False
    fallback = rule.fallback
    if not fallback:
        return rule.kind == "arg"
    required = {a.name for a in decl.schema.arguments if is_tensor(a.type) and not a.is_optional}
    return fallback in required or (rule.kind == "given" and fallback in DTYPES)


def _owned_dtype(decl, o, dtype: str, dtype_local: dict, scope: Scope, checks: list[str]) -> str:
    """The dtype of output `o` (`dtype`, its rule's C++ value); where `o` declares a dtype
    variable, that value in a local of its own, checked against the variable's list and
    recorded in `dtype_local` for the dispatch, which is then returned instead."""
    owned = dict(decl.dtype_owners).get(o.name)
    if not owned:
        return dtype
    var, local = decl.variable(owned), scope.fresh(f"{o.name}_dtype")
    dtype_local[owned] = (local, cpp_string(o.name))
    checks.append(f"const {SCALAR_TYPE} {local} = {dtype};")
    checks.append(f"opwrap::rt::check_output_dtype_in(kOp, {cpp_string(o.name)}, {local}, "
                  f"{cpp_string(o.dtype_rule.text if o.dtype_rule else '')}, {_allowed(var)}, "
                  f"{cpp_string(', '.join(d.name for d in var.dtypes))});")
    return local


def _out_argument(decl, o, ident: dict[str, str], names: dict[str, str], dispatched: str, dtype_local: dict,
                  scope: Scope) -> list[str]:
    """An out= argument: of the result's dtype (its rule's), and resized to the result's shape
    rule as at::native::resize_output does (the full target's _aliased_output)."""
    arg, checks = ident[o.aliases], []
    # a return that declares a dtype variable: the out= argument's dtype is the variable's value
    dtype = _owned_dtype(decl, o, _output_dtype(o, ident, dispatched), dtype_local, scope, checks)
    checks.append(f"opwrap::rt::check_out_dtype(kOp, {cpp_string(o.aliases)}, {arg}, {dtype});")
    if o.shape is None and not decl.like:
        return checks
    shape = scope.fresh(f"{o.aliases}_shape")
    expr = cpp_output_shape(o.shape, names) if o.shape is not None else f"{ident[decl.like]}.sizes().vec()"
    rule = o.shape.text if o.shape is not None else "like " + decl.like
    checks.append(f"const std::vector<int64_t> {shape} = {expr};")
    checks.append(f"opwrap::rt::check_output_shape(kOp, {cpp_string(o.aliases)}, {shape}, {cpp_string(rule)});")
    checks.append(f"opwrap::rt::resize_output(kOp, {cpp_string(o.aliases)}, {arg}, {shape});")
    return checks


def _tensor_checks(decl, ident: dict[str, str], key: str, dtype_local: dict, scope: Scope,
                   checks: list[str]) -> str:
    """Every tensor defined, on the device (the first tensor's: cuda:0 and cuda:1 do not mix),
    of its dtype variable's dtypes; an optional tensor where it is given; each element of a
    list.  Returns the C++ of the tensor the op dispatches on: the first required tensor, else
    (an op whose tensors are lists or optional: an optimizer step's) the first one given at run
    time, named by the run (`params[0]`), as the full target's `first_given`."""
    device = f"{DEVICE_TYPE}::{key}"
    required = [a for a in decl.schema.arguments if is_tensor(a.type) and not a.is_optional]
    outs = {a.name for a in decl.out_arguments}
    if required:
        first, first_name = ident[required[0].name], cpp_string(required[0].name)
    else:
        tensors = [a for a in decl.schema.arguments if is_tensor(unwrap_optional(a.type)) or type_key(a) == "Tensor[]"]
        given, first = scope.fresh("given"), scope.fresh("first")
        first_name = f"{given}.name.c_str()"
        checks.append(f"const opwrap::rt::Given {given} = opwrap::rt::first_given(kOp, "
                      f"{{{', '.join(cpp_string(a.name) for a in tensors)}}}, {', '.join(ident[a.name] for a in tensors)});")
        checks.append(f"const {TENSOR}& {first} = {given}.tensor;")
        checks.append(f"opwrap::rt::check_tensor(kOp, {first_name}, {first}, {device});")
        # the dispatch variable is read from it (the full target's: the first tensor argument's)
        checks.extend(_dtype_check(decl, tensors[0], first, dtype_local, scope, first_name))
    for a in required:
        name = ident[a.name]
        checks.append(f"opwrap::rt::check_tensor(kOp, {cpp_string(a.name)}, {name}, {device});")
        if a is not required[0]:
            checks.append(f"opwrap::rt::check_same_device(kOp, {cpp_string(a.name)}, {name}, {first}, {first_name});")
        if a.name not in outs:  # an out= argument's dtype is the result's (_out_argument)
            checks.extend(_dtype_check(decl, a, name, dtype_local, scope))
    for a in decl.schema.arguments:
        if a.is_optional and is_tensor(unwrap_optional(a.type)):
            name = ident[a.name]
            var = decl.dtype_var(a.name)
            if var.name not in dtype_local and var.owner == a.name and var.absent is not None:
                # its own dtype variable: its dtype where given, else `absent` (the full target's)
                local = scope.fresh(f"{a.name}_dtype")
                dtype_local[var.name] = (local, cpp_string(a.name))
                checks.append(f"const {SCALAR_TYPE} {local} = {name}.has_value() && {name}->defined() ? "
                              f"{name}->scalar_type() : {SCALAR_TYPE}::{var.absent.scalar_type};")
                dtype_checks = [f"opwrap::rt::check_dtype_in(kOp, {cpp_string(a.name)}, *{name}, {_allowed(var)}, "
                                f"{cpp_string(', '.join(d.name for d in var.dtypes))});"]
            else:
                dtype_checks = _dtype_check(decl, a, f"*{name}", dtype_local, scope)
            checks.append(f"if ({name}.has_value() && {name}->defined()) {{")
            checks.append(f"  opwrap::rt::check_tensor(kOp, {cpp_string(a.name)}, *{name}, {device});")
            checks.append(f"  opwrap::rt::check_same_device(kOp, {cpp_string(a.name)}, *{name}, {first}, {first_name});")
            checks.extend("  " + c for c in dtype_checks)
            checks.append("}")
    for a in decl.schema.arguments:
        if type_key(a) == "Tensor[]":
            checks.extend(_list_checks(decl, a, ident, device, first, first_name, dtype_local, scope))
    return first


def _list_checks(decl, a: Argument, ident: dict[str, str], device: str, first: str, first_name: str,
                 dtype_local: dict, scope: Scope) -> list[str]:
    """A Tensor[]'s tensors are defined, on the device, of its variable's dtype (the first
    element's, when no tensor declared the variable), as the full target checks them."""
    var = decl.dtype_var(a.name)
    checks = []
    if var.name not in dtype_local:
        local = scope.fresh(f"{a.name}_dtype")
        dtype_local[var.name] = (local, cpp_string(f"{a.name}[0]"))
        checks.append(f"const {SCALAR_TYPE} {local} = {ident[a.name]}.empty() ? {SCALAR_TYPE}::"
                      f"{var.dtypes[0].scalar_type} : {ident[a.name]}[0].scalar_type();")
    local, source = dtype_local[var.name]
    checks.append(f"opwrap::rt::check_list(kOp, {cpp_string(a.name)}, {ident[a.name]}, {device}, {first}, "
                  f"{first_name}, {_allowed(var)}, {cpp_string(', '.join(d.name for d in var.dtypes))}, "
                  f"{local}, {source});")
    return checks


def _index_checks(decl, names: dict[str, str]) -> list[str]:
    """`index:`: the values of each integer tensor lie in [low, high) (the full target's checks)."""
    out = []
    for b in decl.index_bounds:
        a = decl.schema.argument(b.argument)
        value = names.get(a.name, a.name)
        low, high = render_cpp(b.low, names), render_cpp(b.high, names)
        check = f"opwrap::rt::check_index(kOp, {cpp_string(a.name)}, {{}}, {low}, {high}, {cpp_string(b.text)});"
        out.append(f"if ({value}.has_value() && {value}->defined()) " + check.format(f"*{value}") if a.is_optional
                   else check.format(value))
    return out


def _kernel_call(decl, namespace: str, key: str, first: str, args: tuple[str, ...], scope: Scope,
                 checks: list[str]):
    """(the statement calling the kernel for one dtype combination, the header the wrapper
    includes, the locals holding the values it returns): a symbol behind the C ABI (its
    context, views and returned values' locals appended to `checks`), or the stable C++
    kernel template."""
    foreign = decl.foreign_kernel(key)
    if decl.rows is not None:  # generated from the row-wise program (api/stable_rowwise.py)
        kernel = f"::{namespace}::kernels::{rowwise_kernel(decl, key)}"
        return (lambda combo: f"{kernel}<{', '.join(d.cpp for d in combo)}>({', '.join(args)});"), \
            rowwise_header(decl), []
    if foreign is None:
        kernel = f"::{namespace}::kernels::{decl.kernel(key)}"
        return ((lambda combo: f"{kernel}<{', '.join(d.cpp for d in combo)}>({', '.join(args)});"),
                kernel_header(decl, key), [])
    context = scope.fresh("abi")
    index = f"{first}.device().index()"
    stream = f", opwrap::rt::current_cuda_stream({index})" if key == "CUDA" else ""
    checks.append(f"opwrap::rt::abi::Call {context}(kOp, {DEVICE_TYPE}::{key}, {index}{stream});")
    passed, returned = [], []
    params = abi.params(decl)
    for value, p in zip(args, params):
        statements, arg = abi.wrapper_pass(p.kind, value, scope.fresh(f"{p.name}_abi") if p.kind != "value" else "")
        checks.extend(statements)
        passed.append(arg)
    for p in params[len(args):]:  # a pointer per value the kernel returns
        local = scope.fresh(f"{p.name}_abi")
        checks.append(f"{p.c.pointee()} {local}{{}};")
        passed.append(f"&{local}")
        returned.append(local)
    return (lambda combo: f"{context}.check({foreign.symbol_for(combo)}({context}.context(), "
                          f"{', '.join(passed)}));"), f"abi/{decl.ident}.h", returned


def _dtype_check(decl, a: Argument, value: str, dtype_local: dict, scope: Scope, name: str = "") -> list[str]:
    """`value` has its dtype variable's dtypes: the first tensor of a variable declares it (a
    local), the others match it (the full target's messages).  `name`: the C++ naming `value`
    in messages, where not `a`'s name (the first tensor given of an op without a required one)."""
    var = decl.dtype_var(a.name)
    name = name or cpp_string(a.name)
    if var.name in dtype_local:
        local, source = dtype_local[var.name]
        return [f"opwrap::rt::check_same_dtype(kOp, {name}, {value}, {local}, {source});"]
    local = scope.fresh(f"{a.name}_dtype")
    dtype_local[var.name] = (local, name)
    return [f"opwrap::rt::check_dtype_in(kOp, {name}, {value}, {_allowed(var)}, "
            f"{cpp_string(', '.join(d.name for d in var.dtypes))});",
            f"const {SCALAR_TYPE} {local} = {value}.scalar_type();"]


def _allowed(var) -> str:
    return "{" + ", ".join(f"{SCALAR_TYPE}::{d.scalar_type}" for d in var.dtypes) + "}"


def _output_dtype(o, ident: dict[str, str], dispatched: str) -> str:
    """The C++ dtype of return `o` by its rule (`_renders`), as lang/dtype_rules.render_cpp's."""
    rule = o.dtype_rule
    if rule is None:
        return dispatched
    if rule.kind == "dtype":
        return f"{SCALAR_TYPE}::{rule.fixed.scalar_type}"
    value, fallback = ident[rule.names[0]], rule.fallback
    other = "" if not fallback else f"{SCALAR_TYPE}::{DTYPES[fallback].scalar_type}" if fallback in DTYPES else \
        f"{ident[fallback]}.scalar_type()"
    if rule.kind == "given":  # an optional tensor: its dtype where given
        return f"({value}.has_value() && {value}->defined() ? {value}->scalar_type() : {other})"
    if rule.kind == "arg":  # a ScalarType argument, or a ScalarType? one with its fallback
        return f"{value}.value_or({other})" if fallback else value
    return f"{value}.scalar_type()"


def _switch(decl, dtype_local: dict, call) -> list[str]:
    """Nested switches over the dtype variables, as the full target's (KernelCall.switch)."""
    variables_ = decl.variables

    def level(i: int, combo: tuple, indent: str) -> list[str]:
        if i == len(variables_):
            return [indent + call(combo)]
        var = variables_[i]
        local, source = dtype_local[var.name]
        lines = [f"{indent}switch ({local}) {{"]
        for dt in var.dtypes:
            lines.append(f"{indent}  case {SCALAR_TYPE}::{dt.scalar_type}:")
            lines.extend(level(i + 1, combo + (dt,), indent + "    "))
            lines.append(f"{indent}    break;")
        names = cpp_string(", ".join(d.name for d in var.dtypes))
        lines += [f"{indent}  default:",
                  f"{indent}    opwrap::rt::unsupported_dtype(kOp, {source}, {local}, {names});",
                  f"{indent}}}"]
        return lines
    return level(0, (), "")


__all__ = ["TYPES", "Problem", "StableCall", "kernel_header", "plan", "signature_in", "pointwise_problems", "problems",
           "rowwise_header", "rowwise_kernel", "stable_signature"]
