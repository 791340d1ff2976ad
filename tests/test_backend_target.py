"""The wheel backend's `-C target=`: a full-target (`aten`) `codegen init` library built as the
other target's wheel, one abi3 wheel for every claimed torch (docs/stable-abi.md, "Shipping
one wheel"), without touching the project's own generated/ tree.

A library of its own, the smallest one the stable target builds: ops whose kernels are C
behind the C ABI (the same source in both targets), with derivative formulas, and `codegen
init`'s `scale`, whose C++ kernel is written against each target's API (kernels/scale.h and
kernels/stable/scale.h); the stable build compiles its registration, the wrappers and the C
file at -O0 (about 10 s).  The shared libraries are full-target builds of ops the stable
target refuses."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import one_unit_a_group, run_codegen, run_python
from opwrap_codegen.core import torch_compat

DECLARATION = """\
- func: shift(Tensor self, float by) -> Tensor
  doc: self + by, in C.
  dtypes: [float32, float64]
  kernels: {CPU: {abi: c, symbol: twotargets_shift}}
  like: self
  derivatives:
    self: grad

- func: times(Tensor output, Tensor inputs) -> Tensor
  doc: output * inputs, in C; its arguments take the names of torch.library's setup_context parameters.
  dtypes: [float32, float64]
  kernels: {CPU: {abi: c, symbol: twotargets_times}}
  like: output
  derivatives:
    output: grad * inputs
    inputs: grad * output

- func: cube(Tensor self) -> Tensor
  doc: self ** 3, in C; its derivative calls the library's op cube_backward.
  dtypes: [float32, float64]
  kernels: {CPU: {abi: c, symbol: twotargets_cube}}
  like: self
  derivatives:
    self: cube_backward(grad, self)

