"""`cuda_archs:`: the CUDA architectures an op's kernels are compiled for (codegen/core/cuda_archs.py).

This plugin declares and checks the field; the CUDA wrappers (plugins/kernels.py and
plugins/pointwise.py) read it through `cuda_archs.arch_restriction`."""

from __future__ import annotations

from dataclasses import dataclass

from ..core import cuda_archs
from ..front.fields import INVALID, Field, FieldType, ListOf
from .base import Plugin

__all__ = ["CudaArchs"]


@dataclass(frozen=True)
class CudaArchName(FieldType):
    """A CUDA architecture as TORCH_CUDA_ARCH_LIST writes one: 8.0, 8.6, 9.0, 9.0a (YAML may read
    it as a number: `[8.0, 9.0]` needs no quotes)."""

    def check(self, node, ck, where):
        import yaml
        if not isinstance(node, yaml.ScalarNode) or node.tag not in ("tag:yaml.org,2002:str", "tag:yaml.org,2002:float",
                                                                      "tag:yaml.org,2002:int"):
            return self.fail(node, ck, where)
        why = cuda_archs.problem(node.value)
        if why is not None:
            hint = f"write {node.value}.0" if node.value.isdigit() else "as in TORCH_CUDA_ARCH_LIST: 8.0, 8.6, 9.0, 9.0a"
            ck.error(node, f"'{where}': {why}", hint)
            return INVALID
        return str(cuda_archs.CudaArch.parse(node.value))

    def describe(self):
        return "a CUDA architecture (8.0, 8.6, 9.0, 9.0a)"

    def plural(self):
        return "CUDA architectures (8.0, 8.6, 9.0, 9.0a)"


class CudaArchs(Plugin):
    name = "cuda_archs"
    fields = {"cuda_archs": Field(ListOf(CudaArchName(), nonempty=True, unique=True),
        "The CUDA architectures the op's CUDA kernels are compiled for, as TORCH_CUDA_ARCH_LIST names them "
        "(`[9.0a]`, `[8.0, 9.0]`): the build's architectures that one of them keeps (the same major version and "
        "at least its minor; an arch-specific `9.0a` only itself), with their PTX. On a device none of those runs "
        "on, the op raises a RuntimeError naming the op and the device's compute capability. "
        "See [Per-op CUDA architectures](declarations.md#per-op-cuda-architectures).")}

    def validate(self, decl, lib, diag):
        if not decl.extra_field("cuda_archs") or decl.failed("cuda_archs"):
            return
        where = decl.field_loc("cuda_archs")
        if "CUDA" not in decl.devices:
            diag.error(where, f"{decl.name} has no CUDA kernel for 'cuda_archs' to restrict",
                       "name one in 'kernels: {CUDA: ...}', or remove 'cuda_archs'")
        elif decl.foreign_kernel("CUDA") is not None:
            diag.error(where, f"{decl.name}'s CUDA kernel is behind the C ABI, compiled from its own source: "
                       "'cuda_archs' restricts the kernels opwrap instantiates (templates, pointwise and row-wise)",
                       "test __CUDA_ARCH__ in that source instead")
