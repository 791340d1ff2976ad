"""Per-op CUDA architectures: the `cuda_archs:` declaration field, as data and rules.

An op may restrict its CUDA kernels to architectures (`cuda_archs: [9.0a]` for a kernel that
uses sm_90a's wgmma, `[8.0]` for one that needs sm_80's async copies).  The build's own list
stays `TORCH_CUDA_ARCH_LIST`; each op's kernels are compiled only for the *loose
intersection* of the two, as vLLM's `cuda_archs_loose_intersection` chooses per source file:

- a build architecture b is kept for a declared d when they share the major version and
  b's minor is at least d's (code for sm_80 is valid sm_86 and sm_89 code: a declared 8.0
  keeps a build's 8.6); a declared arch-specific `9.0a` keeps only a build's `9.0a`;
- a kept architecture keeps its PTX (`+PTX`), which a later GPU compiles when it loads it.

The generated CUDA unit is compiled for every architecture of the build (it holds other
ops), but the op's kernels are instantiated only in the device passes of kept
architectures (`device_condition`: a preprocessor test on `__CUDA_ARCH__`), so the library
holds their machine code only there.  On a device that no kept architecture runs on, the
wrapper raises a RuntimeError naming the op and the device's compute capability
(runtime/include/opwrap/runtime/cuda_archs.h, whose rules `runs_on` mirrors).  The build
writes what it compiles for (`build_archs`, from torch's own `-gencode` flags) into a header
of the build directory, `opwrap_cuda_build_archs.h`, which that runtime header reads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

BUILD_HEADER = "opwrap_cuda_build_archs.h"
_ARCH = re.compile(r"(\d{1,2})\.(\d)(a?)")


@dataclass(frozen=True, order=True)
class CudaArch:
    """An architecture: compute capability major.minor, and `specific` for the arch-specific
    targets (`9.0a`: sm_90a's features, valid on that GPU only)."""

    major: int
    minor: int
    specific: bool = False

    @classmethod
    def parse(cls, text: str) -> "CudaArch":
        m = _ARCH.fullmatch(text.strip())
        if m is None:
            raise ValueError(f"'{text}' is not a CUDA architecture such as 8.0, 8.6, 9.0 or 9.0a")
        return cls(int(m.group(1)), int(m.group(2)), bool(m.group(3)))

    @property
    def code(self) -> int:
        """As C++ sees it: __CUDA_ARCH__'s number (900), plus 1 when arch-specific (901)."""
        return self.major * 100 + self.minor * 10 + int(self.specific)

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}{'a' if self.specific else ''}"

    def keeps(self, built: "CudaArch") -> bool:
        """Whether this declared architecture keeps the build's `built` (the loose intersection)."""
        if self.specific:
            return built == self
        return built.major == self.major and built.minor >= self.minor


# The architectures nvcc 12.x/13.x knows (the ones a declaration may name): Maxwell to Blackwell.
KNOWN = frozenset({(5, 0), (5, 2), (5, 3), (6, 0), (6, 1), (6, 2), (7, 0), (7, 2), (7, 5), (8, 0), (8, 6),
                   (8, 7), (8, 9), (9, 0), (10, 0), (10, 1), (10, 3), (11, 0), (12, 0), (12, 1)})
# Arch-specific targets ('a'): sm_90a and later.
SPECIFIC_FROM = (9, 0)


def problem(text: str) -> str | None:
    """Why `text` is not an architecture a declaration may name, or None."""
    try:
        arch = CudaArch.parse(text)
    except ValueError as e:
        return str(e)
    if (arch.major, arch.minor) not in KNOWN:
        return f"'{text}' is not a CUDA architecture nvcc knows ({', '.join(f'{a}.{b}' for a, b in sorted(KNOWN))})"
    if arch.specific and (arch.major, arch.minor) < SPECIFIC_FROM:
        return f"'{text}': arch-specific targets ('a') exist from 9.0a on"
    return None


def loose_intersection(declared: tuple[CudaArch, ...], built: tuple[tuple[CudaArch, bool], ...]) -> list[tuple[CudaArch, bool]]:
    """The build's (architecture, is PTX) entries an op declared for `declared` is compiled for."""
    return [(b, ptx) for b, ptx in built if any(d.keeps(b) for d in declared)]


