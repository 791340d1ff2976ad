"""The generated wrapper around a hand-written kernel, for any device: which checks it
makes, what it allocates, how it calls the kernel and what it returns.

Every device plugin (cpu, cuda) and the pointwise plugin read this module; no plugin
imports another.  Every name in the generated code is decided here: the wrapper's
identifiers come from one `Scope` (codegen/core/names.py), so an argument named `dtype`,
`default` or `kOp` cannot clash with a keyword or a local, and the symbols (`<op>_cpu`,
the split-types instantiations) come from `symbols`.

The kernel's signature is `kernel_signature`: the schema's arguments as the type table
(codegen/api/types.py) gives them to the kernel, then one `at::Tensor&` per output the
wrapper allocates; its return type is the tuple of the returns it makes itself
(`OutputSpec.made_by == "kernel"`), `void` when none.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..lang.schema import (Argument, BaseType, FunctionSchema, ListType, OptionalType, is_list_of_tensors, is_tensor,
                      unwrap_optional)
from ..lang.dtype_rules import DTypeVar, render_cpp as render_rule
from ..lang.shapes import (cpp_input_checks, cpp_list_output_checks, cpp_output_shape, is_list_output, render_cpp,
                      variables)
from . import abi, types
from .cpp import returns_type
from .types import TENSOR, Binding, CType
from .outputs import kernel_outputs, wrapper_outputs
from ..core.names import Scope, cpp_ident
from ..core.literals import cpp_string
from ..core.targets import Device


# Locals the wrapper templates declare themselves (templates/common/kernel_body.j2), `m` of
# TORCH_LIBRARY_IMPL, and the device guard a CUDA wrapper declares (device_guard, below).
TEMPLATE_LOCALS = ("kOp", "m", "device_guard")


def is_single_tensor(a: Argument) -> bool:
    """`Tensor`, `Tensor?`, `Tensor(a!)`: one tensor (not a list)."""
    return is_tensor(unwrap_optional(a.type))


def tensor_arguments(schema: FunctionSchema) -> list[Argument]:
    """The arguments the dispatcher reads dispatch keys from: tensors, optional tensors, lists."""
    return [a for a in schema.arguments if is_single_tensor(a) or is_list_of_tensors(a)]


def dispatch_key(decl, device: Device) -> str:
    """Ops with no tensor argument cannot be dispatched on a device; they are registered for
    every backend (CompositeExplicitAutograd), as aten registers factory functions."""
    return device.key if tensor_arguments(decl.schema) else "CompositeExplicitAutograd"


@dataclass(frozen=True)
class Symbols:
    """The C++ names of one op's generated functions for one device."""

    wrapper: str  # the function `m.impl` registers: `<ident>_cpu`
    kernel: str  # the kernel template, qualified: `::ns::kernels::name`
    split: tuple[tuple[str, str], ...]  # (dtype names joined by '_', the instantiation's function)

    def instantiation(self, combo) -> str:
        """The kernel template instantiated for one combination of the dtype variables."""
        return f"{self.kernel}<{', '.join(d.cpp for d in combo)}>"


def combo_key(combo) -> str:
    return "_".join(d.name for d in combo)


def symbols(decl, namespace: str, device: Device) -> Symbols:
    suffix = device.ident
    return Symbols(wrapper=f"{decl.ident}_{suffix}", kernel=f"::{namespace}::kernels::{kernel_function(decl, device)}",
                   split=tuple((combo_key(c), f"{decl.ident}_{suffix}_{combo_key(c)}")
                               for c in decl.dtype_combinations()))


def template_header(decl) -> str:
    """`template <typename scalar_t, ...>`: one type parameter per dtype variable."""
    return "template <" + ", ".join(f"typename {v.name}" for v in decl.variables) + ">"


def kernel_return_type(decl) -> str:
    return types.tuple_of([types.kernel_returned_type(r) for _, r, _ in kernel_outputs(decl)])


def kernel_binding(a: Argument, name: str) -> Binding:
    """Argument `a` as the kernel's parameter `name` (the type table's kernel type)."""
    return Binding(name, CType.parse(types.kernel_type(a)), a.name)


def kernel_parameters(decl, scope: Scope | None = None) -> list[Binding]:
    """The kernel's parameters, the arguments first, then the outputs the wrapper allocates;
    named in `scope` where given (a generated kernel's, whose template declares names too)."""
    scope = scope or Scope()
    params = [kernel_binding(a, scope.name(a.name)) for a in decl.schema.arguments]
    for _, o in wrapper_outputs(decl):
        params.append(Binding(scope.fresh(o.name), TENSOR.ref(), o.name))
    return params


def _kernel_parameters(decl) -> list[str]:
    return [b.decl() for b in kernel_parameters(decl)]


def kernel_signature(decl, device: str = "CPU") -> str:
    """The exact declaration a kernel header must have for `decl` on `device`:
    `template <typename scalar_t> RET name(PARAMS)` (one type parameter per dtype variable)."""
    return (f"{template_header(decl)} {kernel_return_type(decl)} {decl.kernel(device)}"
            f"({', '.join(_kernel_parameters(decl))})")


