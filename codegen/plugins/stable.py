"""The stable-ABI target's emitters (docs/stable-abi.md), which take the place of the full
target's C++ emitters when `[tool.codegen] target = "stable"` (codegen/core/targets.py, STABLE):

- ``stable-checks``: every declaration feature the target cannot express yet is a positioned
  error naming what torch's stable API lacks (codegen/api/stable.py, `problems`); the fields
  of the full target's plugins that it has no emitter for (`method`) are declared
  here so that using one is that error, not "unknown field";
- ``stable-cpu``: per op, `<cpp_dir>/cpu/<op>.cpp`, the wrapper (checks, allocation from the
  shape rule, dtype dispatch) registered with `STABLE_TORCH_LIBRARY_IMPL` and `TORCH_BOX`;
- ``stable-schema``: `<cpp_dir>/registration.cpp`, the one `STABLE_TORCH_LIBRARY` block with
  the same schema strings as the full target's, and `python/schemas.py`, which defines the ops
  tagged `inplace` or `out` (in-place ops, out= overloads) with those tags where the running
  torch has them: torch's stable C++ API cannot attach either tag in any release;
- ``stable-autograd``: `python/autograd.py`, the derivative formulas registered with
  `torch.library.register_autograd` (the stable API has no C++ autograd); a formula must be
  a Python expression over the op's arguments, results and `grad`.

The Python surface (fake kernels, typed wrappers and .pyi, vmap) and the C ABI bindings are
the full target's plugins, unchanged; autocast is plugins/stable_autocast.py's Python kernels."""

from __future__ import annotations

import ast
import keyword
import re
from dataclasses import dataclass

from ..api import stable
from ..api.kernel import check_foreign
from ..api.tags import validate_tags, with_torch_tags
from ..core.literals import cpp_string, py_string
from ..lang.derivatives import derived_forward, forward_names
from ..lang.schema import ListType, is_tensor, unwrap_optional
from ..core.targets import CPU, Device, Target
from ..core.torch_compat import VERSIONED_TAGS
from .base import Output, Plugin

__all__ = ["StableChecks", "StableKernels", "StableRegistration", "StableAutograd"]


class StableChecks(Plugin):
    """What the stable target cannot express, reported against the declaration."""

    name = "stable-checks"
    target_limits = True

    def __init__(self, fields=None):
        self.fields = dict(fields or {})

    def validate(self, decl, lib, diag):
        for key, _ in decl.foreign:  # what the C ABI cannot pass, a Rust kernel without a crate, ...
            check_foreign(decl, key, diag, lib.config)
        for p in stable.problems(decl):
            where = decl.field_loc(p.field) if p.field and p.field in dict(decl.field_locs) else decl.func_loc
            diag.error(where, p.message, p.hint)
        for p in autograd_problems(decl, library_ops(lib)):
            diag.error(p[0], p[1], p[2])
        for key in stable.DEVICE_KEYS:  # a hand-written C++ kernel's header: `<op>.h`, `<op>.cuh` for CUDA
            field = "header" if key == "CPU" else "cuda_header"
            if decl.foreign_kernel(key) is not None or not decl.kernel(key) or decl.failed(field):
                continue
            header = stable.kernel_header(decl, key)
            if not lib.config.kernel_header(header) and not stable.problems(decl):
                what = "kernel header" if key == "CPU" else f"{key} kernel header"
                where = field if field in dict(decl.field_locs) else "kernels"
                diag.error(decl.field_loc(where), f"{what} '{lib.config.kernels}/{header}' not found",
                           f"write there, against torch's stable API: `{stable.stable_signature(decl, key)}`")


