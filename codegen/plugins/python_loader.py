"""The Python loader: finds and loads the compiled library, and lists its ops; and the
library's copy of the Python run-time helpers (`_runtime.py`, from codegen/pyruntime.py)
that every generated Python module imports."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from .base import Output, Plugin

RUNTIME_SOURCE = "codegen/pyruntime.py"


class PythonLoader(Plugin):
    name = "python"

    def emit(self, lib, ctx):
        cfg = lib.config
        build_rel = os.path.relpath(cfg.path("build"), cfg.path("generated") / "python")
        template = "python/loader.py.j2"
        text = ctx.render(
            template, namespace=lib.namespace, package=cfg.python_package, library=cfg.library,
            build_rel=build_rel.replace(os.sep, "/"), env_var=f"{cfg.python_package.upper()}_LIBRARY",
            ops=[d.op_name for d in lib.declarations], companions=_tuple(companions(cfg.target)),
            target_argument="" if cfg.target == "aten" else f', target="{cfg.target}"',
        )
        yield Output("python/__init__.py", text, lib.sources + (ctx.template_source(template),))
        yield Output("python/_runtime.py", runtime_text(), (RUNTIME_SOURCE,))


def companions(target: str) -> tuple[str, ...]:
    """The generated modules the loader imports once the library is loaded: the stable target's
    autograd and autocast are Python (plugins/stable.py, plugins/stable_autocast.py), the full
    target's are in the library; the stable target's `schemas` (its in-place and out= ops,
    plugins/stable.py) come first."""
    stable = target == "stable"  # `schemas` first: it defines the ops tagged `inplace` or `out` (plugins/stable.py)
    return (("schemas",) if stable else ()) + ("classes", "fake", "ops", "vmap") + \
        (("autograd", "autocast") if stable else ())


def _tuple(names: tuple[str, ...]) -> str:
    return "(" + ", ".join(f'"{n}"' for n in names) + ")"


def runtime_text() -> str:
    """codegen/pyruntime.py, verbatim (the writer adds the banner).  Found, not imported: it
    imports torch, which `codegen` itself never imports (it is slow to import: docs/speed.md)."""
    spec = importlib.util.find_spec("opwrap_codegen.pyruntime")
    assert spec is not None and spec.origin is not None, "opwrap_codegen.pyruntime is part of the toolchain"
    return Path(spec.origin).read_text(encoding="utf-8")
