"""Autograd: one C++ ``torch::autograd::Function`` per differentiable op, registered at the
``Autograd`` key, that redispatches below autograd (as in the dispatcher tutorial) and
computes gradients with the declaration's ``derivatives:`` formulas.

Python decides every statement here; the template lays them out.  What a Function saves
is exactly what its formulas name: Tensor inputs and outputs through
``save_for_backward``, other arguments and tensor metadata (``x.sym_sizes()``) in
``saved_data``.  Ops with Tensor inputs but no ``derivatives:`` get torch's
``autogradNotImplementedFallback``: backward through them raises
"derivative for <op> is not implemented" instead of silently detaching.

Each op's Function is in ``autograd/<op>.cpp``; they are compiled a few at a time in the
unity units ``units/autograd.<k>.cpp`` (codegen/units.py): the autograd headers
(custom_function.h) are most of the compile time of any one of them, and an edited formula
recompiles only its op's unit.  A formula may
call another op of the library by name (``gelu_tanh_backward(grad, self)``); it is called
through the dispatcher, so a double backward and torch.compile see that op.

Each formula statement is preceded by a ``#line`` directive naming the declaration, so a
formula that does not compile is reported by the compiler at the YAML line it came from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..api import cpp
from ..derivatives import METADATA, grad_names
from ..render import LINE_RESTORE
from ..schema import BaseType, ListType, OptionalType, is_tensor, unwrap_optional
from .base import Output, Plugin

# At most this many ops' Functions share a unit: custom_function.h is about 10 s of a
# 2-core machine and each op's Function under 1 s more, so small units cost little more to
# build from scratch, and an edited formula (the most frequent edit) recompiles 4 ops, not 8.
AUTOGRAD_UNIT_SIZE = 4
_AT_CALL = re.compile(r"\bat::([a-z_][a-z0-9_]*)\s*\(")
_FREE_CALL = re.compile(r"(?<![\w.:>])([A-Za-z_]\w*)\s*\(")
# Values a formula may name, saved in ctx->saved_data and read back with IValue::to<T>().
_SAVEABLE = {"int": "int64_t", "SymInt": "c10::SymInt", "float": "double", "bool": "bool", "Scalar": "at::Scalar",
             "ScalarType": "at::ScalarType"}


@dataclass(frozen=True)
class AutogradPlan:
    """Every statement of one op's autograd Function."""

    struct: str
    params: str  # the Autograd kernel's parameters, as the dispatcher passes them
    returns: str  # its return type
    forward_returns: str  # at::Tensor or torch::autograd::variable_list
    op_type: str  # the typed dispatcher signature
    returns_decl: str  # the forward's result variables
    call: str  # the redispatch statement
    forward: tuple[str, ...]  # statements after the redispatch
    forward_result: str
    backward: tuple[str, ...]
    apply_result: tuple[str, ...]  # how the kernel turns Function::apply's value into its return
    includes: tuple[str, ...]  # as written after #include: <...> or "..."
    once_differentiable: bool
    op_calls: tuple[dict, ...] = ()  # library ops the formulas call, see op_call()
    no_grad_tensors: str = ""  # the Tensor arguments checked by the no-grad shortcut ("": no shortcut)
    call_args: str = ""  # every argument, as passed on


def _saveable_type(t) -> str | None:
    inner = t.elem if isinstance(t, OptionalType) else t
    if isinstance(inner, BaseType) and inner.name in _SAVEABLE:
        v = _SAVEABLE[inner.name]
        return f"std::optional<{v}>" if isinstance(t, OptionalType) else v
    if isinstance(t, ListType) and t.elem == BaseType("int"):
        return "std::vector<int64_t>"
    return None


def op_call(d, namespace: str) -> dict:
    """A C++ function that calls library op `d` through the dispatcher, for formulas that name
    it (`gelu_tanh_backward(grad, self)`): the backward then records that op's own autograd
    node (double backward) and torch.compile traces it as the op."""
    s = d.schema
    return dict(function=d.name, returns=cpp.returns_type(s), signature=cpp.dispatcher_signature(s),
                params=", ".join(f"{cpp.argument_type(a)} {a.name}" for a in s.arguments),
                name=f"{namespace}::{d.name}", overload=d.overload, args=", ".join(a.name for a in s.arguments))


def called_functions(d) -> set[str]:
    """Names of the free functions the differentiable formulas call."""
    return {m for f in d.formulas if f.differentiable for m in _FREE_CALL.findall(f.text)}


