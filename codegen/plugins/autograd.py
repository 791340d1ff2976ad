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
unity units ``units/autograd.<k>.cpp`` (codegen/pipeline/units.py): the autograd headers are most of
the compile time of any one of them, and an edited formula recompiles only its op's unit.
A formula may call another op of the library by name (``gelu_tanh_backward(grad, self)``);
it is called through the dispatcher, so a double backward and torch.compile see that op.

Each formula statement is preceded by a ``#line`` directive naming the declaration, so a
formula that does not compile is reported by the compiler at the YAML line it came from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..api import cpp, types
from ..api.aten_ops import header_of
from ..api.kernel import tensor_arguments
from ..core.names import Scope, cpp_ident
from ..core.literals import cpp_string
from ..lang.derivatives import (LIST_METADATA, METADATA, NON_DIFFERENTIABLE, derived_forward, grad_names, has_forward,
                           is_tensor_list)
from .render import LINE_RESTORE
from ..lang.schema import BaseType, ListType, OptionalType, is_tensor, unwrap_optional
from .base import Output, Plugin

_AT_CALL = re.compile(r"\bat::([a-z_][a-z0-9_]*)\s*\(")
_FREE_CALL = re.compile(r"(?<![\w.:>])([A-Za-z_]\w*)\s*\(")


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
    """The C++ type of the node member saving a value of type `t` that a formula names (the
    type table's `saveable` column), None when it cannot be saved."""
    try:
        return types.row(t).saveable
    except types.UnsupportedType:
        return None


# Locals the node's apply and the Autograd kernel declare (templates/autograd/function.j2 and
# the statements below), and a few more kept reserved so that the generated identifiers
# keep their spelling; schema names never take them.
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
    """Decide every statement of one op's backward Node and Autograd kernel, phase by phase:
    what the node saves, its members' names, the kernel's recording, the redispatch and the
    returns' history, the forward-mode block, the saved outputs, the backward, the includes.
    Every identifier comes from one Scope, taken in that order."""
    s, d = decl.schema, decl.derivatives
    ids, scope = identifiers(s)
    op_name = cpp_string(f"{namespace}::{decl.op_name}")
    inputs = _inputs(decl)
    saved = _saved(decl, inputs)
    names = _node_names(ids, scope, inputs, saved)
    node = _node_members(inputs, saved, names)
    forward = d.differentiable and has_forward(decl)
    struct = f"{decl.ident}_Backward"
    record = _record(decl, ids, scope, inputs, saved, names, op_name, struct, forward)
    call = _call(decl, ids)
    library_ops = library_ops or {}
    calls = called_functions(d)
    helpers = bool(calls - set(library_ops))  # helper functions beside the kernel (its header)
    using = f"using namespace ::{namespace}::kernels;  // the helpers the formulas call"
    kernel = [*record.statements, *call.statements]
    if forward:
        # The returns' tangents, before the outputs are saved: a SavedVariable keeps the
        # tangent its tensor has when saved (forward over reverse, as torchgen orders it).
        kernel += [f"if ({record.forward_flag}) {{", *(["  " + using] if helpers else []),
                   *("  " + line if not line.startswith("#line") else line
                     for line in _forward_statements(decl, ids, scope, call.results, op_name)), "}"]
    kernel += _save_outputs(decl, ids, saved, names)
    kernel.append(("return {" + ", ".join(call.results) + "};") if len(call.results) > 1
                  else f"return {call.results[0]};")
    backward = [*([using] if helpers else []), *_backward(decl, ids, inputs, saved, names, op_name)]
    includes = [f"<{h}>" for h in op_headers(d, forward)]
    if helpers:
        includes.append(f'"{decl.header}"')  # helpers a formula calls live beside the kernel
    if d.once_differentiable:
        includes.append("<opwrap/runtime/once_differentiable.h>")
    includes.append("<opwrap/runtime/autograd.h>")  # the shortcut
    includes.append("<opwrap/runtime/autograd_node.h>")  # the node's helpers
    return AutogradPlan(
        struct=struct, node_name=f"{namespace}::{decl.op_name}Backward", members=node.members,
        release=node.release,
        backward=tuple(line if line.startswith("#line") else "    " + line for line in backward),
        params=", ".join(f"{cpp.argument_type(a)} {ids[a.name]}" for a in s.arguments),
        returns=cpp.returns_type(s), op_type=cpp.dispatcher_signature(s), kernel=tuple(kernel),
        includes=tuple(includes), once_differentiable=d.once_differentiable,
        op_calls=tuple(op_call(library_ops[n], namespace) for n in sorted(calls & set(library_ops))),
        no_grad_tensors=_no_grad_tensors(decl, ids), shortcut_guard=call.guard, call_args=call.args,
        function=f"{decl.ident}_autograd")


