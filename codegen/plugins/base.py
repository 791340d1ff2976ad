"""The plugin interface.  Every emitter, built-in or third-party, is a ``Plugin``.

A plugin is a class with a ``name`` and any of these hooks; each has one documented
signature and a declared way of combining results across plugins:

=================  =====================================================  ==============
hook               signature                                              combined as
=================  =====================================================  ==============
``fields``         class attribute: declaration field -> ``Field``        union; a name
                   (codegen/front/fields.py: type and doc), or -> a plain       twice is an
                   description, which means ``Field(Any(), doc)``          error
``validate``       ``(decl, lib, diag) -> None``; report with ``diag``     all run
``transform``      ``(lib, diag) -> Library``; return a new model          chained
``library_block``  ``(lib) -> Iterable[str]``: statements for the one      concatenated,
                   ``TORCH_LIBRARY`` block of the namespace               plugin order
``library_includes`` ``(lib) -> Iterable[str]``: headers those statements   union, sorted
                   need, as written after ``#include``
``emit``           ``(lib, ctx) -> Iterable[Output]``                      all; a path
                                                                          twice is an error
=================  =====================================================  ==============

Hooks never mutate the model (it is frozen); ``transform`` returns a new ``Library``
built with ``dataclasses.replace``.

The loader checks every field value against its type before any hook runs, and
``decl.extra_field(name)`` is the checked value (frozen: tuples, not lists).  ``validate``
runs on every op whose schema parsed, even when the run has other errors; a field given
with a wrong value holds its default and is named in ``decl.invalid_fields``, so a check
that depends on it should skip it (``decl.failed(name)``) rather than report a second error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Iterable, Mapping

if TYPE_CHECKING:
    from ..core.diagnostics import Diagnostics
    from ..front.fields import Field
    from ..front.model import Declaration, Library
    from .render import EmitContext
    from ..core.targets import Device


@dataclass(frozen=True)
class Output:
    """One generated file.  ``path`` is relative to the generated directory; ``sources``
    (declaration files and templates, relative to the project root) go into the banner.

    ``unit`` names the group of a C++ or CUDA source that is compiled together with the
    others of that group (e.g. ``"cpu"``, ``"pointwise.AVX2"``, ``"cuda"``): the pipeline
    writes ``units/<unit>.<k>.cpp`` files that include up to ``[tool.codegen] unity`` of
    them (codegen/pipeline/units.py).  Sources of one group must not define the same name twice
    in one namespace.  ``None``: a source compiled alone, or not a source.  ``unit_size``
    caps how many sources of the group share a unit, below ``[tool.codegen] unity``, for
    groups whose sources are often edited one at a time (the smallest cap of a group holds).
    ``precompiled``: the source may follow ``<opwrap/runtime/precompiled.h>`` (torch's common
    headers, precompiled by the build) in its unit, i.e. nothing of it must come before torch's
    headers; a unit starts with that header when every source of its group says so.  A CPU-
    capability source, which sets the instruction set before any header, must not."""

    path: str
    text: str
    sources: tuple[str, ...] = ()
    unit: str | None = None
    unit_size: int | None = None
    precompiled: bool = False


class Plugin:
    name: ClassVar[str] = ""
    fields: ClassVar[Mapping[str, "Field | str"]] = {}
    # The device (codegen/core/targets.py) whose kernel wrappers this plugin emits, if any: its key
    # is then accepted in a declaration's `kernels:`.
    device: ClassVar["Device | None"] = None
    # Whether its validation errors say what the build's target cannot express (rather than
    # what is wrong with a declaration): `codegen build --leave-out-unsupported` leaves an op
    # out, with a note, when all its errors come from such plugins.
    target_limits: ClassVar[bool] = False

    def validate(self, decl: "Declaration", lib: "Library", diag: "Diagnostics") -> None:
        return None

    def transform(self, lib: "Library", diag: "Diagnostics") -> "Library":
        return lib

    def library_block(self, lib: "Library") -> Iterable[str]:
        return ()

    def library_includes(self, lib: "Library") -> Iterable[str]:
        return ()

    def emit(self, lib: "Library", ctx: "EmitContext") -> Iterable[Output]:
        return ()
