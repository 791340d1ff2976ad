"""The pipeline: load -> validate -> transform -> emit, each step timed, stopping on errors
before anything is emitted.  Writing (or comparing) is the caller's last step.

Load and validate run to the end whatever they find, so that one run reports every error
of every declaration: the loader gives the plugins every op whose schema parsed, with the
fields that failed named in `Declaration.invalid_fields` (checks that depend on one skip
it), and the run stops after validation."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Mapping

from ..core.config import Config
from ..core.diagnostics import CodegenError, Diagnostics
from ..front.fields import Field, as_field
from ..front.loader import CORE_FIELDS, DeclarationLoader
from ..front.model import Library
from ..plugins import Plugin, load_plugins
from ..plugins.render import EmitContext, banner, resolve_line_markers
from . import units
from ..front.selection import Selection, apply as apply_selection
from .writer import unsafe_path


@dataclass
class Result:
    library: Library
    files: dict[str, str]  # path relative to the generated directory -> text
    plugins: list[Plugin]
    timings: list[tuple[str, float]] = field(default_factory=list)
    warnings: list = field(default_factory=list)  # Diagnostics, sorted: the CLI prints them


def _stop_on_errors(diag: Diagnostics) -> None:
    if diag:
        raise CodegenError(diag.sorted())


def _other_targets_kernel(lib: Library, decl, own_target: str) -> tuple[str, str] | None:
    """Why `decl` cannot be built for `lib`'s target when that is not the project's own
    (`own_target`): a hand-written C++ kernel of its, written against the own target's API,
    has no counterpart in `<kernels>/<target>/` written against this target's.  Returns that
    kernel's dispatch key and the message; None when none is missing."""
    from ..api.kernel import written_header
    from ..core.targets import DEVICES
    if own_target == lib.config.target:
        return None
    rows = {device.key: device for device in DEVICES}
    target = lib.config.target
    for key in decl.devices:
        if not decl.kernel(key) or decl.foreign_kernel(key) is not None or decl.rows is not None:
            continue
        header = written_header(decl, rows[key]) if key in rows else None
        if header is None or not (lib.config.target_kernels() / header).is_file():
            where = f": write one against the '{target}' target's in {lib.config.kernels}/{target}/{header}"
            return key, f"its {key} kernel is C++ written against the '{own_target}' target's API" + (where if header else "")
    return None


def _leave_out_unsupported(lib: Library, plugins: list[Plugin], diag: Diagnostics,
                           own_target: str) -> tuple[Library, list[str]]:
    """Validates each declaration apart: one whose every error comes from a plugin with
    `target_limits` is left out (a note naming the first error), as is, transitively, one
    whose derivative formulas call an op left out; any other error goes to `diag`.  Built for
    another target than `own_target` (the project's), an op with a hand-written C++ kernel is
    left out too: that kernel is written against the project's target's C++ API, unless the
    library also has it written against this target's, in `<kernels>/<target>/`."""
    import dataclasses

    from ..front.selection import formula_callees
    ns, left = lib.namespace, {}  # op name -> why it is left out
    for d in lib.declarations:
        limits, other = Diagnostics(), Diagnostics()
        for p in plugins:
            p.validate(d, lib, limits if p.target_limits else other)
        diag.errors.extend((limits.errors + other.errors) if other else [])  # a mistake: all of them
        diag.warnings.extend(limits.warnings + other.warnings)
        if limits and not other:  # what the target lacks first: a kernel written for it would not help
            first = limits.sorted()[0]
            left[d.op_name] = f"leaving out {ns}::{d.op_name}: {first.loc}: {first.message}"
        elif not other and (kernel := _other_targets_kernel(lib, d, own_target)):
            left[d.op_name] = f"leaving out {ns}::{d.op_name}: {d.func_loc}: {kernel[1]}"
    changed = True
    while changed:  # an op whose formula calls one left out would fail in its backward
        changed = False
        for d in lib.declarations:
            calls = [c.op_name for c in formula_callees(lib, d) if c.op_name in left]
            if d.op_name not in left and calls:
                left[d.op_name] = f"leaving out {ns}::{d.op_name}: its derivative calls {ns}::{calls[0]}, left out"
                changed = True
    kept = tuple(d for d in lib.declarations if d.op_name not in left)
    return dataclasses.replace(lib, declarations=kept), [left[d.op_name] for d in lib.declarations if d.op_name in left]


