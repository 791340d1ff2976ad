"""CPU kernels: one translation unit per op (or per op and dtype, cwrap's split_types)
with argument checks, output allocation from the shape rule, and dtype dispatch over
exactly the declared dtypes into the hand-written kernel template."""

from __future__ import annotations

from dataclasses import dataclass

from ..api import cpp
from ..schema import BaseType, ListType, OptionalType, is_tensor, unwrap_optional
from ..shapes import cpp_input_checks, cpp_output_shape
from ..dtypes import DTYPES
from .base import Output, Plugin


@dataclass(frozen=True)
class KernelCall:
    """Everything a device plugin needs to call a kernel template for one op."""

    params: str  # wrapper parameter list
    returns: str  # wrapper return type
    checks: tuple[str, ...]  # argument checks, shape contracts, output allocation, contiguity
    kernel_params: str  # the kernel template's parameter list (for split-type declarations)
    kernel_args: str  # the arguments passed to it
    kernel_args_plain: str  # the kernel's parameter names, to forward them unchanged
    epilogue: tuple[str, ...]  # statements after the kernel (write-back of in-place copies)
    result: str  # the return statement, or ""
    dispatch_expr: str  # the ScalarType dispatched on
    dispatch_arg: str  # argument named in the unsupported-dtype error
    needs_empty: bool


def plan_call(decl, namespace: str, device: str) -> KernelCall:
    """Decide, in Python, every statement of the wrapper around a kernel for `device`."""
    s = decl.schema
    op = f"{namespace}::{decl.op_name}"
    device_type = DEVICE_TYPES[device]
    checks: list[str] = [f'constexpr const char* kOp = "{op}";']
    tensors = decl.tensor_inputs
    required = [a for a in tensors if not a.is_optional and not isinstance(a.type, ListType)]
    dtype_names = ", ".join(d.name for d in decl.dtypes)
    dtype_list = "{" + ", ".join(f"at::ScalarType::{d.scalar_type}" for d in decl.dtypes) + "}"
    if required:
        first = required[0]
        dispatch_expr, dispatch_arg = "dtype", first.name
    else:
        dispatch_expr, dispatch_arg = "dtype", decl.return_names[0]

    first_name = required[0].name if required else ""
    for a in tensors:
        if isinstance(a.type, ListType):
            continue
        if a.is_optional:
            checks.append(f"if ({a.name}.has_value() && {a.name}->defined()) {{")
            checks.extend("  " + c for c in device_checks(a.name, first_name, device, f"*{a.name}"))
            if required:
                checks.append(f'  opwrap::rt::check_same_dtype(kOp, "{a.name}", *{a.name}, dtype, "{required[0].name}");')
            checks.append("}")
            continue
        checks.extend(device_checks(a.name, first_name, device))
        if a is required[0]:
            checks.append(f'opwrap::rt::check_dtype_in(kOp, "{a.name}", {a.name}, {dtype_list}, "{dtype_names}");')
            checks.append(f"const at::ScalarType dtype = {a.name}.scalar_type();")
        else:
            checks.append(f'opwrap::rt::check_same_dtype(kOp, "{a.name}", {a.name}, dtype, "{required[0].name}");')
    if required:
        checks.extend(device_guard(required[0].name, device))
    if decl.shape_plan is not None:
        checks.extend(cpp_input_checks(decl.shape_plan, "kOp", s))
    checks.extend(overlap_checks(decl))

    # Outputs: allocated from the one shape rule and the dtype rule.
    outputs, results = [], []
    options_base = f"{required[0].name}.options()" if required else f"at::TensorOptions().device({device_type})"
    for o in decl.outputs():
        name, rule, shape = o.name, o.dtype, o.shape
        if o.aliases is not None:
            results.append(o.aliases)
            continue
        dtype = f"at::ScalarType::{DTYPES[rule].scalar_type}" if rule in DTYPES else f"{rule}.scalar_type()"
        shape_expr = cpp_output_shape(shape) if shape is not None else f"{decl.like}.sizes().vec()"
        checks.append(f"const std::vector<int64_t> {name}_shape = {shape_expr};")
        checks.append(f'opwrap::rt::check_output_shape(kOp, "{name}", {name}_shape, "{_c(shape.text if shape else "like " + decl.like)}");')
        checks.append(f'at::Tensor {name} = opwrap::rt::empty(kOp, "{name}", {name}_shape, {options_base}.dtype({dtype}));')
        outputs.append(name)
        results.append(name)
    if not required:
        checks.append(f"const at::ScalarType dtype = {decl.return_names[0]}.scalar_type();")

    # Inputs as the kernel sees them.
    kernel_args, kernel_params, plain, epilogue = [], [], [], []
    for a in s.arguments:
        is_t = is_tensor(unwrap_optional(a.type)) and not isinstance(a.type, ListType)
        if is_t and decl.contiguous:
            if a.is_write:
                checks.append(f'at::Tensor {a.name}_c = opwrap::rt::contiguous(kOp, "{a.name}", {a.name});')
                epilogue.append(f"opwrap::rt::write_back({a.name}, {a.name}_c);")
            elif a.is_optional:
                checks.append(f'const std::optional<at::Tensor> {a.name}_c = opwrap::rt::contiguous(kOp, "{a.name}", {a.name});')
            else:
                checks.append(f'const at::Tensor {a.name}_c = opwrap::rt::contiguous(kOp, "{a.name}", {a.name});')
            kernel_args.append(f"{a.name}_c")
        else:
            kernel_args.append(cpp.kernel_argument_value(a, a.name))
        kernel_params.append(f"{cpp.kernel_argument_type(a)} {a.name}")
        plain.append(a.name)
    for name in outputs:
        kernel_args.append(name)
        kernel_params.append(f"at::Tensor& {name}")
        plain.append(name)

    if not results:
        result = ""
    elif len(results) == 1:
        result = f"return {results[0]};"
    else:
        result = "return {" + ", ".join(results) + "};"
    params = ", ".join(f"{cpp.argument_type(a)} {a.name}" for a in s.arguments)
    return KernelCall(params, cpp.returns_type(s), tuple(checks), ", ".join(kernel_params), ", ".join(kernel_args), ", ".join(plain),
                      tuple(epilogue), result, dispatch_expr, dispatch_arg, bool(outputs))


