"""Derivative formulas, in the dialect of torchgen's ``derivatives.yaml``.

A declaration's ``derivatives:`` mapping has one key per Tensor input (or several inputs
in one key, ``input, weight: f(grad_input_mask)``) whose value is a C++ expression, or
``non_differentiable``.  Formulas may name:

* the op's arguments (saved in forward; a Tensor used only as ``x.sym_sizes()``,
  ``x.sizes()``, ``x.dim()`` or ``x.scalar_type()`` is saved as that value, not the tensor;
  a ``Tensor[]`` used only as ``to_args_sizes(xs)``, ``to_args_sizes_symint(xs)`` or
  ``to_args_scalartypes(xs)``, as in torchgen, is saved as those lists);
* its results by name (``result``, ``result0``..., or the schema's return names);
* ``grad`` (the one differentiable output's gradient), ``grads[i]``, ``grad_<return>``;
* ``grad_input_mask`` (a ``std::array<bool, N>``) in a key naming N inputs.

Forward-mode derivatives (``torch.func.jvp``, ``jacfwd``, ``hessian``,
``torch.autograd.forward_ad``) come from keys naming a return, as in torchgen: ``result`` (the
only return, or the only differentiable one) or the return's name (``out``, ``result0``...).
Such a formula gives that return's tangent from the inputs' tangents ``<input>_t`` (zeros
where an input has none; a ``std::vector`` for a ``Tensor[]``; undefined for an absent
``Tensor?``), the inputs' values (``<input>`` or ``<input>_p``), the results and the other
arguments.  An op declared ``pointwise:`` needs none: its Jacobian is diagonal, so each
return's tangent is the sum over inputs of that input's backward formula with the input's
tangent in place of the return's ``grad`` (``derived_forward``).

The formula of a ``Tensor[]`` argument yields the list of its elements' gradients (a
``std::vector<at::Tensor>``, as torchgen's ``tensors: ...``); a ``Tensor?[]`` argument's
formula sees every position (undefined where ``None`` was given) and yields one gradient per
position.

Besides formulas, the mapping takes torchgen's ``output_differentiability: [bool...]``
and two flags that mirror ``torch.autograd.Function``'s ctx methods:
``once_differentiable: true`` and ``materialize_grads: false``.

The expressions stay C++: this module finds the names they use (to save exactly those
and to report unknown ones against the declaration) with a small tokenizer, not a C++
parser.  Identifiers after ``.``, ``->`` or ``::``, before ``(`` or ``::``, C++ keywords
and a few well-known namespaces are not variables.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import yaml

from ..core.diagnostics import Diagnostics, Loc, did_you_mean
from ..core.dtypes import DTYPES
from .schema import FunctionSchema, is_tensor, is_tensor_list, unwrap_optional


from ..core.yaml_nodes import construct as _construct, loc_of, scalar_text_loc

NON_DIFFERENTIABLE = "non_differentiable"
FLAGS = ("output_differentiability", "once_differentiable", "materialize_grads")
# Tensor metadata a formula may use without keeping the tensor alive: accessor -> (saved suffix, C++ type, IValue getter).
METADATA = {
    "sym_sizes": ("sym_sizes", "std::vector<c10::SymInt>", "toSymIntVector()"),
    "sizes": ("sizes", "std::vector<int64_t>", "toIntVector()"),
    "dim": ("dim", "int64_t", "toInt()"),
    "scalar_type": ("scalar_type", "at::ScalarType", "toScalarType()"),
}
# The same for a Tensor[] argument, written as torchgen writes them (`to_args_sizes(tensors)`):
# function -> (saved suffix, C++ type, the runtime helper that computes it).
LIST_METADATA = {
    "to_args_sizes": ("args_sizes", "std::vector<std::vector<int64_t>>", "opwrap::rt::list_sizes"),
    "to_args_sizes_symint": ("args_sym_sizes", "std::vector<std::vector<c10::SymInt>>", "opwrap::rt::list_sym_sizes"),
    "to_args_scalartypes": ("args_scalartypes", "std::vector<at::ScalarType>", "opwrap::rt::list_scalar_types"),
}
_KEYWORDS = frozenset("""
    alignas alignof and auto bool break case catch char const constexpr const_cast continue decltype default delete do
    double dynamic_cast else enum explicit false float for if inline int int64_t int32_t long mutable namespace new
    noexcept not nullptr operator or return short signed sizeof static static_assert static_cast struct switch
    template this throw true try typedef typename uint8_t unsigned using void volatile while size_t
    at c10 std torch opwrap