@dataclass(frozen=True)
class KernelCall:
    """Everything a device template needs to lay out the wrapper of one op."""

    symbols: Symbols
    params: str  # wrapper parameter list
    returns: str  # wrapper return type
    checks: tuple[str, ...]  # argument checks, shape contracts, output allocation, contiguity
    kernel_params: str  # the kernel template's parameter list (for split-type declarations)
    kernel_returns: str  # the kernel's return type
    kernel_args: str  # the arguments passed to it
    kernel_args_plain: str  # the kernel's parameter names, to forward them unchanged
    kernel_result: str  # the local holding what the kernel returned ("": it returns void)
    epilogue: tuple[str, ...]  # statements after the kernel (write-back, checks of what it returned)
    result: str  # the return statement, or ""
    # Per dtype variable (the primary first): the C++ ScalarType dispatched on, the argument
    # named in its unsupported-dtype error (a C++ string literal), and the variable.
    dispatch: tuple[tuple[str, str, DTypeVar], ...]
    needs_empty: bool
    includes: tuple[str, ...] = ()  # headers the wrapper needs beyond the template's own
    # A kernel behind the C ABI (codegen/api/abi.py): the statements making the call's context
    # and views before the dispatch, the arguments of each symbol, what follows the dispatch.
    abi_context: str = ""
    abi_setup: tuple[str, ...] = ()
    abi_args: str = ""
    abi_after: tuple[str, ...] = ()

    def switch(self, function_for) -> list[str]:
        """The dtype dispatch: nested `switch`es over the variables, each case calling
        `function_for(combination)` (a kernel instantiation) with the kernel's arguments; an
        undeclared dtype is the op's error naming the argument and the declared dtypes."""
        def level(i: int, combo: tuple, indent: str) -> list[str]:
            if i == len(self.dispatch):
                return [indent + self.call(function_for(combo))]
            expr, arg, var = self.dispatch[i]
            lines = [f"{indent}switch ({expr}) {{"]
            for dt in var.dtypes:
                lines.append(f"{indent}  case at::ScalarType::{dt.scalar_type}:")
                lines.extend(level(i + 1, combo + (dt,), indent + "    "))
                lines.append(f"{indent}    break;")
            names = cpp_string(", ".join(d.name for d in var.dtypes))
            lines += [f"{indent}  default:", f"{indent}    opwrap::rt::unsupported_dtype(kOp, {arg}, {expr}, {names});",
                      f"{indent}}}"]
            return lines
        return level(0, (), "")

    def call(self, function: str) -> str:
        """The statement calling `function` (a kernel instantiation, or a foreign kernel's
        symbol) with the kernel's arguments."""
        if self.abi_context:
            return f"{self.abi_context}.check({function}({self.abi_context}.context(), {self.abi_args}));"
        if self.kernel_result:
            return f"{self.kernel_result}.emplace({function}({self.kernel_args}));"
        return f"{function}({self.kernel_args});"

    def forward(self, function: str) -> str:
        """The body of a split-types instantiation: forward its parameters to `function`."""
        call = f"{function}({self.kernel_args_plain});"
        return f"return {call}" if self.kernel_returns != "void" else call


def plan_call(decl, namespace: str, device: Device) -> KernelCall:
    """Decide, in Python, every statement of the wrapper around a kernel for `device`: one
    phase per part of the wrapper, in the order of its statements (the dispatch tensor, the
    arguments' checks, the shape rule's names, the outputs, the kernel's inputs, what the
    kernel returns, the call behind the C ABI).  Every identifier comes from one Scope, taken
    in that order."""
    s = decl.schema
    scope = Scope(TEMPLATE_LOCALS)
    ident = {a.name: scope.name(a.name) for a in s.arguments}
    dtypes = _DtypeLocals(decl, scope, dispatched=scope.fresh("dtype"))
    first = _dispatch_tensor(decl, ident, scope, dtypes, device)
    argument_checks = _argument_checks(decl, ident, first, dtypes, device)
    shape = _shape_names(decl, ident, scope)
    outputs = _outputs(decl, ident, shape.names, first, dtypes, device)
    index_checks = _index_checks(decl, shape.names, device)
    inputs = _kernel_inputs(decl, ident, scope, outputs.allocated)
    made = _kernel_result(decl, ident, shape.names, dtypes.dispatched, scope, device)
    foreign = _abi_call(decl, device, first.value, inputs.args, made.local, scope)

    checks = (f"constexpr const char* kOp = {cpp_string(f'{namespace}::{decl.op_name}')};", *first.checks,
              *argument_checks, *shape.checks, *outputs.checks, *overlap_checks(decl, ident), *index_checks,
              *inputs.checks, *made.checks)
    results = list(outputs.results)
    for i, value in made.results:
        results[i] = value
    includes = {*outputs.includes, *foreign.includes}
    if index_checks:
        includes.add("opwrap/runtime/index.h")
    if any(o.dtype_rule is not None and o.dtype_rule.kind == "promote" for o in decl.outputs()):
        includes.add("opwrap/runtime/dtype_rules.h")
    # With no tensor to read it from, the primary dtype's errors name the first return.
    unread = None if first.value else (decl.return_names[0] if decl.return_names else decl.name)
    return KernelCall(
        symbols=symbols(decl, namespace, device),
        params=", ".join(Binding(ident[a.name], CType.parse(types.dispatcher_type(a)), a.name).decl()
                         for a in s.arguments),
        returns=returns_type(s), checks=checks,
        kernel_params=", ".join(inputs.params), kernel_returns=kernel_return_type(decl),
        kernel_args=", ".join(inputs.args), kernel_args_plain=", ".join(inputs.plain),
        kernel_result=made.local, epilogue=(*inputs.epilogue, *made.epilogue), result=_return_statement(results),
        dispatch=dtypes.dispatch(unread), needs_empty=bool(outputs.allocated), includes=tuple(sorted(includes)),
        abi_context=foreign.context, abi_setup=foreign.setup, abi_args=", ".join(foreign.args),
        abi_after=foreign.after)


