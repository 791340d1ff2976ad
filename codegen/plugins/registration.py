"""The one `TORCH_LIBRARY(<namespace>, m)` block: every schema, with tags, plus the
statements other plugins contribute through the `library_block` hook."""

from __future__ import annotations

from dataclasses import replace

from ..api.names import cpp_string
from .base import Output, Plugin

# at::Tag values that not every supported torch (>= 2.6) has: tag -> (macro, (major, minor) since).
VERSIONED_TAGS = {"inplace": ("OPWRAP_TAG_INPLACE", (2, 13))}


def _returns_self(s) -> bool:
    return s.is_inplace and len(s.returns) == 1 and s.aliased_argument(s.returns[0]) is s.argument("self")


class SchemaRegistration(Plugin):
    name = "schema"

    def __init__(self, plugins=()):
        self.plugins = plugins  # the active plugin list, to collect library_block statements

    def transform(self, lib, diag):
        """In-place ops that return `self` get torch's `inplace` tag, which lets torch.compile
        functionalize them (auto_functionalize accepts a mutated first argument that is also
        returned).  Other ops whose name ends in '_' return what they like, untagged."""
        return replace(lib, declarations=tuple(
            replace(d, tags=d.tags + ("inplace",)) if _returns_self(d.schema) and "inplace" not in d.tags else d
            for d in lib.declarations))

    def emit(self, lib, ctx):
        defs = []
        for d in lib.declarations:
            # Tags newer than the oldest supported torch go through a macro (last: it may be empty).
            names = sorted(d.tags, key=lambda t: t in VERSIONED_TAGS)
            tags = "{" + ", ".join(VERSIONED_TAGS[t][0] if t in VERSIONED_TAGS else f"at::Tag::{t}" for t in names) + "}"
            defs.append(f"m.def({cpp_string(str(d.schema))}, {tags});" if d.tags else f"m.def({cpp_string(str(d.schema))});")
        extra = [line for p in self.plugins for line in p.library_block(lib)]  # emitted before the defs
        template = "registration.cpp.j2"
        includes = sorted({inc for p in self.plugins for inc in p.library_includes(lib)})
        versioned = [(macro, tag, since) for tag, (macro, since) in sorted(VERSIONED_TAGS.items())
                     if any(tag in d.tags for d in lib.declarations)]
        if versioned:
            includes = sorted(set(includes) | {"<torch/version.h>"})
        text = ctx.render(template, namespace=lib.namespace, defs=defs, extra=extra, includes=includes,
                          versioned=versioned)
        # In the CPU wrappers' units: torch/library.h is all it includes, and they include it
        # too (a translation unit of its own cost about 5 s of compiler time a library at -O0).
        yield Output("registration.cpp", text, lib.sources + (ctx.template_source(template),), unit="cpu")