@dataclass(frozen=True)
class _Inputs:
    """The arguments the node has edges for, and the names its formulas use."""

    tensors: tuple  # Tensor and Tensor? arguments: one edge each (invalid for an absent Tensor?)
    # Tensor[] and Tensor?[] arguments: one edge per element (per position of a Tensor?[],
    # invalid where none was given); their formulas see vectors and give vectors.
    lists: tuple
    optional_lists: set[str]  # the Tensor?[] arguments' names
    uses: tuple  # every use of a name in the backward formulas
    used: set[str]

    @property
    def list_names(self) -> set[str]:
        return {a.name for a in self.lists}


def _inputs(decl) -> _Inputs:
    """Decides which arguments the node has edges for: tensors, and lists of tensors."""
    args = decl.schema.arguments
    lists = tuple(a for a in args if is_tensor_list(a.type))
    uses = tuple(decl.derivatives.uses())
    return _Inputs(tensors=tuple(a for a in args if is_tensor(unwrap_optional(a.type))
                                 and not isinstance(a.type, ListType)),
                   lists=lists, optional_lists={a.name for a in lists if _is_optional_list(a)}, uses=uses,
                   used={u.name for u in uses})


@dataclass(frozen=True)
class _Saved:
    """What the node saves, by schema name: exactly what its formulas name."""

    before: tuple[str, ...]  # Tensor inputs, saved before the call
    after: tuple[str, ...]  # written arguments, saved after it
    outputs: tuple[str, ...]  # returns
    lists: tuple[str, ...]  # Tensor[] arguments
    values: tuple  # the other arguments named (typed members)
    metadata: tuple[tuple[str, str], ...]  # (tensor, accessor): only metadata of a tensor input
    list_metadata: tuple[tuple[str, str], ...]  # (list, accessor)

    @property
    def variables(self) -> tuple[str, ...]:
        """The saved tensors, each a SavedVariable."""
        return self.before + self.after + self.outputs


def _saved(decl, inputs: _Inputs) -> _Saved:
    """Decides what the backward needs: whole tensors, or only metadata of a tensor input."""
    s, uses = decl.schema, inputs.uses
    written = {a.name for a in s.arguments if a.is_write}
    before: list[str] = []
    after: list[str] = []
    metadata: list[tuple[str, str]] = []
    for a in inputs.tensors:
        plain = [u for u in uses if u.name == a.name and u.accessor is None]
        meta = sorted({u.accessor for u in uses if u.name == a.name and u.accessor})
        if plain or (meta and a.is_optional):
            (after if a.name in written else before).append(a.name)
        else:
            metadata.extend((a.name, m) for m in meta)
    list_names = inputs.list_names
    return _Saved(
        before=tuple(before), after=tuple(after),
        outputs=tuple(n for n in s.return_names() if n in inputs.used and s.argument(n) is None),
        lists=tuple(a.name for a in inputs.lists if any(u.name == a.name and u.accessor is None for u in uses)),
        values=tuple(a for a in s.arguments
                     if a.name in inputs.used and a not in inputs.tensors and a.name not in list_names),
        metadata=tuple(metadata),
        list_metadata=tuple((a.name, m) for a in inputs.lists
                            for m in sorted({u.accessor for u in uses if u.name == a.name
                                             and u.accessor in LIST_METADATA})))


@dataclass(frozen=True)
class _NodeNames:
    """The identifiers of the node's members and of the apply's locals, by schema name (they
    never clash with a formula's names or the apply's locals)."""

    member: dict[str, str]  # a saved tensor, list or value
    meta: dict[tuple[str, str], str]  # saved metadata, by (tensor, accessor)
    size: dict[str, str]  # a list's length
    edge: dict[str, str]  # the index of an argument's first edge
    list_grads: dict[str, str]  # the gradients a formula gives a list
    positions: dict[str, str]  # a Tensor?[]'s tensors, one per position
    ids: dict[str, str]

    def edge_arg(self, a) -> str:
        """What collect_next_edges and compute_requires_grad see of an argument."""
        return self.positions[a.name] if a.name in self.positions else self.ids[a.name]