class _DtypeLocals:
    """Which C++ local holds each dtype variable's value at run time, and which argument or
    return its errors name (the tensor it was read from).  The phases fill it in as they write
    the statements that read the variables: the one piece of plan_call's state that is not a
    frozen record."""

    def __init__(self, decl, scope: Scope, dispatched: str):
        self.decl, self.scope = decl, scope
        self.dispatched = dispatched  # the primary variable's local: the dtype the op dispatches on
        self.primary = decl.variables[0]
        self.value: dict[str, str] = {self.primary.name: dispatched}
        self.source: dict[str, str] = {}
        self.spelled: dict[str, str] = {}  # a source named at run time: its C++ expression

    def declare(self, var: str, local: str, source: str, spelled: str = "") -> None:
        """`var` is read into `local` from the tensor `source` names in messages; `spelled`:
        the C++ expression of that name where it is known only at run time (the first tensor
        given: `xs[2]`)."""
        self.value[var], self.source[var] = local, source
        if spelled:
            self.spelled[source] = spelled

    def named(self, source: str) -> str:
        """The C++ expression that names `source` in messages."""
        return self.spelled.get(source) or cpp_string(source)

    def read(self, var: str) -> str | None:
        """The local of a variable already read from a tensor; None before."""
        return self.value.get(var) if var in self.source else None

    def check(self, a: Argument, value: str, first_name: str) -> list[str]:
        """`value` (one tensor of argument `a`) has the dtype of its variable: the first
        tensor of a variable declares it (its value is checked against the variable's
        list), the others are checked against that."""
        var = self.decl.dtype_var(a.name)
        known = self.value.get(var.name)
        if known is not None and (var.name != self.primary.name or a.name != first_name):
            if var.name in self.source:
                return [f"opwrap::rt::check_same_dtype(kOp, {cpp_string(a.name)}, {value}, {known}, "
                        f"{self.named(self.source[var.name])});"]
        local = known or self.scope.fresh(f"{a.name}_dtype")
        self.declare(var.name, local, a.name)
        return [f"opwrap::rt::check_dtype_in(kOp, {cpp_string(a.name)}, {value}, {_dtype_list(var)}, "
                f"{cpp_string(_dtype_names(var))});",
                f"const at::ScalarType {local} = {value}.scalar_type();"]

    def dispatch(self, unread: str | None) -> tuple[tuple[str, str, DTypeVar], ...]:
        """`KernelCall.dispatch`; `unread`: the name the primary's errors give when no tensor
        declared it (None: leave it as the checks left it)."""
        if unread is not None:
            self.source.setdefault(self.primary.name, unread)
        return tuple((self.value[v.name], self.named(self.source.get(v.name, v.owner)), v)
                     for v in self.decl.variables)


@dataclass(frozen=True)
class _DispatchTensor:
    """The tensor the op dispatches on and allocates like: a C++ expression, and the name its
    errors give; both "" for an op with no tensor argument."""

    value: str
    name: str
    checks: tuple[str, ...] = ()  # reading it, when it is the first tensor given
    spelled: str = ""  # the C++ expression of its name where only the run knows it (the first tensor given)

    @property
    def name_cpp(self) -> str:
        """The C++ expression that names it in messages."""
        return self.spelled or cpp_string(self.name)


def _dispatch_tensor(decl, ident: dict[str, str], scope: Scope, dtypes: _DtypeLocals,
                     device: Device) -> _DispatchTensor:
    """Decides the dispatch tensor: the first required tensor argument; else the first tensor
    given at run time (checked here, and the primary dtype read from it); else none."""
    s = decl.schema
    required = [a for a in s.arguments if is_single_tensor(a) and not a.is_optional]
    if required:
        return _DispatchTensor(value=ident[required[0].name], name=required[0].name)
    tensors = tensor_arguments(s)
    if not tensors:
        return _DispatchTensor(value="", name="")
    primary, dtype = dtypes.primary, dtypes.dispatched
    given_local, first = scope.fresh("given"), scope.fresh("first")
    # Its name in messages is the run's: the optional tensor's, or the list and the element's (`xs[2]`).
    first_name, spelled = "the first tensor given", f"{given_local}.name.c_str()"
    given = ", ".join(ident[a.name] for a in tensors)
    names = ", ".join(cpp_string(a.name) for a in tensors)
    dtypes.declare(primary.name, dtype, first_name, spelled)
    return _DispatchTensor(value=first, name=first_name, spelled=spelled, checks=(
        f"const opwrap::rt::Given {given_local} = opwrap::rt::first_given(kOp, {{{names}}}, {given});",
        f"const at::Tensor& {first} = {given_local}.tensor;",
        *device_checks(first_name, first, "", "", device, name_cpp=spelled),
        f"opwrap::rt::check_dtype_in(kOp, {spelled}, {first}, {_dtype_list(primary)}, "
        f"{cpp_string(_dtype_names(primary))});",
        f"const at::ScalarType {dtype} = {first}.scalar_type();"))


