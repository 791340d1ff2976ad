"""Kernels behind the C kernel ABI, in a `codegen init` library declared from the README:
a Rust crate and a C file, their errors and panics, the build (cargo run once, a Rust edit
relinks, a signature that does not match is a compile error), and the same op under
autograd, torch.compile and export.  The bundled ops (fill_natural and huber in Rust,
dedup_consecutive in C) are tested at the end."""

from __future__ import annotations

import re
import shutil
import textwrap
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from conftest import import_library, made_once, one_unit_a_group, run_codegen, run_python

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(shutil.which("cargo") is None, reason="cargo is not installed")

DECLARATIONS = """\
- func: scale_shift(Tensor self, float alpha, float beta) -> Tensor
  doc: self * alpha + beta, in Rust, any strides.
  dtypes: [float32, float64]
  kernels: {CPU: {abi: rust}}
  contiguous: false
  shape:
    self: ["*S"]
    result: self.shape
  derivatives:
    self: grad * alpha

- func: sqrt_strict(Tensor self) -> Tensor
  doc: sqrt(self) in Rust; refuses negative values (an Err) and panics on NaN.
  dtypes: [float32]
  kernels: {CPU: {abi: rust, function: checked::sqrt_strict}}
  like: self

- func: clip(Tensor self, float lo, float hi) -> Tensor
  doc: self clamped to [lo, hi], in C.
  dtypes: [float32, float64]
  kernels: {CPU: {abi: c, symbol: foreignlib_clip}}
  like: self

- func: count_above(Tensor self, float threshold) -> int
  doc: how many elements are above threshold, in C.
  dtypes: [float32]
  kernels: {CPU: {abi: c, symbol: foreignlib_count_above}}
"""

CARGO = """\
[package]
name = "foreignlib-kernels"
version = "0.1.0"
edition = "2024"

[lib]
crate-type = ["staticlib"]
"""

LIB_RS = """\
#[path = "../../generated/rust/kernels.rs"]
mod kernels;

use kernels::{Context, Float, Result, TensorMut, TensorRef};

fn scale_shift<T: Float>(ctx: &Context, x: TensorRef<'_, T>, alpha: f64, beta: f64,
                         mut result: TensorMut<'_, T>) -> Result<()> {
    let (a, b) = (T::from_f64(alpha), T::from_f64(beta));
    result.par_chunks_mut(ctx, 4096, |start, out| {
        for (o, v) in out.iter_mut().zip(x.values_from(start)) {
            *o = v * a + b;
        }
    })
}

mod checked {
    use super::kernels::{Context, Result, TensorMut, TensorRef};

    pub fn sqrt_strict(_ctx: &Context, x: TensorRef<'_, f32>, mut result: TensorMut<'_, f32>) -> Result<()> {
        let out = result.as_mut_slice().unwrap();
        for (o, &v) in out.iter_mut().zip(x.as_slice().unwrap()) {
            if v.is_nan() {
                panic!("NaN at the door");
            }
            if v < 0.0 {
                return Err(format!("negative input {v}").into());
            }
            *o = v.sqrt();
        }
        Ok(())
    }
}
"""

C_SOURCE = """\
#include "abi/clip.h"
#include "abi/count_above.h"

#define CLIP(NAME, T)                                                                                       \\
  int32_t NAME(opwrap_context* ctx, const opwrap_tensor* self, double lo, double hi, opwrap_tensor* result) { \\
    if (lo > hi) return opwrap_fail(ctx, "lo (%g) is above hi (%g)", lo, hi);                              \\
    const T* x = (const T*)self->data;                                                                      \\
    T* out = (T*)result->data;                                                                              \\
    for (int64_t i = 0, n = opwrap_numel(self); i < n; ++i)                                                 \\
      out[i] = x[i] < lo ? (T)lo : x[i] > hi ? (T)hi : x[i];                                                \\
    return OPWRAP_OK;                                                                                       \\
  }

CLIP(foreignlib_clip_float32, float)
CLIP(foreignlib_clip_float64, double)

int32_t foreignlib_count_above_float32(opwrap_context* ctx, const opwrap_tensor* self, double threshold,
                                       int64_t* result) {
  (void)ctx;
  const float* x = (const float*)self->data;
  int64_t count = 0;
  for (int64_t i = 0, n = opwrap_numel(self); i < n; ++i) count += x[i] > threshold;
  *result = count;
  return OPWRAP_OK;
}
"""


def _build(lib: Path) -> list:
    r = run_codegen("build", "--no-cuda", "-O0", cwd=lib)
    return [r.returncode, r.stdout + r.stderr]


