"""Build glue over torch.utils.cpp_extension: one source list, two entry points.

``build()`` is the development build (``codegen build`` / ``make build``): ninja, through
``torch.utils.cpp_extension.load``, into the project's build directory.  ``extension()``
returns the same sources and flags as a setuptools ``CppExtension`` (``CUDAExtension`` when
CUDA is built) for wheels.

CUDA sources (``.cu``) are compiled when torch is a CUDA build and a toolkit is found
(see ``cuda_env``), and skipped with one line saying why otherwise; ``cuda=True/False``
(``--cuda/--no-cuda``, or ``OPWRAP_CUDA=1/0`` for wheels) forces the choice.
"""

from __future__ import annotations

import glob
import os
import shutil
import sys
import time
from pathlib import Path

from .config import Config

# -Wno-psabi: GCC notes that passing at::vec::Vectorized by value changed ABI in GCC 4.6 (noise).
CXX_FLAGS = ["-O3", "-fvisibility-inlines-hidden", "-Wno-psabi"]  # torch adds its own -std (c++17 or c++20)
# at::parallel_for in a kernel header is an inline `#pragma omp parallel` when torch is built
# with OpenMP: without -fopenmp it silently runs on one thread.  The link flag resolves to the
# libgomp.so.1 that torch itself loads (same soname), so there is one OpenMP runtime.
OPENMP_FLAGS = ["-fopenmp"] if sys.platform.startswith("linux") else []
# torch adds -std, the arch flags from TORCH_CUDA_ARCH_LIST and its half/bfloat16 defines;
# aten's gpu_kernel (generated pointwise kernels) takes extended __host__ __device__ lambdas.
NVCC_FLAGS = ["-O3", "--extended-lambda"]
# `codegen build --sanitize`: AddressSanitizer and UndefinedBehaviorSanitizer over the CPU
# kernels.  Every report is fatal (-fno-sanitize-recover), so a test run under it passes only
# with zero reports.  -O1 keeps stack traces exact and compiles faster than -O3.  vptr is left
# out: it checks dynamic types through typeinfo, and torch's classes come from libraries built
# without the sanitizer, whose hidden typeinfo copies it reports as mismatches.
SANITIZE = "address,undefined"
SANITIZER_CXX_FLAGS = ["-O1", "-g", "-fno-omit-frame-pointer", f"-fsanitize={SANITIZE}", "-fno-sanitize=vptr",
                       "-fno-sanitize-recover=all", "-fvisibility-inlines-hidden", "-Wno-psabi"]
SANITIZER_LD_FLAGS = [f"-fsanitize={SANITIZE}"]