def runs_on(built: CudaArch, ptx: bool, major: int, minor: int) -> bool:
    """Whether code compiled for `built` (machine code, or PTX) runs on a device of compute
    capability major.minor (the rules of runtime/include/opwrap/runtime/cuda_archs.h)."""
    if built.specific:
        return (built.major, built.minor) == (major, minor)
    if ptx:
        return (built.major, built.minor) <= (major, minor)
    return built.major == major and built.minor <= minor


def device_condition(declared: tuple[CudaArch, ...]) -> str:
    """The preprocessor test, in a device pass, that the pass's architecture is kept."""
    terms = []
    for d in sorted(set(declared)):
        if d.specific:
            terms.append(f"(__CUDA_ARCH__ == {d.code - 1} && defined(__CUDA_ARCH_FEAT_SM{d.major}{d.minor}_ALL))")
        else:
            terms.append(f"(__CUDA_ARCH__ >= {d.code} && __CUDA_ARCH__ < {(d.major + 1) * 100})")
    return " || ".join(terms)


def parse_gencode(flags: list[str]) -> tuple[tuple[CudaArch, bool], ...]:
    """(architecture, is PTX) for each target of nvcc's `-gencode=arch=compute_90a,code=sm_90a`
    (machine code) and `code=compute_90` (PTX) flags, as torch's cpp_extension writes them."""
    out = []
    for flag in flags:
        for kind, number, suffix in re.findall(r"code=\[?(sm|compute)_(\d+)([af]?)", flag):
            n = int(number)
            arch = (CudaArch(n // 10, n % 10, suffix == "a"), kind == "compute")
            if arch not in out:
                out.append(arch)
    return tuple(out)


def gencode_flags() -> list[str]:
    """nvcc's -gencode flags for this build: torch's own, from TORCH_CUDA_ARCH_LIST (or, unset,
    the visible GPUs' architectures)."""
    from torch.utils import cpp_extension
    return list(cpp_extension._get_cuda_arch_flags())


def build_archs(flags: list[str] | None = None) -> tuple[tuple[CudaArch, bool], ...]:
    """What this build's nvcc compiles for (`flags`, or gencode_flags())."""
    return parse_gencode(gencode_flags() if flags is None else flags)


def build_header_text(built: tuple[tuple[CudaArch, bool], ...], arch_list: str) -> str:
    entries = " ".join(f"OPWRAP_CUDA_BUILT({a.code}, {int(ptx)})" for a, ptx in built)
    return ("// Written by codegen build: the architectures its nvcc compiles for "
            f"(TORCH_CUDA_ARCH_LIST={arch_list or 'unset'}).\n"
            "// Read by <opwrap/runtime/cuda_archs.h>.\n"
            "#pragma once\n"
            f"#define OPWRAP_CUDA_BUILD_ARCHS {entries}\n")


def write_build_header(directory: Path, arch_list: str, flags: list[str] | None = None) -> Path:
    """Writes BUILD_HEADER for a build compiling with `flags` (gencode_flags() by default) into
    `directory` (only when it changed) and returns the directory, for nvcc's include path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / BUILD_HEADER
    text = build_header_text(build_archs(flags), arch_list)
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")
    return directory


@dataclass(frozen=True)
class ArchRestriction:
    """What a CUDA wrapper of an op declared with `cuda_archs:` adds: the host check before
    the kernel runs, and the device-pass condition its kernel instantiations sit under."""

    archs: str  # as C++ initializers: "900, 901"
    declared: str  # as written: "9.0, 9.0a"
    condition: str


def arch_restriction(decl) -> ArchRestriction | None:
    archs = decl.extra_field("cuda_archs")
    if not archs or decl.failed("cuda_archs"):
        return None
    parsed = tuple(CudaArch.parse(a) for a in archs)
    codes = ", ".join(str(a.code) for a in parsed)
    return ArchRestriction(archs=codes, declared=", ".join(archs),
                           condition=f"!defined(__CUDA_ARCH__) || {device_condition(parsed)}")
