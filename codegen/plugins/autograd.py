"""Autograd: one Autograd kernel per differentiable op, written as torchgen writes aten's
VariableType kernels: a backward ``torch::autograd::Node`` subclass per op, whose ``apply``
runs the declaration's ``derivatives:`` formulas, and a kernel that records it
(``compute_requires_grad``, ``collect_next_edges``, the redispatch below autograd,
``set_history``).  Not a ``torch::autograd::Function``: torch refuses C++ Functions under
functorch transforms (torch.func.grad, vjp, jacrev, vmap of grad), and plain nodes need no
context, so they compose with them as aten's ops do.

Python decides every statement here; the template lays them out.  What a node saves is
exactly what its formulas name: Tensor inputs as ``SavedVariable``s (before the call;
is_output=false) and outputs (after ``set_history``; is_output=true), other arguments as
typed members, tensor metadata (``x.sym_sizes()``) as values.  Its next edges are one per
Tensor argument (invalid for an absent ``Tensor?``), one per element of a ``Tensor[]`` and
per position of a ``Tensor?[]``; its inputs one per return (a non-differentiable return
keeps an undefined slot), so ``grads[i]`` is the gradient of return ``i``.

Forward-mode AD (torch.func.jvp, jacfwd, hessian, torch.autograd.forward_ad) is done in the
same kernel, as torchgen does it: when an input has a tangent, each differentiable return's
tangent is computed from the inputs' values (``_fw_primal``) and tangents by its forward
formula (a ``result:`` key), or, for a pointwise op, from its backward formulas
(derivatives.derived_forward), and set with ``_set_fw_grad``.  An op with differentiable
returns and no forward formula raises a clear error naming it.
Ops with Tensor inputs but no ``derivatives:`` get torch's ``autogradNotImplementedFallback``,
or, when they write arguments or take a ``Tensor?[]`` (which that fallback does not see),
``opwrap::rt::autograd_not_implemented``: backward through them raises "derivative for <op>
is not implemented" instead of silently detaching.  out= overloads get
``opwrap::rt::out_autograd``, which refuses arguments that require grad as aten's do.  Every
op that writes arguments gets an ``ADInplaceOrView`` kernel that moves their versions.

Each op's kernel is in ``autograd/<op>.cpp``; they are compiled a few at a time in the
unity units ``units/autograd.<k>.cpp`` (codegen/units.py): the autograd headers are most of
the compile time of any one of them, and an edited formula recompiles only its op's unit.
A formula may call another op of the library by name (``gelu_tanh_backward(grad, self)``);
it is called through the dispatcher, so a double backward and torch.compile see that op.

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
from ..derivatives import (LIST_METADATA, METADATA, NON_DIFFERENTIABLE, derived_forward, grad_names, has_forward,
                           is_tensor_list)
from ..render import LINE_RESTORE
from ..schema import BaseType, ListType, OptionalType, is_tensor, unwrap_optional
from .base import Output, Plugin

# At most this many ops' kernels share a unit: the autograd headers are most of a unit's
# compile time and each op's node and kernel under 1 s more, so small units cost little more to
# build from scratch, and an edited formula (the most frequent edit) recompiles 4 ops, not 8.
AUTOGRAD_UNIT_SIZE = 4
_AT_CALL = re.compile(r"\bat::([a-z_][a-z0-9_]*)\s*\(")
_FREE_CALL = re.compile(r"(?<![\w.:>])([A-Za-z_]\w*)\s*\(")
# Values a formula may name: members of the node, of these types.
_SAVEABLE = {"int": "int64_t", "SymInt": "c10::SymInt", "float": "double", "bool": "bool", "Scalar": "at::Scalar",
             "ScalarType": "at::ScalarType"}


@dataclass(frozen=True)
class AutogradPlan:
    """Every statement of one op's backward Node and Autograd kernel."""

    struct: str  # the Node subclass
    node_name: str  # what its name() returns (grad_fn.name())
    members: tuple[str, ...]  # its member declarations
    release: tuple[str, ...]  # release_variables()'s statements
    backward: tuple[str, ...]  # apply()'s statements
    params: str  # the Autograd kernel's parameters, as the dispatcher passes them
    returns: str  # its return type
    op_type: str  # the typed dispatcher signature
    kernel: tuple[str, ...]  # the kernel's statements after the no-grad shortcut
    includes: tuple[str, ...]  # as written after #include: <...> or "..."
    once_differentiable: bool
    op_calls: tuple[dict, ...] = ()  # library ops the formulas call, see op_call()
    no_grad_tensors: str = ""  # the Tensor arguments checked by the no-grad shortcut ("": no shortcut)
    shortcut_guard: str = "at::AutoDispatchBelowADInplaceOrView"  # the keys the redispatch skips
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


