"""A third-party plugin that adds a device, as a user would outside codegen/: one row of
opwrap_codegen.plugins.Device (here PyTorch's XPU, through the generic c10::DeviceGuard), and
the kernel plugin serving it.  Its ops say `kernels: {XPU: name}` and get
generated/xpu/<op>.cpp, registered for the XPU dispatch key."""

from opwrap_codegen.plugins import Device, DeviceKernels

XPU = Device("XPU", "c10::DeviceType::XPU", unit="xpu", suffix=".cpp", compiler="c++", header_suffix=".xpu.h",
             header_field="xpu_header", includes=("c10/core/DeviceGuard.h",), guard="c10::DeviceGuard",
             same_device=True, host_checks=False, tensor_dispatch_only=True)

XPU_KERNELS = DeviceKernels(XPU)
