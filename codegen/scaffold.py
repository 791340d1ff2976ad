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

[tool.codegen]
namespace = "{ns}"
declarations = "declarations"
generated = "generated"
kernels = "kernels"
build = "build"
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

_INIT = '''"""The {ns} op library: `import {ns}` loads it, so torch.ops.{ns}.* exist."""

import importlib
import importlib.util
import sys
from pathlib import Path

import torch


def _generated_package():
    # Installed: a real subpackage.  A source checkout: generated/python beside this package.
    try:
        from . import _generated
        return _generated
    except ImportError:
        path = Path(__file__).resolve().parent.parent / "generated" / "python"
        spec = importlib.util.spec_from_file_location(
            f"{{__name__}}._generated", path / "__init__.py", submodule_search_locations=[str(path)])
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module


_generated = _generated_package()
library_path = _generated.load_library()
ops = importlib.import_module(_generated.__name__ + ".ops")  # typed wrappers of torch.ops.{ns}.*
'''


def scaffold(target: Path, namespace: str) -> list[Path]:
    files = {
        target / "pyproject.toml": _PYPROJECT.format(ns=namespace),
        target / "declarations" / "scale.yaml": _DECLARATION.format(ns=namespace),
        target / "kernels" / "scale.h": _KERNEL.format(ns=namespace),
        target / namespace / "__init__.py": _INIT.format(ns=namespace),
        target / ".gitignore": "/build/\n__pycache__/\n",
    }
    for path in files:
        if path.exists():
            raise FileExistsError(str(path))
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return list(files)