# Locals the node's apply and the Autograd kernel declare (templates/autograd/function.j2 and
# the statements below), and a few the Function they replaced did (so identifiers stay as
# they were); schema names never take them.
_LOCALS = ("ctx", "grads", "grad", "op", "guard", "saved", "grad_inputs", "next_edge", "needs", "grad_input_mask",
           "outs", "ks", "m", "to_save", "next_slot", "needs_list", "grad_fn", "requires_grad")


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


def formula_texts(d, forward: bool = True) -> list[str]:
    """The C++ of the differentiable backward formulas and (with `forward`) the forward ones."""
    return [f.text for f in d.formulas if f.differentiable] + ([f.text for f in d.forward] if forward else [])


def called_functions(d) -> set[str]:
    """Names of the free functions the formulas call."""
    return {m for t in formula_texts(d) for m in _FREE_CALL.findall(t)} - set(LIST_METADATA)


def identifiers(schema) -> tuple[dict[str, str], Scope]:
    """The C++ identifier of every schema name a node or kernel uses: arguments, returns and
    `grad_<return>`, so a formula written with the schema's names (`default`, `dtype`, `ctx`)
    compiles; and the scope, for the locals and members they add."""
    scope = Scope(_LOCALS)
    ids = {a.name: scope.name(a.name) for a in schema.arguments}
    for n in schema.return_names():
        ids.setdefault(n, scope.fresh(n))
    for g in grad_names(schema):
        ids.setdefault(g, scope.fresh(g))
    return ids, scope


def written_not_returned(schema) -> list:
    """The arguments an op writes but does not return (`rms_norm(Tensor(a!) result, ...) -> ()`,
    batch norm's running statistics): their versions move (the ADInplaceOrView kernel) and
    their history is left alone: nothing can give the gradient of their new value."""
    returned = {a.name for r in schema.returns if (a := schema.aliased_argument(r)) is not None}
    return [a for a in schema.arguments if a.is_write and a.name not in returned]