def _argument_checks(decl, ident: dict[str, str], first: _DispatchTensor, dtypes: _DtypeLocals,
                     device: Device) -> tuple[str, ...]:
    """Decides the checks of the tensor arguments (defined, on the dispatch tensor's device,
    of their dtype variable's dtypes), then the device guard.  The dispatch tensor first (it
    declares the primary dtype), then the others in schema order: an optional tensor may come
    before it (`Tensor? ggI, Tensor gO`).  Variables owned by a required tensor are read from
    it; one read from an optional tensor or a list is checked where given."""
    s = decl.schema
    singles = [a for a in s.arguments if is_single_tensor(a)]
    required = [a for a in singles if not a.is_optional]
    outs = {a.name for a in decl.out_arguments}
    checks: list[str] = []
    for a in sorted(required, key=lambda a: a is not required[0]):
        name = ident[a.name]
        checks.extend(device_checks(a.name, name, first.value, first.name_cpp, device))
        if a.name not in outs:  # an out= argument's dtype is the output's (see _outputs)
            checks.extend(dtypes.check(a, name, first.name))
    for a in s.arguments:
        if is_list_of_tensors(a):
            checks.extend(_list_checks(a, ident[a.name], first, dtypes, device))
    for a in singles:
        if not a.is_optional:
            continue
        name = ident[a.name]
        var = decl.dtype_var(a.name)
        owns = first.value and var.owner == a.name and var.absent is not None  # its own: its dtype, else absent
        if owns:
            local = dtypes.scope.fresh(f"{a.name}_dtype")
            dtypes.declare(var.name, local, a.name)
            checks.append(f"const at::ScalarType {local} = {name}.has_value() && {name}->defined() ? "
                          f"{name}->scalar_type() : at::ScalarType::{var.absent.scalar_type};")
        checks.append(f"if ({name}.has_value() && {name}->defined()) {{")
        checks.extend("  " + c for c in device_checks(a.name, f"*{name}", first.value, first.name_cpp, device))
        if owns:
            checks.append(f"  opwrap::rt::check_dtype_in(kOp, {cpp_string(a.name)}, *{name}, {_dtype_list(var)}, "
                          f"{cpp_string(_dtype_names(var))});")
        elif first.value:
            checks.extend("  " + c for c in dtypes.check(a, f"*{name}", first.name))
        checks.append("}")
    if first.value:
        checks.extend(device_guard(first.value, device))
    return tuple(checks)


def _list_checks(a: Argument, name: str, first: _DispatchTensor, dtypes: _DtypeLocals, device: Device) -> list[str]:
    """A Tensor[] argument's tensors are on the device, of its variable's dtype; a list whose
    variable no tensor declared declares it (the dtype of its first given tensor)."""
    var = dtypes.decl.dtype_var(a.name)
    checks = []
    known = dtypes.read(var.name)
    if known is None:
        known = dtypes.scope.fresh(f"{a.name}_dtype")
        dtypes.declare(var.name, known, f"{a.name}[0]")
        checks.append(f"const at::ScalarType {known} = opwrap::rt::list_dtype({name}, "
                      f"at::ScalarType::{var.dtypes[0].scalar_type});")
    checks.append(f"opwrap::rt::check_list(kOp, {cpp_string(a.name)}, {name}, {device.device_type}, "
                  f"{first.value or 'at::Tensor()'}, {first.name_cpp}, {_dtype_list(var)}, "
                  f"{cpp_string(_dtype_names(var))}, {known}, {dtypes.named(dtypes.source[var.name])});")
    return checks


@dataclass(frozen=True)
class _ShapeNames:
    """The shape rule's names as C++ expressions, and the checks of its input contracts."""

    names: dict[str, str]
    checks: tuple[str, ...]


def _shape_names(decl, ident: dict[str, str], scope: Scope) -> _ShapeNames:
    """Decides what the shape rule's names are in C++: arguments (SymInts guarded to their
    values), optional tensors' bound values, and the dimension variables (fresh locals); and
    the checks that the inputs meet the rule."""
    s = decl.schema
    names: dict[str, str] = {}
    for a in s.arguments:
        t = unwrap_optional(a.type)
        symint = t == BaseType("SymInt") or (isinstance(t, ListType) and t.elem == BaseType("SymInt"))
        names[a.name] = types.to_kernel(a, ident[a.name]) if symint else ident[a.name]
    if decl.shape_plan is None:
        return _ShapeNames(names=names, checks=())
    for a in s.arguments:
        if is_single_tensor(a) and a.is_optional:
            names[a.name + "?"] = scope.fresh(ident[a.name] + "_")
    for v in sorted(variables(decl.shape_plan)):
        if s.argument(v) is None:
            names[v] = scope.fresh(v)
    return _ShapeNames(names=names, checks=tuple(cpp_input_checks(decl.shape_plan, "kOp", s, names)))


@dataclass(frozen=True)
class _Output:
    """How the wrapper makes one return."""

    checks: tuple[str, ...]
    result: str  # what the wrapper returns for it ("": what the kernel returned, see _kernel_result)
    allocated: str = ""  # the tensor it allocated and passes to the kernel
    includes: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Outputs:
    """The returns as the wrapper makes them, in schema order."""

    checks: tuple[str, ...]
    allocated: tuple[str, ...]  # the tensors it allocates, passed to the kernel after the arguments
    results: tuple[str, ...]  # per return, what the wrapper returns ("": made by the kernel)
    includes: tuple[str, ...]


def _outputs(decl, ident: dict[str, str], names: dict[str, str], first: _DispatchTensor, dtypes: _DtypeLocals,
             device: Device) -> _Outputs:
    """Decides how each return is made: allocated from the one shape rule and the dtype rule,
    an out= argument resized, or left to the kernel; and, for an op with no tensor argument,
    the dtype it dispatches on (its first allocated output's, else the first declared)."""
    made_at = {i for i, _, _ in kernel_outputs(decl)}
    options = f"{first.value}.options()" if first.value else f"at::TensorOptions().device({device.device_type})"
    made = [_Output(checks=_owned_dtype(decl, o, ident, dtypes)[0], result="") if i in made_at
            else _wrapper_output(decl, o, ident, names, dtypes, options) for i, o in enumerate(decl.outputs())]
    checks = [c for m in made for c in m.checks]
    allocated = tuple(m.allocated for m in made if m.allocated)
    if not first.value:
        checks.append(_unread_dtype(decl, allocated, dtypes.dispatched))
    return _Outputs(checks=tuple(checks), allocated=allocated, results=tuple(m.result for m in made),
                    includes=tuple(h for m in made for h in m.includes))


