"""torch's `inplace` and `out` tags: which ops carry them, by torch's own rules
(`torch.library._validate_inplace_schema` and `_validate_out_schema`, which
`torch.library.define` checks a tagged schema against).  Both targets' registrations read
them (plugins/registration.py, plugins/stable.py):

- `inplace`: the first positional argument is a `Tensor(a!)`, it is the only one written,
  and the op returns exactly it (`addmv_(Tensor(a!) self, ...) -> Tensor(a!)`);
- `out`: every written argument is a keyword-only `Tensor(a!)`, and the op returns them
  all, in order (`name.out(..., *, Tensor(a!) out) -> Tensor(a!)`, torchgen's out= ops).

With either tag, torch's auto_functionalize turns the call into a functional one (for
`out`, the outputs are allocated from the out arguments' metadata and only written).  A
mutating op that returns nothing needs no tag; one that returns what it writes in any
other way cannot be traced by torch.compile (its outputs alias inputs without a tag that
says how).  A hand-written `inplace` or `out` tag is checked against the same rule."""

from __future__ import annotations

from dataclasses import replace

from ..lang.schema import BaseType, FunctionSchema


def _plain_tensor(t) -> bool:
    return t == BaseType("Tensor")


def inplace_problem(s: FunctionSchema) -> str | None:
    """Why `s` cannot carry torch's `inplace` tag (torch.library._validate_inplace_schema),
    or None when it can."""
    args = s.arguments
    if not args or args[0].kwarg_only or not args[0].is_write or not _plain_tensor(args[0].type):
        return "its first positional argument must be a written Tensor, e.g. 'Tensor(a!) self'"
    if len(s.returns) != 1 or not s.returns[0].is_write or s.aliased_argument(s.returns[0]) is not args[0]:
        return f"it must return exactly its first argument '{args[0].name}', e.g. '-> Tensor(a!)'"
    others = [a.name for a in args[1:] if a.is_write]
    if others:
        return f"it may write only its first argument, but also writes {', '.join(repr(n) for n in others)}"
    return None


def out_problem(s: FunctionSchema) -> str | None:
    """Why `s` cannot carry torch's `out` tag (torch.library._validate_out_schema), or None
    when it can."""
    written = [a for a in s.arguments if a.is_write]
    if not written:
        return "it writes no argument"
    positional = [a.name for a in written if not a.kwarg_only]
    if positional:
        return f"every written argument must be keyword-only (after '*'), but {', '.join(repr(n) for n in positional)} is not"
    if any(not _plain_tensor(a.type) for a in written):
        return "every written argument must be a 'Tensor(a!)'"
    if len(s.returns) != len(written) or any(
            not r.is_write or s.aliased_argument(r) is not a for r, a in zip(s.returns, written)):
        return "it must return its written arguments, in order, e.g. '-> (Tensor(a!) values, Tensor(b!) indices)'"
    return None


def torch_tags(s: FunctionSchema) -> tuple[str, ...]:
    """The tags torch needs to trace `s` (see the module docstring)."""
    if inplace_problem(s) is None:
        return ("inplace",)
    if out_problem(s) is None:
        return ("out",)
    return ()


def validate_tags(decl, diag) -> None:
    """A hand-written `inplace` or `out` tag that does not fit the op is a positioned error."""
    for tag, problem in (("inplace", inplace_problem), ("out", out_problem)):
        why = problem(decl.schema) if tag in decl.tags else None
        if why is not None:
            diag.error(decl.field_loc("tags"), f"the '{tag}' tag does not fit this op: {why}")


def with_torch_tags(lib):
    """`lib` with torch's `inplace` tag on in-place ops and its `out` tag on out= ops, which
    let torch.compile and torch.export functionalize them."""
    return replace(lib, declarations=tuple(
        replace(d, tags=d.tags + tuple(t for t in torch_tags(d.schema) if t not in d.tags))
        for d in lib.declarations))