def plan(decl, namespace: str, library_ops: dict | None = None) -> AutogradPlan:
    s = decl.schema
    d = decl.derivatives
    rets = s.return_names()
    args = s.arguments
    ids, scope = identifiers(s)
    tensor_args = [a for a in args if is_tensor(unwrap_optional(a.type)) and not isinstance(a.type, ListType)]
    # Tensor[] and Tensor?[] arguments: one edge per element (per position of a Tensor?[],
    # invalid where none was given); their formulas see vectors and give vectors.
    lists = [a for a in args if is_tensor_list(a.type)]
    list_names = {a.name for a in lists}
    optional_names = {a.name for a in lists if _is_optional_list(a)}
    uses = d.uses()
    used = {u.name for u in uses}
    written = {a.name for a in args if a.is_write}
    op_name = cpp_string(f"{namespace}::{decl.op_name}")

    # What the backward needs: whole tensors, or only metadata of a tensor input.
    save_tensors: list[str] = []  # inputs saved before the call (schema names)
    save_after: list[str] = []  # written arguments and outputs, saved after it
    metadata: list[tuple[str, str]] = []  # (tensor, accessor)
    for a in tensor_args:
        plain = [u for u in uses if u.name == a.name and u.accessor is None]
        meta = sorted({u.accessor for u in uses if u.name == a.name and u.accessor})
        if plain or (meta and a.is_optional):
            (save_after if a.name in written else save_tensors).append(a.name)
        else:
            metadata.extend((a.name, m) for m in meta)
    out_saves = [n for n in rets if n in used and s.argument(n) is None]
    save_lists = [a.name for a in lists if any(u.name == a.name and u.accessor is None for u in uses)]
    list_metadata = [(a.name, m) for a in lists for m in sorted({u.accessor for u in uses if u.name == a.name
                                                                   and u.accessor in LIST_METADATA})]
    saved_values = [a for a in args if a.name in used and a not in tensor_args and a.name not in list_names]

    # Members of the Node (their names never clash with a formula's or the apply's locals).
    member = {n: scope.fresh(f"{ids[n]}_") for n in save_tensors + save_after + out_saves + save_lists}
    member.update({a.name: scope.fresh(f"{ids[a.name]}_") for a in saved_values})
    meta_ids = {(n, m): scope.fresh(f"{ids[n]}_{METADATA[m][0]}") for n, m in metadata}
    meta_ids.update({(n, m): scope.fresh(f"{ids[n]}_{LIST_METADATA[m][0]}") for n, m in list_metadata})
    size = {a.name: scope.fresh(f"{ids[a.name]}_size") for a in lists}
    edge = {a.name: scope.fresh(f"{ids[a.name]}_edge") for a in tensor_args + lists}
    list_grads = {a.name: scope.fresh(f"{ids[a.name]}_grads") for a in lists}
    positions = {n: scope.fresh(f"{ids[n]}_positions") for n in optional_names}

    def edge_arg(a) -> str:  # what collect_next_edges and compute_requires_grad see of an argument
        return positions[a.name] if a.name in optional_names else ids[a.name]

    members: list[str] = []
    release: list[str] = []
    for n in save_tensors + save_after + out_saves:
        members.append(f"torch::autograd::SavedVariable {member[n]};")
        release.append(f"{member[n]}.reset_data();")
    for n in save_lists:
        members.append(f"std::vector<torch::autograd::SavedVariable> {member[n]};")
        release.append(f"opwrap::rt::release_list({member[n]});")
    for a in saved_values:
        members.append(f"{_saveable_type(a.type)} {member[a.name]};")
    for (n, m), v in meta_ids.items():
        ctype = METADATA[m][1] if (n, m) in metadata else LIST_METADATA[m][1]
        members.append(f"{ctype} {v};")
    for a in lists:
        members.append(f"size_t {size[a.name]} = 0;")

    # The kernel, past the no-grad shortcut.
    edge_args = [edge_arg(a) for a in args if a in tensor_args or a in lists]
    all_tensors = ", ".join(ids[a.name] for a in tensor_args + lists)
    forward = d.differentiable and has_forward(decl)
    kernel: list[str] = []
    if forward:
        forward_flag = scope.fresh("forward")
        kernel.append(f"const bool {forward_flag} = opwrap::rt::any_forward_grad({all_tensors});")
    elif d.differentiable:
        kernel.append(f"opwrap::rt::refuse_forward_grad({op_name}, {all_tensors});")
    for n in sorted(optional_names, key=[a.name for a in args].index):
        kernel.append(f"const std::vector<at::Tensor> {positions[n]} = opwrap::rt::all_positions({ids[n]});")
    kernel.append(f"const bool requires_grad = torch::autograd::compute_requires_grad({', '.join(edge_args)});")
    diff_by_name = dict(zip(rets, d.output_differentiability))
    for r, n in zip(s.returns, rets):
        a = s.aliased_argument(r)
        if a is not None and a.is_write and diff_by_name[n]:
            kernel.append(f"opwrap::rt::check_inplace({ids[a.name]}, requires_grad);")
    struct = f"{decl.ident}_Backward"
    kernel.append(f"opwrap::rt::NodePtr<{struct}> grad_fn;")
    kernel.append("if (requires_grad) {")
    kernel.append(f"  grad_fn = opwrap::rt::make_node<{struct}>();")
    kernel.append(f"  grad_fn->set_next_edges(torch::autograd::collect_next_edges({', '.join(edge_args)}));")
    for n in save_tensors:
        a = s.argument(n)
        value = f"opwrap::rt::value_or_undefined({ids[n]})" if a.is_optional else ids[n]
        kernel.append(f"  grad_fn->{member[n]} = torch::autograd::SavedVariable({value}, /*is_output=*/false);")
    for n in save_lists:
        kernel.append(f"  grad_fn->{member[n]} = opwrap::rt::save_list({edge_arg(s.argument(n))});")
    for a in lists:
        kernel.append(f"  grad_fn->{size[a.name]} = {ids[a.name]}.size();")
    for a in saved_values:
        vec = ".vec()" if isinstance(a.type, ListType) else ""
        kernel.append(f"  grad_fn->{member[a.name]} = {ids[a.name]}{vec};")
    for n, m in metadata:
        vec = ".vec()" if METADATA[m][1].startswith("std::vector") else ""
        kernel.append(f"  grad_fn->{meta_ids[(n, m)]} = {ids[n]}.{m}(){vec};")
    for n, m in list_metadata:
        kernel.append(f"  grad_fn->{meta_ids[(n, m)]} = {LIST_METADATA[m][2]}({edge_arg(s.argument(n))});")
    kernel.append("}")

    # The call (below autograd; through ADInplaceOrView for an op that writes, which moves the
    # written arguments' versions), then the returns' history and the saved outputs.
    multi = len(rets) > 1
    ret_ids = [ids[n] if s.argument(n) is None else _fresh_result(ids, n) for n in rets]
    call_args = ", ".join(ids[a.name] for a in args)
    aliased = [s.aliased_argument(r) for r in s.returns]
    guard = "at::AutoDispatchBelowAutograd" if s.is_mutable else "at::AutoDispatchBelowADInplaceOrView"
    redispatch = f"op.redispatch(ks & c10::after_autograd_keyset, {call_args})"
    if not multi and aliased[0] is not None and aliased[0].is_write:
        kernel += ["{", f"  {guard} guard;", f"  {redispatch};", "}"]
    else:
        kernel.append("at::Tensor " + ", ".join(ret_ids) + ";")
        target = f"std::tie({', '.join(ret_ids)})" if multi else ret_ids[0]
        kernel += ["{", f"  {guard} guard;", f"  {target} = {redispatch};", "}"]
    results = [ids[a.name] if a is not None and a.is_write else ret_ids[i] for i, a in enumerate(aliased)]
    kernel.append("if (grad_fn) {")
    for i, (n, ok) in enumerate(zip(rets, d.output_differentiability)):
        a = aliased[i]
        if not ok:
            kernel.append("  opwrap::rt::skip_output(grad_fn);  // not differentiable: its slot stays undefined")
        elif a is not None and a.is_write:
            kernel.append(f"  opwrap::rt::rebase_output_history({results[i]}, grad_fn);")
        else:
            kernel.append(f"  opwrap::rt::set_output_history({results[i]}, grad_fn);")
    kernel.append("}")
    # The returns' tangents, before the outputs are saved: a SavedVariable keeps the tangent its
    # tensor has when saved (forward over reverse, as torchgen orders it).
    forward_block = len(kernel) + 1  # where the forward block's statements start
    if forward:
        kernel.append(f"if ({forward_flag}) {{")
        kernel += ["  " + line if not line.startswith("#line") else line
                   for line in _forward_statements(decl, ids, scope, results, op_name)]
        kernel.append("}")
    # A written argument returned differentiable now has this node as grad_fn: an output.
    own_output = {a.name for r, ok in zip(s.returns, d.output_differentiability)
                  if ok and (a := s.aliased_argument(r)) is not None and a.is_write}
    if save_after or out_saves:
        kernel.append("if (grad_fn) {")
        for n in save_after:
            is_output = "true" if n in own_output else "false"
            kernel.append(f"  grad_fn->{member[n]} = torch::autograd::SavedVariable({ids[n]}, /*is_output=*/{is_output});")
        for n in out_saves:
            kernel.append(f"  grad_fn->{member[n]} = torch::autograd::SavedVariable({ids[n]}, /*is_output=*/true);")
        kernel.append("}")
    kernel.append(("return {" + ", ".join(results) + "};") if multi else f"return {results[0]};")

    # The backward.
    backward: list[str] = []
    if not d.differentiable:
        backward.append("return torch::autograd::variable_list(num_outputs());  // no input has a gradient")
    else:
        if d.materialize_grads:
            backward.append("opwrap::rt::materialize_grads(*this, grads);")
        else:
            backward.append("// materialize_grads: false; undefined gradients reach the formulas as undefined tensors.")
            backward.append("if (!opwrap::rt::any_defined(grads)) {")
            backward.append("  return torch::autograd::variable_list(num_outputs());")
            backward.append("}")
        for n in save_tensors:
            backward.append(f"const at::Tensor {ids[n]} = {member[n]}.unpack();")
        for n in save_after + out_saves:  # an output's saved variable needs its grad_fn: this node
            backward.append(f"const at::Tensor {ids[n]} = {member[n]}.unpack(getptr());")
        for n in save_lists:
            backward.append(f"const std::vector<at::Tensor> {ids[n]} = opwrap::rt::unpack_list({member[n]});")
        for a in saved_values:
            backward.append(f"const auto& {ids[a.name]} = {member[a.name]};")
        if d.once_differentiable:
            unpacked = ["grads"] + [ids[n] for n in save_tensors + save_after + out_saves + save_lists]
            backward.append(f"opwrap::rt::refuse_second_order({op_name}, {', '.join(unpacked)});")
        diff_out = [i for i, ok in enumerate(d.output_differentiability) if ok]
        if "grad" in used and len(diff_out) == 1:
            backward.append(f"const at::Tensor& grad = grads[{diff_out[0]}];")
        for g, i in grad_names(s).items():
            if g in used:
                backward.append(f"const at::Tensor& {ids[g]} = grads[{i}];")
        # One edge per Tensor (an absent Tensor? has an invalid one), per list element.
        backward.append("size_t next_edge = 0;")
        for a in args:
            n = a.name
            if a in lists:
                backward.append(f"const size_t {edge[n]} = next_edge;")
                backward.append(f"next_edge += {size[n]};")
            elif a in tensor_args:
                backward.append(f"const size_t {edge[n]} = next_edge++;")
        backward.append("torch::autograd::variable_list grad_inputs(num_outputs());")
        for f in d.formulas:
            if not f.differentiable:
                continue
            expr = _rename(f, ids, meta_ids)
            needs = [f"opwrap::rt::should_compute_any(*this, {edge[n]}, {size[n]})" if n in list_names
                     else f"task_should_compute_output({edge[n]})" for n in f.inputs]
            line = f'#line {f.loc.line} {cpp_string(f.loc.path)}'
            scatter = [f"  opwrap::rt::scatter_list_grads({op_name}, {cpp_string(n)}, {list_grads[n]}, {size[n]}, "
                       f"grad_inputs, {edge[n]}, *this);" for n in f.inputs if n in list_names]
            if len(f.inputs) == 1:
                n = f.inputs[0]
                backward.append(f"if ({needs[0]}) {{")
                backward.append(line)
                if n in list_names:
                    backward.append(f"  const std::vector<at::Tensor> {list_grads[n]} = {expr};")
                else:
                    backward.append(f"  grad_inputs[{edge[n]}] = {expr};")
            else:
                backward.append(f"if ({' || '.join(needs)}) {{")
                backward.append(f"  const std::array<bool, {len(needs)}> grad_input_mask = {{{', '.join(needs)}}};")
                for n in f.inputs:
                    if n in list_names:
                        backward.append(f"  std::vector<at::Tensor> {list_grads[n]};")
                targets = ", ".join(list_grads[n] if n in list_names else f"grad_inputs[{edge[n]}]" for n in f.inputs)
                backward.append(line)
                backward.append(f"  std::tie({targets}) = {expr};")
            backward.append(LINE_RESTORE)
            backward.extend(scatter)
            backward.append("}")
        backward.append("return grad_inputs;")
    if d.once_differentiable:
        # As torch.autograd.function.once_differentiable: run without recording, and make a
        # double backward through the results raise.
        backward = ([f"return opwrap::rt::once_differentiable({op_name}, grads, "
                     "[&]() -> torch::autograd::variable_list {"]
                    + [("  " + line) if not line.startswith("#line") else line for line in backward] + ["});"])

    includes = [f"<{h}>" for h in op_headers(d, forward)]
    library_ops = library_ops or {}
    calls = called_functions(d)
    op_calls = tuple(op_call(library_ops[n], namespace) for n in sorted(calls & set(library_ops)))
    if calls - set(library_ops):
        includes.append(f'"{decl.header}"')  # helpers a formula calls live beside the kernel
        backward.insert(0, f"using namespace ::{namespace}::kernels;  // the helpers the formulas call")
        if forward:
            kernel.insert(forward_block, f"  using namespace ::{namespace}::kernels;  // the helpers the formulas call")
    if d.once_differentiable:
        includes.append("<opwrap/runtime/once_differentiable.h>")
    # Nothing to record (no input requires grad in grad mode, no forward gradient): redispatch
    # below autograd as aten's VariableType kernels do, without the node.  An op that writes
    # arguments redispatches through its ADInplaceOrView kernel, which moves their versions
    # (AutoDispatchBelowAutograd); not for ops returning a view of an argument they do not write.
    tensors = [ids[a.name] for a in args if is_tensor(unwrap_optional(a.type))
               or (isinstance(a.type, ListType) and is_tensor(a.type.elem))]
    shortcut = tensors and all(s.aliased_argument(r) is None or r.is_write for r in s.returns)
    includes.append("<opwrap/runtime/autograd.h>")  # the shortcut
    includes.append("<opwrap/runtime/autograd_node.h>")  # the node's helpers
    return AutogradPlan(
        struct=struct, node_name=f"{namespace}::{decl.op_name}Backward", members=tuple(members),
        release=tuple(release),
        backward=tuple(line if line.startswith("#line") else "    " + line for line in backward),
        params=", ".join(f"{cpp.argument_type(a)} {ids[a.name]}" for a in args),
        returns=cpp.returns_type(s), op_type=cpp.dispatcher_signature(s), kernel=tuple(kernel),
        includes=tuple(includes), once_differentiable=d.once_differentiable, op_calls=op_calls,
        no_grad_tensors=", ".join(tensors) if shortcut else "", shortcut_guard=guard, call_args=call_args,
        function=f"{decl.ident}_autograd")


