"""Autocast kernels from `autocast:` (seed 004): the dtypes that reach the kernel under
torch.autocast, for each policy, seen by a dispatch mode below the autocast key."""

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import opwrap

ops = opwrap.ops


class KernelDtypes(TorchDispatchMode):
    """Records the input dtypes of each opwrap op as it reaches the kernels."""

    def __init__(self):
        super().__init__()
        self.seen = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.namespace == "opwrap":
            self.seen[func.__name__.split(".")[0]] = [a.dtype for a in args if isinstance(a, torch.Tensor)]
        return func(*args, **(kwargs or {}))


def run(fn, *, dtype=torch.bfloat16, enabled=True):
    with torch.autocast("cpu", dtype=dtype, enabled=enabled), KernelDtypes() as mode:
        out = fn()
    return out, mode.seen


def test_lower_precision_casts_float_inputs_to_the_autocast_dtype():
    a, b = torch.randn(4, 3), torch.randn(3, 5)
    out, seen = run(lambda: ops.mymatmul(a, b))
    assert seen["mymatmul"] == [torch.bfloat16, torch.bfloat16] and out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), a @ b, atol=5e-2, rtol=2e-2)
    out, seen = run(lambda: ops.mymatmul(a, b), dtype=torch.float16)
    assert seen["mymatmul"] == [torch.float16, torch.float16]


def test_outside_autocast_and_for_ineligible_inputs_nothing_is_cast():
    a, b = torch.randn(4, 3), torch.randn(3, 5)
    out, seen = run(lambda: ops.mymatmul(a, b), enabled=False)
    assert seen["mymatmul"] == [torch.float32, torch.float32]
    out, seen = run(lambda: ops.mymatmul(a.double(), b.double()))  # float64 is never autocast
    assert seen["mymatmul"] == [torch.float64, torch.float64]


def test_fp32_runs_in_float32():
    x, w = torch.randn(2, 8, dtype=torch.bfloat16), torch.randn(8, dtype=torch.bfloat16)
    (out, rstd), seen = run(lambda: ops.rms_norm(x, w))
    assert seen["rms_norm"] == [torch.float32, torch.float32] and out.dtype == torch.float32


def test_promote_takes_the_widest_input_type():
    a, b = torch.randn(5), torch.randn(5).bfloat16()
    out, seen = run(lambda: ops.myadd(a, b))
    assert seen["myadd"] == [torch.float32, torch.float32] and out.dtype == torch.float32
    _, seen = run(lambda: ops.myadd(b, b))
    assert seen["myadd"] == [torch.bfloat16, torch.bfloat16]
    assert ops.myadd(a, b).dtype == torch.float32  # outside autocast, the kernel promotes as torch.add
    # A third floating dtype is refused by at::autocast::prioritize (and by the stable target's
    # Python kernels: tests/test_stable_target.py, test_autocast_policies).
    with torch.autocast("cpu", dtype=torch.bfloat16), \
            pytest.raises(RuntimeError, match="Unexpected floating ScalarType in at::autocast::prioritize"):
        ops.myadd(b, b.half())


def test_autocast_composes_with_autograd():
    a = torch.randn(4, 3, requires_grad=True)
    b = torch.randn(3, 5, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = ops.mymatmul(a, b)
    out.float().sum().backward()
    assert a.grad.dtype == torch.float32 and b.grad.dtype == torch.float32
    torch.testing.assert_close(a.grad, torch.ones(4, 5) @ b.detach().t(), atol=5e-2, rtol=2e-2)


def test_autocast_kernels_are_registered_for_cpu_and_cuda():
    for op in ("mymatmul", "rms_norm", "myadd"):
        assert torch._C._dispatch_has_kernel_for_dispatch_key(f"opwrap::{op}", "AutocastCPU")
        assert torch._C._dispatch_has_kernel_for_dispatch_key(f"opwrap::{op}", "AutocastCUDA")
    assert not torch._C._dispatch_has_kernel_for_dispatch_key("opwrap::linear", "AutocastCPU")
