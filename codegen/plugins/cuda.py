"""CUDA kernels: one `.cu` translation unit per op with `TORCH_LIBRARY_IMPL(<ns>, CUDA, m)`,
the same argument checks, output allocation and dtype dispatch as the CPU wrapper (one
`plan_call`), plus a `CUDAGuard` on the first tensor's device and a check that every tensor
is on that one device.  The kernel template `<kernel><scalar_t>` lives in the op's `.cuh`
(default `<name>.cuh` in the kernels directory), launches on the current stream and checks
the launch; its math is shared with the CPU kernel through the op's `.h`."""

from __future__ import annotations

from .base import Output, Plugin
from .cpu import check_supported, plan_call


def cuda_header(decl) -> str:
    return decl.extra_field("cuda_header") or decl.header.rsplit(".", 1)[0] + ".cuh"


class CudaKernels(Plugin):
    name = "cuda"
    fields = {"cuda_header": "the CUDA kernel header in the kernels directory (default: <name>.cuh)"}

    def validate(self, decl, lib, diag):
        kernel = decl.kernel("CUDA")
        if kernel is None:
            return
        if not decl.tensor_inputs:
            diag.error(decl.field_loc("kernels"), f"{decl.name} has no Tensor input, so nothing dispatches it to CUDA",
                       "an op without tensor inputs is registered for every backend from its CPU kernel")
            return
        check_supported(decl, lib, diag, "CUDA")
        header = lib.config.path("kernels") / cuda_header(decl)
        if not header.is_file():
            diag.error(decl.field_loc("cuda_header") if decl.extra_field("cuda_header") else decl.field_loc("kernels"),
                       f"CUDA kernel header '{lib.config.kernels}/{cuda_header(decl)}' not found",
                       f"write `template <typename scalar_t> void {kernel}(...)` there, or name another file with "
                       "'cuda_header:'")

    def emit(self, lib, ctx):
        ns = lib.namespace
        for d in lib.declarations:
            kernel = d.kernel("CUDA")
            if kernel is None or not d.tensor_inputs:
                continue
            call = plan_call(d, ns, "CUDA")
            cases = [(dt.scalar_type, f"::{ns}::kernels::{kernel}<{dt.cpp}>({call.kernel_args});") for dt in d.dtypes]
            template = "cuda/op.cu.j2"
            text = ctx.render(template, namespace=ns, decl=d, call=call, header=cuda_header(d),
                              cases=cases, dtype_names=", ".join(dt.name for dt in d.dtypes))
            yield Output(f"cuda/{d.ident}.cu", text, (d.path, ctx.template_source(template)))
