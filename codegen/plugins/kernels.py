"""The wrappers around kernels, one instance of this plugin a device (codegen/core/targets.py):
for each op with a kernel on that device, one translation unit (or, where the device allows
cwrap's split_types, one per dtype) with the argument checks, output allocation from the
shape rule and dtype dispatch over exactly the declared dtypes (one `plan_call`), the
device's guard on the first tensor's device, and `TORCH_LIBRARY_IMPL(<ns>, <key>, m)`.  The
kernel is a hand-written template `<kernel><scalar_t>` in the op's header (for CUDA, its
`.cuh`: it launches on the current stream and checks the launch), a C symbol behind the C
ABI, or one generated from a row-wise program."""

from __future__ import annotations

from ..api.kernel import (check_foreign, check_supported, combo_key, dispatch_key, kernel_function, kernel_header,
                          kernel_signature, plan_call, tensor_arguments, written_header)
from ..core.cuda_archs import arch_restriction
from ..front.fields import Field, RelativePath
from ..core.targets import Device
from .base import Output, Plugin

__all__ = ["DeviceKernels"]


class DeviceKernels(Plugin):
    """The kernel wrappers of one device row; its name is the row's unit ("cpu", "cuda")."""

    def __init__(self, device: Device):
        self.device = device
        self.name = device.unit
        self.fields = {} if device.header_field == "header" else {device.header_field: Field(
            RelativePath((device.header_suffix, ".h", ".hpp"), "a relative path inside the kernels directory"),
            f"the {device.key} kernel header (default `<name>{device.header_suffix}`).")}

    def validate(self, decl, lib, diag):
        device = self.device
        if not kernel_function(decl, device):  # none, or a pointwise expression's (its plugin's wrappers)
            return
        if device.tensor_dispatch_only and not tensor_arguments(decl.schema):
            diag.error(decl.field_loc("kernels"),
                       f"{decl.name} has no Tensor input, so nothing dispatches it to {device.key}",
                       "an op without tensor inputs is registered for every backend from its CPU kernel")
            return
        supported = check_supported(decl, lib, diag, device.key)
        if decl.foreign_kernel(device.key) is not None:  # no header: the symbols' prototypes are generated
            check_foreign(decl, device.key, diag, lib.config)
            return
        if decl.rows is not None:  # generated from the row-wise program
            return
        header = written_header(decl, device)
        own = device.header_field != "header" and decl.extra_field(device.header_field)
        if lib.config.kernel_header(header) or decl.failed("header") or decl.failed(device.header_field):
            return
        written = own or (device.header_field == "header" and "header" in dict(decl.field_locs))
        what = "kernel header" if device.header_field == "header" else f"{device.key} kernel header"
        diag.error(decl.field_loc(device.header_field) if written else decl.field_loc("kernels"),
                   f"{what} '{lib.config.kernels}/{header}' not found",
                   f"write there: `{kernel_signature(decl, device.key) if supported else 'template <typename scalar_t> ...'}`"
                   + ("" if written else f", or name another file with '{device.header_field}:'")
                   + (" (`codegen stubs` writes a skeleton)" if device.header_field == "header" else ""))

    def emit(self, lib, ctx):
        device, ns = self.device, lib.namespace
        template = "kernels/op.j2"
        for d in lib.declarations:
            if not kernel_function(d, device) or (device.tensor_dispatch_only and not tensor_arguments(d.schema)):
                continue
            call = plan_call(d, ns, device)
            sym = call.symbols
            foreign = d.foreign_kernel(device.key)
            # A foreign kernel has no template to instantiate; a generated one is instantiated once.
            split = device.split_types and d.split_types and foreign is None and d.rows is None
            split_fn = dict(sym.split)
            if foreign is not None:
                dispatch = call.switch(foreign.symbol_for)
            else:
                dispatch = call.switch(lambda c: split_fn[combo_key(c)] if split else sym.instantiation(c))
            common = dict(namespace=ns, decl=d, device=device, call=call, header=kernel_header(d, device),
                          key=dispatch_key(d, device), dispatch=dispatch, split=split, foreign=foreign is not None,
                          declarations=[f"{call.kernel_returns} {fn}({call.kernel_params});" for _, fn in sym.split],
                          arch=arch_restriction(d) if device.compiler == "nvcc" and foreign is None else None)
            yield Output(f"{device.unit}/{d.ident}{device.suffix}", ctx.render(template, **common),
                         (d.path, ctx.template_source(template)), unit=device.unit, precompiled=device.precompiled)
            if split:  # one unit per dtype of the primary variable, with every combination it has
                t2 = "kernels/op_dtype.j2"
                for dt in d.dtypes:
                    combos = [c for c in d.dtype_combinations() if c[0] == dt]
                    functions = [(split_fn[combo_key(c)], ", ".join(x.name for x in c),
                                  call.forward(sym.instantiation(c))) for c in combos]
                    yield Output(f"{device.unit}/{d.ident}_{dt.name}{device.suffix}",
                                 ctx.render(t2, **common, functions=functions, precompiled=device.precompiled),
                                 (d.path, ctx.template_source(t2)))