def _node_names(ids: dict[str, str], scope: Scope, inputs: _Inputs, saved: _Saved) -> _NodeNames:
    """Decides the names of the node's members and of the edges' locals."""
    member = {n: scope.fresh(f"{ids[n]}_") for n in saved.variables + saved.lists}
    member.update({a.name: scope.fresh(f"{ids[a.name]}_") for a in saved.values})
    meta = {(n, m): scope.fresh(f"{ids[n]}_{METADATA[m][0]}") for n, m in saved.metadata}
    meta.update({(n, m): scope.fresh(f"{ids[n]}_{LIST_METADATA[m][0]}") for n, m in saved.list_metadata})
    size = {a.name: scope.fresh(f"{ids[a.name]}_size") for a in inputs.lists}
    edge = {a.name: scope.fresh(f"{ids[a.name]}_edge") for a in inputs.tensors + inputs.lists}
    list_grads = {a.name: scope.fresh(f"{ids[a.name]}_grads") for a in inputs.lists}
    positions = {n: scope.fresh(f"{ids[n]}_positions") for n in inputs.optional_lists}
    return _NodeNames(member=member, meta=meta, size=size, edge=edge, list_grads=list_grads, positions=positions,
                      ids=ids)


@dataclass(frozen=True)
class _NodeMembers:
    """The node's members, and how release_variables() frees them."""

    members: tuple[str, ...]  # their declarations
    release: tuple[str, ...]  # release_variables()'s statements


def _node_members(inputs: _Inputs, saved: _Saved, names: _NodeNames) -> _NodeMembers:
    """Decides the node's member declarations and what release_variables() frees."""
    member = names.member
    members: list[str] = []
    release: list[str] = []
    for n in saved.variables:
        members.append(f"torch::autograd::SavedVariable {member[n]};")
        release.append(f"{member[n]}.reset_data();")
    for n in saved.lists:
        members.append(f"std::vector<torch::autograd::SavedVariable> {member[n]};")
        release.append(f"opwrap::rt::release_list({member[n]});")
    for a in saved.values:
        members.append(f"{_saveable_type(a.type)} {member[a.name]};")
    for (n, m), v in names.meta.items():
        ctype = METADATA[m][1] if (n, m) in saved.metadata else LIST_METADATA[m][1]
        members.append(f"{ctype} {v};")
    for a in inputs.lists:
        members.append(f"size_t {names.size[a.name]} = 0;")
    return _NodeMembers(members=tuple(members), release=tuple(release))


@dataclass(frozen=True)
class _Record:
    """The kernel's statements past the no-grad shortcut, up to the call."""

    statements: tuple[str, ...]
    forward_flag: str = ""  # the local saying whether an input has a tangent ("": no forward mode)


def _record(decl, ids: dict[str, str], scope: Scope, inputs: _Inputs, saved: _Saved, names: _NodeNames,
            op_name: str, struct: str, forward: bool) -> _Record:
    """Decides how the kernel records the node: whether forward mode runs (or is refused),
    whether an input requires grad, then the node with its next edges and what it saves of
    the inputs."""
    s, d = decl.schema, decl.derivatives
    args = s.arguments
    edge_args = [names.edge_arg(a) for a in args if a in inputs.tensors or a in inputs.lists]
    all_tensors = ", ".join(ids[a.name] for a in inputs.tensors + inputs.lists)
    kernel: list[str] = []
    forward_flag = ""
    if forward:
        forward_flag = scope.fresh("forward")
        kernel.append(f"const bool {forward_flag} = opwrap::rt::any_forward_grad({all_tensors});")
    elif d.differentiable:
        kernel.append(f"opwrap::rt::refuse_forward_grad({op_name}, {all_tensors});")
    for n in sorted(inputs.optional_lists, key=[a.name for a in args].index):
        kernel.append(f"const std::vector<at::Tensor> {names.positions[n]} = opwrap::rt::all_positions({ids[n]});")
    kernel.append(f"const bool requires_grad = torch::autograd::compute_requires_grad({', '.join(edge_args)});")
    diff_by_name = dict(zip(s.return_names(), d.output_differentiability))
    for r, n in zip(s.returns, s.return_names()):
        a = s.aliased_argument(r)
        if a is not None and a.is_write and diff_by_name[n]:
            kernel.append(f"opwrap::rt::check_inplace({ids[a.name]}, requires_grad);")
    kernel.append(f"opwrap::rt::NodePtr<{struct}> grad_fn;")
    kernel.append("if (requires_grad) {")
    kernel.append(f"  grad_fn = opwrap::rt::make_node<{struct}>();")
    kernel.append(f"  grad_fn->set_next_edges(torch::autograd::collect_next_edges({', '.join(edge_args)}));")
    kernel += ["  " + line for line in _save_inputs(decl, ids, inputs, saved, names)]
    kernel.append("}")
    return _Record(statements=tuple(kernel), forward_flag=forward_flag)