def plan(decl, namespace: str, torch_include: Path | None = None, library_ops: dict | None = None) -> AutogradPlan:
    s = decl.schema
    d = decl.derivatives
    rets = s.return_names()
    ident = decl.ident
    args = s.arguments
    tensor_args = [a for a in args if is_tensor(unwrap_optional(a.type)) and not isinstance(a.type, ListType)]
    uses = d.uses()
    used = {u.name for u in uses}

    # What the backward needs: whole tensors, or only metadata of a tensor input.
    save_tensors: list[str] = []  # names in save_for_backward order
    metadata: list[tuple[str, str]] = []  # (tensor, accessor)
    for a in tensor_args:
        plain = [u for u in uses if u.name == a.name and u.accessor is None]
        meta = sorted({u.accessor for u in uses if u.name == a.name and u.accessor})
        if plain or (meta and a.is_optional):
            save_tensors.append(a.name)
        else:
            metadata.extend((a.name, m) for m in meta)
    save_tensors.extend(n for n in rets if n in used)
    saved_values = [a for a in args if a.name in used and a not in tensor_args]

    forward: list[str] = []
    if save_tensors:
        items = []
        for n in save_tensors:
            a = s.argument(n)
            items.append(f"{n}.has_value() ? *{n} : at::Tensor()" if a is not None and a.is_optional else n)
        forward.append("ctx->save_for_backward({" + ", ".join(items) + "});")
    for a in saved_values:
        forward.append(f'ctx->saved_data["{a.name}"] = {a.name};')
    for n, m in metadata:
        forward.append(f'ctx->saved_data["{n}_{METADATA[m][0]}"] = {n}.{m}();')
    for a in tensor_args:
        if a.is_optional:
            forward.append(f'ctx->saved_data["{a.name}_defined"] = {a.name}.has_value() && {a.name}->defined();')
    dirty = [a.name for a in args if a.is_write]
    if dirty:
        forward.append("ctx->mark_dirty({" + ", ".join(dirty) + "});  // apply() bumps their version counters")
    out_names = [n for n, r in zip(rets, s.returns) if s.aliased_argument(r) is None]
    nondiff = [n for n, ok in zip(rets, d.output_differentiability) if not ok and n in out_names]
    if nondiff:
        forward.append("ctx->mark_non_differentiable({" + ", ".join(nondiff) + "});")
    if not d.materialize_grads:
        forward.append("ctx->set_materialize_grads(false);")

    backward: list[str] = []
    n_args = len(args)
    if not any(f.differentiable for f in d.formulas) or not any(d.output_differentiability):
        backward.append(f"return torch::autograd::variable_list({n_args});  // no input has a gradient")
        return _finish(decl, namespace, d, forward, backward, dirty, torch_include, library_ops)
    if not d.materialize_grads:
        backward.append("// materialize_grads: false; undefined gradients reach the formulas as undefined tensors.")
        backward.append("if (std::none_of(grads.begin(), grads.end(), [](const at::Tensor& g) { return g.defined(); })) {")
        backward.append(f"  return torch::autograd::variable_list({n_args});")
        backward.append("}")
    if save_tensors:
        backward.append("const torch::autograd::variable_list saved = ctx->get_saved_variables();")
        for i, n in enumerate(save_tensors):
            backward.append(f"const at::Tensor& {n} = saved[{i}];")
    for a in saved_values:
        t = _saveable_type(a.type)
        backward.append(f'const auto {a.name} = ctx->saved_data["{a.name}"].to<{t}>();')
    for n, m in metadata:
        suffix, ctype, getter = METADATA[m]
        backward.append(f'const {ctype} {n}_{suffix} = ctx->saved_data["{n}_{suffix}"].{getter};')
    diff_out = [i for i, ok in enumerate(d.output_differentiability) if ok]
    if "grad" in used and len(diff_out) == 1:
        backward.append(f"const at::Tensor& grad = grads[{diff_out[0]}];")
    for g, i in grad_names(s).items():
        if g in used:
            backward.append(f"const at::Tensor& {g} = grads[{i}];")
    # Gradient edges exist only for tensors that were passed (an absent optional has none).
    backward.append("size_t next_edge = 0;")
    for a in tensor_args:
        if a.is_optional:
            backward.append(f'const size_t {a.name}_edge = ctx->saved_data["{a.name}_defined"].toBool() ? next_edge++ : SIZE_MAX;')
        else:
            backward.append(f"const size_t {a.name}_edge = next_edge++;")
    backward.append("const auto needs = [&](size_t edge) { return edge != SIZE_MAX && ctx->needs_input_grad(edge); };")
    backward.append(f"torch::autograd::variable_list grad_inputs({n_args});")
    index = {a.name: i for i, a in enumerate(args)}
    metadata_only = {n for n, _ in metadata}
    for f in d.formulas:
        if not f.differentiable:
            continue
        expr = _rewrite(f, metadata_only)
        needs = [f"needs({n}_edge)" for n in f.inputs]
        line = f'#line {f.loc.line} "{f.loc.path}"'
        if len(f.inputs) == 1:
            backward.append(f"if ({needs[0]}) {{")
            backward.append(line)
            backward.append(f"  grad_inputs[{index[f.inputs[0]]}] = {expr};")
        else:
            backward.append(f"if ({' || '.join(needs)}) {{")
            backward.append(f"  const std::array<bool, {len(needs)}> grad_input_mask = {{{', '.join(needs)}}};")
            targets = ", ".join(f"grad_inputs[{index[n]}]" for n in f.inputs)
            backward.append(line)
            backward.append(f"  std::tie({targets}) = {expr};")
        backward.append(LINE_RESTORE)
        backward.append("}")
    backward.append("return grad_inputs;")
    return _finish(decl, namespace, d, forward, backward, dirty, torch_include, library_ops)


