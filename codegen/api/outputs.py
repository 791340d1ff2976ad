"""Who makes each return of an op: the kernel, or the generated wrapper (which allocates it
from the shape rule and passes it to the kernel to fill).  Read by the C++ kernel API
(kernel.py) and the C ABI (abi.py) alike."""

from __future__ import annotations


def made_by_kernel(r, o) -> bool:
    """The kernel makes return `r` (its OutputSpec `o`).  A view (`Tensor(a)` aliasing an
    argument that is not written) is made by the kernel too."""
    return o.made_by == "kernel" or (o.made_by == "alias" and not r.is_write)


def kernel_outputs(decl) -> list:
    """(index, return, OutputSpec) of the returns the kernel makes."""
    return [(i, r, o) for i, (r, o) in enumerate(zip(decl.schema.returns, decl.outputs())) if made_by_kernel(r, o)]


def wrapper_outputs(decl) -> list:
    """(return, OutputSpec) of the outputs the wrapper allocates and the kernel fills (its
    parameters after the arguments)."""
    return [(r, o) for r, o in zip(decl.schema.returns, decl.outputs()) if o.made_by == "wrapper"]