def _save_inputs(decl, ids: dict[str, str], inputs: _Inputs, saved: _Saved, names: _NodeNames) -> list[str]:
    """What the node saves before the call: the inputs' SavedVariables, lists and their
    lengths, other arguments, tensor metadata."""
    s, member, meta = decl.schema, names.member, names.meta
    out = []
    for n in saved.before:
        value = f"opwrap::rt::value_or_undefined({ids[n]})" if s.argument(n).is_optional else ids[n]
        out.append(f"grad_fn->{member[n]} = torch::autograd::SavedVariable({value}, /*is_output=*/false);")
    for n in saved.lists:
        out.append(f"grad_fn->{member[n]} = opwrap::rt::save_list({names.edge_arg(s.argument(n))});")
    for a in inputs.lists:
        out.append(f"grad_fn->{names.size[a.name]} = {ids[a.name]}.size();")
    for a in saved.values:  # as torchgen saves them (the type table's `save` column)
        out.append(f"grad_fn->{member[a.name]} = {types.row(a.type).save.format(ids[a.name])};")
    for n, m in saved.metadata:
        vec = ".vec()" if METADATA[m][1].startswith("std::vector") else ""
        out.append(f"grad_fn->{meta[(n, m)]} = {ids[n]}.{m}(){vec};")
    for n, m in saved.list_metadata:
        out.append(f"grad_fn->{meta[(n, m)]} = {LIST_METADATA[m][2]}({names.edge_arg(s.argument(n))});")
    return out


@dataclass(frozen=True)
class _Call:
    """The redispatch below autograd and the returns' history."""

    statements: tuple[str, ...]
    results: tuple[str, ...]  # per return, its C++ value
    guard: str  # the keys the redispatch skips
    args: str  # every argument, as passed on


def _call(decl, ids: dict[str, str]) -> _Call:
    """Decides the call (below autograd; through ADInplaceOrView for an op that writes, which
    moves the written arguments' versions), then the returns' history: a written argument is
    rebased on the node, a new tensor gets it, a non-differentiable return keeps an undefined
    slot."""
    s, d = decl.schema, decl.derivatives
    rets = s.return_names()
    multi = len(rets) > 1
    ret_ids = [ids[n] if s.argument(n) is None else _fresh_result(ids, n) for n in rets]
    call_args = ", ".join(ids[a.name] for a in s.arguments)
    aliased = [s.aliased_argument(r) for r in s.returns]
    guard = "at::AutoDispatchBelowAutograd" if s.is_mutable else "at::AutoDispatchBelowADInplaceOrView"
    redispatch = f"op.redispatch(ks & c10::after_autograd_keyset, {call_args})"
    kernel: list[str] = []
    if not multi and aliased[0] is not None and aliased[0].is_write:
        kernel += ["{", f"  {guard} guard;", f"  {redispatch};", "}"]
    else:
        kernel.append("at::Tensor " + ", ".join(ret_ids) + ";")
        target = f"std::tie({', '.join(ret_ids)})" if multi else ret_ids[0]
        kernel += ["{", f"  {guard} guard;", f"  {target} = {redispatch};", "}"]
    results = [ids[a.name] if a is not None and a.is_write else ret_ids[i] for i, a in enumerate(aliased)]
    kernel.append("if (grad_fn) {")
    for i, ok in enumerate(d.output_differentiability[:len(rets)]):
        a = aliased[i]
        if not ok:
            kernel.append("  opwrap::rt::skip_output(grad_fn);  // not differentiable: its slot stays undefined")
        elif a is not None and a.is_write:
            kernel.append(f"  opwrap::rt::rebase_output_history({results[i]}, grad_fn);")
        else:
            kernel.append(f"  opwrap::rt::set_output_history({results[i]}, grad_fn);")
    kernel.append("}")
    return _Call(statements=tuple(kernel), results=tuple(results), guard=guard, args=call_args)