def _unread_dtype(decl, allocated: tuple[str, ...], dtype: str) -> str:
    """The dispatch dtype of an op with no tensor argument: its first allocated output's, else
    (nothing to take a dtype from) the first declared dtype."""
    if allocated:
        return f"const at::ScalarType {dtype} = {allocated[0]}.scalar_type();"
    all_outputs = decl.outputs()
    rule = all_outputs[0].dtype_rule if all_outputs else None
    dt = rule.fixed if rule is not None and rule.fixed else decl.dtypes[0]
    return f"const at::ScalarType {dtype} = at::ScalarType::{dt.scalar_type};"


def _owned_dtype(decl, o, ident: dict[str, str], dtypes: _DtypeLocals) -> tuple[tuple[str, ...], str]:
    """The dtype of return `o` (its rule's value, else the dispatch dtype) and, where the return
    declares a dtype variable, the statements that hold it in a local checked against the
    variable's list: the kernel is instantiated for it, whether the wrapper or the kernel
    makes the return."""
    out_dtype = _output_dtype(o, ident, dtypes.dispatched)
    owned = dict(decl.dtype_owners).get(o.name)
    if not owned:
        return (), out_dtype
    var = decl.variable(owned)
    local = dtypes.scope.fresh(f"{o.name}_dtype")
    dtypes.declare(owned, local, o.name)
    return (f"const at::ScalarType {local} = {out_dtype};",
            f"opwrap::rt::check_output_dtype_in(kOp, {cpp_string(o.name)}, {local}, "
            f"{cpp_string(o.dtype_rule.text if o.dtype_rule else '')}, {_dtype_list(var)}, "
            f"{cpp_string(_dtype_names(var))});"), local


def _wrapper_output(decl, o, ident: dict[str, str], names: dict[str, str], dtypes: _DtypeLocals,
                    options: str) -> _Output:
    """One return the wrapper makes: its dtype (a return that declares a dtype variable: its
    rule's value, checked against the variable's list), then an argument it writes, or a new
    tensor of the shape rule (or of the `like:` argument's shape)."""
    scope = dtypes.scope
    owned_checks, out_dtype = _owned_dtype(decl, o, ident, dtypes)
    checks = list(owned_checks)
    if o.made_by == "alias":
        return _aliased_output(decl, o, ident, names, scope, out_dtype, checks)
    out = scope.fresh(o.name)
    shape_var = scope.fresh(f"{o.name}_shape")
    shape_expr = cpp_output_shape(o.shape, names) if o.shape is not None else f"{ident[decl.like]}.sizes().vec()"
    rule_text = o.shape.text if o.shape is not None else "like " + decl.like
    checks.append(f"const std::vector<int64_t> {shape_var} = {shape_expr};")
    checks.append(f"opwrap::rt::check_output_shape(kOp, {cpp_string(o.name)}, {shape_var}, {cpp_string(rule_text)});")
    checks.append(f"at::Tensor {out} = opwrap::rt::empty(kOp, {cpp_string(o.name)}, {shape_var}, "
                  f"{options}.dtype({out_dtype}));")
    return _Output(checks=tuple(checks), result=out, allocated=out)


def _aliased_output(decl, o, ident: dict[str, str], names: dict[str, str], scope: Scope, out_dtype: str,
                    checks: list[str]) -> _Output:
    """A return that is an argument the op writes, returned as it is; an out= argument is
    checked for the output's dtype and resized to the shape rule, as at::native::resize_output
    does."""
    arg = ident[o.aliases]
    if o.aliases not in {a.name for a in decl.out_arguments}:
        return _Output(checks=tuple(checks), result=arg)
    checks = [*checks, f"opwrap::rt::check_out_dtype(kOp, {cpp_string(o.aliases)}, {arg}, {out_dtype});"]
    if o.shape is None and not decl.like:
        return _Output(checks=tuple(checks), result=arg)
    shape_var = scope.fresh(f"{o.aliases}_shape")
    shape_expr = cpp_output_shape(o.shape, names) if o.shape is not None else f"{ident[decl.like]}.sizes().vec()"
    checks.append(f"const std::vector<int64_t> {shape_var} = {shape_expr};")
    checks.append(f"opwrap::rt::check_output_shape(kOp, {cpp_string(o.aliases)}, {shape_var}, "
                  f"{cpp_string(o.shape.text if o.shape is not None else 'like ' + decl.like)});")
    checks.append(f"opwrap::rt::resize_output(kOp, {cpp_string(o.aliases)}, {arg}, {shape_var});")
    return _Output(checks=tuple(checks), result=arg, includes=("opwrap/runtime/out.h",))


@dataclass(frozen=True)
class _KernelInputs:
    """The kernel's arguments, as the wrapper passes them: the schema's, then the outputs it
    allocated."""

    args: tuple[str, ...]  # the expressions passed (contiguous copies where the declaration asks)
    params: tuple[str, ...]  # the kernel's parameters, `type name` (for the split-types declarations)
    plain: tuple[str, ...]  # their names, forwarded unchanged
    checks: tuple[str, ...]  # the contiguous copies
    epilogue: tuple[str, ...]  # written arguments computed in a copy, written back


