"""`codegen init DIR`: a new, separate op library that the toolchain generates and builds."""

from __future__ import annotations

from pathlib import Path

_PYPROJECT = '''[build-system]
requires = ["setuptools>=77", "torch>=2.6", "opwrap"]
build-backend = "setuptools.build_meta"

[project]
name = "{ns}"
version = "0.1.0"
requires-python = ">=3.10"
dependencies = ["torch>=2.6"]

[tool.setuptools]
package-dir = {{ "{ns}" = "{ns}", "{ns}._generated" = "generated/python" }}
packages = ["{ns}", "{ns}._generated"]

[tool.setuptools.package-data]
"{ns}" = ["py.typed"]
"{ns}._generated" = ["*.pyi"]

[tool.codegen]
namespace = "{ns}"
declarations = "declarations"
generated = "generated"
kernels = "kernels"
build = "build"
'''

# setuptools' editable install maps the package-dir table above with an import hook, which
# mypy and pyright cannot follow; strict mode links the files into a plain folder instead.
_SETUP_CFG = '''# `pip install -e .` (after `codegen generate`) in setuptools' strict mode: the package's
# files are linked into build/__editable__.*, a folder on sys.path that mypy and pyright
# read (the default mode is an import hook they cannot follow).  Install again after adding
# or removing a file under {ns}/ or generated/python, or deleting build/.
[editable_wheel]
mode = strict
'''

_DECLARATION = '''# One entry per op; see the opwrap README for every field.
- func: scale(Tensor self, float factor) -> Tensor
  doc: Elementwise self * factor.
  dtypes: [float32, float64]
  kernels: {{CPU: scale_cpu}}
  like: self
  derivatives:
    self: grad * factor
'''

_KERNEL = '''// The kernel body of {ns}::scale.  The generated wrapper has checked the arguments, made
// `self` contiguous and allocated `result` from the declaration's shape rule.
#pragma once

#include <ATen/core/Tensor.h>

namespace {ns}::kernels {{

template <typename scalar_t>
void scale_cpu(const at::Tensor& self, double factor, at::Tensor& result) {{
  const scalar_t* in = self.const_data_ptr<scalar_t>();
  scalar_t* out = result.mutable_data_ptr<scalar_t>();
  for (int64_t i = 0; i < result.numel(); ++i) out[i] = static_cast<scalar_t>(in[i] * factor);
}}

}}  // namespace {ns}::kernels
'''

_INIT = '''"""The {ns} op library: `import {ns}` loads it, so torch.ops.{ns}.* exist, and
`{ns}.ops.<op>` are their typed wrappers (checked by mypy and pyright: see py.typed)."""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path


def _generated_package() -> types.ModuleType:
    """`{ns}._generated` is a real subpackage when installed; in a source checkout that was
    not installed it is loaded from generated/python beside this package."""
    try:
        from . import _generated
        return _generated
    except ImportError:
        path = Path(__file__).resolve().parent.parent / "generated" / "python"
        spec = importlib.util.spec_from_file_location(
            f"{{__name__}}._generated", path / "__init__.py", submodule_search_locations=[str(path)])
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module


library_path: str = _generated_package().load_library()
from ._generated import ops  # noqa: E402  (typed wrappers of torch.ops.{ns}.*)

__all__ = ["ops", "library_path"]
'''


def scaffold(target: Path, namespace: str) -> list[Path]:
    files = {
        target / "pyproject.toml": _PYPROJECT.format(ns=namespace),
        target / "setup.cfg": _SETUP_CFG.format(ns=namespace),
        target / "declarations" / "scale.yaml": _DECLARATION.format(ns=namespace),
        target / "kernels" / "scale.h": _KERNEL.format(ns=namespace),
        target / namespace / "__init__.py": _INIT.format(ns=namespace),
        target / namespace / "py.typed": "",  # PEP 561: type checkers read the package's types
        target / ".gitignore": "/build/\n__pycache__/\n",
    }
    for path in files:
        if path.exists():
            raise FileExistsError(str(path))
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return list(files)