def _finish(decl, namespace, d, forward, backward, dirty, torch_include, library_ops=None) -> AutogradPlan:
    s = decl.schema
    rets = s.return_names()
    ident = decl.ident
    args = s.arguments
    if d.once_differentiable:
        # As torch.autograd.function.once_differentiable: run without recording, and make a
        # double backward through the results raise.
        backward = ([f'return opwrap::rt::once_differentiable("{namespace}::{decl.op_name}", grads, '
                     "[&]() -> torch::autograd::variable_list {"]
                    + [("  " + line) if not line.startswith("#line") else line for line in backward] + ["});"])

    # The redispatch and what the kernel returns.
    multi = len(rets) > 1
    forward_returns = "torch::autograd::variable_list" if multi else "at::Tensor"
    op_type = cpp.dispatcher_signature(s)
    call_args = ", ".join(a.name for a in args)
    forward_result = ("{" + ", ".join(rets) + "}") if multi else rets[0]
    returns_decl = "at::Tensor " + ", ".join(rets)
    call = (f"std::tie({', '.join(rets)}) = op.call({call_args})" if multi else f"{rets[0]} = op.call({call_args})")
    if multi:
        apply_result = (f"const torch::autograd::variable_list outs = {ident}_Function::apply({call_args});",
                        "return {" + ", ".join(f"outs[{i}]" for i in range(len(rets))) + "};")
    elif dirty:
        apply_result = (f"{ident}_Function::apply({call_args});", f"return {dirty[0]};")
    else:
        apply_result = (f"return {ident}_Function::apply({call_args});",)

    headers = sorted({f"ATen/ops/{m}.h" for f in d.formulas for m in _AT_CALL.findall(f.text)})
    if torch_include is not None:
        headers = [h for h in headers if (torch_include / h).is_file()]
    includes = [f"<{h}>" for h in headers]
    library_ops = library_ops or {}
    calls = called_functions(d)
    op_calls = tuple(op_call(library_ops[n], namespace) for n in sorted(calls & set(library_ops)))
    if calls - set(library_ops):
        includes.append(f'"{decl.header}"')  # helpers a formula calls live beside the kernel
        backward.insert(0, f"using namespace ::{namespace}::kernels;  // the helpers the formulas call")
    if d.once_differentiable:
        includes.append("<opwrap/runtime/once_differentiable.h>")
    # Nothing to record (no input requires grad in grad mode, no forward gradient): redispatch
    # below autograd as aten's VariableType kernels do, without the Function's node and context.
    # Not for ops that write or alias an argument (the Function bumps dirty versions).
    tensors = [a.name for a in args if is_tensor(unwrap_optional(a.type))
               or (isinstance(a.type, ListType) and is_tensor(a.type.elem))]
    shortcut = tensors and not s.is_mutable and all(s.aliased_argument(r) is None for r in s.returns)
    if shortcut:
        includes.append("<opwrap/runtime/autograd.h>")
    return AutogradPlan(
        no_grad_tensors=", ".join(tensors) if shortcut else "", call_args=call_args,
        struct=f"{ident}_Function", params=", ".join(f"{cpp.argument_type(a)} {a.name}" for a in args),
        returns=cpp.returns_type(s), forward_returns=forward_returns, op_type=op_type, returns_decl=returns_decl,
        call=call, forward=tuple(forward), forward_result=forward_result,
        backward=tuple(line if line.startswith("#line") else "    " + line for line in backward),
        apply_result=apply_result, includes=tuple(includes), once_differentiable=d.once_differentiable,
        op_calls=op_calls)


