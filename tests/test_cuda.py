"""CUDA kernels.  The registration tests run wherever the loaded library was built with CUDA
(CI's `make cuda-check` builds it, with no GPU, and runs this file on it); the kernel tests
are marked `cuda` and run only on a machine with a GPU, where they compare every op and
dtype with the CPU kernel.  `make gpu-test` runs them there."""

import pytest

from opwrap_codegen.api.kernel import tensor_arguments
import torch

import opwrap
from opwrap_codegen import build, cuda_env, testing
from conftest import ROOT
from references import PREPARE

DECLS = [d for d in testing.declared_ops(ROOT) if d.kernel("CUDA") is not None]  # hand-written or generated
ENV, WHY_NOT = cuda_env.detect()
BUILT_WITH_CUDA = build.manifest(opwrap.library_path).get("cuda", False)
needs_cuda_build = pytest.mark.skipif(not BUILT_WITH_CUDA, reason=f"{opwrap.library_path} has no CUDA kernels "
                                      "(make cuda-check builds and tests them)")
needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


def op_of(decl):
    return getattr(getattr(torch.ops.opwrap, decl.name), decl.overload or "default")


def test_every_op_but_factories_declares_cuda():
    for d in testing.declared_ops(ROOT):
        if d.kernels:  # class-method ops run the class's C++ method on any device
            assert (d.kernel("CUDA") is not None) == bool(tensor_arguments(d.schema)), d.op_name


@needs_cuda_build
@pytest.mark.parametrize("decl", DECLS, ids=lambda d: d.op_name)
def test_cuda_kernel_is_registered(decl):
    name = f"opwrap::{decl.op_name}"
    assert torch._C._dispatch_has_kernel_for_dispatch_key(name, "CUDA"), name
    dump = torch._C._dispatch_dump(name)
    assert f"CUDA: registered at {ROOT}/generated/cuda/{decl.ident}.cu" in dump, dump


def test_cuda_environment_is_found_without_hard_coded_paths():
    if torch.version.cuda is None:
        pytest.skip("CPU-only torch")
    root = cuda_env.find_toolkit_root()
    assert root is not None and cuda_env.is_toolkit_root(root)
    assert (root / "bin" / "nvcc").is_file() and not cuda_env._is_script(root / "bin" / "nvcc")
    assert any((d / "cusparse.h").is_file() for d in cuda_env.nvidia_include_dirs())


@pytest.mark.cuda
@needs_gpu
@pytest.mark.parametrize("decl, dtype", [pytest.param(d, dt, id=f"{d.op_name}-{dt.name}") for d in DECLS for dt in d.dtypes])
def test_cuda_matches_cpu(decl, dtype):
    for sample in testing.sample_inputs(decl, testing.torch_dtype(dtype), prepare=PREPARE.get(decl.op_name)):
        testing.check_same_as_cpu(decl, op_of(decl), sample, "cuda")


@pytest.mark.cuda
@needs_gpu
@pytest.mark.parametrize("decl", DECLS, ids=lambda d: d.op_name)
def test_cuda_opcheck_and_gradients(decl):
    dtype = torch.float64 if any(dt.name == "float64" for dt in decl.dtypes) else testing.torch_dtype(decl.dtypes[0])
    for sample in testing.sample_inputs(decl, dtype, prepare=PREPARE.get(decl.op_name), device="cuda"):
        testing.check_opcheck(op_of(decl), sample)
    if dtype == torch.float64 and testing.differentiable_inputs(decl):
        for sample in testing.sample_inputs(decl, dtype, requires_grad=True, prepare=PREPARE.get(decl.op_name),
                                            device="cuda"):
            testing.check_gradients(decl, op_of(decl), sample)


@pytest.mark.cuda
@needs_gpu
def test_wrong_and_mixed_devices_are_clear_errors():
    x = torch.randn(3, device="cuda")
    with pytest.raises(RuntimeError, match=r"opwrap::myadd: argument 'other' is on cpu, but this kernel expects"):
        torch.ops.opwrap.myadd(x, torch.randn(3))
    if torch.cuda.device_count() > 1:
        with pytest.raises(RuntimeError, match=r"argument 'other' is on cuda:1, but 'self' is on cuda:0"):
            torch.ops.opwrap.myadd(x, torch.randn(3, device="cuda:1"))


@pytest.mark.cuda
@needs_gpu
def test_kernels_run_on_the_inputs_device_and_current_stream():
    x = torch.randn(1 << 16, device="cuda")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        y = torch.ops.opwrap.mul_constant(x, 2.0)
    s.synchronize()
    torch.testing.assert_close(y, x * 2)
