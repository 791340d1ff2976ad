"""Build glue over torch.utils.cpp_extension: one source list, two entry points.

``build()`` is the development build (``codegen build`` / ``make build``): ninja, through
``torch.utils.cpp_extension.load``, into the project's build directory.  ``extension()``
returns the same sources and flags as a setuptools ``CppExtension`` for wheels.
"""

from __future__ import annotations

import glob
import os
import shutil
import sys
import time
from pathlib import Path

from .config import Config

CXX_FLAGS = ["-O3", "-fvisibility-inlines-hidden"]  # torch adds its own -std (c++17 or c++20)


def support_include_dir() -> Path:
    """The support headers generated code includes (<opwrap/runtime/checks.h>)."""
    here = Path(__file__).resolve().parent.parent / "runtime" / "include"
    if here.is_dir():
        return here
    from importlib.resources import files
    return Path(str(files("codegen") / "include"))


def sources(config: Config) -> list[Path]:
    gen = config.path("generated")
    out = sorted(Path(p) for p in glob.glob(str(gen / "**" / "*.cpp"), recursive=True))
    for pattern in config.sources:
        out.extend(sorted(Path(p) for p in glob.glob(str(config.root / pattern), recursive=True)))
    return out


def include_dirs(config: Config) -> list[Path]:
    return [support_include_dir(), config.path("kernels"), *[config.root / d for d in config.include]]


def ccache_wrapper(build_dir: Path) -> str | None:
    """A `c++` symlink to ccache (its masquerade mode), for cpp_extension's CXX, if ccache is
    installed.  ccache then finds the real `c++` further down PATH."""
    ccache = shutil.which("ccache")
    if ccache is None:
        return None
    bindir = build_dir / ".ccache-bin"
    bindir.mkdir(parents=True, exist_ok=True)
    link = bindir / "c++"
    if not link.is_symlink() or os.readlink(link) != ccache:
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(ccache)
    return str(link)


def build(config: Config, verbose: bool = False, use_ccache: bool | None = None, log=print) -> Path:
    """Compile generated/ and the project's sources into <build>/<library>.so with ninja."""
    from torch.utils import cpp_extension

    build_dir = config.path("build")
    build_dir.mkdir(parents=True, exist_ok=True)
    srcs = sources(config)
    if not srcs:
        raise FileNotFoundError(f"no C++ sources under {config.path('generated')}; run `codegen generate` first")
    stems: dict[str, Path] = {}
    for src in srcs:  # cpp_extension.load names each object file after the source's stem only
        if src.stem in stems:
            raise ValueError(f"sources {stems[src.stem]} and {src} would compile to the same object {src.stem}.o")
        stems[src.stem] = src
    if use_ccache is not False and "CXX" not in os.environ:
        wrapper = ccache_wrapper(build_dir)
        if wrapper:
            os.environ["CXX"] = wrapper
            log(f"codegen build: compiling through ccache ({wrapper})")
        elif use_ccache:
            raise FileNotFoundError("--ccache given but ccache is not installed")
    t0 = time.perf_counter()
    cpp_extension.load(
        name=config.library,
        sources=[str(s) for s in srcs],
        extra_cflags=CXX_FLAGS,
        extra_include_paths=[str(d) for d in include_dirs(config)],
        build_directory=str(build_dir),
        verbose=verbose,
        is_python_module=False,
        with_cuda=False,
    )
    out = build_dir / f"{config.library}.so"
    log(f"codegen build: {out} ({len(srcs)} sources, {time.perf_counter() - t0:.1f}s)")
    return out


def extension(config: Config):
    """A setuptools extension over the same sources, for `BuildExtension` wheels."""
    from torch.utils.cpp_extension import CppExtension

    root = config.root
    return CppExtension(
        name=f"{config.python_package}.{config.library}",
        sources=[os.path.relpath(s, root) for s in sources(config)],
        include_dirs=[str(d) for d in include_dirs(config)],
        extra_compile_args=CXX_FLAGS,
    )