""".split())
_TOKEN = re.compile(r'''(?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')|(?P<num>\d[\w.']*)|(?P<id>[A-Za-z_]\w*)|(?P<op>->|::|\S)|\s+''')


@dataclass(frozen=True)
class Use:
    """One free identifier in a formula: its offset, and the metadata accessor it is
    immediately followed by (``x.sym_sizes()`` -> ``sym_sizes``), or the list metadata
    function it is the only argument of (``to_args_sizes(xs)`` -> ``to_args_sizes``; the
    use then starts at the function's name), if any."""

    name: str
    start: int
    end: int  # end of the whole use, accessor call included
    accessor: str | None


@dataclass(frozen=True)
class Formula:
    inputs: tuple[str, ...]  # the arguments this key computes gradients for
    text: str  # a C++ expression, or NON_DIFFERENTIABLE
    loc: Loc  # where the expression starts
    uses: tuple[Use, ...] = ()

    @property
    def differentiable(self) -> bool:
        return self.text != NON_DIFFERENTIABLE

    def names(self) -> set[str]:
        return {u.name for u in self.uses}


@dataclass(frozen=True)
class ForwardFormula:
    """A forward derivative: the tangent of return `output` (index `index`)."""

    output: str
    index: int
    text: str
    loc: Loc
    uses: tuple[Use, ...] = ()


@dataclass(frozen=True)
class Derivatives:
    formulas: tuple[Formula, ...]
    output_differentiability: tuple[bool, ...]  # one per return
    once_differentiable: bool = False
    materialize_grads: bool = True
    forward: tuple[ForwardFormula, ...] = ()  # the 'result:' (or return-named) keys

    @property
    def differentiable(self) -> bool:
        return any(f.differentiable for f in self.formulas) and any(self.output_differentiability)

    def formula_for(self, arg: str) -> Formula | None:
        return next((f for f in self.formulas if arg in f.inputs), None)

    def uses(self) -> list[Use]:
        """The names the backward formulas use (what the node saves)."""
        return [u for f in self.formulas for u in f.uses]

    def forward_for(self, index: int) -> ForwardFormula | None:
        return next((f for f in self.forward if f.index == index), None)


def scan(text: str, names: frozenset[str] | set[str] = frozenset()) -> list[Use]:
    """The free identifiers of a C++ expression, in order.  `names` (the schema's argument and
    return names) are uses even where they are C++ keywords (`default`, `new`): the formula
    names them as the schema does, and the autograd emitter renames them."""
    toks = [(m.lastgroup, m.group(), m.start(), m.end()) for m in _TOKEN.finditer(text) if m.lastgroup]
    uses = []
    for i, (kind, value, start, end) in enumerate(toks):
        if kind != "id" or (value in _KEYWORDS and value not in names):
            continue
        prev = toks[i - 1][1] if i else ""
        nxt = toks[i + 1][1] if i + 1 < len(toks) else ""
        if prev in (".", "->", "::") or nxt in ("(", "::"):
            continue
        accessor = None
        if nxt == "." and i + 4 < len(toks) and toks[i + 2][1] in METADATA and toks[i + 3][1] == "(" and toks[i + 4][1] == ")":
            accessor = toks[i + 2][1]
            end = toks[i + 4][3]
        elif (prev == "(" and nxt == ")" and i >= 2 and toks[i - 2][1] in LIST_METADATA
              and (i < 3 or toks[i - 3][1] not in (".", "->", "::"))):
            accessor = toks[i - 2][1]
            start, end = toks[i - 2][2], toks[i + 1][3]
        uses.append(Use(value, start, end, accessor))
    return uses


def forward_names(schema: FunctionSchema) -> set[str]:
    """The names forward formulas add to the schema's: `<input>_t` (the tangent) and
    `<input>_p` (the value) of every Tensor and Tensor[] input."""
    tensors = [a.name for a in schema.arguments if is_tensor(unwrap_optional(a.type)) or is_tensor_list(a.type)]
    return {f"{n}_t" for n in tensors} | {f"{n}_p" for n in tensors}


def grad_names(schema: FunctionSchema) -> dict[str, int]:
    """``grad_<return>`` -> output index."""
    return {f"grad_{n}": i for i, n in enumerate(schema.return_names())}


def parse(node, schema: FunctionSchema, path: str, diag: Diagnostics, output_dtypes: dict[str, str]) -> Derivatives | None:
    """Read a ``derivatives:`` YAML mapping (a composed node, so positions are kept)."""
    if not isinstance(node, yaml.MappingNode):
        diag.error(loc_of(node, path), "'derivatives' must map input names to C++ formulas, e.g. {self: grad * 2}")
        return None
    # As torch.library's register_autograd (functional ops only) and aten's _fused_adam_: an op
    # that writes a tensor list (or an optional tensor) has no formulas.  One error, not one per
    # formula that would have no gradient to use.
    unsupported = [a for a in schema.arguments if a.is_write and (a.is_optional or is_tensor_list(a.type))]
    for a in unsupported:
        diag.error(loc_of(node, path), f"'{a}' is written by {schema.name}: derivatives of ops that "
                   "write an optional tensor or a list are not supported (as torch.library's register_autograd, which "
                   "takes functional ops only)", f"without 'derivatives:', backward through {schema.name} raises 'not "
                   "implemented' and writing a leaf that requires grad is an error, as for any in-place op; or "
                   "declare a functional op that returns the new tensors, with formulas")
    if unsupported:
        return None
    rets = schema.return_names()
    tensors = [a.name for a in schema.arguments if is_tensor(unwrap_optional(a.type)) or is_tensor_list(a.type)]
    all_args = [a.name for a in schema.arguments]
    schema_names = set(all_args) | set(rets)
    formulas: list[Formula] = []
    forward: list[tuple[str, yaml.Node, Loc]] = []  # (return name, value node, key location)
    covered: dict[str, Loc] = {}
    flags: dict[str, object] = {}
    for k, v in node.value:
        key = str(k.value)
        kloc = loc_of(k, path)
        if key in FLAGS:
            flags[key] = (_construct(v), loc_of(v, path), v)
            continue
        if key not in all_args and (key in rets or key == "result"):
            forward.append((key, v, kloc))
            continue
        names = [n.strip() for n in key.split(",")]
        ok = True
        for n in names:
            if n in tensors:
                if n in covered:
                    diag.error(kloc, f"'{n}' has a second formula", f"first at {covered[n]}")
                    ok = False
                covered[n] = kloc
            elif n in all_args:
                diag.error(kloc, f"'{n}' is not a Tensor argument; only Tensor inputs have gradients")
                ok = False
            else:
                diag.error(kloc, f"'{n}' is neither an argument nor a return of {schema.name}",
                           did_you_mean(n, tensors + list(rets) + list(FLAGS))
                           or ("its Tensor arguments: " + ", ".join(tensors) + "; its returns (forward "
                               "derivatives): " + ", ".join(rets)))
                ok = False
        if not isinstance(v, yaml.ScalarNode) or v.tag != "tag:yaml.org,2002:str" or not v.value.strip():
            diag.error(loc_of(v, path), f"the formula for '{key}' must be a C++ expression string or '{NON_DIFFERENTIABLE}'")
            continue
        if ok:
            text = v.value.strip()
            uses = () if text == NON_DIFFERENTIABLE else tuple(scan(text, schema_names))
            # Locations of names are exact for one-line plain or quoted scalars.
            formulas.append(Formula(tuple(names), text, scalar_text_loc(v, path, v.value.find(text[:1])), uses))

    out_diff = tuple(True for _ in rets)
    if "output_differentiability" in flags:
        value, vloc, _ = flags["output_differentiability"]
        if not (isinstance(value, list) and all(isinstance(b, bool) for b in value) and len(value) == len(rets)):
            diag.error(vloc, f"'output_differentiability' must be a list of {len(rets)} true/false values, one per return")
        else:
            out_diff = tuple(value)
    # Outputs whose dtype rule is an integer or bool dtype never have gradients.
    out_diff = tuple(d and not (output_dtypes.get(n) in DTYPES and not DTYPES[output_dtypes[n]].differentiable)
                     for d, n in zip(out_diff, rets))
    once = materialize = None
    for name, default in (("once_differentiable", False), ("materialize_grads", True)):
        value, vloc, _ = flags.get(name, (default, None, None))
        if not isinstance(value, bool):
            diag.error(vloc, f"'{name}' must be true or false")
            value = default
        if name == "once_differentiable":
            once = value
        else:
            materialize = value

    # An out= argument (keyword-only, written) is an output, with no formula of its own; an
    # out= overload is refused by the autograd plugin anyway.
    outs = {a.name for a in schema.arguments if a.kwarg_only and a.is_write}
    for n in tensors:
        if n not in covered and n not in outs:
            diag.error(loc_of(node, path), f"no derivative formula for Tensor argument '{n}'",
                       f"add '{n}: <formula>', or '{n}: {NON_DIFFERENTIABLE}' if it has no gradient")
    fwd: list[ForwardFormula] = []
    tangents = forward_names(schema)
    diff_rets = [n for n, ok in zip(rets, out_diff) if ok]
    for key, v, kloc in forward:
        name = key
        if key == "result" and key not in rets:
            if len(diff_rets) != 1:
                diag.error(kloc, f"'result' names the only differentiable return, but {schema.name} has "
                           f"{len(diff_rets)}: name the return ({', '.join(rets)})")
                continue
            name = diff_rets[0]
        index = rets.index(name)
        if not out_diff[index]:
            diag.error(kloc, f"'{key}' is not a differentiable return, so it has no forward derivative")
            continue
        if any(f.index == index for f in fwd):
            diag.error(kloc, f"return '{name}' has a second forward-derivative formula")
            continue
        if not isinstance(v, yaml.ScalarNode) or v.tag != "tag:yaml.org,2002:str" or not v.value.strip():
            diag.error(loc_of(v, path), f"the forward-derivative formula for '{key}' must be a C++ expression string")
            continue
        text = v.value.strip()
        fwd.append(ForwardFormula(name, index, text, scalar_text_loc(v, path, v.value.find(text[:1])),
                                  tuple(scan(text, schema_names | tangents))))
    result = Derivatives(tuple(formulas), out_diff, once, materialize, tuple(sorted(fwd, key=lambda f: f.index)))
    check_names(result, schema, diag)
    return result


def check_names(d: Derivatives, schema: FunctionSchema, diag: Diagnostics) -> None:
    """Every free name of a formula must be something the backward can provide."""
    rets = schema.return_names()
    diff_outputs = [i for i, ok in enumerate(d.output_differentiability) if ok]
    arg_names = {a.name for a in schema.arguments}
    written = {a.name for a in schema.arguments if a.is_write}
    lists = {a.name for a in schema.arguments if is_tensor_list(a.type)}
    grads = grad_names(schema)
    for f in d.formulas:
        if not f.differentiable:
            continue
        known = arg_names | set(rets) | set(grads) | {"grads"}
        if len(diff_outputs) == 1:
            known.add("grad")
        if len(f.inputs) > 1:
            known.add("grad_input_mask")
        for u in f.uses:
            loc = f.loc.shifted(u.start)
            if u.accessor in LIST_METADATA and u.name not in lists:
                diag.error(loc, f"{u.accessor}() takes a Tensor[] argument; '{u.name}' is not one",
                           f"a Tensor's metadata is {u.name}.sym_sizes(), .sizes(), .dim() or .scalar_type()"
                           if u.name in arg_names else "")
            elif u.accessor in METADATA and u.name in lists:
                diag.error(loc, f"'{u.name}' is a Tensor[]: its elements' sizes are to_args_sizes({u.name}) "
                           f"(to_args_sizes_symint, to_args_scalartypes), as in torchgen")
            elif u.name in written and u.name not in rets:
                diag.error(loc, f"'{u.name}' is modified in place by {schema.name}; its value before the call "
                           "is not available to a derivative formula")
            elif u.name in grads and grads[u.name] not in diff_outputs:
                diag.error(loc, f"'{u.name}' is the gradient of a non-differentiable output")
            elif u.name not in known:
                hint = did_you_mean(u.name, sorted(known))
                if u.name == "grad" and not diff_outputs:
                    hint = f"{schema.name} has no differentiable output, so no formula has a gradient to use"
                elif u.name == "grad" and len(diff_outputs) != 1:
                    hint = f"{schema.name} has {len(diff_outputs)} differentiable outputs: use grads[i] or " + \
                        ", ".join(n for n in grads if grads[n] in diff_outputs)
                elif u.name == "grad_input_mask":
                    hint = "grad_input_mask exists in a formula for several inputs ('a, b: ...')"
                diag.error(loc, f"unknown name '{u.name}' in the derivative formula for '{', '.join(f.inputs)}'",
                           hint or "formulas may use the arguments, the results, grad, grads[i], grad_<result> "
                           "and grad_input_mask")
        if not f.uses and not f.text:
            diag.error(f.loc, "empty formula")
    forward_known = arg_names | set(rets) | forward_names(schema)
    for ff in d.forward:
        for u in ff.uses:
            loc = ff.loc.shifted(u.start)
            base = u.name[:-2] if u.name.endswith(("_t", "_p")) and u.name not in arg_names else u.name
            if base in written and base not in rets and u.name in (base, f"{base}_p"):
                diag.error(loc, f"'{u.name}' is modified in place by {schema.name}; its value before the call is "
                           "not available to a forward-derivative formula", "its tangent is "
                           f"'{u.name}_t'; its new value is the result")
            elif u.name in ("grad", "grads") or u.name in grads:
                diag.error(loc, f"'{u.name}' is a backward name; a forward-derivative formula gives the tangent of "
                           f"'{ff.output}' from the inputs' tangents (<input>_t)")
            elif u.name not in forward_known:
                diag.error(loc, f"unknown name '{u.name}' in the forward-derivative formula for '{ff.output}'",
                           did_you_mean(u.name, sorted(forward_known)) or "forward formulas may use the arguments, their "
                           "tangents <input>_t, their values <input>_p and the results")


def derived_forward(decl) -> dict[int, tuple[Formula, ...]]:
    """For an op declared ``pointwise:`` (elementwise, so each return's Jacobian with respect to
    each input is diagonal, up to broadcasting): every differentiable return without a
    forward formula of its own, with the one-input backward formulas whose tangent terms sum
    to its tangent.  Empty when a formula covers several inputs at once (its gradients come
    as a tuple) or the op is not pointwise: such returns need a written formula."""
    d = decl.derivatives
    if d is None or not getattr(decl, "pointwise", None) or not d.differentiable:
        return {}
    diff = [f for f in d.formulas if f.differentiable]
    if any(len(f.inputs) != 1 or is_tensor_list(decl.schema.argument(f.inputs[0]).type) for f in diff):
        return {}
    return {i: tuple(diff) for i, ok in enumerate(d.output_differentiability)
            if ok and d.forward_for(i) is None}


def has_forward(decl) -> bool:
    """Whether every differentiable return has a forward derivative (written or derived)."""
    d = decl.derivatives
    if d is None or not d.differentiable:
        return False
    derived = derived_forward(decl)
    return all(d.forward_for(i) is not None or i in derived
               for i, ok in enumerate(d.output_differentiability) if ok)


__all__ = ["Derivatives", "Formula", "ForwardFormula", "derived_forward", "has_forward", "Use", "parse", "scan", "NON_DIFFERENTIABLE", "METADATA", "LIST_METADATA"]
