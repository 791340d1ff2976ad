"""What opwrap builds for, as data.

A *device* is one row: what a generated wrapper for that dispatch key needs (the device type
its checks name, the guard that makes the first tensor's device current, the stream a C ABI
kernel is given, whether host-side value checks run), where its translation units go and who
compiles them, and where a hand-written kernel's header is by default.  One kernel plugin
(plugins/kernels.py, one instance a row) and one wrapper template serve every row; adding a
device is one row here, or in a third-party plugin (a `DeviceKernels(row)` in its list), plus
the runtime header its guard and stream come from.

The CPU capabilities are the builds of each generated CPU loop besides the default one,
chosen at run time by ATen's CPU dispatch as its own kernels are; the build
(opwrap_codegen.build), the generated-kernel plugins and the survey read them here."""

from __future__ import annotations

from dataclasses import dataclass

from .torch_compat import OLDEST


@dataclass(frozen=True)
class Device:
    key: str  # the dispatch key, and its name in a declaration's `kernels:`
    device_type: str  # the c10::DeviceType the wrapper checks every tensor against
    unit: str  # generated/<unit>/<op><suffix>, the translation-unit group, the plugin's name
    suffix: str  # of the wrapper's translation unit
    compiler: str  # "c++", or "nvcc": compiled only by `codegen build --cuda`
    header_suffix: str  # a hand-written kernel's header by default: `<op><header_suffix>`
    header_field: str = "header"  # the declaration field that names that header instead
    includes: tuple[str, ...] = ()  # what the wrapper includes for the guard
    guard: str = ""  # the C++ guard type making the first tensor's device current ("" none)
    stream: str = ""  # the current stream, given to C ABI kernels ("" none)
    stream_include: str = ""
    same_device: bool = False  # every tensor on the first one's device (cuda:0 and cuda:1 do not mix)
    host_checks: bool = True  # `index:` bounds checked by the wrapper (on a GPU: by the kernel, no sync)
    tensor_dispatch_only: bool = False  # only an op with tensor inputs can reach it
    split_types: bool = False  # cwrap's split_types: one translation unit per dtype
    precompiled: bool = False  # its units start with the precompiled torch header

    @property
    def ident(self) -> str:
        """The suffix of the wrapper's C++ names: `<op>_<ident>`."""
        return self.key.lower()


CPU = Device("CPU", "c10::DeviceType::CPU", unit="cpu", suffix=".cpp", compiler="c++", header_suffix=".h",
             split_types=True, precompiled=True)
CUDA = Device("CUDA", "c10::DeviceType::CUDA", unit="cuda", suffix=".cu", compiler="nvcc", header_suffix=".cuh",
              header_field="cuda_header", includes=("c10/cuda/CUDAGuard.h",), guard="c10::cuda::CUDAGuard",
              stream="c10::cuda::getCurrentCUDAStream().stream()", stream_include="c10/cuda/CUDAStream.h",
              same_device=True, host_checks=False, tensor_dispatch_only=True)

# The built-in devices, in the order their plugins run.
DEVICES = (CPU, CUDA)

# The devices the generated kernels (`pointwise:` expressions and `rowwise:` programs) exist for.
GENERATED = (CPU, CUDA)

# Translation units `<group>.<CAPABILITY>.<n>.cpp`, each compiled with that capability's flags
# (ATen's: DEFAULT is the group without a suffix).
CPU_CAPABILITIES = ("AVX2", "AVX512")


@dataclass(frozen=True)
class Target:
    """The API the generated C++ is written against, chosen per library (`[tool.codegen]
    target`, `codegen build --target`): see docs/stable-abi.md.  The full ATen target pins a
    built library to one torch release; the stable one loads into every release from
    `oldest` on."""

    name: str  # its name in `[tool.codegen] target` and `codegen build --target`
    doc: str
    cpp_dir: str = ""  # where its C++ goes inside the generated tree ("": the tree's root)
    runtime_include: str = "opwrap/runtime/checks.h"  # the support header of its wrappers
    oldest: tuple[int, int] | None = None  # the oldest torch release it loads in (None: only its own)
    py_limited_api: bool = False  # built as a Python limited-API (abi3) extension
    fast_bindings: bool = True  # the compiled fast Python call path (it needs torch's Python C++ API)
    precompiled: bool = True  # the precompiled torch header applies to its units
    cpp_autograd: bool = True  # autograd kernels in C++ (else registered from Python)
    openmp: bool = True  # compiled with torch's OpenMP flags (the stable API's parallel_for needs none)
    cflags: tuple[str, ...] = ()  # further options of its C++ units

    @property
    def checks_abi(self) -> bool:
        """Whether a build's symbols are checked against torch's stable C shim (abi_check.py)."""
        return self.oldest is not None

    @property
    def defines(self) -> tuple[str, ...]:
        """Preprocessor definitions of its every unit: the oldest release it must load in."""
        if self.oldest is None:
            return ()
        major, minor = self.oldest
        return (f"TORCH_TARGET_VERSION=0x{major:02x}{minor:02x}000000000000",)


ATEN = Target("aten", "the full ATen C++ API: every feature; a build works with the torch release it compiled against")
STABLE = Target("stable", "torch's stable ABI (torch/csrc/stable, torch/headeronly): one build for every torch from "
                "the oldest claimed release on", cpp_dir="stable", runtime_include="opwrap/stable/runtime.h",
                oldest=OLDEST, py_limited_api=True, fast_bindings=False, precompiled=False, cpp_autograd=False,
                openmp=False,
                # torch's own kernels' floating-point options (torch.__config__.show()): a sqrt
                # that need not set errno, and float compares without traps, vectorize; its
                # loops are plain C++ the compiler vectorizes (no at::vec), the row-wise passes'
                # reductions under `#pragma omp simd` (-fopenmp-simd: the pragmas, no runtime)
                cflags=("-fno-math-errno", "-fno-trapping-math", "-fopenmp-simd"))

TARGETS = (ATEN, STABLE)


def target_named(name: str) -> Target:
    for t in TARGETS:
        if t.name == name:
            return t
    raise KeyError(name)
