"""The stable-ABI target's symbol check (docs/stable-abi.md): after a stable build, every
symbol the library needs from torch's own libraries must be one of torch's stable C shim
(`torch/csrc/stable/c/*.h`, `torch/csrc/inductor/aoti_torch/c/*.h`).  Anything else (a C++
symbol of ATen or c10 that a header pulled in) would tie the library to the torch release it
was compiled against, which is what the target exists to avoid: the build fails, naming each
such symbol (demangled) and the objects that reference it."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

# The shim headers, relative to torch's include directory.
SHIM_DIRS = ("torch/csrc/stable/c", "torch/csrc/inductor/aoti_torch/c")
# torch's libraries whose symbols a stable library may use only through the shim.
TORCH_LIBRARIES = ("libtorch.so", "libtorch_cpu.so", "libc10.so", "libtorch_cuda.so", "libc10_cuda.so")

_IDENT = re.compile(r"\b[A-Za-z_]\w*\b")
# The C++ runtime's own names, which torch's libraries export too (they are libstdc++'s, the
# same in every release): not torch's API.
_RUNTIME = ("std::", "__gnu_cxx::", "__cxxabiv1::", "operator new", "operator delete", "__cxa_", "_Unwind_")


@dataclass(frozen=True)
class Violation:
    symbol: str  # as linked (mangled)
    readable: str  # demangled
    objects: tuple[str, ...]  # the build's objects that reference it

    def __str__(self) -> str:
        where = f" (referenced by {', '.join(self.objects)})" if self.objects else ""
        name = self.readable if self.readable == self.symbol else f"{self.readable} [{self.symbol}]"
        return f"{name}{where}"


def shim_names(include_dir: Path) -> set[str]:
    """Every identifier the stable C shim headers name: its functions are among them."""
    names: set[str] = set()
    for d in SHIM_DIRS:
        for header in sorted((include_dir / d).glob("*.h")):
            names.update(_IDENT.findall(header.read_text(encoding="utf-8", errors="replace")))
    return names


def _nm(path: Path, *flags: str) -> list[str]:
    out = subprocess.run(["nm", "-D", *flags, str(path)], capture_output=True, text=True, check=False).stdout
    return [line.split()[-1] for line in out.splitlines() if line.strip()]


def torch_symbols(lib_dir: Path) -> set[str]:
    """The dynamic symbols torch's libraries define."""
    out: set[str] = set()
    for name in TORCH_LIBRARIES:
        if (lib_dir / name).is_file():
            out.update(s.split("@")[0] for s in _nm(lib_dir / name, "--defined-only"))
    return out


def _demangle(symbols: list[str]) -> list[str]:
    tool = shutil.which("c++filt")
    if not tool or not symbols:
        return symbols
    out = subprocess.run([tool], input="\n".join(symbols), capture_output=True, text=True, check=False).stdout
    lines = out.splitlines()
    return lines if len(lines) == len(symbols) else symbols


def violations(library: Path, objects: list[Path], include_dir: Path, lib_dir: Path) -> list[Violation]:
    """The symbols `library` needs from torch that are not in the stable C shim."""
    if shutil.which("nm") is None:
        raise FileNotFoundError("the stable target's ABI check needs `nm` (binutils), which is not on PATH")
    needed = sorted({s.split("@")[0] for s in _nm(library, "--undefined-only")})
    allowed, defined = shim_names(include_dir), torch_symbols(lib_dir)
    candidates = [s for s in needed if s in defined and s not in allowed]
    pairs = [(s, r) for s, r in zip(candidates, _demangle(candidates)) if not r.startswith(_RUNTIME)]
    bad = [s for s, _ in pairs]
    referencing = {o: set(subprocess.run(["nm", "--undefined-only", "--format=just-symbols", str(o)],
                                          capture_output=True, text=True, check=False).stdout.split())
                   for o in objects} if bad else {}
    return [Violation(s, readable, tuple(sorted(o.name for o, syms in referencing.items() if s in syms)))
            for s, readable in pairs]


def check(library: Path, build_dir: Path, log=print) -> None:
    """Fail (RuntimeError) when `library` needs a torch symbol outside the stable C shim; the
    library is removed then, so that nothing loads a build that would break on another torch."""
    import torch.utils.cpp_extension as cpp_extension  # the torch this build compiled against
    torch_dir = Path(cpp_extension.include_paths()[0])
    found = violations(library, sorted(build_dir.glob("*.o")), torch_dir, Path(cpp_extension.TORCH_LIB_PATH))
    if found:
        library.unlink(missing_ok=True)
        raise RuntimeError(f"{library}: error: the stable target's library needs {len(found)} torch symbol"
                           f"{'s' if len(found) > 1 else ''} outside torch's stable C shim, so it would load "
                           "into this torch release only:\n" + "\n".join(f"  {v}" for v in found)
                           + "\n(a hand-written kernel or header used the full ATen API: use torch/csrc/stable "
                           "and torch/headeronly only)")
    log(f"codegen build: stable ABI check: {library.name} needs no torch symbol outside the stable C shim")