def _save_outputs(decl, ids: dict[str, str], saved: _Saved, names: _NodeNames) -> list[str]:
    """What the node saves after the call: written arguments (an output where one is returned
    differentiable: it now has this node as grad_fn) and returns."""
    s, d = decl.schema, decl.derivatives
    if not (saved.after or saved.outputs):
        return []
    own_output = {a.name for r, ok in zip(s.returns, d.output_differentiability)
                  if ok and (a := s.aliased_argument(r)) is not None and a.is_write}
    out = ["if (grad_fn) {"]
    for n in saved.after:
        is_output = "true" if n in own_output else "false"
        out.append(f"  grad_fn->{names.member[n]} = torch::autograd::SavedVariable({ids[n]}, "
                   f"/*is_output=*/{is_output});")
    for n in saved.outputs:
        out.append(f"  grad_fn->{names.member[n]} = torch::autograd::SavedVariable({ids[n]}, /*is_output=*/true);")
    out.append("}")
    return out


def _backward(decl, ids: dict[str, str], inputs: _Inputs, saved: _Saved, names: _NodeNames,
              op_name: str) -> list[str]:
    """Decides apply()'s statements: the gradients materialized (or an early return when all
    are undefined), the saved values unpacked, the edges' indices, then each formula where
    its inputs need a gradient; once_differentiable runs them without recording."""
    d = decl.derivatives
    if not d.differentiable:
        backward = ["return torch::autograd::variable_list(num_outputs());  // no input has a gradient"]
    else:
        backward = [*_unpack(decl, ids, inputs, saved, names, op_name), *_edges(decl, names, inputs),
                    "torch::autograd::variable_list grad_inputs(num_outputs());"]
        for f in d.formulas:
            if f.differentiable:
                backward += _formula(f, ids, inputs, names, op_name)
        backward.append("return grad_inputs;")
    if not d.once_differentiable:
        return backward
    # As torch.autograd.function.once_differentiable: run without recording, and make a
    # double backward through the results raise.
    return ([f"return opwrap::rt::once_differentiable({op_name}, grads, "
             "[&]() -> torch::autograd::variable_list {"]
            + [("  " + line) if not line.startswith("#line") else line for line in backward] + ["});"])


def _unpack(decl, ids: dict[str, str], inputs: _Inputs, saved: _Saved, names: _NodeNames, op_name: str) -> list[str]:
    """The start of a differentiable backward: the gradients materialized, the saved values
    unpacked under the formulas' names, the returns' gradients named."""
    s, d, member = decl.schema, decl.derivatives, names.member
    out: list[str] = []
    if d.materialize_grads:
        out.append("opwrap::rt::materialize_grads(*this, grads);")
    else:
        out.append("// materialize_grads: false; undefined gradients reach the formulas as undefined tensors.")
        out.append("if (!opwrap::rt::any_defined(grads)) {")
        out.append("  return torch::autograd::variable_list(num_outputs());")
        out.append("}")
    for n in saved.before:
        out.append(f"const at::Tensor {ids[n]} = {member[n]}.unpack();")
    for n in saved.after + saved.outputs:  # an output's saved variable needs its grad_fn: this node
        out.append(f"const at::Tensor {ids[n]} = {member[n]}.unpack(getptr());")
    for n in saved.lists:
        out.append(f"const std::vector<at::Tensor> {ids[n]} = opwrap::rt::unpack_list({member[n]});")
    for a in saved.values:
        unpacked = types.row(a.type).unpacked  # an OptionalArray, as the ArrayRef the formula takes
        out.append(f"{unpacked or 'const auto&'} {ids[a.name]} = {member[a.name]};")
    if d.once_differentiable:
        unpacked = ["grads"] + [ids[n] for n in saved.variables + saved.lists]
        out.append(f"opwrap::rt::refuse_second_order({op_name}, {', '.join(unpacked)});")
    diff_out = [i for i, ok in enumerate(d.output_differentiability) if ok]
    if "grad" in inputs.used and len(diff_out) == 1:
        out.append(f"const at::Tensor& grad = grads[{diff_out[0]}];")
    for g, i in grad_names(s).items():
        if g in inputs.used:
            out.append(f"const at::Tensor& {ids[g]} = grads[{i}];")
    return out