def _kernel_inputs(decl, ident: dict[str, str], scope: Scope, allocated: tuple[str, ...]) -> _KernelInputs:
    """Decides the inputs as the kernel sees them: converted to its types, or, for a
    `contiguous:` declaration, each tensor as a contiguous copy (a written one is copied back
    after the kernel when it was not contiguous)."""
    args, params, plain, checks, epilogue = [], [], [], [], []
    for a in decl.schema.arguments:
        name = ident[a.name]
        if decl.contiguous and isinstance(a.type, ListType) and a.type.elem == BaseType("Tensor"):
            # a Tensor[]'s elements contiguous as a Tensor's: copies where they are not, and
            # a written list's copies written back
            c = scope.fresh(f"{name}_c")
            checks.append(f"const opwrap::rt::ContiguousList {c}(kOp, {cpp_string(a.name)}, {name});")
            if a.is_write:
                epilogue.append(f"{c}.write_back({name});")
            args.append(f"{c}.list()")
        elif is_single_tensor(a) and decl.contiguous:
            c = scope.fresh(f"{name}_c")
            local_type = TENSOR.optional() if a.is_optional else TENSOR
            if a.is_write:
                checks.append(f"{local_type} {c} = opwrap::rt::contiguous(kOp, {cpp_string(a.name)}, {name});")
                epilogue.append(f"opwrap::rt::write_back({name}, {c});")
            else:
                checks.append(f"{local_type.const()} {c} = opwrap::rt::contiguous(kOp, {cpp_string(a.name)}, {name});")
            args.append(c)
        else:
            args.append(types.to_kernel(a, name))
        params.append(kernel_binding(a, name).decl())
        plain.append(name)
    for name in allocated:
        args.append(name)
        params.append(Binding(name, TENSOR.ref(), name).decl())
        plain.append(name)
    return _KernelInputs(args=tuple(args), params=tuple(params), plain=tuple(plain), checks=tuple(checks),
                         epilogue=tuple(epilogue))


@dataclass(frozen=True)
class _KernelResult:
    """What the kernel returns, and how the wrapper takes it."""

    local: str  # the std::optional holding it ("": the kernel returns void)
    checks: tuple[str, ...]  # its declaration
    epilogue: tuple[str, ...]  # the checks of what it returned
    results: tuple[tuple[int, str], ...]  # (index of the return, its value as the dispatcher returns it)


def _kernel_result(decl, ident: dict[str, str], names: dict[str, str], dtype: str, scope: Scope,
                   device: Device) -> _KernelResult:
    """Decides how the returns the kernel makes are taken: held in one local, checked
    (device; dtype where the declaration has a rule) and converted to the dispatcher's return
    type."""
    made = kernel_outputs(decl)
    if not made:
        return _KernelResult(local="", checks=(), epilogue=(), results=())
    local = scope.fresh("kernel_result")
    epilogue: list[str] = []
    results = []
    for k, (i, r, o) in enumerate(made):
        value = f"*{local}" if len(made) == 1 else f"std::get<{k}>(*{local})"
        epilogue.extend(_result_checks(decl, r, o, value, ident, names, dtype, device))
        results.append((i, types.from_kernel(r, f"std::move({value})")))
    held = CType.parse(kernel_return_type(decl)).optional()
    return _KernelResult(local=local, checks=(f"{held} {local};",),
                         epilogue=tuple(epilogue), results=tuple(results))


def _result_checks(decl, r, o, value: str, ident: dict[str, str], names: dict[str, str], dtype: str,
                   device: Device) -> list[str]:
    """A tensor the kernel returned (`value`) is on the device, of the return's dtype where its
    declaration has a rule; a Tensor[] return with a shape rule has the rule's length, shapes
    and dtype (the fake kernel makes exactly these tensors)."""
    if not (unwrap_optional(r.type) == BaseType("Tensor") or r.type == ListType(BaseType("Tensor"))):
        return []
    checks = []
    if not isinstance(r.type, OptionalType):
        checks.append(f"opwrap::rt::check_result(kOp, {cpp_string(o.name)}, {value}, {device.device_type});")
    explicit = o.name in dict(decl.dtype_rules) or decl.like
    if explicit and o.dtype_rule is not None and r.type == BaseType("Tensor"):
        checks.append(f"opwrap::rt::check_result_dtype(kOp, {cpp_string(o.name)}, {value}, "
                      f"{_output_dtype(o, ident, dtype)});")
    if is_list_output(o.shape) and r.type == ListType(BaseType("Tensor")):
        checks.extend(cpp_list_output_checks(o.shape, f"({value})", names))
        checks.append(f"opwrap::rt::check_result_dtype(kOp, {cpp_string(o.name)}, {value}, "
                      f"{_output_dtype(o, ident, dtype)});")
    return checks


@dataclass(frozen=True)
class _AbiCall:
    """The call of a kernel behind the C ABI (codegen/api/abi.py); empty for a C++ kernel."""

    context: str = ""  # the local holding the call's context
    setup: tuple[str, ...] = ()  # the context and the views, before the dispatch
    args: tuple[str, ...] = ()  # the arguments of each symbol
    after: tuple[str, ...] = ()  # what follows the dispatch
    includes: tuple[str, ...] = ()


def _abi_call(decl, device: Device, first: str, kernel_args: tuple[str, ...], kernel_result: str,
              scope: Scope) -> _AbiCall:
    """Decides how a kernel behind the C ABI is called (the same wrapper; the kernel is a C
    symbol per dtype combination): the symbol's parameters (codegen/api/abi.py) are the
    kernel's arguments, its outputs, then a pointer per value it returns."""
    if decl.foreign_kernel(device.key) is None:
        return _AbiCall()
    context = scope.fresh("abi")
    device_index = f"{first}.device().index()" if first else "-1"
    stream = f", {device.stream}" if device.stream else ""
    includes = [device.stream_include] if device.stream_include else []
    setup = [f"opwrap::rt::abi::Call {context}(kOp, {device.device_type}, {device_index}{stream});"]
    args = []
    params = abi.params(decl)
    for value, p in zip(kernel_args, params):
        local = scope.fresh(f"{p.name}_abi") if p.kind != "value" else ""
        statements, passed = abi.wrapper_pass(p.kind, value, local)
        setup.extend(statements)
        args.append(passed)
    returned = []
    for p in params[len(kernel_args):]:
        local = scope.fresh(f"{p.name}_abi")
        setup.append(f"{p.c.pointee()} {local}{{}};")  # `int64_t` for `int64_t*`
        args.append(f"&{local}")
        returned.append(local)
    after = (f"{kernel_result}.emplace({', '.join(returned)});",) if returned else ()
    return _AbiCall(context=context, setup=tuple(setup), args=tuple(args), after=after,
                    includes=(*includes, "opwrap/runtime/abi.h"))