def generate(config: Config, selection: "Selection | None" = None, notes: list[str] | None = None,
             leave_out_unsupported: bool = False, own_target: str | None = None) -> Result:
    """Run the pipeline.  `selection` (a selective build) keeps only some ops and dtypes,
    after the whole library has been validated; `notes` receives why it kept or left out
    ops the selection did not name.  `leave_out_unsupported` leaves out, instead of failing
    on, the ops that the target cannot express (every error of theirs from a plugin with
    `target_limits`) and the ops whose formulas call those, each a note;
    `own_target`, the project's when `config` is retargeted, says whose C++ kernels are."""
    diag = Diagnostics()
    timings: list[tuple[str, float]] = []

    def timed(name, fn):
        t0 = time.perf_counter()
        out = fn()
        timings.append((name, time.perf_counter() - t0))
        return out

    plugins = timed("plugins", lambda: load_plugins(config, diag))
    _stop_on_errors(diag)
    fields = plugin_fields(plugins, config, diag)
    _stop_on_errors(diag)
    lib = timed("load", lambda: DeclarationLoader(config, diag, fields, device_keys(plugins)).load())

    def validate():
        for d in lib.declarations:
            for p in plugins:
                p.validate(d, lib, diag)
    from ..api.stable import signature_in
    if leave_out_unsupported:
        lib, why = timed("validate", lambda: _leave_out_unsupported(lib, plugins, diag, own_target or config.target))
        if notes is not None:
            notes.extend(why)
    else:
        timed("validate", validate)
        for d in lib.declarations:  # built for another target than the project's: its C++ kernels
            kernel = _other_targets_kernel(lib, d, own_target or config.target)
            if kernel:
                diag.error(d.field_loc("kernels"), kernel[1], f"`{signature_in(config.target, d, kernel[0])[0]}`")
    _stop_on_errors(diag)

    def transform():
        out = lib
        for p in plugins:
            out = p.transform(out, diag)
        return out
    lib = timed("transform", transform)
    _stop_on_errors(diag)
    if selection:
        lib, why = apply_selection(lib, selection, diag, config_loc(config))
        _stop_on_errors(diag)
        timed("validate selection", validate)
        _stop_on_errors(diag)
        if notes is not None:
            notes.extend(why)

    def emit():
        ctx = EmitContext.create(config)
        files: dict[str, str] = {}
        owner: dict[str, str] = {}
        groups: dict[str, list[str]] = {}
        sources: dict[str, tuple[str, ...]] = {}
        sizes: dict[str, int] = {}
        plain: set[str] = set()  # groups with a source that must not follow the precompiled header
        for p in plugins:
            for out in p.emit(lib, ctx):
                why = unsafe_path(out.path) or units.bad_output(out.path, out.unit)
                if why:
                    diag.error(config_loc(config), f"plugin '{p.name}' emits '{out.path}': {why}")
                    continue
                if out.path in files:
                    diag.error(config_loc(config), f"plugins '{owner[out.path]}' and '{p.name}' both emit '{out.path}'")
                    continue
                text = banner(out.path, p.name, out.sources) + out.text
                files[out.path] = resolve_line_markers(text, f"{config.generated}/{out.path}")
                owner[out.path] = p.name
                if out.unit is not None:
                    groups.setdefault(out.unit, []).append(out.path)
                    sources[out.path] = out.sources
                    if out.unit_size:
                        sizes[out.unit] = min(out.unit_size, sizes.get(out.unit, out.unit_size))
                    if not out.precompiled:
                        plain.add(out.unit)
        groups = units.scoped(groups, config.unity_scope, plain, sizes)
        for path, (group, members) in units.layout(groups, config.unity, sizes).items():
            if path in files:
                diag.error(config_loc(config), f"plugin '{owner[path]}' emits '{path}', where the unity units go")
                continue
            made_from = tuple(sorted({src for m in members for src in sources[m]}))  # the members' declarations and templates
            files[path] = banner(path, "units", made_from) + units.text(group, members, group not in plain)
        return files
    files = timed("emit", emit)
    _stop_on_errors(diag)
    return Result(lib, files, plugins, timings, sorted(set(diag.warnings)))


def device_keys(plugins: list[Plugin]) -> tuple[str, ...]:
    """The dispatch keys of the run's kernel plugins (the built-in devices', then a third-party
    plugin's), in plugin order."""
    return tuple(dict.fromkeys(p.device.key for p in plugins if p.device is not None))


def plugin_fields(plugins: list[Plugin], config: Config, diag: Diagnostics) -> dict[str, Field]:
    """The fields the plugins declare, as typed Fields (a plain-string description means any
    plain YAML data); a field declared twice, or over a core field, is a configuration error."""
    fields: dict[str, Field] = {}
    for p in plugins:
        declared = getattr(p, "fields", None)
        if not isinstance(declared, Mapping):
            diag.error(config_loc(config), f"plugin '{p.name}': 'fields' must map field names to Fields")
            continue
        for name, spec in declared.items():
            field = as_field(spec)
            if field is None:
                diag.error(config_loc(config), f"plugin '{p.name}' declares field '{name}' with {type(spec).__name__}, "
                           "not an opwrap_codegen.front.fields.Field or a description string")
            elif name in CORE_FIELDS or name in fields:
                diag.error(config_loc(config), f"plugin '{p.name}' declares field '{name}', which is already taken")
            else:
                fields[name] = field
    return fields


def config_loc(config: Config):
    from ..core.diagnostics import Loc
    return Loc(str(config.root / "pyproject.toml"), 1, 1)
