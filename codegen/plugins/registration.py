"""The one `TORCH_LIBRARY(<namespace>, m)` block: every schema, with tags, plus the
statements other plugins contribute through the `library_block` hook.

Tags that torch.compile and torch.export need are added by torch's own rules
(`torch.library._validate_inplace_schema` and `_validate_out_schema`, which
`torch.library.define` checks a tagged schema against):

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

from ..core.literals import cpp_string
from ..lang.schema import BaseType, FunctionSchema
from ..core.torch_compat import VERSIONED_TAGS
from .base import Output, Plugin


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


class SchemaRegistration(Plugin):
    name = "schema"

    def __init__(self, plugins=()):
        self.plugins = plugins  # the active plugin list, to collect library_block statements

    def validate(self, decl, lib, diag):
        for tag, problem in (("inplace", inplace_problem), ("out", out_problem)):
            why = problem(decl.schema) if tag in decl.tags else None
            if why is not None:
                diag.error(decl.field_loc("tags"), f"the '{tag}' tag does not fit this op: {why}")

    def transform(self, lib, diag):
        """In-place ops get torch's `inplace` tag and out= ops its `out` tag (see the module
        docstring), which let torch.compile and torch.export functionalize them."""
        return replace(lib, declarations=tuple(
            replace(d, tags=d.tags + tuple(t for t in torch_tags(d.schema) if t not in d.tags))
            for d in lib.declarations))

    def emit(self, lib, ctx):
        defs = []
        for d in lib.declarations:
            # Tags newer than the oldest supported torch go through a macro (last: it may be empty).
            names = sorted(d.tags, key=lambda t: t in VERSIONED_TAGS)
            tags = "{" + ", ".join(VERSIONED_TAGS[t] if t in VERSIONED_TAGS else f"at::Tag::{t}" for t in names) + "}"
            text = cpp_string(d.schema.text(parseable=True))
            defs.append(f"m.def({text}, {tags});" if d.tags else f"m.def({text});")
        extra = [line for p in self.plugins for line in p.library_block(lib)]  # emitted before the defs
        template = "registration.cpp.j2"
        includes = sorted({inc for p in self.plugins for inc in p.library_includes(lib)})
        if any(t in VERSIONED_TAGS for d in lib.declarations for t in d.tags):
            includes = sorted(set(includes) | {"<opwrap/runtime/torch_compat.h>"})
        text = ctx.render(template, namespace=lib.namespace, defs=defs, extra=extra, includes=includes)
        # In the CPU wrappers' units: torch/library.h is all it includes, and they include it
        # too, so it costs no translation unit of its own (docs/architecture.md, "Unity units").
        yield Output("registration.cpp", text, lib.sources + (ctx.template_source(template),), unit="cpu",
                     precompiled=True)