- func: cube_backward(Tensor grad_output, Tensor self) -> Tensor
  doc: grad_output * 3 * self ** 2, in C; differentiable once (cube's second derivative), not twice.
  dtypes: [float32, float64]
  kernels: {CPU: {abi: c, symbol: twotargets_cube_backward}}
  like: self
  derivatives:
    grad_output: cube_backward(grad, self)
    self: 6 * grad * grad_output * self
    once_differentiable: true
"""

C_SOURCE = """\
#include "abi/shift.h"

#define SHIFT(NAME, T)                                                                             \\
  int32_t NAME(opwrap_context* ctx, const opwrap_tensor* self, double by, opwrap_tensor* result) { \\
    (void)ctx;                                                                                     \\
    const T* x = (const T*)self->data;                                                             \\
    T* out = (T*)result->data;                                                                     \\
    for (int64_t i = 0, n = opwrap_numel(self); i < n; ++i) out[i] = x[i] + (T)by;                 \\
    return OPWRAP_OK;                                                                              \\
  }
SHIFT(twotargets_shift_float32, float)
SHIFT(twotargets_shift_float64, double)

#include "abi/times.h"

#define TIMES(NAME, T)                                                                                \
  int32_t NAME(opwrap_context* ctx, const opwrap_tensor* a, const opwrap_tensor* b, opwrap_tensor* result) { \
    (void)ctx;                                                                                        \
    const T* x = (const T*)a->data;                                                                   \
    const T* y = (const T*)b->data;                                                                   \
    T* out = (T*)result->data;                                                                        \
    for (int64_t i = 0, n = opwrap_numel(a); i < n; ++i) out[i] = x[i] * y[i];                        \
    return OPWRAP_OK;                                                                                 \
  }
TIMES(twotargets_times_float32, float)
TIMES(twotargets_times_float64, double)

#include "abi/cube.h"
#include "abi/cube_backward.h"

#define CUBE(NAME, T)                                                                                 \
  int32_t NAME(opwrap_context* ctx, const opwrap_tensor* self, opwrap_tensor* result) {               \
    (void)ctx;                                                                                        \
    const T* x = (const T*)self->data;                                                                \
    T* out = (T*)result->data;                                                                        \
    for (int64_t i = 0, n = opwrap_numel(self); i < n; ++i) out[i] = x[i] * x[i] * x[i];              \
    return OPWRAP_OK;                                                                                 \
  }
CUBE(twotargets_cube_float32, float)
CUBE(twotargets_cube_float64, double)

#define CUBE_BACKWARD(NAME, T)                                                                        \
  int32_t NAME(opwrap_context* ctx, const opwrap_tensor* g, const opwrap_tensor* self, opwrap_tensor* result) { \
    (void)ctx;                                                                                        \
    const T* gi = (const T*)g->data;                                                                  \
    const T* x = (const T*)self->data;                                                                \
    T* out = (T*)result->data;                                                                        \
    for (int64_t i = 0, n = opwrap_numel(self); i < n; ++i) out[i] = gi[i] * 3 * x[i] * x[i];         \
    return OPWRAP_OK;                                                                                 \
  }
CUBE_BACKWARD(twotargets_cube_backward_float32, float)
CUBE_BACKWARD(twotargets_cube_backward_float64, double)
"""

PROBE = """\
import json, sys, torch
import twotargets
x = torch.randn(5, dtype=torch.float64, requires_grad=True)
torch.testing.assert_close(twotargets.ops.shift(x, 2.5), x + 2.5)
torch.autograd.gradcheck(lambda t: twotargets.ops.shift(t, 1.0), (x,))
torch.library.opcheck(torch.ops.twotargets.shift.default, (x.detach(), 0.5))
y = torch.randn(5, dtype=torch.float64, requires_grad=True)
torch.testing.assert_close(twotargets.ops.times(x, y), x * y)
torch.autograd.gradcheck(twotargets.ops.times, (x, y))  # formulas over arguments named output and inputs
# A formula calling the library's op (cube_backward), differentiable once more, not twice.
torch.testing.assert_close(twotargets.ops.cube(x), x ** 3)
torch.autograd.gradcheck(twotargets.ops.cube, (x,))
torch.autograd.gradgradcheck(twotargets.ops.cube, (x,))
(g,) = torch.autograd.grad(twotargets.ops.cube(x).sum(), x, create_graph=True)
(gg,) = torch.autograd.grad(g.sum(), x, create_graph=True)
torch.testing.assert_close(gg, 6 * x.detach())
try:
    gg.sum().backward()
    raise AssertionError("a third derivative of cube went through")
except RuntimeError as e:
    assert "trying to differentiate twice the backward of twotargets::cube_backward, which is declared " \
           "once_differentiable" in str(e), e
# init's scale: its C++ kernel written against torch's stable API (kernels/stable/scale.h)
torch.testing.assert_close(twotargets.ops.scale(x, 1.5), x * 1.5)
torch.testing.assert_close(twotargets.ops.scale(x.float().t(), -2.0), x.float().t() * -2.0)
torch.autograd.gradcheck(lambda t: twotargets.ops.scale(t, 0.5), (x,), check_forward_ad=True)
torch.library.opcheck(torch.ops.twotargets.scale.default, (x.detach(), 3.0))
print(json.dumps({"ok": True}))
"""

# init's scale against torch's stable API (docs/stable-abi.md, "Kernels for both targets").
STABLE_SCALE = """\
#pragma once

#include <torch/csrc/stable/tensor.h>

namespace twotargets::kernels {

template <typename scalar_t>
void scale_cpu(const torch::stable::Tensor& self, double factor, torch::stable::Tensor& result) {
  const scalar_t* in = self.const_data_ptr<scalar_t>();
  scalar_t* out = result.mutable_data_ptr<scalar_t>();
  for (int64_t i = 0; i < result.numel(); ++i) out[i] = static_cast<scalar_t>(in[i] * factor);
}

}  // namespace twotargets::kernels
"""


def _tree_digest(tree: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(tree.rglob("*")):
        if p.is_file():
            h.update(p.relative_to(tree).as_posix().encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


@pytest.mark.slow(40)
def test_a_full_target_library_ships_the_stable_targets_abi3_wheel(tmp_path):
    lib = tmp_path / "twotargets"
    r = run_codegen("init", str(lib))
    assert r.returncode == 0, r.stdout + r.stderr
    one_unit_a_group(lib)
    (lib / "declarations" / "shift.yaml").write_text(DECLARATION)  # beside init's scale.yaml
    (lib / "csrc").mkdir()
    (lib / "csrc" / "shift.c").write_text(C_SOURCE)
    pyproject = lib / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace("[tool.codegen]\n", '[tool.codegen]\nsources = ["csrc/*.c"]\n'))
    assert 'target = "stable"' not in pyproject.read_text()
    r = run_codegen("generate", cwd=lib)  # the project's own (full) target, committed as a user would
    assert r.returncode == 0, r.stdout + r.stderr
    before = _tree_digest(lib / "generated")

    # scale's kernel is C++ against ATen's API: the stable wheel needs one against the stable
    # API, in kernels/stable/, and says where before compiling anything.
    out = tmp_path / "wheels"
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps",
                        "-C", "target=stable", "-C", "optimize=0", "-C", "cuda=false", "-w", str(out), str(lib)],
                       capture_output=True, text=True)
    assert r.returncode != 0 and not list(out.glob("*.whl")), r.stdout + r.stderr
    assert ("declarations/scale.yaml:5:12: error: its CPU kernel is C++ written against the 'aten' target's API: "
            "write one against the 'stable' target's in kernels/stable/scale.h") in r.stdout + r.stderr, r.stdout + r.stderr
    assert ("`template <typename scalar_t> void scale_cpu(const torch::stable::Tensor& self, double factor, "
            "torch::stable::Tensor& result)`") in r.stdout + r.stderr, r.stdout + r.stderr  # what to write there
    assert "Traceback" not in r.stdout + r.stderr, r.stderr[-3000:]
    # `codegen stubs --target stable` writes its skeleton there (the signature the error gave),
    # leaves the full target's kernels/scale.h alone; the kernel then replaces the skeleton.
    r = run_codegen("stubs", "--target", "stable", cwd=lib)
    assert r.returncode == 0 and "wrote kernels/stable/scale.h" in r.stderr, r.stdout + r.stderr
    skeleton = (lib / "kernels" / "stable" / "scale.h").read_text()
    assert ("template <typename scalar_t>\nvoid scale_cpu(const torch::stable::Tensor& self, double factor, "
            "torch::stable::Tensor& result) {\n  STD_TORCH_CHECK(false, \"twotargets::scale: kernel not written\");") \
        in skeleton, skeleton
    assert "at::Tensor" in (lib / "kernels" / "scale.h").read_text()
    (lib / "kernels" / "stable" / "scale.h").write_text(STABLE_SCALE)

    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps",
                        "-C", "target=stable", "-C", "optimize=0", "-C", "cuda=false", "-w", str(out), str(lib)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    (wheel,) = out.glob("*.whl")
    assert wheel.name == "twotargets-0.1.0-cp311-abi3-linux_x86_64.whl", wheel.name
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        metadata = z.read("twotargets-0.1.0.dist-info/METADATA").decode().splitlines()
        manifest = json.loads(z.read("twotargets/_C.abi3.json"))
        autograd = z.read("twotargets/_generated/autograd.py").decode()
    assert f"Requires-Dist: torch>={torch_compat.release_name(torch_compat.OLDEST)}" in metadata, metadata
    assert manifest["target"] == "stable", manifest
    # the stable tree's Python: its derivatives are registered from Python (the full target's are C++)
    assert "_runtime.register_autograd('twotargets::shift'" in autograd, autograd
    assert "    inputs_, output_ = inputs, output\n    output, inputs, = inputs_\n" in autograd, autograd
    assert not any(n.endswith("_fast.so") or "_fast." in n for n in names), names
    assert _tree_digest(lib / "generated") == before, "the project's own generated/ tree was rewritten"

    site = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    r = run_python(["-c", PROBE], cwd=tmp_path, env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert r.returncode == 0 and '{"ok": true}' in r.stdout, r.stdout + r.stderr


def test_an_unknown_target_setting_is_refused(tmp_path):
    from opwrap_codegen.backend import BuildError, _target
    from opwrap_codegen.core.config import load_config
    r = run_codegen("init", str(tmp_path / "lib"))
    assert r.returncode == 0, r.stderr
    config = load_config(tmp_path / "lib")
    assert _target(config, {}) == "aten"
    assert _target(config, {"target": "stable"}) == "stable"
    with pytest.raises(BuildError, match=r"^-C target=abi3: expected one of aten, stable$"):
        _target(config, {"target": "abi3"})


LEAVE_OUT = """\
- func: shift(Tensor self, float by) -> Tensor
  dtypes: [float32]
  kernels: {CPU: {abi: c, symbol: lib_shift}}
  like: self
  derivatives:
    self: grad

- func: tangent_add(Tensor self, Tensor other) -> Tensor
  dtypes: [float32]
  kernels: {CPU: {abi: c, symbol: lib_tangent_add}}
  like: self
  derivatives: {self: grad, other: grad, result: self_t + at::zeros_like(other_t)}

- func: calls_tangent_add(Tensor self) -> Tensor
  dtypes: [float32]
  kernels: {CPU: {abi: c, symbol: lib_calls}}
  like: self
  derivatives:
    self: tangent_add(grad, self)

- func: in_cpp(Tensor self) -> Tensor
  dtypes: [float32]
  kernels: {CPU: in_cpp}
  like: self
"""


def _leave_out_project(root: Path, declarations: str) -> Path:
    (root / "declarations").mkdir(parents=True)
    (root / "kernels").mkdir()
    (root / "pyproject.toml").write_text('[tool.codegen]\nnamespace = "lib"\nkernels = "kernels"\n')
    (root / "declarations" / "ops.yaml").write_text(declarations)
    (root / "kernels" / "in_cpp.h").write_text("#pragma once\n")
    return root


def test_leave_out_unsupported_builds_what_the_other_target_expresses_and_says_why(tmp_path):
    from opwrap_codegen.build import retargeted
    from opwrap_codegen.core.config import load_config
    from opwrap_codegen.core.diagnostics import CodegenError
    from opwrap_codegen.pipeline.passes import generate
    config = load_config(_leave_out_project(tmp_path / "lib", LEAVE_OUT))
    stable = retargeted(config, "stable")
    with pytest.raises(CodegenError, match="runs forward formulas in Python"):
        generate(stable)  # without the option, what the target lacks is an error
    notes: list[str] = []
    result = generate(stable, None, notes, leave_out_unsupported=True, own_target="aten")
    assert [d.op_name for d in result.library.declarations] == ["shift"]
    assert notes == [
        "leaving out lib::tangent_add: declarations/ops.yaml:12:50: the stable target runs forward formulas in "
        "Python (an autograd.Function's jvp): 'self_t + at::zeros_like(other_t)' is C++ (it has '::' or '->'), not a "
        "Python expression",
        "leaving out lib::calls_tangent_add: its derivative calls lib::tangent_add, left out",
        "leaving out lib::in_cpp: declarations/ops.yaml:21:9: its CPU kernel is C++ written against the 'aten' "
        "target's API: write one against the 'stable' target's in kernels/stable/in_cpp.h"], notes
    assert any(p.endswith("cpu/shift.cpp") for p in result.files) and not any("tangent_add" in p for p in result.files)
    # With its kernel written against the stable API too, in kernels/stable/, the op is built.
    (tmp_path / "lib" / "kernels" / "stable").mkdir()
    (tmp_path / "lib" / "kernels" / "stable" / "in_cpp.h").write_text("#pragma once\n")
    result = generate(stable, None, [], leave_out_unsupported=True, own_target="aten")
    assert [d.op_name for d in result.library.declarations] == ["shift", "in_cpp"]
    assert any(p.endswith("cpu/in_cpp.cpp") for p in result.files)
    # In its own target nothing is left out; and a mistake in a declaration is an error either way.
    assert len(generate(config, None, [], leave_out_unsupported=True).library.declarations) == 4
    (tmp_path / "lib" / "declarations" / "ops.yaml").write_text(LEAVE_OUT.replace("[float32]\n  kernels: {CPU: in",
                                                                                  "[float33]\n  kernels: {CPU: in"))
    with pytest.raises(CodegenError, match="unknown dtype 'float33'"):
        generate(stable, None, [], leave_out_unsupported=True, own_target="aten")