def sanitizer_runtime() -> str | None:
    """What must be preloaded into python (LD_PRELOAD, space-separated) for a sanitized
    library to load: the AddressSanitizer runtime (an uninstrumented interpreter cannot bring
    it in later), and libstdc++, so that ASan's C++ exception interceptor finds __cxa_throw
    when it starts (python itself does not link libstdc++; without it the first C++ exception
    of a pybind11 module, e.g. triton's at `import torch._dynamo`, aborts)."""
    import subprocess
    cxx = os.environ.get("CXX", "c++")
    found = []
    for lib in ("libasan.so", "libstdc++.so.6"):
        try:
            path = subprocess.run([cxx, f"-print-file-name={lib}"], capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return None
        if not (os.path.isabs(path) and os.path.exists(path)):
            return None
        found.append(os.path.normpath(path))
    return " ".join(found)


def openmp_flags() -> list[str]:
    """-fopenmp when torch parallelizes with OpenMP (see OPENMP_FLAGS)."""
    import torch
    return OPENMP_FLAGS if torch.backends.openmp.is_available() else []


def support_include_dir() -> Path:
    """The support headers generated code includes (<opwrap/runtime/checks.h>)."""
    here = Path(__file__).resolve().parent.parent / "runtime" / "include"
    if here.is_dir():
        return here
    from importlib.resources import files
    return Path(str(files("codegen") / "include"))


def sources(config: Config, cuda: bool = False) -> list[Path]:
    """The C++ (and, with `cuda`, the CUDA) sources: generated/ and `[tool.codegen] sources`."""
    gen = config.path("generated")
    found = sorted(Path(p) for p in glob.glob(str(gen / "**" / "*.cpp"), recursive=True)
                   if Path(p) != gen / "python" / f"{FAST_MODULE}.cpp")
    found += sorted(Path(p) for p in glob.glob(str(gen / "**" / "*.cu"), recursive=True))
    for pattern in config.sources:
        found.extend(sorted(Path(p) for p in glob.glob(str(config.root / pattern), recursive=True)))
    # CPU-capability builds (cpu/<op>.AVX2.cpp) link last.  Inline functions from headers are
    # emitted in every object that uses them, compiled for that object's instruction set,
    # and the linker keeps the first copy: the one compiled for every CPU.
    found.sort(key=lambda p: p.suffixes[-2:-1] in ([".AVX2"], [".AVX512"]))
    return [p for p in found if cuda or p.suffix != ".cu"]


FAST_MODULE = "_fast"


def fast_source(config: Config) -> Path | None:
    """The generated CPython bindings (see plugins/python_fast.py), built as their own module."""
    path = config.path("generated") / "python" / f"{FAST_MODULE}.cpp"
    return path if path.is_file() else None


def cuda_sources(config: Config) -> list[Path]:
    return [p for p in sources(config, cuda=True) if p.suffix == ".cu"]


def resolve_cuda(config: Config, cuda: bool | None, log=print):
    """The CUDA environment to build with, or None.  `cuda=None` decides by what is installed;
    `True` fails when CUDA cannot be built; `False` skips it."""
    from . import cuda_env

    n = len(cuda_sources(config))
    if cuda is False or n == 0:
        if n:
            log(f"codegen build: skipping {n} CUDA sources (--no-cuda)")
        return None
    env, reason = cuda_env.detect()
    if env is None:
        if cuda:
            raise FileNotFoundError(f"--cuda given, but CUDA cannot be built: {reason}")
        log(f"codegen build: skipping {n} CUDA sources: {reason}")
        return None
    cuda_env.activate(env)
    log(f"codegen build: compiling {n} CUDA sources with {env.nvcc} "
        f"(TORCH_CUDA_ARCH_LIST={os.environ['TORCH_CUDA_ARCH_LIST']})")
    return env


def include_dirs(config: Config) -> list[Path]:
    return [support_include_dir(), config.path("kernels"), *[config.root / d for d in config.include]]


def cuda_include_flags(env) -> list[str]:
    """The nvidia wheels' headers, for nvcc only: C++ translation units never need them, and
    keeping them off the C++ command lines keeps those objects valid across CUDA/CPU builds."""
    return [f"-I{d}" for d in env.include_dirs] if env is not None else []


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


def build(config: Config, verbose: bool = False, use_ccache: bool | None = None, log=print,
          cuda: bool | None = None, sanitize: bool = False) -> Path:
    """Compile generated/ and the project's sources into <build>/<library>.so with ninja.
    `sanitize` builds the CPU sources with ASan and UBSan instead (see SANITIZER_CXX_FLAGS)."""
    if sanitize:
        if cuda:
            raise ValueError("--sanitize builds the CPU kernels only; it cannot be combined with --cuda")
        cuda = False
    env = resolve_cuda(config, cuda, log)  # before cpp_extension is imported: it reads CUDA_HOME once
    from torch.utils import cpp_extension
    cflags, ldflags = (SANITIZER_CXX_FLAGS, SANITIZER_LD_FLAGS) if sanitize else (CXX_FLAGS, [])

    build_dir = config.path("build")
    build_dir.mkdir(parents=True, exist_ok=True)
    srcs = sources(config, cuda=env is not None)
    if not srcs:
        raise FileNotFoundError(f"no C++ sources under {config.path('generated')}; run `codegen generate` first")
    stems: dict[str, Path] = {}
    for src in srcs:  # cpp_extension.load names each object after the source's stem only
        obj = src.stem + (".cuda.o" if src.suffix == ".cu" else ".o")
        if obj in stems:
            raise ValueError(f"sources {stems[obj]} and {src} would compile to the same object {obj}")
        stems[obj] = src
    if use_ccache is not False and "CXX" not in os.environ:
        wrapper = ccache_wrapper(build_dir)
        if wrapper:
            os.environ["CXX"] = wrapper
            log(f"codegen build: compiling through ccache ({wrapper})")
        elif use_ccache:
            raise FileNotFoundError("--ccache given but ccache is not installed")
    ninja_log = build_dir / ".ninja_log"
    log_start = ninja_log.stat().st_size if ninja_log.exists() else 0
    t0 = time.perf_counter()
    cpp_extension.load(
        name=config.library,
        sources=[str(s) for s in srcs],
        extra_cflags=cflags + openmp_flags(),
        extra_ldflags=ldflags + openmp_flags(),
        extra_cuda_cflags=NVCC_FLAGS + cuda_include_flags(env),
        extra_include_paths=[str(d) for d in include_dirs(config)],
        build_directory=str(build_dir),
        verbose=verbose,
        is_python_module=False,
        with_cuda=env is not None,
    )
    out = build_dir / f"{config.library}.so"
    log(f"codegen build: {out} ({len(srcs)} sources, {time.perf_counter() - t0:.1f}s)")
    fast = fast_source(config)
    if fast is not None:  # the Python bindings: a CPython module of their own, linked with libtorch_python
        fast_dir = build_dir / "python"
        fast_dir.mkdir(exist_ok=True)
        fast_log = fast_dir / ".ninja_log"
        fast_start = fast_log.stat().st_size if fast_log.exists() else 0
        cpp_extension.load(name=FAST_MODULE, sources=[str(fast)], extra_cflags=cflags, extra_ldflags=ldflags,
                           extra_include_paths=[str(d) for d in include_dirs(config)], build_directory=str(fast_dir),
                           verbose=verbose, is_python_module=True, with_cuda=False)
        for kind, (count, secs) in compile_times(fast_log, fast_start).items():
            log(f"codegen build: compiled the fast Python bindings, {secs:.1f}s")
    for kind, (count, secs) in compile_times(ninja_log, log_start).items():
        log(f"codegen build: compiled {count} {kind} objects, {secs:.1f}s of compiler time "
            f"({secs / count:.1f}s each)")
    return out


def compile_times(ninja_log: Path, start: int) -> dict[str, tuple[int, float]]:
    """Objects compiled since byte `start` of ninja's log, by kind: C++ or CUDA."""
    if not ninja_log.exists():
        return {}
    out: dict[str, list] = {}
    with open(ninja_log) as f:
        f.seek(start)
        for line in f:
            parts = line.split("\t")
            if len(parts) < 4 or not parts[3].endswith(".o"):
                continue
            kind = "CUDA" if parts[3].endswith(".cuda.o") else "C++"
            entry = out.setdefault(kind, [0, 0.0])
            entry[0] += 1
            entry[1] += (int(parts[1]) - int(parts[0])) / 1000
    return {k: (n, secs) for k, (n, secs) in out.items()}


def extension(config: Config, log=print):
    """A setuptools extension over the same sources, for `BuildExtension` wheels.
    OPWRAP_CUDA=1/0 forces CUDA on or off; unset, it is built when it can be."""
    flag = os.environ.get("OPWRAP_CUDA")
    env = resolve_cuda(config, None if flag is None else flag == "1", log)
    from torch.utils.cpp_extension import CppExtension, CUDAExtension

    root = config.root
    kind = CUDAExtension if env is not None else CppExtension
    return kind(
        name=f"{config.python_package}.{config.library}",
        sources=[os.path.relpath(s, root) for s in sources(config, cuda=env is not None)],
        include_dirs=[str(d) for d in include_dirs(config)],
        extra_compile_args=({"cxx": CXX_FLAGS + openmp_flags(), "nvcc": NVCC_FLAGS + cuda_include_flags(env)}
                            if env is not None else CXX_FLAGS + openmp_flags()),
        extra_link_args=openmp_flags(),
    )


def fast_extension(config: Config):
    """The fast Python bindings as a setuptools extension module, or None when not generated."""
    from torch.utils.cpp_extension import CppExtension

    src = fast_source(config)
    if src is None:
        return None
    return CppExtension(name=f"{config.python_package}._generated.{FAST_MODULE}",
                        sources=[os.path.relpath(src, config.root)],
                        include_dirs=[str(d) for d in include_dirs(config)], extra_compile_args=CXX_FLAGS)
