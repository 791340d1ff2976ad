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