class StableKernels(Plugin):
    """The stable target's wrappers of one device row (CPU, CUDA): `<cpp_dir>/<unit>/<op><suffix>`,
    compiled in the units of group `stable` (CPU) or `stable.<unit>` (CUDA: by nvcc, where CUDA
    is built, as the full target's CUDA sources are)."""

    def __init__(self, target: Target, device: Device):
        self.target, self.device = target, device
        self.name = f"stable-{device.unit}"

    def emit(self, lib, ctx):
        template, device = "stable/op.cpp.j2", self.device
        group = "stable" if device == CPU else f"stable.{device.unit}"
        for d in lib.declarations:
            if device.key not in d.devices or d.expression is not None or stable.problems(d):
                continue  # (a pointwise expression's kernels: plugins/stable_pointwise.py)
            call = stable.plan(d, lib.namespace, device.key)
            text = ctx.render(template, namespace=lib.namespace, decl=d, call=call, target=self.target)
            yield Output(f"{self.target.cpp_dir}/{device.unit}/{d.ident}{device.suffix}", text,
                         (d.path, ctx.template_source(template)), unit=group)


def python_defined(decl) -> bool:
    """Whether the op is defined from Python (`python/schemas.py`), not in the
    STABLE_TORCH_LIBRARY block: it carries torch's `inplace` or `out` tag, which torch's stable
    C++ API cannot attach (no release's `torch_tag_*` getters name them)."""
    return any(t in VERSIONED_TAGS for t in decl.tags)


class StableRegistration(Plugin):
    """The one STABLE_TORCH_LIBRARY block: the same schema strings as the full target's, and
    the tags torch.compile needs by the full target's rules (codegen/api/tags.py).  An op
    tagged `inplace` or `out` is defined from Python instead (`python_defined`), with the tags
    the running torch has; the stable C++ API defines the others, without tags, as before."""

    name = "stable-schema"

    def __init__(self, target: Target):
        self.target = target

    def validate(self, decl, lib, diag):
        validate_tags(decl, diag)

    def transform(self, lib, diag):
        return with_torch_tags(lib)

    def emit(self, lib, ctx):
        template = "stable/registration.cpp.j2"
        defs = [cpp_string(d.schema.text(parseable=True)) for d in lib.declarations if not python_defined(d)]
        text = ctx.render(template, namespace=lib.namespace, defs=defs, target=self.target)
        yield Output(f"{self.target.cpp_dir}/registration.cpp", text, lib.sources + (ctx.template_source(template),),
                     unit="stable")
        tagged = [d for d in lib.declarations if python_defined(d)]
        if tagged:
            template = "stable/schemas.py.j2"
            defs = [(d.schema.text(parseable=True), repr(tuple(sorted(d.tags)))) for d in tagged]
            yield Output("python/schemas.py", ctx.render(template, namespace=lib.namespace, defs=defs,
                                                         py_string=py_string),
                         tuple(sorted({d.path for d in tagged})) + (ctx.template_source(template),))


# Names an argument may not take: the generated functions' own that formulas see (setup_context's
# `inputs` and `output` are moved to fresh names where an argument takes theirs).
_RESERVED = ("ctx", "grad", "grads", "torch")


def _formula_names(decl) -> set[str]:
    return {a.name for a in decl.schema.arguments} | set(_result_names(decl)) | set(_grad_names(decl)) | {"torch"}


def library_ops(lib) -> set[str]:
    """The names a formula may call as the library's ops (torch.ops.<namespace>.<name>, through
    _runtime.formula_op)."""
    return {d.name for d in lib.declarations}