def _return_statement(results: list[str]) -> str:
    """The wrapper's return statement ("": it returns nothing)."""
    if not results:
        return ""
    if len(results) == 1:
        return f"return {results[0]};"
    return "return {" + ", ".join(results) + "};"


def _output_dtype(o, ident: dict[str, str], dispatched: str) -> str:
    """The C++ ScalarType of a return's dtype rule (`dispatched`: the op's dispatch dtype,
    for a return without a rule)."""
    return render_rule(o.dtype_rule, ident) if o.dtype_rule is not None else dispatched


def _dtype_list(var) -> str:
    return "{" + ", ".join(f"at::ScalarType::{d.scalar_type}" for d in var.dtypes) + "}"


def _dtype_names(var) -> str:
    return ", ".join(d.name for d in var.dtypes)


def _index_checks(decl, names: dict[str, str], device: Device) -> list[str]:
    """`index:`: the values of each integer tensor lie in [low, high).  Checked where the
    device's row says so (the CPU): on CUDA it would synchronize the stream, and kernels check
    with CUDA_KERNEL_ASSERT, as aten's do."""
    if not device.host_checks:
        return []
    out = []
    for b in decl.index_bounds:
        a = decl.schema.argument(b.argument)
        value = names.get(a.name, a.name)
        low, high = render_cpp(b.low, names), render_cpp(b.high, names)
        if a.is_optional:
            out.append(f"if ({value}.has_value() && {value}->defined()) "
                       f"opwrap::rt::check_index(kOp, {cpp_string(a.name)}, *{value}, {low}, {high}, "
                       f"{cpp_string(b.text)});")
        else:
            out.append(f"opwrap::rt::check_index(kOp, {cpp_string(a.name)}, {value}, {low}, {high}, "
                       f"{cpp_string(b.text)});")
    return out


def device_checks(name: str, value: str, first: str, first_name: str, device: Device,
                  name_cpp: str = "") -> list[str]:
    """The tensor argument `name` (the C++ expression `value`; `name_cpp`, where given, the C++
    expression of its name) is defined and on `device`; where the row says so, on the same
    device as `first` (named by the C++ expression `first_name` in messages, a string literal
    or a name known at run time): cuda:0 and cuda:1 do not mix.  Shared by every generated
    wrapper."""
    out = [f"opwrap::rt::check_tensor(kOp, {name_cpp or cpp_string(name)}, {value}, {device.device_type});"]
    if device.same_device and first and value != first:
        out.append(f"opwrap::rt::check_same_device(kOp, {name_cpp or cpp_string(name)}, {value}, {first}, "
                   f"{first_name});")
    return out


def device_guard(first: str, device: Device) -> list[str]:
    """Where the device has a guard, outputs are allocated (and inputs copied) on the first
    tensor's device."""
    return [f"const {device.guard} device_guard({first}.device());"] if device.guard else []


def overlap_checks(decl, ident: dict[str, str] | None = None) -> list[str]:
    """Each argument written in place has no self-overlapping elements and shares no memory
    with another tensor argument, read or written (aten's assert_no_internal_overlap /
    assert_no_overlap).  Between tensors, two at a time; where a tensor list takes part (an
    optimizer step's `Tensor(a!)[] params`, or a read `Tensor[]` beside a written tensor),
    every element of every argument at once (opwrap::rt::check_no_overlaps: one sort, not
    every pair), each element named `list[i]` in messages."""
    ident = ident or {}
    arguments = [a for a in decl.schema.arguments if is_single_tensor(a) or is_list_of_tensors(a)]
    if not any(a.is_write for a in arguments):
        return []
    if any(is_list_of_tensors(a) for a in arguments):
        entries = ", ".join(f"{{{cpp_string(a.name)}, {'true' if a.is_write else 'false'}, {ident.get(a.name, a.name)}}}"
                            for a in arguments)
        return [f"opwrap::rt::check_no_overlaps(kOp, {{{entries}}});"]
    out = []
    for w in (a for a in arguments if a.is_write):
        wn = ident.get(w.name, w.name)
        target = f"{'*' if w.is_optional else ''}{wn}"
        checks = [f"opwrap::rt::check_writable(kOp, {cpp_string(w.name)}, {target});"]
        for a in arguments:
            if a is w or (a.is_write and arguments.index(a) < arguments.index(w)):
                continue  # two written arguments are compared once, when the first is `w`
            an = ident.get(a.name, a.name)
            also = ", true" if a.is_write else ""
            if a.is_optional:
                checks.append(f"if ({an}.has_value() && {an}->defined()) opwrap::rt::check_no_overlap(kOp, "
                              f"{cpp_string(w.name)}, {target}, {cpp_string(a.name)}, *{an}{also});")
            else:
                checks.append(f"opwrap::rt::check_no_overlap(kOp, {cpp_string(w.name)}, {target}, "
                              f"{cpp_string(a.name)}, {an}{also});")
        if w.is_optional:
            out.append(f"if ({wn}.has_value() && {wn}->defined()) {{")
            out.extend("  " + c for c in checks)
            out.append("}")
        else:
            out.extend(checks)
    return out