DEVICE_TYPES = {"CPU": "c10::DeviceType::CPU", "CUDA": "c10::DeviceType::CUDA"}


def device_checks(arg: str, first: str, device: str, value: str = "") -> list[str]:
    """`arg` (the C++ expression `value`, default the name) is a defined tensor on `device`;
    off the CPU, on the same device as the `first` tensor argument (cuda:0 and cuda:1 do
    not mix).  Shared by every generated wrapper."""
    v = value or arg
    out = [f'opwrap::rt::check_tensor(kOp, "{arg}", {v}, {DEVICE_TYPES[device]});']
    if device != "CPU" and first and arg != first:
        out.append(f'opwrap::rt::check_same_device(kOp, "{arg}", {v}, {first}, "{first}");')
    return out


def device_guard(first: str, device: str) -> list[str]:
    """Off the CPU, outputs are allocated (and inputs copied) on the first tensor's device."""
    return [f"const c10::cuda::CUDAGuard device_guard({first}.device());"] if device != "CPU" else []


def overlap_checks(decl) -> list[str]:
    """Each argument written in place has no self-overlapping elements and shares no memory
    with another tensor input (aten's assert_no_internal_overlap / assert_no_overlap)."""
    out = []
    tensors = [a for a in decl.tensor_inputs if not isinstance(a.type, ListType)]
    for w in (a for a in tensors if a.is_write and not a.is_optional):
        out.append(f'opwrap::rt::check_writable(kOp, "{w.name}", {w.name});')
        for a in tensors:
            if a is w:
                continue
            if a.is_optional:
                out.append(f'if ({a.name}.has_value() && {a.name}->defined()) '
                           f'opwrap::rt::check_no_overlap(kOp, "{w.name}", {w.name}, "{a.name}", *{a.name});')
            else:
                out.append(f'opwrap::rt::check_no_overlap(kOp, "{w.name}", {w.name}, "{a.name}", {a.name});')
    return out


