"""The one `TORCH_LIBRARY(<namespace>, m)` block: every schema, with tags, plus the
statements other plugins contribute through the `library_block` hook.  The tags torch.compile
and torch.export need (`inplace`, `out`) are added by torch's own rules (codegen/api/tags.py)."""

from __future__ import annotations

from ..api.tags import validate_tags, with_torch_tags
from ..core.literals import cpp_string
from ..core.torch_compat import VERSIONED_TAGS
from .base import Output, Plugin


class SchemaRegistration(Plugin):
    name = "schema"

    def __init__(self, plugins=()):
        self.plugins = plugins  # the active plugin list, to collect library_block statements

    def validate(self, decl, lib, diag):
        validate_tags(decl, diag)

    def transform(self, lib, diag):
        return with_torch_tags(lib)

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
