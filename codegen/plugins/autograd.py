"""Autograd: one C++ ``torch::autograd::Function`` per differentiable op, registered at the
``Autograd`` key, that redispatches below autograd (as in the dispatcher tutorial) and
computes gradients with the declaration's ``derivatives:`` formulas.

Python decides every statement here; the template lays them out.  What a Function saves
is exactly what its formulas name: Tensor inputs and outputs through
``save_for_backward``, other arguments and tensor metadata (``x.sym_sizes()``) in
``saved_data``; a ``Tensor[]`` argument's elements are inputs of their own for
``torch::autograd::Function``, so its formula's vector of gradients is spread over them.
Ops with Tensor inputs but no ``derivatives:`` get torch's ``autogradNotImplementedFallback``,
or, when they write arguments or take a ``Tensor?[]`` (which that fallback does not see),
``opwrap::rt::autograd_not_implemented``: backward through them raises "derivative for <op>
is not implemented" instead of silently detaching.  out= overloads get
``opwrap::rt::out_autograd``, which refuses arguments that require grad as aten's do.  Every
op that writes arguments gets an ``ADInplaceOrView`` kernel that moves their versions.

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

from ..api import cpp
from ..api.aten_ops import header_of
from ..api.kernel import tensor_arguments
from ..api.names import Scope, cpp_ident, cpp_string
from ..derivatives import LIST_METADATA, METADATA, NON_DIFFERENTIABLE, grad_names, is_tensor_list
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
    forward_params: str  # the Function's forward parameters (a Tensor?[] as an at::TensorList)
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
    shortcut_guard: str = "at::AutoDispatchBelowADInplaceOrView"  # the keys the shortcut's redispatch skips
    call_args: str = ""  # every argument, as passed on
    function: str = ""  # the Autograd kernel's name


def _saveable_type(t) -> str | None:
    inner = t.elem if isinstance(t, OptionalType) else t
    if isinstance(inner, BaseType) and inner.name in _SAVEABLE:
        v = _SAVEABLE[inner.name]
        return f"std::optional<{v}>" if isinstance(t, OptionalType) else v
    if isinstance(t, ListType) and t.elem == BaseType("int"):
        return "std::vector<int64_t>"
    return None


# Locals the Function and the Autograd kernel declare (templates/autograd/function.j2 and
# the statements below); schema names never take them.
_LOCALS = ("ctx", "grads", "grad", "op", "guard", "saved", "grad_inputs", "next_edge", "needs", "grad_input_mask",
           "outs", "ks", "m", "to_save", "next_slot", "needs_list")


def op_call(d, namespace: str) -> dict:
    """A C++ function that calls library op `d` through the dispatcher, for formulas that name
    it (`gelu_tanh_backward(grad, self)`): the backward then records that op's own autograd
    node (double backward) and torch.compile traces it as the op."""
    s = d.schema
    scope = Scope(("op",))
    ids = [scope.name(a.name) for a in s.arguments]
    return dict(function=d.name, returns=cpp.returns_type(s), signature=cpp.dispatcher_signature(s),
                params=", ".join(f"{cpp.argument_type(a)} {i}" for a, i in zip(s.arguments, ids)),
                name=f"{namespace}::{d.name}", overload=d.overload, args=", ".join(ids))


def called_functions(d) -> set[str]:
    """Names of the free functions the differentiable formulas call."""
    return {m for f in d.formulas if f.differentiable for m in _FREE_CALL.findall(f.text)} - set(LIST_METADATA)


def identifiers(schema) -> tuple[dict[str, str], Scope]:
    """The C++ identifier of every schema name a Function uses: arguments, returns and
    `grad_<return>`, so a formula written with the schema's names (`default`, `dtype`, `ctx`)
    compiles; and the scope, for the locals the Function adds."""
    scope = Scope(_LOCALS)
    ids = {a.name: scope.name(a.name) for a in schema.arguments}
    for n in schema.return_names():
        ids.setdefault(n, scope.fresh(n))
    for g in grad_names(schema):
        ids.setdefault(g, scope.fresh(g))
    return ids, scope


def written_not_returned(schema) -> list:
    """The arguments an op writes but does not return (`rms_norm(Tensor(a!) result, ...) -> ()`,
    batch norm's running statistics): its Function returns them as extra outputs, marked
    dirty (only outputs can be) and non-differentiable."""
    returned = {a.name for r in schema.returns if (a := schema.aliased_argument(r)) is not None}
    return [a for a in schema.arguments if a.is_write and a.name not in returned]


def plan(decl, namespace: str, library_ops: dict | None = None) -> AutogradPlan:
    s = decl.schema
    d = decl.derivatives
    rets = s.return_names()
    args = s.arguments
    ids, scope = identifiers(s)
    tensor_args = [a for a in args if is_tensor(unwrap_optional(a.type)) and not isinstance(a.type, ListType)]
    # Tensor[] arguments: torch::autograd::Function makes each element an input of its own
    # (custom_function.h, ExtractVariables), so their gradients are spread over the flat list
    # backward returns.  A Tensor?[] reaches the Function as its given elements and their
    # mask (see _finish); its formula sees every position, undefined where none was given.
    lists = [a for a in args if is_tensor_list(a.type)]
    uses = d.uses()
    used = {u.name for u in uses}

    # What the backward needs: whole tensors, or only metadata of a tensor input.
    save_tensors: list[str] = []  # schema names in save_for_backward order
    metadata: list[tuple[str, str]] = []  # (tensor, accessor)
    for a in tensor_args:
        plain = [u for u in uses if u.name == a.name and u.accessor is None]
        meta = sorted({u.accessor for u in uses if u.name == a.name and u.accessor})
        if plain or (meta and a.is_optional):
            save_tensors.append(a.name)
        else:
            metadata.extend((a.name, m) for m in meta)
    save_tensors.extend(n for n in rets if n in used and s.argument(n) is None)
    # A list is saved element by element after those when a formula names it, and its
    # to_args_sizes(...) (and the like) as values whether it is saved or not.
    save_lists = [a.name for a in lists if any(u.name == a.name and u.accessor is None for u in uses)]
    list_metadata = [(a.name, m) for a in lists for m in sorted({u.accessor for u in uses if u.name == a.name
                                                                   and u.accessor in LIST_METADATA})]
    list_names = {a.name for a in lists}
    saved_values = [a for a in args if a.name in used and a not in tensor_args and a.name not in list_names]
    meta_ids = {(n, m): scope.fresh(f"{ids[n]}_{METADATA[m][0]}") for n, m in metadata}
    meta_ids.update({(n, m): scope.fresh(f"{ids[n]}_{LIST_METADATA[m][0]}") for n, m in list_metadata})
    edge = {a.name: scope.fresh(f"{ids[a.name]}_edge") for a in tensor_args + lists}
    size = {a.name: scope.fresh(f"{ids[a.name]}_size") for a in lists}
    slot = {a.name: scope.fresh(f"{ids[a.name]}_slot") for a in tensor_args + lists} if lists else {}
    list_grads = {a.name: scope.fresh(f"{ids[a.name]}_grads") for a in lists}
    optional_names = {a.name for a in lists if _is_optional_list(a)}
    given = {n: scope.fresh(f"{ids[n]}_given") for n in optional_names}
    extra = written_not_returned(s)

    forward: list[str] = []
    items = []
    for n in save_tensors:
        a = s.argument(n)
        v = ids[n]
        items.append(f"{v}.has_value() ? *{v} : at::Tensor()" if a is not None and a.is_optional else v)
    if save_lists:
        forward.append("torch::autograd::variable_list to_save{" + ", ".join(items) + "};")
        for n in save_lists:
            forward.append(f"to_save.insert(to_save.end(), {ids[n]}.begin(), {ids[n]}.end());")
        forward.append("ctx->save_for_backward(std::move(to_save));")
    elif save_tensors:
        forward.append("ctx->save_for_backward({" + ", ".join(items) + "});")
    for a in lists:
        forward.append(f"ctx->saved_data[{cpp_string(a.name + '_size')}] = static_cast<int64_t>({ids[a.name]}.size());")
        if _is_optional_list(a):  # which positions were given: the formula sees every position
            forward.append(f"ctx->saved_data[{cpp_string(a.name + '_given')}] = "
                           f"opwrap::rt::mask_list({ids[a.name]}_given);")
    for a in saved_values:
        forward.append(f"ctx->saved_data[{cpp_string(a.name)}] = {ids[a.name]};")
    for n, m in metadata:
        forward.append(f"ctx->saved_data[{cpp_string(n + '_' + METADATA[m][0])}] = {ids[n]}.{m}();")
    for n, m in list_metadata:
        suffix, _, save, _ = LIST_METADATA[m]
        value = f"opwrap::rt::all_positions({ids[n]}, {ids[n]}_given)" if n in optional_names else ids[n]
        forward.append(f"ctx->saved_data[{cpp_string(n + '_' + suffix)}] = {save}({value});")
    for a in tensor_args:
        if a.is_optional:
            v = ids[a.name]
            forward.append(f"ctx->saved_data[{cpp_string(a.name + '_defined')}] = {v}.has_value() && {v}->defined();")
    dirty = [ids[a.name] for a in args if a.is_write]
    if dirty:
        forward.append("ctx->mark_dirty({" + ", ".join(dirty) + "});  // apply() bumps their version counters")
    out_names = [n for n, r in zip(rets, s.returns) if s.aliased_argument(r) is None]
    nondiff = [ids[n] for n, ok in zip(rets, d.output_differentiability) if not ok and n in out_names]
    nondiff += [ids[a.name] for a in extra]
    if nondiff:
        forward.append("ctx->mark_non_differentiable({" + ", ".join(nondiff) + "});")
    if not d.materialize_grads:
        forward.append("ctx->set_materialize_grads(false);")

    backward: list[str] = []
    # The number of gradients backward returns: one per argument, one per element of a list.
    for a in lists:
        backward.append(f"const size_t {size[a.name]} = ctx->saved_data[{cpp_string(a.name + '_size')}].toInt();")
        if a.name in optional_names:
            backward.append(f"const c10::List<bool> {given[a.name]} = "
                            f"ctx->saved_data[{cpp_string(a.name + '_given')}].toBoolList();")
    # (A Tensor?[] is two parameters of the Function: its given elements and their mask.)
    n_slots = " + ".join([str(len(args) - len(lists) + len(optional_names))] + [size[a.name] for a in lists])
    if not any(f.differentiable for f in d.formulas) or not any(d.output_differentiability):
        backward.append(f"return torch::autograd::variable_list({n_slots});  // no input has a gradient")
        return _finish(decl, namespace, d, forward, backward, dirty, library_ops, ids)
    if not d.materialize_grads:
        backward.append("// materialize_grads: false; undefined gradients reach the formulas as undefined tensors.")
        backward.append("if (std::none_of(grads.begin(), grads.end(), [](const at::Tensor& g) { return g.defined(); })) {")
        backward.append(f"  return torch::autograd::variable_list({n_slots});")
        backward.append("}")
    if save_tensors or save_lists:
        backward.append("const torch::autograd::variable_list saved = ctx->get_saved_variables();")
        for i, n in enumerate(save_tensors):
            backward.append(f"const at::Tensor& {ids[n]} = saved[{i}];")
        offset = [str(len(save_tensors))]
        for n in save_lists:
            first = " + ".join(offset)
            if n in optional_names:  # every position, undefined where nothing was given
                backward.append(f"const std::vector<at::Tensor> {ids[n]} = opwrap::rt::all_positions("
                                f"at::TensorList(saved.data() + {first}, {size[n]}), {given[n]});")
            else:
                backward.append(f"const std::vector<at::Tensor> {ids[n]}(saved.begin() + {first}, "
                                f"saved.begin() + {first} + {size[n]});")
            offset.append(size[n])
    for a in saved_values:
        t = _saveable_type(a.type)
        backward.append(f"const auto {ids[a.name]} = ctx->saved_data[{cpp_string(a.name)}].to<{t}>();")
    for n, m in metadata:
        suffix, ctype, getter = METADATA[m]
        backward.append(f"const {ctype} {meta_ids[(n, m)]} = ctx->saved_data[{cpp_string(n + '_' + suffix)}].{getter};")
    for n, m in list_metadata:
        suffix, ctype, _, load = LIST_METADATA[m]
        backward.append(f"const {ctype} {meta_ids[(n, m)]} = {load}(ctx->saved_data[{cpp_string(n + '_' + suffix)}]);")
    diff_out = [i for i, ok in enumerate(d.output_differentiability) if ok]
    if "grad" in used and len(diff_out) == 1:
        backward.append(f"const at::Tensor& grad = grads[{diff_out[0]}];")
    for g, i in grad_names(s).items():
        if g in used:
            backward.append(f"const at::Tensor& {ids[g]} = grads[{i}];")
    # Gradient edges exist only for tensors that were passed (an absent optional has none);
    # with lists, the positions in the returned list (slots) depend on their lengths.
    backward.append("size_t next_edge = 0;")
    if lists:
        backward.append("size_t next_slot = 0;")
    for a in args:
        n = a.name
        if a in lists:
            backward.append(f"const size_t {edge[n]} = next_edge;")
            backward.append(f"next_edge += {size[n]};")
            backward.append(f"const size_t {slot[n]} = next_slot;")
            backward.append(f"next_slot += {size[n]};")
            if n in optional_names:
                backward.append("next_slot++;  // its mask")
            continue
        if a in tensor_args:
            if a.is_optional:
                backward.append(f"const size_t {edge[n]} = ctx->saved_data[{cpp_string(n + '_defined')}].toBool() "
                                "? next_edge++ : SIZE_MAX;")
            else:
                backward.append(f"const size_t {edge[n]} = next_edge++;")
        if lists:
            backward.append(f"const size_t {slot[n]} = next_slot++;" if n in slot else "next_slot++;")
    backward.append("const auto needs = [&](size_t edge) { return edge != SIZE_MAX && ctx->needs_input_grad(edge); };")
    if lists:
        backward.append("const auto needs_list = [&](size_t edge, size_t n) {")
        backward.append("  for (size_t i = 0; i < n; ++i) if (ctx->needs_input_grad(edge + i)) return true;")
        backward.append("  return false;")
        backward.append("};")
    backward.append(f"torch::autograd::variable_list grad_inputs({n_slots});")
    index = {a.name: (slot[a.name] if lists else str(i)) for i, a in enumerate(args) if not lists or a.name in slot}
    op_name = cpp_string(f"{namespace}::{decl.op_name}")
    for f in d.formulas:
        if not f.differentiable:
            continue
        expr = _rewrite(f, meta_ids, ids)
        needs = [f"needs_list({edge[n]}, {size[n]})" if n in list_names else f"needs({edge[n]})" for n in f.inputs]
        line = f'#line {f.loc.line} {cpp_string(f.loc.path)}'
        scatter = [f"  opwrap::rt::scatter_list_grads({op_name}, {cpp_string(n)}, {list_grads[n]}, {size[n]}, "
                   f"grad_inputs, {slot[n]}, {edge[n]}, needs);" if n not in optional_names else
                   f"  opwrap::rt::scatter_optional_list_grads({op_name}, {cpp_string(n)}, {list_grads[n]}, {given[n]}, "
                   f"grad_inputs, {slot[n]}, {edge[n]}, needs);" for n in f.inputs if n in list_names]
        if len(f.inputs) == 1:
            n = f.inputs[0]
            backward.append(f"if ({needs[0]}) {{")
            backward.append(line)
            if n in list_names:
                backward.append(f"  const std::vector<at::Tensor> {list_grads[n]} = {expr};")
            else:
                backward.append(f"  grad_inputs[{index[n]}] = {expr};")
        else:
            backward.append(f"if ({' || '.join(needs)}) {{")
            backward.append(f"  const std::array<bool, {len(needs)}> grad_input_mask = {{{', '.join(needs)}}};")
            for n in f.inputs:
                if n in list_names:
                    backward.append(f"  std::vector<at::Tensor> {list_grads[n]};")
            targets = ", ".join(list_grads[n] if n in list_names else f"grad_inputs[{index[n]}]" for n in f.inputs)
            backward.append(line)
            backward.append(f"  std::tie({targets}) = {expr};")
        backward.append(LINE_RESTORE)
        backward.extend(scatter)
        backward.append("}")
    backward.append("return grad_inputs;")
    return _finish(decl, namespace, d, forward, backward, dirty, library_ops, ids)


def _finish(decl, namespace, d, forward, backward, dirty, library_ops, ids) -> AutogradPlan:
    s = decl.schema
    rets = s.return_names()
    ident = decl.ident
    args = s.arguments
    struct = f"{ident}_Function"
    if d.once_differentiable:
        # As torch.autograd.function.once_differentiable: run without recording, and make a
        # double backward through the results raise.
        backward = ([f"return opwrap::rt::once_differentiable({cpp_string(namespace + '::' + decl.op_name)}, grads, "
                     "[&]() -> torch::autograd::variable_list {"]
                    + [("  " + line) if not line.startswith("#line") else line for line in backward] + ["});"])

    # The redispatch and what the kernel returns.  The Function's outputs are the returns, then
    # the written arguments it does not return (see written_not_returned).
    extra = [ids[a.name] for a in written_not_returned(s)]
    multi = len(rets) + len(extra) > 1
    ret_ids = [ids[n] if s.argument(n) is None else _fresh_result(ids, n) for n in rets]
    forward_returns = "torch::autograd::variable_list" if multi else "at::Tensor"
    op_type = cpp.dispatcher_signature(s)
    call_args = ", ".join(ids[a.name] for a in args)
    # A Tensor?[] is passed to Function::apply as an at::TensorList of its given elements
    # (apply makes each an input; an undefined tensor cannot be one) and the mask of which
    # positions were given, and turned back into the dispatcher's c10::List for the redispatch.
    optional_lists = [a for a in args if _is_optional_list(a)]
    forward_args = ", ".join(f"opwrap::rt::to_optional_list({ids[a.name]}, {ids[a.name]}_given)"
                             if a in optional_lists else ids[a.name] for a in args)
    apply_args = ", ".join(f"at::TensorList({ids[a.name]}_elements), {ids[a.name]}_given"
                           if a in optional_lists else ids[a.name] for a in args)
    apply_prelude = tuple(line for a in optional_lists for line in (
        f"const std::vector<at::Tensor> {ids[a.name]}_elements = opwrap::rt::given_elements({ids[a.name]});",
        f"const std::vector<bool> {ids[a.name]}_given = opwrap::rt::given_mask({ids[a.name]});"))
    forward_params = ", ".join(f"at::TensorList {ids[a.name]}, const std::vector<bool>& {ids[a.name]}_given"
                               if a in optional_lists else f"{cpp.argument_type(a)} {ids[a.name]}" for a in args)
    forward_result = ("{" + ", ".join(ret_ids + extra) + "}") if multi else ret_ids[0]
    returns_decl = "at::Tensor " + ", ".join(ret_ids)
    call = (f"std::tie({', '.join(ret_ids)}) = op.call({forward_args})" if len(rets) > 1
            else f"{ret_ids[0]} = op.call({forward_args})")
    # A return that is a written argument is that argument (the kernel returns a reference).
    aliased = [s.aliased_argument(r) for r in s.returns]
    results = [ids[a.name] if a is not None and a.is_write else f"outs[{i}]" for i, a in enumerate(aliased)]
    apply_result: tuple[str, ...]
    if len(rets) > 1:
        apply_result = (f"const torch::autograd::variable_list outs = {struct}::apply({apply_args});",
                        "return {" + ", ".join(results) + "};")
    elif results[0] != "outs[0]":
        apply_result = (f"{struct}::apply({apply_args});", f"return {results[0]};")
    elif multi:
        apply_result = (f"return {struct}::apply({apply_args})[0];",)
    else:
        apply_result = (f"return {struct}::apply({apply_args});",)
    apply_result = apply_prelude + apply_result

    includes = [f"<{h}>" for h in op_headers(d)]
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
    # An op that writes arguments redispatches through its ADInplaceOrView kernel, which moves
    # their versions as the Function's mark_dirty would (AutoDispatchBelowAutograd); not for
    # ops returning a view of an argument they do not write (the Function's view bookkeeping).
    tensors = [ids[a.name] for a in args if is_tensor(unwrap_optional(a.type))
               or (isinstance(a.type, ListType) and is_tensor(a.type.elem))]
    shortcut = tensors and all(s.aliased_argument(r) is None or r.is_write for r in s.returns)
    includes.append("<opwrap/runtime/autograd.h>")  # the shortcut, list helpers, bump_written_versions
    return AutogradPlan(
        no_grad_tensors=", ".join(tensors) if shortcut else "", call_args=call_args,
        shortcut_guard="at::AutoDispatchBelowAutograd" if s.is_mutable else "at::AutoDispatchBelowADInplaceOrView",
        struct=struct, params=", ".join(f"{cpp.argument_type(a)} {ids[a.name]}" for a in args),
        forward_params=forward_params,
        returns=cpp.returns_type(s), forward_returns=forward_returns, op_type=op_type, returns_decl=returns_decl,
        call=call, forward=tuple(forward), forward_result=forward_result,
        backward=tuple(line if line.startswith("#line") else "    " + line for line in backward),
        apply_result=apply_result, includes=tuple(includes), once_differentiable=d.once_differentiable,
        op_calls=op_calls, function=f"{ident}_autograd")


def _is_optional_list(a) -> bool:
    return is_tensor_list(a.type) and isinstance(a.type.elem, OptionalType)


def _fresh_result(ids: dict[str, str], name: str) -> str:
    """A return named like an argument: its own local in the forward."""
    key = f"#return {name}"
    if key not in ids:
        taken = set(ids.values()) | set(_LOCALS)
        ids[key] = cpp_ident(name + "_result", taken)
    return ids[key]


def op_headers(d) -> list[str]:
    """The `ATen/ops/<name>.h` headers of the `at::` functions the formulas call, decided from
    the formulas alone (never from the installed torch, so generated files are the same on
    every machine): a name torch has no such header for (an `at::` function defined elsewhere)
    is covered by ATen/Functions.h, included instead of all of them."""
    names = {m for f in d.formulas if f.differentiable for m in _AT_CALL.findall(f.text)}
    headers = {n: header_of(n) for n in names}
    if any(h is None for h in headers.values()):
        return ["ATen/Functions.h"]
    return sorted(set(headers.values()))  # type: ignore[arg-type]


_LIBRARY_OPS: tuple = (None, {})  # (lib, its ops): validate asks once per declaration


def library_ops(lib) -> dict:
    """The library's ops with kernels that formulas may call by name (one overload per name)."""
    global _LIBRARY_OPS
    if _LIBRARY_OPS[0] is lib:
        return _LIBRARY_OPS[1]
    out: dict = {}
    for d in lib.declarations:
        if d.kernels and not d.overload:
            out.setdefault(d.name, d)
    _LIBRARY_OPS = (lib, out)
    return out


def _rewrite(formula, metadata_only: dict[tuple[str, str], str], ids: dict[str, str]) -> str:
    """The formula in the Function's identifiers: `x.sym_sizes()` of a tensor saved only as
    metadata becomes the saved value, and every schema name its C++ identifier."""
    text, out, pos = formula.text, [], 0
    for u in formula.uses:
        if u.accessor and (u.name, u.accessor) in metadata_only:
            out.append(text[pos:u.start])
            out.append(metadata_only[(u.name, u.accessor)])
            pos = u.end
        elif ids.get(u.name, u.name) != u.name:
            out.append(text[pos:u.start])
            out.append(ids[u.name])
            pos = u.start + len(u.name)
    out.append(text[pos:])
    return "".join(out)


class Autograd(Plugin):
    name = "autograd"

    def validate(self, decl, lib, diag):
        d = decl.derivatives
        if d is None:
            return
        s = decl.schema
        loc = decl.field_loc("derivatives")
        if not tensor_arguments(s):
            diag.error(loc, f"{s.name} has no Tensor input, so nothing to differentiate")
            return
        if out_arguments(decl):
            diag.error(loc, f"{decl.op_name} is an out= overload ({', '.join(a.name for a in out_arguments(decl))}); as aten's, "
                       "it is not differentiable", "declare the derivatives on the functional op; its out= overload "
                       "refuses inputs that require grad")
            return
        used = {u.name for u in d.uses()}
        for a in s.arguments:
            if (a.name in used and not is_tensor(unwrap_optional(a.type)) and not is_tensor_list(a.type)
                    and _saveable_type(a.type) is None):
                diag.error(loc, f"argument '{a.name}' of type {a.type} cannot be saved for backward")
        for a in s.arguments:
            if a.is_write and (a.is_optional or isinstance(a.type, ListType)):
                diag.error(loc, f"'{a.name}' ({a.type}) is written by {s.name}: derivatives of ops that write an "
                           "optional tensor or a list are not supported", "without 'derivatives:', backward through "
                           f"{s.name} raises 'not implemented'")
        # A written argument that is not returned is an output of the Function, marked
        # non-differentiable: nothing can give the gradient of its old value.
        for a in written_not_returned(s):
            f = d.formula_for(a.name)
            if f is not None and f.differentiable:
                diag.error(f.loc, f"'{a.name}' is written by {s.name} but not returned, so its new value has no "
                           "gradient for a formula to use", f"return it ('-> Tensor(a!)') or declare "
                           f"'{a.name}: {NON_DIFFERENTIABLE}'")
        if not s.returns:
            diag.error(decl.func_loc, "an op with derivatives must return its result (in place: 'Tensor(a!)')")
        for r, n in zip(s.returns, s.return_names()):
            if r.type != BaseType("Tensor"):
                diag.error(decl.func_loc, f"return '{n}' of type {r.type} is not supported by the autograd emitter")
        ops = library_ops(lib)
        missing = [f.loc for f in d.formulas if f.differentiable and set(_FREE_CALL.findall(f.text)) - set(ops)]
        header = lib.config.path("kernels") / decl.header
        if missing and not header.is_file() and not decl.failed("header"):
            diag.error(missing[0], f"the formula calls a helper function, but '{lib.config.kernels}/{decl.header}' "
                       "where helpers live does not exist")

    def emit(self, lib, ctx):
        """One source per op with Tensor inputs: its Function and Autograd kernel from the
        formulas (unity group "autograd"), or a kernel that makes backward raise "not
        implemented" (or, for an out= overload, refuses inputs that require grad)."""
        ns = lib.namespace
        ops = library_ops(lib)
        template = "autograd/op.cpp.j2"
        for decl in lib.declarations:
            if not decl.kernels or not tensor_arguments(decl.schema):
                continue
            p = None if decl.derivatives is None else plan(decl, ns, ops)
            fallback = None if p else "out" if out_arguments(decl) else "function" if needs_function(decl) else "plain"
            includes = sorted(p.includes, key=lambda h: (h.startswith('"'), h)) if p else []
            text = ctx.render(template, namespace=ns, decl=decl, p=p, includes=includes, fallback=fallback,
                              bump_versions=decl.schema.is_mutable)
            # Ops with formulas share units of AUTOGRAD_UNIT_SIZE, larger past units.MAX_UNITS
            # units (custom_function.h is most of their compile time, and an edited formula
            # recompiles one unit), and so do the not-implemented Functions (see
            # needs_function); the others only register a boxed kernel (torch's not-implemented
            # fallback, opwrap::rt::out_autograd), a light source that shares the CPU wrappers'
            # units (their headers are its headers: one translation unit less, about 4 s of
            # compiler time a library at -O0).
            heavy = p is not None or fallback == "function"
            yield Output(f"autograd/{decl.ident}.cpp", text, (decl.path, ctx.template_source(template)),
                         unit="autograd" if heavy else "cpu", unit_size=AUTOGRAD_UNIT_SIZE if heavy else None)


def needs_function(decl) -> bool:
    """Whether an op without formulas needs opwrap::rt::autograd_not_implemented (a
    torch::autograd::Function) instead of torch's autogradNotImplementedFallback, which
    attaches its node to the returns only and does not see the elements of a Tensor?[]: an op
    that writes arguments, or takes a Tensor?[]."""
    s = decl.schema
    return s.is_mutable or any(is_tensor_list(a.type) and isinstance(a.type.elem, OptionalType) for a in s.arguments)


def out_arguments(decl) -> tuple:
    """torchgen's out= arguments: keyword-only Tensor(a!) arguments (as
    `Declaration.out_arguments`)."""
    return tuple(a for a in decl.schema.arguments if a.kwarg_only and a.is_write and is_tensor(unwrap_optional(a.type)))