def _c(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"')


def dispatch_key(decl, device: str) -> str:
    """Ops with no tensor input cannot be dispatched on a device; they are registered for
    every backend (CompositeExplicitAutograd), as aten registers factory functions."""
    return device if decl.tensor_inputs else "CompositeExplicitAutograd"


def check_supported(decl, lib, diag, plugin: str) -> bool:
    ok = True
    s = decl.schema
    for a in s.arguments:
        try:
            cpp.argument_type(a)
        except cpp.UnsupportedType:
            diag.error(decl.func_loc, f"argument '{a.name}' of type {a.type} is not supported by the {plugin} emitter")
            ok = False
    for r, name in zip(s.returns, decl.return_names):
        if r.type != BaseType("Tensor"):
            diag.error(decl.func_loc, f"return '{name}' of type {r.type} is not supported by the {plugin} emitter; "
                       "kernels return tensors")
            ok = False
            continue
        if s.aliased_argument(r) is not None:
            if decl.shape_of(name) is not None:
                diag.error(decl.shape_of(name).loc, f"return '{name}' aliases an input; it takes that input's shape")
            continue
        if r.alias is not None:
            diag.error(decl.func_loc, f"return '{name}' has an alias annotation that matches no argument")
            ok = False
        elif decl.shape_of(name) is None and not decl.like:
            diag.error(decl.field_loc("shape") if decl.shapes else decl.loc,
                       f"return '{name}' needs a shape rule: add 'shape: {{{name}: [...]}}' or 'like: <input>'")
            ok = False
    if not decl.dtypes:
        diag.error(decl.loc, "missing 'dtypes': list the dtypes the kernel supports, e.g. [float32, float64]")
        ok = False
    tensors = decl.tensor_inputs
    required = [a for a in tensors if not a.is_optional and not isinstance(a.type, ListType)]
    if tensors and not required:
        diag.error(decl.func_loc, "an op needs a required Tensor argument to dispatch on")
        ok = False
    if not tensors and s.returns:
        rule = decl.output_dtype(decl.return_names[0])
        if rule not in DTYPES:
            diag.error(decl.loc, "an op with no Tensor input needs 'dtype: {<return>: <dtype>}'")
            ok = False
        elif DTYPES[rule] not in decl.dtypes:
            diag.error(decl.field_loc("dtype"), f"output dtype '{rule}' is not among the declared dtypes")
    if s.base_name.endswith("_") and not s.is_inplace:
        diag.error(decl.func_loc, f"'{s.base_name}' ends in '_' (in place) but does not mutate 'self': "
                   "declare 'Tensor(a!) self'")
    if s.is_inplace and not (len(s.returns) == 1 and s.aliased_argument(s.returns[0]) is s.argument("self")):
        diag.error(decl.func_loc, f"in-place op '{s.base_name}' must return 'self' as 'Tensor(a!)'")
    return ok


class CpuKernels(Plugin):
    name = "cpu"

    def validate(self, decl, lib, diag):
        kernel = decl.kernel("CPU")
        if not kernel:  # none, or generated by another plugin (pointwise expressions)
            return
        check_supported(decl, lib, diag, "CPU")
        header = lib.config.path("kernels") / decl.header
        if not header.is_file():
            diag.error(decl.field_loc("header") if decl.extra_field("header") else decl.field_loc("kernels"),
                       f"kernel header '{lib.config.kernels}/{decl.header}' not found",
                       f"write `template <typename scalar_t> void {kernel}(...)` there, or name another file with 'header:'")

    def emit(self, lib, ctx):
        ns = lib.namespace
        for d in lib.declarations:
            kernel = d.kernel("CPU")
            if not kernel:
                continue
            call = plan_call(d, ns, "CPU")
            split = d.split_types
            cases = []
            for dt in d.dtypes:
                if split:
                    fn = f"{d.ident}_cpu_{dt.name}"
                else:
                    fn = f"::{ns}::kernels::{kernel}<{dt.cpp}>"
                cases.append((dt.scalar_type, f"{fn}({call.kernel_args});"))
            common = dict(namespace=ns, decl=d, call=call, kernel=kernel, header=d.header,
                          key=dispatch_key(d, "CPU"), cases=cases, split=split,
                          dtype_names=", ".join(dt.name for dt in d.dtypes))
            template = "cpu/op.cpp.j2"
            yield Output(f"cpu/{d.ident}.cpp", ctx.render(template, **common), (d.path, ctx.template_source(template)),
                         unit="cpu")
            if split:
                t2 = "cpu/op_dtype.cpp.j2"
                for dt in d.dtypes:
                    yield Output(f"cpu/{d.ident}_{dt.name}.cpp",
                                 ctx.render(t2, **common, dtype=dt, fn=f"{d.ident}_cpu_{dt.name}"),
                                 (d.path, ctx.template_source(t2)))