def _is_optional_list(a) -> bool:
    return is_tensor_list(a.type) and isinstance(a.type.elem, OptionalType)


def _fresh_result(ids: dict[str, str], name: str) -> str:
    """A return named like an argument: its own local in the forward."""
    key = f"#return {name}"
    if key not in ids:
        taken = set(ids.values()) | set(_LOCALS)
        ids[key] = cpp_ident(name + "_result", taken)
    return ids[key]


def op_headers(d, forward: bool = True) -> list[str]:
    """The `ATen/ops/<name>.h` headers of the `at::` functions the formulas call, decided from
    the formulas alone (never from the installed torch, so generated files are the same on
    every machine): a name torch has no such header for (an `at::` function defined elsewhere)
    is covered by ATen/Functions.h, included instead of all of them."""
    names = {m for t in formula_texts(d, forward) for m in _AT_CALL.findall(t)}
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
        if d.devices and not d.overload:
            out.setdefault(d.name, d)
    _LIBRARY_OPS = (lib, out)
    return out


def _forward_statements(decl, ids: dict[str, str], scope, results: list[str], op_name: str) -> list[str]:
    """The forward-mode block of the kernel: every differentiable return's tangent from its
    forward formula, or, for a pointwise op, the sum over inputs of their backward formulas
    with the input's tangent as the return's gradient.  Inputs are seen as their primal values
    (`_fw_primal`), results as computed."""
    s, d = decl.schema, decl.derivatives
    rets = s.return_names()
    derived = derived_forward(decl)
    used: set[str] = {u.name for f in d.forward for u in f.uses}
    used |= {u.name for fs in derived.values() for f in fs for u in f.uses} | {n for fs in derived.values()
                                                                                for f in fs for n in f.inputs}
    out: list[str] = []
    names: dict[str, str] = {}  # schema name, <name>_p or <name>_t -> the C++ local
    for a in s.arguments:
        t = unwrap_optional(a.type)
        if not (is_tensor(t) or is_tensor_list(a.type)):
            names[a.name] = ids[a.name]
            continue
        vec = isinstance(a.type, ListType)
        ctype = "std::vector<at::Tensor>" if vec else "at::Tensor"
        if a.name in used or f"{a.name}_p" in used:
            p = scope.fresh(f"{ids[a.name]}_p")
            out.append(f"const {ctype} {p} = opwrap::rt::primal({ids[a.name]});")
            names[a.name] = names[f"{a.name}_p"] = p
        if f"{a.name}_t" in used:
            t_ = scope.fresh(f"{ids[a.name]}_t")
            out.append(f"const {ctype} {t_} = opwrap::rt::tangent({ids[a.name]});")
            names[f"{a.name}_t"] = t_
    for i, n in enumerate(rets):
        a = s.aliased_argument(s.returns[i])
        if a is not None and a.is_write:  # a written argument: its new value, without tangent
            if n not in used:
                continue
            p = scope.fresh(f"{ids[n] if n in ids else n}_value")
            out.append(f"const at::Tensor {p} = opwrap::rt::primal({results[i]});")
            names[n] = p
        else:
            names[n] = results[i]
    bwd_names = {**names, **{g: ids[g] for g in grad_names(s)}}  # a derived term's backward formula
    inplace = [s.aliased_argument(r) is not None for r in s.returns]
    raw: dict[str, str] = {}
    setters: list[str] = []
    for i, ok in enumerate(d.output_differentiability):
        if not ok:
            continue
        f = d.forward_for(i)
        label = cpp_string(rets[i])
        inplace_flag = "true" if inplace[i] else "false"
        total = scope.fresh(f"{rets[i]}_tangent")
        # Every tangent is computed before any is set: a formula may read another result.
        setters.append(f"opwrap::rt::set_forward_grad({op_name}, {label}, {results[i]}, {total}, "
                       f"/*is_inplace_op=*/{inplace_flag});")
        if f is not None:
            out.append(f'#line {f.loc.line} {cpp_string(f.loc.path)}')
            out.append(f"const at::Tensor {total} = {_rename(f, names)};")
            out.append(LINE_RESTORE)
            continue
        # Derived: the sum over inputs x of formula_x(grad of this return := x's tangent).
        out.append(f"at::Tensor {total};  // d {rets[i]} = sum over inputs of d{rets[i]}/dx * x_t (diagonal)")
        for f in derived[i]:
            x = f.inputs[0]
            if x not in raw:
                raw[x] = scope.fresh(f"{ids[x]}_fw")
                out.insert(0, f"const at::Tensor {raw[x]} = opwrap::rt::raw_tangent({ids[x]});")
            out.append(f"if ({raw[x]}.defined()) {{")
            out.append(f"  torch::autograd::variable_list grads({len(rets)});")
            for j, ok_j in enumerate(d.output_differentiability):
                if j == i:
                    out.append(f"  grads[{j}] = {raw[x]};")
                elif ok_j and d.materialize_grads:
                    out.append(f"  grads[{j}] = at::zeros_like({names[rets[j]]});")
            if any(u.name == "grad" for u in f.uses):
                out.append(f"  const at::Tensor& grad = grads[{i}];")
            for g, j in grad_names(s).items():
                if any(u.name == g for u in f.uses):
                    out.append(f"  const at::Tensor& {ids[g]} = grads[{j}];")
            out.append(f'#line {f.loc.line} {cpp_string(f.loc.path)}')
            out.append(f"  opwrap::rt::add_tangent({total}, {_rename(f, bwd_names)});")
            out.append(LINE_RESTORE)
            out.append("}")
    return out + setters