def _edges(decl, names: _NodeNames, inputs: _Inputs) -> list[str]:
    """The index of each argument's first edge: one per Tensor (an absent Tensor? has an
    invalid one), one per list element."""
    out = ["size_t next_edge = 0;"]
    for a in decl.schema.arguments:
        n = a.name
        if a in inputs.lists:
            out.append(f"const size_t {names.edge[n]} = next_edge;")
            out.append(f"next_edge += {names.size[n]};")
        elif a in inputs.tensors:
            out.append(f"const size_t {names.edge[n]} = next_edge++;")
    return out


def _formula(f, ids: dict[str, str], inputs: _Inputs, names: _NodeNames, op_name: str) -> list[str]:
    """One backward formula, run where one of its inputs needs a gradient: one input's
    gradient, or a tuple of them (with grad_input_mask); a list's are scattered to its
    elements' slots."""
    edge, size, list_grads, list_names = names.edge, names.size, names.list_grads, inputs.list_names
    expr = _rename(f, ids, names.meta)
    needs = [f"opwrap::rt::should_compute_any(*this, {edge[n]}, {size[n]})" if n in list_names
             else f"task_should_compute_output({edge[n]})" for n in f.inputs]
    line = f'#line {f.loc.line} {cpp_string(f.loc.path)}'
    out: list[str] = []
    if len(f.inputs) == 1:
        n = f.inputs[0]
        out.append(f"if ({needs[0]}) {{")
        out.append(line)
        if n in list_names:
            out.append(f"  const std::vector<at::Tensor> {list_grads[n]} = {expr};")
        else:
            out.append(f"  grad_inputs[{edge[n]}] = {expr};")
    else:
        out.append(f"if ({' || '.join(needs)}) {{")
        out.append(f"  const std::array<bool, {len(needs)}> grad_input_mask = {{{', '.join(needs)}}};")
        for n in f.inputs:
            if n in list_names:
                out.append(f"  std::vector<at::Tensor> {list_grads[n]};")
        targets = ", ".join(list_grads[n] if n in list_names else f"grad_inputs[{edge[n]}]" for n in f.inputs)
        out.append(line)
        out.append(f"  std::tie({targets}) = {expr};")
    out.append(LINE_RESTORE)
    out += [f"  opwrap::rt::scatter_list_grads({op_name}, {cpp_string(n)}, {list_grads[n]}, {size[n]}, "
            f"grad_inputs, {edge[n]}, *this);" for n in f.inputs if n in list_names]
    out.append("}")
    return out


def _no_grad_tensors(decl, ids: dict[str, str]) -> str:
    """The tensors the no-grad shortcut checks ("": no shortcut).  Nothing to record (no
    input requires grad in grad mode, no forward gradient): redispatch below autograd as
    aten's VariableType kernels do, without the node.  An op that writes arguments
    redispatches through its ADInplaceOrView kernel, which moves their versions
    (AutoDispatchBelowAutograd); not for ops returning a view of an argument they do not
    write."""
    s = decl.schema
    tensors = [ids[a.name] for a in s.arguments if is_tensor(unwrap_optional(a.type))
               or (isinstance(a.type, ListType) and is_tensor(a.type.elem))]
    shortcut = tensors and all(s.aliased_argument(r) is None or r.is_write for r in s.returns)
    return ", ".join(tensors) if shortcut else ""


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