_LIBRARY_OPS: tuple = (None, {})  # (lib, its ops): validate asks once per declaration


def library_ops(lib) -> dict:
    """The library's ops with kernels that formulas may call by name (one overload per name)."""
    global _LIBRARY_OPS
    if _LIBRARY_OPS[0] is lib:
        return _LIBRARY_OPS[1]
    out = {}
    for d in lib.declarations:
        if d.kernels and not d.overload:
            out.setdefault(d.name, d)
    _LIBRARY_OPS = (lib, out)
    return out


def _rewrite(formula, metadata_only: set[str]) -> str:
    """The formula with `x.sym_sizes()` of a tensor saved only as metadata replaced by the saved value."""
    text, out, pos = formula.text, [], 0
    for u in formula.uses:
        if u.name in metadata_only and u.accessor:
            out.append(text[pos:u.start])
            out.append(f"{u.name}_{METADATA[u.accessor][0]}")
            pos = u.end
    out.append(text[pos:])
    return "".join(out)


def torch_include_dir() -> Path | None:
    """The installed torch's include directory, found without importing torch."""
    from importlib.util import find_spec
    spec = find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    inc = Path(list(spec.submodule_search_locations)[0]) / "include"
    return inc if inc.is_dir() else None


class Autograd(Plugin):
    name = "autograd"

    def validate(self, decl, lib, diag):
        d = decl.derivatives
        if d is None:
            return
        s = decl.schema
        if not decl.tensor_inputs:
            diag.error(decl.field_loc("derivatives"), f"{s.name} has no Tensor input, so nothing to differentiate")
            return
        if any(isinstance(a.type, ListType) and is_tensor(a.type.elem) for a in s.arguments):
            diag.error(decl.field_loc("derivatives"), "derivatives of Tensor[] arguments are not supported yet")
        used = {u.name for u in d.uses()}
        for a in s.arguments:
            if a.name in used and not is_tensor(unwrap_optional(a.type)) and _saveable_type(a.type) is None:
                diag.error(decl.field_loc("derivatives"),
                           f"argument '{a.name}' of type {a.type} cannot be saved for backward")
        if not s.returns:
            diag.error(decl.func_loc, "an op with derivatives must return its result (in place: 'Tensor(a!)')")
        for r, n in zip(s.returns, s.return_names()):
            if r.type != BaseType("Tensor"):
                diag.error(decl.func_loc, f"return '{n}' of type {r.type} is not supported by the autograd emitter")
        ops = library_ops(lib)
        missing = [f.loc for f in d.formulas if f.differentiable and set(_FREE_CALL.findall(f.text)) - set(ops)]
        header = lib.config.path("kernels") / decl.header
        if missing and not header.is_file():
            diag.error(missing[0], f"the formula calls a helper function, but '{lib.config.kernels}/{decl.header}' "
                       "where helpers live does not exist")

    def emit(self, lib, ctx):
        """One source per op with Tensor inputs, in the unity group "autograd": its Function
        and Autograd kernel from the formulas, or the not-implemented fallback."""
        ns = lib.namespace
        inc = torch_include_dir()
        ops = library_ops(lib)
        template = "autograd/op.cpp.j2"
        for decl in lib.declarations:
            if not decl.kernels or not decl.tensor_inputs:
                continue
            p = None if decl.derivatives is None else plan(decl, ns, inc, ops)
            includes = sorted(p.includes, key=lambda h: (h.startswith('"'), h)) if p else []
            text = ctx.render(template, namespace=ns, decl=decl, p=p, includes=includes)
            yield Output(f"autograd/{decl.ident}.cpp", text, (decl.path, ctx.template_source(template)), unit="autograd",
                         unit_size=AUTOGRAD_UNIT_SIZE)