def autograd_problems(decl, ops: set[str] = frozenset()) -> list[tuple]:
    """(loc, message, hint) for each derivative the stable target's Python autograd cannot run;
    `ops`: the library's op names, which formulas may call."""
    d = decl.derivatives
    if d is None or not d.differentiable:
        return []
    out = []
    hint = "write it as a Python expression over the op's arguments, results and `grad` (e.g. `grad * factor`)"
    loc = decl.field_loc("derivatives")
    lists = {a.name for a in decl.schema.arguments if stable.type_key(a) == "Tensor[]"}
    fw_allowed = _formula_names(decl) | forward_names(decl.schema) | ops
    for ff in d.forward:
        if lists:
            out.append((ff.loc, "the stable target has no forward formulas for an op with a Tensor[] argument "
                        f"('{', '.join(sorted(lists))}') yet", "leave the forward formula out"))
        elif (problem := python_formula_problem(_py(decl, ff.text), fw_allowed)) is not None:
            out.append((ff.loc, f"the stable target runs forward formulas in Python (an autograd.Function's "
                        f"jvp): {problem}", "write it as a Python expression over the op's arguments, their "
                        "tangents (`self_t`) and results (e.g. `self_t.mm(other) + self.mm(other_t)`)"))
    if not d.materialize_grads:  # a formula would see None, which no formula the core accepts can test
        out.append((loc, "the stable target has no 'materialize_grads: false' yet: its formulas see zeros for "
                    "the returns without a gradient", "leave 'materialize_grads' out"))
    # torch.library.register_autograd refuses both when the library loads (every claimed release)
    if decl.schema.is_mutable:
        out.append((loc, "the stable target registers derivatives with torch.library.register_autograd, which "
                    "takes functional ops only, and this op writes its arguments",
                    "declare the derivatives on a functional op, or build in the full target"))
    keyword_tensors = [a.name for a in decl.schema.arguments if a.kwarg_only and (
        is_tensor(unwrap_optional(a.type)) or (isinstance(a.type, ListType) and is_tensor(unwrap_optional(a.type.elem))))]
    if keyword_tensors:
        out.append((decl.func_loc, "the stable target registers derivatives with torch.library.register_autograd, "
                    f"which takes no keyword-only tensor ({', '.join(repr(n) for n in keyword_tensors)})",
                    "declare it before '*'"))
    for a in decl.schema.arguments:
        if keyword.iskeyword(a.name) or a.name in _RESERVED:
            out.append((decl.func_loc, f"argument '{a.name}' is a Python keyword or a name the stable target's "
                        "Python autograd uses; rename it", ""))
    allowed = _formula_names(decl) | ops
    for f in d.formulas:
        if not f.differentiable:
            continue
        named = set(f.inputs) | _names(_py(decl, f.text)) if python_formula_problem(_py(decl, f.text), allowed) is None \
            else set(f.inputs)
        if named & lists:
            out.append((f.loc, f"the stable target does not differentiate through or save a Tensor[] argument "
                        f"('{', '.join(sorted(named & lists))}') yet", ""))
            continue
        if len(f.inputs) != 1:
            out.append((f.loc, "the stable target takes one input per derivative formula so far "
                        f"('{', '.join(f.inputs)}' share one)", "give each input its own formula"))
            continue
        problem = python_formula_problem(_py(decl, f.text), allowed)
        if problem:
            out.append((f.loc, f"the stable target runs derivative formulas in Python "
                        f"(torch.library.register_autograd): {problem}", hint))
    return out


# C++'s boolean literals, which derivatives.yaml's formulas use (`x.sum(-1, true)`), as Python's.
_CPP_BOOLEANS = re.compile(r"(?<![\w.])(true|false)(?!\w)")


# at::Tensor's methods that torch.Tensor spells otherwise, as formulas written for the full
# target call them (`grad.to(self.scalar_type())`, derivatives.yaml's `sym_sizes()`): the
# Python the stable target runs calls torch.Tensor's (`.dtype`, `.shape`, `.expand(`).
_CPP_METHODS = {"scalar_type()": ".dtype", "sizes()": ".shape", "sym_sizes()": ".shape", "sym_numel()": ".numel()",
                "sym_size(": ".size(", "expand_symint(": ".expand(", "sym_strides()": ".stride()",
                "strides()": ".stride()"}
_CPP_METHOD = re.compile(r"\.(scalar_type|sizes|sym_sizes|sym_numel|sym_strides|strides)\s*\(\s*\)|"
                         r"\.(sym_size|expand_symint)\s*\(")


