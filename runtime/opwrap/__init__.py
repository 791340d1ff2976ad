"""opwrap: an op library built with the opwrap code generator.

``import opwrap`` loads the compiled library, so ``torch.ops.opwrap.<op>`` exist, and
``opwrap.ops.<op>`` are their typed wrappers.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import types
from pathlib import Path


def _generated_package() -> types.ModuleType:
    """`opwrap._generated` is a real subpackage when installed; in a source checkout that was
    not installed it is loaded from generated/python beside runtime/.

    $OPWRAP_TARGET_BUILD names the target folder of a `codegen build --target T --build-dir B`
    build (B/T, e.g. build/stable): its generated Python is loaded instead, and with it B/T/_C.so,
    so that tests and benchmarks run the bundled library as the other target built it
    (scripts/gpu-test, benchmarks/target_worker.py)."""
    build = os.environ.get("OPWRAP_TARGET_BUILD")
    if build:
        path = Path(build).resolve() / "generated" / "python"
        if not (path / "__init__.py").is_file():
            raise ImportError(f"OPWRAP_TARGET_BUILD={build}: no {path / '__init__.py'} (the target folder of "
                              "`codegen build --target T --build-dir B` is B/T)")
    else:
        try:
            from . import _generated
            return _generated
        except ImportError:
            path = Path(__file__).resolve().parents[2] / "generated" / "python"
    spec = importlib.util.spec_from_file_location(
        f"{__name__}._generated", path / "__init__.py", submodule_search_locations=[str(path)])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


_generated_package()
from ._generated import OPS, load_library, ops  # noqa: E402  (typed wrappers: opwrap.ops.<op>)

library_path = load_library()

__all__ = ["ops", "OPS", "library_path"]