# A library of its own, not conftest's `sharedlib`: what it checks is the whole build's
# life (a no-op rebuild, builds that must fail on a Rust or a C mismatch, cargo running again
# after an edit), and its pyproject names crates and C sources that no other test's ops want.
def _make_foreignlib(lib: Path) -> dict:
    record: dict = {}
    r = run_codegen("init", str(lib))
    record["init"] = [r.returncode, r.stdout + r.stderr]
    if r.returncode != 0:
        return record
    pyproject = lib / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace(
        "[tool.codegen]\n", '[tool.codegen]\ncrates = ["rust"]\nsources = ["csrc/*.c"]\n'))
    one_unit_a_group(lib)
    (lib / "declarations" / "ops.yaml").write_text(DECLARATIONS)
    (lib / "rust" / "src").mkdir(parents=True)
    (lib / "rust" / "Cargo.toml").write_text(CARGO)
    lib_rs = lib / "rust" / "src" / "lib.rs"
    lib_rs.write_text(LIB_RS)
    (lib / "csrc").mkdir()
    (lib / "csrc" / "ops.c").write_text(C_SOURCE)
    r = run_codegen("generate", cwd=lib)
    record["generate"] = [r.returncode, r.stdout + r.stderr]
    record["build"] = _build(lib)
    if record["build"][0] != 0:
        return record
    record["noop"] = _build(lib)
    # A Rust function whose signature does not match the bindings: rustc refuses it.
    lib_rs.write_text(LIB_RS.replace("alpha: f64, beta: f64", "alpha: f32, beta: f64"))
    record["rust_mismatch"] = _build(lib)
    # A C definition that does not match its prototype: the C compiler refuses it.
    c_file = lib / "csrc" / "ops.c"
    lib_rs.write_text(LIB_RS)
    c_file.write_text(C_SOURCE.replace("double threshold,", "float threshold,"))
    record["c_mismatch"] = _build(lib)
    c_file.write_text(C_SOURCE)
    # A Rust edit: cargo runs, the library is relinked, the new body runs.
    lib_rs.write_text(LIB_RS.replace("*o = v * a + b;", "*o = v * a + b + T::from_f64(1000.0);"))
    record["rust_edit"] = _build(lib)
    probe = ("import torch, foreignlib; print(foreignlib.ops.scale_shift(torch.ones(3), 2.0, 0.0).tolist())")
    r = run_python(["-c", probe], cwd=lib)
    record["after_edit"] = [r.returncode, r.stdout + r.stderr]
    lib_rs.write_text(LIB_RS)
    record["restored"] = _build(lib)
    return record


@pytest.fixture(scope="module")
def foreignlib(tmp_path_factory):
    root, made = made_once(tmp_path_factory, "foreignlib", _make_foreignlib)
    assert made["init"][0] == 0, made["init"][1]
    assert made["generate"][0] == 0, made["generate"][1]
    assert made["build"][0] == 0, made["build"][1]
    assert made["restored"][0] == 0, made["restored"][1]
    module = import_library(root / "foreignlib")
    return module, made, root / "foreignlib"


@pytest.mark.slow(120)
def test_generated_bindings_are_what_the_readme_shows(foreignlib):
    _, _, lib = foreignlib
    header = (lib / "generated" / "abi" / "clip.h").read_text()
    assert ("int32_t foreignlib_clip_float32(opwrap_context* ctx, const opwrap_tensor* self, double lo, double hi, "
            "opwrap_tensor* result);") in header
    assert "int32_t foreignlib_count_above_float32(opwrap_context* ctx, const opwrap_tensor* self, " \
           "double threshold, int64_t* result);" in (lib / "generated" / "abi" / "count_above.h").read_text()
    rust = (lib / "generated" / "rust" / "kernels.rs").read_text()
    assert ("fn scale_shift(ctx: &Context, self_: TensorRef<'_, f32>, alpha: f64, beta: f64, "
            "result: TensorMut<'_, f32>) -> Result<()>") in rust
    assert "pub extern \"C\" fn foreignlib_scale_shift_cpu_float64(" in rust
    assert "crate::checked::sqrt_strict(" in rust
    # The C header compiles as C, and includes no torch header.
    for text in (header, (ROOT / "runtime/include/opwrap/kernel_abi.h").read_text()):
        assert not re.search(r"#include <(torch|ATen|c10)/", text)


@pytest.mark.slow(120)
def test_cargo_runs_only_when_the_crate_changes(foreignlib):
    _, made, _ = foreignlib
    assert "cargo" in made["build"][1]
    assert made["noop"][0] == 0, made["noop"][1]
    assert "cargo" not in made["noop"][1].lower().replace("crates", ""), made["noop"][1]
    assert made["rust_edit"][0] == 0, made["rust_edit"][1]
    assert made["after_edit"][0] == 0, made["after_edit"][1]
    assert "[1002.0, 1002.0, 1002.0]" in made["after_edit"][1]