def _py(decl, text: str) -> str:
    """Formula `text` as the Python the stable target runs: C++'s `true` and `false` are
    Python's `True` and `False`, except where the op names an argument or a return so (a
    formula's name is then the argument, as in the full target: lang.derivatives.scan); the
    methods of _CPP_METHODS are torch.Tensor's."""
    own = {a.name for a in decl.schema.arguments} | set(decl.return_names)
    text = _CPP_BOOLEANS.sub(lambda m: m.group(1) if m.group(1) in own else m.group(1).capitalize(), text)
    return _CPP_METHOD.sub(lambda m: _CPP_METHODS[m.group(1) + "()" if m.group(1) else m.group(2) + "("], text)


def python_formula_problem(text: str, allowed: set[str]) -> str | None:
    """Why the C++ formula `text` is not also a Python expression the generated backward can
    evaluate as it stands, or None."""
    if "::" in text or "->" in text:
        return f"'{text}' is C++ (it has '::' or '->'), not a Python expression"
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        return f"'{text}' is not a Python expression"
    unknown = sorted({n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - allowed)
    if unknown:
        return f"'{text}' names {', '.join(unknown)}, which is not an argument, a result, 'grad' or an op of the library"
    return None


@dataclass(frozen=True)
class _Backward:
    """One op's generated setup_context and backward functions, as their statements."""

    op: str  # "namespace::name.overload"
    ident: str
    setup: tuple[str, ...]  # setup_context's body
    head: tuple[str, ...]  # backward's statements before its return
    grads: tuple[str, ...]  # per argument: its gradient expression (guarded by needs_input_grad), or "None"
    once_differentiable: bool = False  # run without a graph; a double backward raises (_once_differentiable)
    jvp: tuple[str, ...] = ()  # the jvp function's body (forward formulas), or () where there is none

class StableAutograd(Plugin):
    """`python/autograd.py`: each differentiable op's formulas, registered with
    torch.library.register_autograd when the library loads (its loader imports it)."""

    name = "stable-autograd"

    def emit(self, lib, ctx):
        ops = [b for d in lib.declarations if (b := _backward(d, lib.namespace, library_ops(lib))) is not None]
        if not ops:
            return
        template = "stable/autograd.py.j2"
        sources = tuple(sorted({d.path for d in lib.declarations if d.derivatives is not None}))
        yield Output("python/autograd.py", ctx.render(template, ops=ops, py_string=py_string),
                     sources + (ctx.template_source(template),))


def _result_names(decl) -> dict[str, int]:
    """The names formulas give the returns: `result` (one return) or `result<i>`, and each
    return's own name (as derivatives.py reads them)."""
    names = decl.return_names
    out = {"result": 0} if len(names) == 1 else {f"result{i}": i for i in range(len(names))}
    out.update({n: i for i, n in enumerate(names)})
    return out


def _grad_names(decl) -> dict[str, str]:
    """The names formulas give the returns' gradients: `grads` (all), `grad_<return>`, and `grad`
    (the one differentiable return's), as Python expressions over backward's `grads`."""
    d = decl.derivatives
    out = {"grads": "grads", **{f"grad_{n}": f"grads[{i}]" for i, n in enumerate(decl.return_names)}}
    differentiable = [i for i, flag in enumerate(d.output_differentiability) if flag]
    if len(differentiable) == 1:
        out["grad"] = f"grads[{differentiable[0]}]"
    return out


def _fresh_py(base: str, taken: set[str]) -> str:
    """`base`, or `base_`, `base__`...: the first not in `taken` (then taken)."""
    while base in taken:
        base += "_"
    taken.add(base)
    return base


def _backward(decl, namespace: str, ops: set[str] = frozenset()) -> _Backward | None:
    """Decide setup_context and backward: save the tensor arguments and results the formulas
    use (the other arguments on ctx), mark the returns that are not differentiable, and give
    each input that needs a gradient its formula's value."""
    d = decl.derivatives
    if d is None or not d.differentiable or autograd_problems(decl, ops):
        return None
    args = decl.schema.arguments
    used: set[str] = set()
    for f in d.formulas:
        if f.differentiable:
            used |= _names(_py(decl, f.text))
    single = len(decl.schema.returns) == 1
    results = {name: i for name, i in _result_names(decl).items() if name in used}
    kept = sorted(set(results.values()))  # the returns backward needs
    tensors = [a.name for a in args if is_tensor(unwrap_optional(a.type)) and a.name in used]
    values = [a.name for a in args if not is_tensor(unwrap_optional(a.type)) and a.name in used]
    # setup_context is called with the keywords ctx, inputs and output (torch.library): where an
    # argument takes one of those names, its first statement moves them to fresh ones.
    taken = {a.name for a in args} | set(_RESERVED)
    inputs, out = (_fresh_py(base, taken) for base in ("inputs", "output"))
    output = (lambda i: out) if single else (lambda i: f"{out}[{i}]")
    moved = [f"{inputs}, {out} = inputs, output"] if (inputs, out) != ("inputs", "output") else []
    nondiff = [output(i) for i, flag in enumerate(d.output_differentiability)
               if not flag and is_tensor(decl.schema.returns[i].type)]
    setup = [*moved, f"{', '.join(a.name for a in args)}, = {inputs}",
             f"ctx.save_for_backward({', '.join([*tensors, *(output(i) for i in kept)])})",
             *(f"ctx.{name} = {name}" for name in values),
             # one call: each call replaces what the last marked
             *([f"ctx.mark_non_differentiable({', '.join(nondiff)})"] if nondiff else [])]
    saved = [*tensors, *(f"saved_result{i}" for i in kept)]
    head = [f"{', '.join(saved)}, = ctx.saved_tensors"] if saved else []
    head += [f"{name} = saved_result{i}" for name, i in sorted(results.items())]
    head += [f"{name} = ctx.{name}" for name in values]
    head += [f"{name} = {expr}" for name, expr in _grad_names(decl).items() if name in used and name != "grads"]
    own = _formula_names(decl)  # a name of the op's own shadows an op of the library
    head += [f"{name} = _runtime.formula_op({py_string(f'{namespace}::{name}')})" for name in sorted((used & ops) - own)]
    grads = []
    for k, a in enumerate(args):
        f = d.formula_for(a.name)
        differentiable = f is not None and f.differentiable and is_tensor(unwrap_optional(a.type))
        grads.append(f"({_py(decl, f.text)}) if ctx.needs_input_grad[{k}] else None" if differentiable else "None")
    op = f"{namespace}::{decl.op_name}"
    jvp = _jvp(decl, op, namespace, ops, output)
    if jvp:
        setup += jvp[0]
    return _Backward(op=op, ident=decl.ident, setup=tuple(setup), head=tuple(head), grads=tuple(grads),
                     once_differentiable=d.once_differentiable, jvp=tuple(jvp[1]) if jvp else ())


def _names(text: str) -> set[str]:
    """The names a Python expression reads."""
    return {n.id for n in ast.walk(ast.parse(text, mode="eval")) if isinstance(n, ast.Name)}


def _jvp(decl, op: str, namespace: str, ops: set[str], output) -> tuple[list[str], list[str]] | None:
    """The forward mode of an op, as (the statements setup_context adds, the jvp function's
    body), or None where it has none: every differentiable return needs a forward formula, or
    (`pointwise:`, one differentiable return) one derived from the backward formulas, as the
    full target derives it (lang.derivatives.derived_forward): the sum over the inputs with a
    tangent of the input's formula with `grad` as that tangent.  Formulas see the arguments
    (`x`, `x_p`), their tangents (`x_t`: zeros where an input has none, None for an absent
    optional tensor), the results and the library's ops."""
    d = decl.derivatives
    args, returns = decl.schema.arguments, decl.schema.returns
    if any(stable.type_key(a) == "Tensor[]" for a in args):
        return None
    differentiable = [i for i, flag in enumerate(d.output_differentiability) if flag and is_tensor(returns[i].type)]
    derived = derived_forward(decl)
    texts: dict[int, str] = {}
    terms: dict[str, str] = {}  # derived: input -> its formula, with `grad` the input's tangent
    for i in differentiable:
        if (ff := d.forward_for(i)) is not None:
            texts[i] = _py(decl, ff.text)
        elif i in derived and len(differentiable) == 1:
            for f in derived[i]:
                if not _names(_py(decl, f.text)) & (set(_grad_names(decl)) - {"grad"}):
                    terms[f.inputs[0]] = _py(decl, f.text)
                else:
                    return None
        else:
            return None
    used = set().union(*(_names(t) for t in [*texts.values(), *terms.values()]))
    tensor_args = [a for a in args if is_tensor(unwrap_optional(a.type))]
    saved = [a.name for a in tensor_args if {a.name, f"{a.name}_p", f"{a.name}_t"} & used or a.name in terms]
    values = [a.name for a in args if not is_tensor(unwrap_optional(a.type)) and a.name in used]
    # the jvp's own locals, apart from every name a formula may use
    taken = _formula_names(decl) | forward_names(decl.schema) | ops | set(_RESERVED)
    tangents_, tangent, term = (_fresh_py(base, taken) for base in ("tangents", "tangent", "term"))
    # the returns: those with a tangent, and those the formulas read (layer_norm's mean and rstd)
    kept = sorted(set(differentiable) | {i for name, i in _result_names(decl).items()
                                         if name in used and is_tensor(returns[i].type)})
    fw_result = {i: _fresh_py(f"fw_result{i}", taken) for i in kept}
    setup = [f"ctx.save_for_forward({', '.join([*saved, *(output(i) for i in kept)])})",
             *(f"ctx.{name} = {name}" for name in values)]
    body = [f"{tangents_} = tangents"] if tangents_ != "tangents" else []
    body += [f"{', '.join([*saved, *fw_result.values()])}, = ctx.saved_tensors"]
    body += [f"{name} = {fw_result[i]}" for name, i in sorted(_result_names(decl).items())
             if name in used and i in fw_result]
    body += [f"{name} = ctx.{name}" for name in values]
    own = _formula_names(decl)
    body += [f"{name} = _runtime.formula_op({py_string(f'{namespace}::{name}')})" for name in sorted((used & ops) - own)]
    position = {a.name: k for k, a in enumerate(args)}
    for a in tensor_args:
        k = position[a.name]
        if f"{a.name}_p" in used:
            body.append(f"{a.name}_p = {a.name}")
        if f"{a.name}_t" in used:
            zeros = f"torch.zeros_like({a.name})"
            if a.is_optional:
                zeros = f"None if {a.name} is None else {zeros}"
            body.append(f"{a.name}_t = {tangents_}[{k}] if {tangents_}[{k}] is not None else {zeros}")
    if terms:  # derived: one differentiable return
        (i,) = differentiable
        body.append(f"{tangent} = None")
        for name, text in terms.items():
            k = position[name]
            body += [f"if {tangents_}[{k}] is not None:", f"    grad = {tangents_}[{k}]",
                     f"    {term} = {text}", f"    {tangent} = {term} if {tangent} is None else {tangent} + {term}"]
        texts[i] = tangent
    names = decl.return_names
    body.append("return (" + "".join(
        f"_runtime.forward_tangent({py_string(op)}, {py_string(names[i])}, {texts[i]}, {fw_result[i]}), "
        if i in texts else "None, " for i in range(len(returns))) + ")")
    return setup, body
