"""opwrap: an op library built with the opwrap code generator.

``import opwrap`` loads the compiled library, so ``torch.ops.opwrap.<op>`` exist.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import torch


def _generated_package():
    """`opwrap._generated` is a real subpackage when installed; in a source checkout that was
    not installed it is loaded from generated/python beside runtime/."""
    try:
        from . import _generated
        return _generated
    except ImportError:
        path = Path(__file__).resolve().parents[2] / "generated" / "python"
        spec = importlib.util.spec_from_file_location(
            f"{__name__}._generated", path / "__init__.py", submodule_search_locations=[str(path)])
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module


_generated = _generated_package()
library_path = _generated.load_library()
OPS = _generated.OPS
ops = torch.ops.opwrap

__all__ = ["ops", "OPS", "library_path"]