def _rename(formula, names: dict[str, str], whole: dict[tuple[str, str], str] | None = None) -> str:
    """A formula with every name it uses replaced by its local or member in `names`.  A use
    with an accessor (`x.sym_sizes()`, `to_args_sizes(xs)`) in `whole` becomes that text
    entirely (the node's saved metadata); a `to_args_sizes(xs)` not in it becomes the
    runtime's function of the renamed list (the forward block's, of the values)."""
    text, out, pos = formula.text, [], 0
    for u in formula.uses:
        if u.accessor and (u.name, u.accessor) in (whole or {}):
            out.append(text[pos:u.start])
            out.append(whole[(u.name, u.accessor)])
            pos = u.end
        elif u.accessor in LIST_METADATA:
            out.append(text[pos:u.start])
            out.append(f"{LIST_METADATA[u.accessor][2]}({names.get(u.name, u.name)})")
            pos = u.end
        elif names.get(u.name, u.name) != u.name:
            out.append(text[pos:u.start])
            out.append(names[u.name])
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
        # A written argument that is not returned has no gradient slot: nothing can give the
        # gradient of its new value.
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
            elif r.alias is not None and not r.is_write:
                # aten records such views with as_view and view replay, which generated nodes do not do.
                diag.error(decl.func_loc, f"return '{n}' is a view of an argument ({r}): "
                           "an op with derivatives must return a new tensor or an argument it writes",
                           "return a new tensor (drop the alias annotation), or declare no derivatives")
        ops = library_ops(lib)
        missing = [f.loc for f in (*[f for f in d.formulas if f.differentiable], *d.forward)
                   if set(_FREE_CALL.findall(f.text)) - set(ops) - set(LIST_METADATA)]
        header = lib.config.path("kernels") / decl.header
        if missing and not header.is_file() and not decl.failed("header"):
            diag.error(missing[0], f"the formula calls a helper function, but '{lib.config.kernels}/{decl.header}' "
                       "where helpers live does not exist")

    def emit(self, lib, ctx):
        """One source per op with Tensor inputs: its backward node and Autograd kernel from the
        formulas (unity group "autograd"), or a kernel that makes backward raise "not
        implemented" (or, for an out= overload, refuses inputs that require grad)."""
        ns = lib.namespace
        ops = library_ops(lib)
        template = "autograd/op.cpp.j2"
        for decl in lib.declarations:
            if not decl.devices or not tensor_arguments(decl.schema):
                continue
            p = None if decl.derivatives is None else plan(decl, ns, ops)
            fallback = None if p else "out" if out_arguments(decl) else "function" if needs_function(decl) else "plain"
            includes = sorted(p.includes, key=lambda h: (h.startswith('"'), h)) if p else []
            text = ctx.render(template, namespace=ns, decl=decl, p=p, includes=includes, fallback=fallback,
                              bump_versions=decl.schema.is_mutable)
            # Ops with formulas share units of AUTOGRAD_UNIT_SIZE, larger past units.MAX_UNITS
            # units (the autograd headers are most of their compile time, and an edited formula
            # recompiles one unit), and so do the not-implemented Functions (see
            # needs_function); the others only register a boxed kernel (torch's not-implemented
            # fallback, opwrap::rt::out_autograd), a light source that shares the CPU wrappers'
            # units (their headers are its headers: one translation unit less, about 4 s of
            # compiler time a library at -O0).
            heavy = p is not None or fallback == "function"
            yield Output(f"autograd/{decl.ident}.cpp", text, (decl.path, ctx.template_source(template)),
                         unit="autograd" if heavy else "cpu", unit_size=AUTOGRAD_UNIT_SIZE if heavy else None,
                         precompiled=True)


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