@pytest.mark.slow(120)
def test_a_signature_that_does_not_match_does_not_compile(foreignlib):
    _, made, _ = foreignlib
    code, out = made["rust_mismatch"]
    assert code != 0 and "mismatched types" in out, out[-3000:]
    code, out = made["c_mismatch"]
    assert code != 0 and re.search(r"conflicting types for .foreignlib_count_above_float32", out), out[-3000:]


@pytest.mark.slow(120)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_rust_kernel_with_any_strides_and_derivatives(foreignlib, dtype):
    module, _, _ = foreignlib
    x = torch.randn(6, 5, dtype=dtype)
    torch.testing.assert_close(module.ops.scale_shift(x, 2.0, 0.5), x * 2 + 0.5)
    for strided in (x.t(), x[:, ::2], x[1:, 1:].t(), torch.randn(4, 1, dtype=dtype).expand(4, 7)):
        assert not strided.is_contiguous()
        torch.testing.assert_close(module.ops.scale_shift(strided, -1.5, 3.0), strided * -1.5 + 3.0)
    if dtype == torch.float64:
        x = torch.randn(3, 4, dtype=dtype, requires_grad=True)
        assert torch.autograd.gradcheck(lambda t: module.ops.scale_shift(t.t(), 3.0, 1.0), (x,))


@pytest.mark.slow(120)
def test_errors_and_panics_become_runtime_errors_naming_the_op(foreignlib):
    module, _, _ = foreignlib
    torch.testing.assert_close(module.ops.sqrt_strict(torch.tensor([4.0, 9.0])), torch.tensor([2.0, 3.0]))
    with pytest.raises(RuntimeError, match=r"foreignlib::sqrt_strict: negative input -1"):
        module.ops.sqrt_strict(torch.tensor([4.0, -1.0]))
    with pytest.raises(RuntimeError, match=r"foreignlib::sqrt_strict: the Rust kernel panicked: NaN at the door"):
        module.ops.sqrt_strict(torch.tensor([float("nan")]))
    # The process goes on: the panic did not unwind into C++.
    torch.testing.assert_close(module.ops.sqrt_strict(torch.tensor([16.0])), torch.tensor([4.0]))
    with pytest.raises(RuntimeError, match=r"foreignlib::clip: lo \(2\) is above hi \(1\)"):
        module.ops.clip(torch.zeros(3), 2.0, 1.0)
    with pytest.raises(RuntimeError, match=r"foreignlib::clip: .*self.*float32, float64"):
        module.ops.clip(torch.zeros(3, dtype=torch.int64), 0.0, 1.0)


@pytest.mark.slow(120)
def test_c_kernels(foreignlib):
    module, _, _ = foreignlib
    x = torch.randn(100, dtype=torch.float64)
    torch.testing.assert_close(module.ops.clip(x, -0.5, 0.5), x.clamp(-0.5, 0.5))
    assert module.ops.count_above(torch.tensor([0.5, 2.0, 3.0, -1.0]), 1.0) == 2


@pytest.mark.slow(120)
def test_foreign_kernels_compile_without_graph_breaks(foreignlib):
    module, _, _ = foreignlib
    from torch._dynamo.testing import CompileCounterWithBackend

    counter = CompileCounterWithBackend("inductor")

    def f(x):
        return module.ops.clip(module.ops.scale_shift(x, 2.0, 1.0), -1.0, 1.0) * 2

    x = torch.randn(8, 3)
    torch._dynamo.reset()
    out = torch.compile(f, backend=counter, fullgraph=True)(x)
    torch.testing.assert_close(out, f(x))
    assert counter.frame_count == 1


def test_declaration_errors_of_foreign_kernels(tmp_path):
    lib = tmp_path / "badlib"
    assert run_codegen("init", str(lib)).returncode == 0
    (lib / "declarations" / "ops.yaml").write_text(textwrap.dedent("""\
        - func: a(Tensor self) -> Tensor
          dtypes: [float32]
          like: self
          kernels: {CPU: {symbol: a_cpu}}
        - func: b(Tensor self) -> Tensor
          dtypes: [float32]
          like: self
          kernels: {CUDA: {abi: rust}}
        - func: c(Tensor self, Generator? gen) -> Tensor
          dtypes: [float32]
          like: self
          kernels: {CPU: {abi: c}}
        - func: d(Tensor self) -> Tensor[]
          dtypes: [float32]
          kernels: {CPU: {abi: c}}
        - func: e(Tensor self) -> Tensor
          dtypes: [complex64]
          like: self
          kernels: {CPU: {abi: rust}}
        - func: f(Tensor self) -> Tensor
          dtypes: [float32]
          like: self
          kernels: {CPU: {abi: go}}
        """))
    r = run_codegen("check", cwd=lib)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    errors = [line for line in r.stderr.splitlines() if ": error: " in line]
    expect = [
        ("ops.yaml:4:", "the CPU kernel needs 'abi: c' or 'abi: rust'"),
        ("ops.yaml:8:", "a Rust kernel runs on the CPU; the CUDA kernel is 'abi: c'"),
        ("ops.yaml:12:", "argument 'gen' of type Generator? cannot be passed to a kernel behind the C ABI"),
        ("ops.yaml:15:", "return 'result' is a Tensor[] the kernel makes"),
        ("ops.yaml:19:", "dtypes complex64 have no Rust element type"),
        ("ops.yaml:19:", "'abi: rust': crate::e needs a crate, and [tool.codegen] crates names none"),
        ("ops.yaml:23:", "unknown kernel ABI 'go'"),
    ]
    for where, message in expect:
        assert any(where in e and message in e for e in errors), (where, message, errors)


