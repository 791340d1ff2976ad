"""Finding the CUDA toolkit and headers a CUDA build needs, without hard-coded paths.

Torch guesses CUDA_HOME from the `nvcc` first on PATH (its parent's parent).  When that
`nvcc` is a wrapper script outside the toolkit (as on these machines: /usr/local/bin/nvcc
exec'ing the real one), the guess is wrong.  The real root is the folder holding the real
`bin/nvcc` and `lib64/libcudart.so`; the wrapper names it, so we read it from there.
Headers such as cusparse.h, which ATen's CUDA headers include, ship in torch's `nvidia`
wheels (site-packages/nvidia/cu13/include), not necessarily in the toolkit.
"""

from __future__ import annotations

import importlib
import logging
import os
import re
import shutil
import sys
import types
from dataclasses import dataclass
from pathlib import Path

DEFAULT_ARCH_LIST = "8.0;9.0"
CPP_EXTENSION = "torch.utils.cpp_extension"


@dataclass(frozen=True)
class CudaEnv:
    root: Path  # the toolkit root: bin/nvcc and lib64/libcudart.so
    include_dirs: tuple[Path, ...]  # headers from torch's nvidia wheels

    @property
    def nvcc(self) -> Path:
        return self.root / "bin" / "nvcc"


def is_toolkit_root(root: Path) -> bool:
    nvcc = root / "bin" / "nvcc"
    if not nvcc.is_file() or _is_script(nvcc):
        return False
    return any((root / lib).glob("libcudart.so*") for lib in ("lib64", "lib", "targets/x86_64-linux/lib"))


def _is_script(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(2) == b"#!"
    except OSError:
        return False


def find_toolkit_root() -> Path | None:
    """CUDA_HOME / CUDA_PATH when they hold a toolkit; else the real root behind the `nvcc`
    on PATH (following links, and reading a wrapper script for the nvcc it runs); else the
    usual /usr/local/cuda* folders, newest first."""
    for var in ("CUDA_HOME", "CUDA_PATH"):
        value = os.environ.get(var)
        if value and is_toolkit_root(Path(value)):
            return Path(value)
    nvcc = shutil.which("nvcc")
    if nvcc:
        real = Path(os.path.realpath(nvcc))
        if is_toolkit_root(real.parent.parent):
            return real.parent.parent
        if _is_script(real):
            text = real.read_text(errors="replace")
            for m in re.finditer(r"(/[^\s\"'`;|&$]+)/bin/nvcc\b", text):
                root = Path(m.group(1))
                if is_toolkit_root(root):
                    return root
    candidates = sorted(Path("/usr/local").glob("cuda*"), key=_version_key, reverse=True)
    return next((c for c in candidates if is_toolkit_root(c)), None)


def _version_key(p: Path):
    return [int(x) for x in re.findall(r"\d+", p.name)] or [0]


def nvidia_include_dirs() -> tuple[Path, ...]:
    """The include folders of torch's `nvidia` wheels (cusparse.h, cublas_v2.h, ...)."""
    from importlib.util import find_spec

    spec = find_spec("nvidia")
    if spec is None or not spec.submodule_search_locations:
        return ()
    out = []
    for base in spec.submodule_search_locations:
        for inc in sorted(Path(base).glob("*/include")):
            if any(inc.glob("*.h")):
                out.append(inc)
    return tuple(out)


def torch_cuda_version() -> str | None:
    """The CUDA version torch was built with, or None for a CPU-only torch."""
    import torch

    return torch.version.cuda


def detect() -> tuple[CudaEnv | None, str]:
    """The CUDA environment, or None and the one-line reason a CUDA build is not possible."""
    if torch_cuda_version() is None:
        return None, "torch is a CPU-only build"
    root = find_toolkit_root()
    if root is None:
        return None, "no CUDA toolkit found (no nvcc with lib64/libcudart.so beside it; set CUDA_HOME)"
    return CudaEnv(root, nvidia_include_dirs()), ""


def activate(env: CudaEnv) -> None:
    """Point torch.utils.cpp_extension at the toolkit (it reads CUDA_HOME when first imported
    and keeps it in a module global) and give TORCH_CUDA_ARCH_LIST a small default."""
    os.environ["CUDA_HOME"] = str(env.root)
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", DEFAULT_ARCH_LIST)
    cpp_extension = import_cpp_extension(cuda_built=True)
    cpp_extension.CUDA_HOME = str(env.root)


def import_cpp_extension(cuda_built: bool) -> types.ModuleType:
    """torch.utils.cpp_extension, imported once the build has decided on CUDA.

    A CUDA build of torch guesses CUDA_HOME when the module is first imported (from
    CUDA_HOME/CUDA_PATH, else the `nvcc` on PATH, else /usr/local/cuda) and, when no GPU is
    usable, logs "No CUDA runtime is found, using CUDA_HOME='...'" through the module's own
    logger.  When CUDA is not being built (--no-cuda, --sanitize, a CPU-only decision) that
    guess is never used, so the import runs with a filter on that logger dropping everything
    below ERROR.  The filter is removed right after, so what the module warns about later
    (compiler version, ABI) still shows.  When CUDA is built, `activate` has set CUDA_HOME and
    the message, if any, is torch's own and true: there is no GPU to run the kernels on.
    A module imported earlier is returned as it is: its guess was logged, or not, back then."""
    if cuda_built or CPP_EXTENSION in sys.modules:
        return importlib.import_module(CPP_EXTENSION)
    logger = logging.getLogger(CPP_EXTENSION)  # the object the module's getLogger(__name__) returns

    def errors_only(record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR

    logger.addFilter(errors_only)
    try:
        return importlib.import_module(CPP_EXTENSION)
    finally:
        logger.removeFilter(errors_only)