def _forward_statements(decl, ids: dict[str, str], scope, results: tuple[str, ...], op_name: str) -> list[str]:
    """The forward-mode block of the kernel: every differentiable return's tangent from its
    forward formula, or, for a pointwise op, the sum over inputs of their backward formulas
    with the input's tangent as the return's gradient.  Inputs are seen as their primal values
    (`_fw_primal`), results as computed."""
    s, d = decl.schema, decl.derivatives
    rets = s.return_names()
    derived = derived_forward(decl)
    values = _forward_values(decl, ids, scope, results, derived)
    out, names = list(values.statements), values.names
    bwd_names = {**names, **{g: ids[g] for g in grad_names(s)}}  # a derived term's backward formula
    inplace = [s.aliased_argument(r) is not None for r in s.returns]
    raw: dict[str, str] = {}  # an input's raw tangent local, declared first, by the terms that read it
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
            out += _derived_term(decl, f, i, total, raw[x], names, bwd_names, ids)
    raw_tangents = [f"const at::Tensor {local} = opwrap::rt::raw_tangent({ids[x]});"
                    for x, local in reversed(raw.items())]
    return raw_tangents + out + setters


@dataclass(frozen=True)
class _ForwardValues:
    """The values the forward formulas read: the inputs' primal values and tangents, and the
    results."""

    statements: tuple[str, ...]  # the locals holding them
    names: dict[str, str]  # schema name, <name>_p or <name>_t -> its C++ expression


def _forward_values(decl, ids: dict[str, str], scope, results: tuple[str, ...], derived: dict) -> _ForwardValues:
    """Decides which primal values and tangents the forward block reads, as locals; a written
    argument returned is its new value, without tangent."""
    s, d = decl.schema, decl.derivatives
    used: set[str] = {u.name for f in d.forward for u in f.uses}
    used |= {u.name for fs in derived.values() for f in fs for u in f.uses} | {n for fs in derived.values()
                                                                                for f in fs for n in f.inputs}
    out: list[str] = []
    names: dict[str, str] = {}
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
    for i, n in enumerate(s.return_names()):
        a = s.aliased_argument(s.returns[i])
        if a is not None and a.is_write:  # a written argument: its new value, without tangent
            if n not in used:
                continue
            p = scope.fresh(f"{ids[n] if n in ids else n}_value")
            out.append(f"const at::Tensor {p} = opwrap::rt::primal({results[i]});")
            names[n] = p
        else:
            names[n] = results[i]
    return _ForwardValues(statements=tuple(out), names=names)


def _derived_term(decl, f, i: int, total: str, raw: str, names: dict[str, str], bwd_names: dict[str, str],
                  ids: dict[str, str]) -> list[str]:
    """One term of a derived tangent of return `i`: where input x has a tangent (`raw`), its
    backward formula `f` with that tangent as the return's gradient, added to `total`."""
    s, d = decl.schema, decl.derivatives
    rets = s.return_names()
    out = [f"if ({raw}.defined()) {{", f"  torch::autograd::variable_list grads({len(rets)});"]
    for j, ok_j in enumerate(d.output_differentiability):
        if j == i:
            out.append(f"  grads[{j}] = {raw};")
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
    return out


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
        if decl.out_arguments:
            diag.error(loc, f"{decl.op_name} is an out= overload ({', '.join(a.name for a in decl.out_arguments)}); as aten's, "
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
            fallback = None if p else "out" if decl.out_arguments else "function" if needs_function(decl) else "plain"
            includes = sorted(p.includes, key=lambda h: (h.startswith('"'), h)) if p else []
            text = ctx.render(template, namespace=ns, decl=decl, p=p, includes=includes, fallback=fallback,
                              bump_versions=decl.schema.is_mutable)
            # Ops with formulas share units (`[tool.codegen] unity` of them), and so do the
            # not-implemented Functions (see needs_function); the others only register a boxed
            # kernel (torch's not-implemented
            # fallback, opwrap::rt::out_autograd), a light source that shares the CPU wrappers'
            # units (their headers are its headers: one translation unit less; measured in
            # docs/architecture.md, "Unity units").
            heavy = p is not None or fallback == "function"
            yield Output(f"autograd/{decl.ident}.cpp", text, (decl.path, ctx.template_source(template)),
                         unit="autograd" if heavy else "cpu",
                         precompiled=True)


def needs_function(decl) -> bool:
    """Whether an op without formulas needs opwrap::rt::autograd_not_implemented (a
    torch::autograd::Function) instead of torch's autogradNotImplementedFallback, which
    attaches its node to the returns only and does not see the elements of a Tensor?[]: an op
    that writes arguments, or takes a Tensor?[]."""
    s = decl.schema
    return s.is_mutable or any(is_tensor_list(a.type) and isinstance(a.type.elem, OptionalType) for a in s.arguments)