# ---------------------------------------------------------------------------- bundled ops
import opwrap  # noqa: E402


def test_fill_natural_in_rust_as_the_seed():
    out = opwrap.ops.fill_natural([2, 3])
    assert out.dtype == torch.int64 and out.tolist() == [[0, 1, 2], [3, 4, 5]]
    big = torch.ops.opwrap.fill_natural([1000, 1000])  # several chunks of the thread pool
    torch.testing.assert_close(big.flatten(), torch.arange(1_000_000))


def test_fill_natural_compiles_with_zero_graph_breaks_and_exports():
    from torch._dynamo.testing import CompileCounterWithBackend

    def f(x):
        return x + torch.ops.opwrap.fill_natural([2, 3])

    torch._dynamo.reset()
    explain = torch._dynamo.explain(f)(torch.ones(2, 3, dtype=torch.int64))
    assert explain.graph_break_count == 0 and explain.graph_count == 1
    counter = CompileCounterWithBackend("inductor")
    x = torch.ones(2, 3, dtype=torch.int64)
    torch.testing.assert_close(torch.compile(f, backend=counter, fullgraph=True)(x), f(x))
    assert counter.frame_count == 1

    class M(torch.nn.Module):
        def forward(self, x):
            return f(x)

    ep = torch.export.export(M(), (x,))
    assert any(n.target is torch.ops.opwrap.fill_natural.default for n in ep.graph.nodes)
    torch.testing.assert_close(ep.module()(x), f(x))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_huber_in_rust_matches_torch(dtype):
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(64, 33, dtype=dtype, generator=g) * 3, torch.randn(64, 33, dtype=dtype, generator=g)
    for a, b in ((x, y), (x.t(), y.t()), (x[::2, 1:], y[1::2, :-1]), (x[:, :1].expand(64, 9), y[:, 3:12])):
        for delta in (1.0, 0.25):
            torch.testing.assert_close(opwrap.ops.huber(a, b, delta),
                                       F.huber_loss(a, b, reduction="none", delta=delta))
    with pytest.raises(RuntimeError, match=r"opwrap::huber: delta must be positive, got -1"):
        opwrap.ops.huber(x, y, -1.0)
    # The run *S binds every dimension of input: a target with more or fewer is refused.
    for target in (y.unsqueeze(-1), y[0], y.reshape(64, 3, 11)):
        with pytest.raises(RuntimeError, match=r"opwrap::huber: argument 'target' has dimensions .* where \*S = "):
            opwrap.ops.huber(x, target)


def test_huber_derivatives():
    x = torch.randn(5, 4, dtype=torch.float64, requires_grad=True)
    y = torch.randn(5, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: opwrap.ops.huber(a.t(), b.t(), 0.7), (x, y))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32, torch.int64])
def test_dedup_consecutive_in_c(dtype):
    x = torch.tensor([[1, 1, 2], [2, 3, 1]], dtype=dtype)
    torch.testing.assert_close(opwrap.ops.dedup_consecutive(x), torch.unique_consecutive(x.flatten()))
    assert opwrap.ops.dedup_consecutive(torch.empty(0, dtype=dtype)).shape == (0,)


def test_dedup_consecutive_compiles_with_its_data_dependent_size():
    torch._dynamo.config.capture_dynamic_output_shape_ops = True
    try:
        def f(x):
            return opwrap.ops.dedup_consecutive(x) * 2

        x = torch.tensor([1.0, 1.0, 2.0, 3.0, 3.0])
        torch._dynamo.reset()
        torch.testing.assert_close(torch.compile(f, fullgraph=True)(x), f(x))
    finally:
        torch._dynamo.config.capture_dynamic_output_shape_ops = False


def test_c_kernel_unit_includes_no_torch_header():
    source = (ROOT / "runtime" / "kernels" / "dedup_consecutive.c").read_text()
    cu = (ROOT / "runtime" / "kernels" / "huber.cu").read_text()
    for text in (source, cu):
        assert not re.search(r"#include <(torch|ATen|c10)/", text)