def kernel_header(decl, device: Device) -> str:
    """What a wrapper includes for its kernel: the hand-written kernel header (relative to the
    kernels directory), or for a kernel behind the C ABI its symbols' generated prototypes, or
    the kernel generated from a row-wise program (codegen/plugins/rowwise.py)."""
    if decl.rows is not None:
        return f"rowwise/{decl.rows.owner}{device.header_suffix}"
    if decl.foreign_kernel(device.key) is not None:
        return f"abi/{decl.ident}.h"
    return written_header(decl, device)


def kernel_function(decl, device: Device) -> str | None:
    """The kernel template a wrapper for `device` calls: the declared one (`kernels:`), or the
    one generated from a row-wise program (codegen/plugins/rowwise.py); None where the op has
    none there (a pointwise expression's plugin writes whole wrappers of its own)."""
    if decl.rows is not None:
        return f"{decl.rows.owner}_rowwise_{device.ident}"  # an out= overload: its functional op's kernel
    return decl.kernel(device.key)


def written_header(decl, device: Device) -> str:
    """The hand-written kernel header of `decl` for `device`: the one its declaration names
    (`header:`, or the device's own field such as `cuda_header:`), else `<op><suffix>`."""
    if device.header_field == "header":
        return decl.header
    return decl.extra_field(device.header_field) or decl.header.rsplit(".", 1)[0] + device.header_suffix


def check_foreign(decl, device: str, diag, config) -> None:
    """A kernel behind the C ABI can take every argument and make every return of `decl`,
    and a Rust kernel has a crate to live in."""
    spec = decl.foreign_kernel(device)
    for problem in abi.unsupported(decl):
        diag.error(spec.loc, problem, "write a C++ kernel for this op")
    if spec.abi == "rust" and not config.crates:
        diag.error(spec.loc, f"'abi: rust': crate::{spec.function} needs a crate, and [tool.codegen] crates names none",
                   "add `crates = [\"<directory of the crate's Cargo.toml>\"]` to [tool.codegen] "
                   "(see *Kernels in Rust or C* in the README)")
    if spec.abi == "rust":
        odd = sorted({d.name for c in decl.dtype_combinations() for d in c} - set(abi.RUST_ELEMENTS))
        if odd:
            diag.error(spec.loc, f"dtypes {', '.join(odd)} have no Rust element type",
                       "Rust kernels take " + ", ".join(abi.RUST_ELEMENTS))


def check_supported(decl, lib, diag, plugin: str) -> bool:
    """The schema's types have rows in the type table, and the declaration has what the
    wrapper needs.  Returns whether the wrapper can be generated."""
    ok = True
    s = decl.schema
    for a in s.arguments:
        try:
            types.argument_row(a)
        except types.UnsupportedType as e:
            diag.error(decl.func_loc, f"argument '{a.name}' of type {a.type} is not supported by the {plugin} emitter"
                       + (f": {e.reason}" if e.reason else ""))
            ok = False
    for r, name in zip(s.returns, decl.return_names):
        try:
            types.return_row(r)
        except types.UnsupportedType as e:
            diag.error(decl.func_loc, f"return '{name}' of type {r.type} is not supported by the {plugin} emitter"
                       + (f": {e.reason}" if e.reason else ""))
            ok = False
            continue
        if s.aliased_argument(r) is not None:
            if decl.shape_of(name) is not None and name not in {a.name for a in decl.out_arguments}:
                diag.error(decl.shape_of(name).loc, f"return '{name}' aliases an input; it takes that input's shape")
            continue
        if r.is_write:
            diag.error(decl.func_loc, f"return '{name}' is written ('!') but its alias annotation matches no argument")
            ok = False
    if not decl.dtypes:
        if not decl.failed("dtypes"):  # (a wrong 'dtypes:' is reported by the loader)
            diag.error(decl.loc, "missing 'dtypes': list the dtypes the kernel supports, e.g. [float32, float64]")
        ok = False
    if not tensor_arguments(s) and not decl.failed("dtype") and not decl.failed("like"):
        for o in decl.outputs():
            fixed = o.dtype_rule.fixed if o.dtype_rule is not None else None
            if o.made_by != "wrapper" or (o.dtype_rule is not None and o.dtype_rule.kind == "arg"):
                continue
            if fixed is None:
                diag.error(decl.loc, f"an op with no Tensor input needs 'dtype: {{{o.name}: <dtype>}}'")
                ok = False
            elif o.name not in dict(decl.dtype_owners) and decl.dtypes and fixed not in decl.dtypes \
                    and not decl.failed("dtypes"):
                diag.error(decl.field_loc("dtype"), f"output dtype '{fixed.name}' is not among the declared dtypes")
    name = s.base_name
    dunder = name.startswith("__") and name.endswith("__")
    if name.endswith("_") and not dunder and not s.is_inplace:  # torchgen's convention; torch.library has none
        diag.warning(decl.func_loc, f"'{name}' ends in '_', torchgen's mark of an op that writes 'self' in place, "
                     "but it does not write 'self'",
                     "torch.library accepts the name; if the op writes 'self', declare 'Tensor(a!) self'")
    return ok


__all__ = ["KernelCall", "Symbols", "plan_call", "kernel_signature", "kernel_header", "check_foreign",
           "kernel_return_type", "check_supported", "device_checks", "device_guard", "overlap_checks", "dispatch_key",
           "symbols", "tensor_arguments", "written_header", "kernel_function",
           "cpp_ident"]
