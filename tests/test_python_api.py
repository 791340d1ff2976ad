"""The typed Python surface `opwrap.ops`: signatures, docstrings, named results,
`__torch_function__` (seed 002's ScalarTensor and MetadataTensor, a Tensor subclass, a
TorchFunctionMode), torch.compile over the wrappers, and `mypy --strict` on a user script."""

import functools
import inspect
import json
import re
import subprocess
import sys
import typing
from pathlib import Path

import pytest
import torch
from torch._dynamo.utils import counters
from torch.overrides import TorchFunctionMode

import opwrap
from conftest import ROOT, locked, run_codegen, run_python, shared_dir

ops = opwrap.ops


def test_every_op_has_a_typed_wrapper():
    assert sorted(ops.__all__) == sorted(name.replace(".", "_") for name in opwrap.OPS)
    sig = inspect.signature(ops.addmv_)
    assert list(sig.parameters) == ["self", "mat", "vec", "beta", "alpha"]
    assert sig.parameters["beta"].kind is inspect.Parameter.KEYWORD_ONLY and sig.parameters["beta"].default == 1
    hints = typing.get_type_hints(ops.WRAPPERS["linear"])
    assert hints["bias"] == typing.Optional[torch.Tensor] and hints["return"] is torch.Tensor
    assert typing.get_type_hints(ops.WRAPPERS["fill_natural"])["size"] == typing.Sequence[int]


def test_help_shows_schema_dtypes_devices_and_differentiability():
    doc = ops.linear.__doc__
    assert "y = input @ weight.T + bias" in doc
    assert "Schema: opwrap::linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor" in doc
    assert "Dtypes: float32, float64, bfloat16" in doc and "Devices: CPU, CUDA" in doc
    assert "Differentiable: yes, with respect to input, weight, bias; twice" in doc
    assert "once (no double backward)" in ops.rms_norm.__doc__
    assert "Differentiable: no (its outputs are not differentiable)" in ops.bucketize_count.__doc__
    # per-argument dtypes: each variable's, by the tensors that have it
    assert "Dtypes: weight: float32, float64, float16, bfloat16; indices, offsets: int32, int64" in \
        ops.embedding_bag_sum.__doc__
    assert "Dtypes: self: int32, int64; weights: float32, float64 (float32 when absent)" in ops.bincount_fixed.__doc__


def test_named_returns_are_named():
    r = ops.rms_norm(torch.randn(2, 4), torch.ones(4))
    assert r._fields == ("out", "rstd") and r.out.shape == (2, 4) and r.rstd.shape == (2,)
    out, rstd = r
    assert out is r.out
    assert isinstance(ops.sincos(torch.randn(3)).cos, torch.Tensor)


# ------------------------------------------------------------------ __torch_function__ (seed 002)

HANDLED_FUNCTIONS = {}


class ScalarTensor:
    def __init__(self, N, value):
        self._N, self._value = N, value

    def tensor(self):
        return self._value * torch.eye(self._N)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func not in HANDLED_FUNCTIONS or not all(issubclass(t, (torch.Tensor, ScalarTensor)) for t in types):
            return NotImplemented
        return HANDLED_FUNCTIONS[func](*args, **kwargs)


def implements(torch_function):
    def decorator(func):
        functools.update_wrapper(func, torch_function)
        HANDLED_FUNCTIONS[torch_function] = func
        return func
    return decorator


@implements(ops.myadd)
def _scalar_myadd(self, other):
    if isinstance(self, ScalarTensor) and isinstance(other, ScalarTensor):
        return ScalarTensor(self._N, self._value + other._value)
    self = self.tensor() if isinstance(self, ScalarTensor) else self
    other = other.tensor() if isinstance(other, ScalarTensor) else other
    return ops.myadd(self, other)


def test_scalar_tensor_reaches_its_override():
    s = ops.myadd(ScalarTensor(2, 2), ScalarTensor(2, 3))
    assert isinstance(s, ScalarTensor) and s._value == 5
    mixed = ops.myadd(ScalarTensor(2, 2), torch.ones(2, 2))
    torch.testing.assert_close(mixed, torch.tensor([[3.0, 1.0], [1.0, 3.0]]))
    with pytest.raises(TypeError, match=r"no implementation found for 'opwrap\._generated\.(_fast|ops)\.mul_constant'"):
        ops.mul_constant(ScalarTensor(2, 2), 2.0)


class MetadataTensor:
    def __init__(self, data, metadata=None, **kwargs):
        self._t = torch.as_tensor(data, **kwargs)
        self._metadata = metadata

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        metadatas = [a._metadata for a in args if hasattr(a, "_metadata")]
        args = [a._t if hasattr(a, "_t") else a for a in args]
        return MetadataTensor(func(*args, **kwargs), metadata=metadatas[0])


def test_metadata_tensor_propagates_through_the_op():
    m = MetadataTensor([[1.0, 2.0], [3.0, 4.0]], metadata={"owner": "Ministry of Silly Walks"})
    out = ops.myadd(torch.ones(2, 2), m)
    assert isinstance(out, MetadataTensor) and out._metadata == {"owner": "Ministry of Silly Walks"}
    torch.testing.assert_close(out._t, torch.tensor([[2.0, 3.0], [4.0, 5.0]]))


class LoggingTensor(torch.Tensor):
    calls = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        cls.calls.append(func)
        return super().__torch_function__(func, types, args, kwargs or {})


def test_tensor_subclass_sees_the_op_and_keeps_its_type():
    LoggingTensor.calls.clear()
    x = torch.randn(3).as_subclass(LoggingTensor)
    out = ops.mul_constant(x, 2.0)
    assert type(out) is LoggingTensor and ops.mul_constant in LoggingTensor.calls
    r = ops.rms_norm(torch.randn(2, 3).as_subclass(LoggingTensor), torch.ones(3))
    assert type(r.out) is LoggingTensor


def test_torch_function_mode_sees_the_op():
    seen = []

    class Mode(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            seen.append(func)
            return func(*args, **(kwargs or {}))

    with Mode():
        ops.myadd(torch.ones(2), torch.ones(2))
    assert ops.myadd in seen


def test_wrappers_compile_without_graph_breaks():
    torch._dynamo.reset()
    counters.clear()

    def f(x, w):
        r = ops.rms_norm(ops.myadd(x, x), w)
        return ops.mul_constant(r.out, 2.0) + r.rstd.unsqueeze(-1)

    x, w = torch.randn(4, 8), torch.randn(8)
    torch.testing.assert_close(torch.compile(f, fullgraph=True)(x, w), f(x, w))
    assert sum(counters["graph_break"].values()) == 0


# ------------------------------------------------------------------ mypy --strict on a user script

USER_SCRIPT = '''
import torch
import opwrap
from opwrap import ops

x = torch.randn(4, 3)
w = torch.randn(5, 3)
y: torch.Tensor = ops.linear(x, w, None)
y = ops.linear(x, w)
z: torch.Tensor = ops.myadd(y, y)
z = ops.mul_constant(z, 0.5)
z = ops.addmv_(torch.zeros(5), w, torch.randn(3), beta=0.0, alpha=2)
r = ops.rms_norm(x, torch.ones(3), eps=1e-5)
out: torch.Tensor = r.out
s, c = ops.sincos(x)
b = ops.bucketize_count(x, torch.tensor([0.0]))
counts: torch.Tensor = b.counts
n: torch.Tensor = ops.nonzero_flat(x)
f: torch.Tensor = ops.fill_natural([2, 3])
ops.for_each_add_(torch.classes.opwrap.TensorQueue(x), x)
'''


# mypy runs as a user's would: in a folder outside the repository, with no PYTHONPATH or
# MYPYPATH, on the package installed in this venv.  `make venv` installs it in setuptools'
# strict editable mode (a link tree in build/), which type checkers read; the default mode's
# import hook they cannot ("Cannot find implementation or library stub for module named opwrap").
CLEAN_ENV = {"PATH": "/usr/bin:/bin"}
REINSTALL = "\n(is this venv's editable install in strict mode? `make venv` installs it so)"


@pytest.fixture(scope="session")
def mypy_cache(tmp_path_factory):
    """One mypy cache for the run's mypy checks (run_mypy), on every xdist worker: torch's
    stubs are analysed once (about 11 s of CPU), by the first check, while the others wait."""
    return shared_dir(tmp_path_factory, "mypy-cache")


def run_mypy(args, cwd, cache, python=sys.executable):
    """`mypy --strict --cache-dir cache *args` in `cwd`, holding the cache's lock (mypy writes
    its cache files whole, but a check that waits finds torch's analysis there)."""
    with locked(cache):
        return subprocess.run([str(python), "-m", "mypy", "--strict", "--cache-dir", str(cache), *args], cwd=cwd,
                              capture_output=True, text=True, env=CLEAN_ENV)


@pytest.fixture(scope="module")
def installed_opwrap(tmp_path_factory):
    """The `opwrap` this venv imports outside the repository must be this checkout's."""
    cwd = tmp_path_factory.mktemp("outside")
    r = subprocess.run([sys.executable, "-c", "import importlib.util as u; print(u.find_spec('opwrap').origin)"],
                       cwd=cwd, capture_output=True, text=True, env=CLEAN_ENV)
    assert r.returncode == 0, r.stderr + REINSTALL
    origin = Path(r.stdout.strip())
    assert origin.resolve() == ROOT / "runtime" / "opwrap" / "__init__.py", f"{origin} is not this checkout's{REINSTALL}"
    return origin


def _mypy(cwd, script, cache, python=sys.executable):
    (cwd / "user.py").write_text(script)
    return run_mypy(["user.py"], cwd, cache, python)


@pytest.mark.slow(15)
@pytest.mark.xdist_group("mypy")
def test_mypy_strict_accepts_a_script_calling_every_op(tmp_path, mypy_cache, installed_opwrap):
    r = _mypy(tmp_path, USER_SCRIPT, mypy_cache)
    assert r.returncode == 0, r.stdout + r.stderr + REINSTALL


@pytest.mark.slow(15)
@pytest.mark.xdist_group("mypy")
def test_mypy_strict_rejects_a_wrong_argument_type(tmp_path, mypy_cache, installed_opwrap):
    r = _mypy(tmp_path, USER_SCRIPT + "bad = ops.mul_constant(x, 'two')\nworse = ops.fill_natural(3)\n", mypy_cache)
    assert r.returncode == 1, r.stdout + r.stderr + REINSTALL
    assert 'Argument 2 to "mul_constant" has incompatible type "str"; expected "float"' in r.stdout, r.stdout
    assert 'Argument 1 to "fill_natural" has incompatible type "int"; expected "Sequence[int]"' in r.stdout, r.stdout


@pytest.mark.slow(15)
@pytest.mark.xdist_group("mypy")
def test_mypy_strict_accepts_the_runtime_module(tmp_path, mypy_cache):
    """codegen/pyruntime.py, which every library carries as `_generated/_runtime.py`, is
    type-checked as the library's own code would be."""
    (tmp_path / "_runtime.py").write_text((ROOT / "codegen" / "pyruntime.py").read_text())
    r = run_mypy(["_runtime.py"], tmp_path, mypy_cache)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.slow(15)
@pytest.mark.xdist_group("mypy")
def test_mypy_strict_reads_an_editable_install_of_a_codegen_init_library(tmp_path, mypy_cache):
    """`pip install -e` of a library made by `codegen init` (strict mode: the backend's default),
    into a throwaway venv layered over this one (torch, pip and mypy come from here)."""
    lib = tmp_path / "mylib"
    assert run_codegen("init", str(lib)).returncode == 0
    assert run_codegen("generate", cwd=lib).returncode == 0
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # this venv's packages, and the link trees of its editable installs (opwrap_codegen: the backend)
    parent = [p for p in sys.path if Path(p).name in ("site-packages", "dist-packages") or "__editable__" in p]
    Path(site, "_parent_venv.pth").write_text("".join(p + "\n" for p in parent))
    r = subprocess.run([python, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps", "-e", str(lib)],
                       capture_output=True, text=True, env={**CLEAN_ENV, "PIP_NO_INDEX": "1"})
    assert r.returncode == 0, r.stdout + r.stderr
    pth = Path(site, "__editable__.mylib-0.1.0.pth").read_text()
    assert pth.strip() == str(lib / "build" / "__editable__.mylib-0.1.0-py3-none-any"), pth  # a path, not a hook
    user = tmp_path / "user"
    user.mkdir()
    r = _mypy(user, "import torch\nimport mylib\n\ny: torch.Tensor = mylib.ops.scale(torch.ones(2), 2.0)\n"
                    "reveal_type(mylib.ops.scale)\nmylib.ops.scale(y, 'two')\n", mypy_cache, python)
    assert re.search(r'Revealed type is "def \(self: torch\._tensor\.Tensor, factor: (builtins\.)?float\) -> torch\._tensor\.Tensor"',
                     r.stdout), r.stdout + r.stderr
    assert 'Argument 2 to "scale" has incompatible type "str"; expected "float"' in r.stdout, r.stdout
    assert r.stdout.count("error:") == 1 and r.returncode == 1, r.stdout


# ------------------------------------------------------------------ the fast call path

def test_eager_calls_take_the_compiled_binding():
    assert type(ops.myadd).__name__ == "builtin_function_or_method"
    assert inspect.signature(ops.addmv_) == inspect.signature(ops.WRAPPERS["addmv_"]).replace(
        parameters=[p.replace(annotation=inspect.Parameter.empty)
                    for p in inspect.signature(ops.WRAPPERS["addmv_"]).parameters.values()],
        return_annotation=inspect.Signature.empty)
    assert "Schema: opwrap::addmv_" in ops.addmv_.__doc__


@pytest.mark.parametrize("call", [
    lambda f, x, w: f["linear"](x, w),                      # a default filled in C++
    lambda f, x, w: f["linear"](x, w, None),
    lambda f, x, w: f["linear"](x, w, bias=torch.ones(5)),  # keywords, by the wrapper's names
    lambda f, x, w: f["linear"](input=x, weight=w),
    lambda f, x, w: f["linear"](weight=w, bias=None, input=x),
    lambda f, x, w: f["myadd_out"](x, x, out=torch.empty(4, 3)),  # a keyword-only out= argument
    lambda f, x, w: f["rms_norm"](x, torch.ones(3), 1e-3),
    lambda f, x, w: f["addmv_"](torch.zeros(5), w, torch.ones(3), beta=0.5, alpha=2),
    lambda f, x, w: f["fill_natural"]((2, 3)),
    lambda f, x, w: f["mul_constant"](x, 2),                # an int where float is expected
    lambda f, x, w: f["linear"](x, torch.nn.Parameter(w)),  # a Parameter is a plain tensor here
])
def test_binding_and_wrapper_agree(call):
    x, w = torch.randn(4, 3), torch.randn(5, 3)
    fast = {name: getattr(ops, name) for name in ops.__all__}
    got, want = call(fast, x, w), call(ops.WRAPPERS, x, w)
    assert type(got) is type(want)
    for g, e in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        torch.testing.assert_close(g, e)


@pytest.fixture
def wrapper_calls():
    """The names of the ops whose calls the fast bindings handed to their Python wrapper,
    while the test runs."""
    fast, calls = ops.myadd.__self__, []

    def counting(wrapper):
        @functools.wraps(wrapper)
        def twin(*args, **kwargs):
            calls.append(wrapper.__name__)
            return wrapper(*args, **kwargs)
        return twin

    def install(make):
        for i, name in enumerate(fast.OPS):
            result = typing.get_type_hints(ops.WRAPPERS[name]).get("return")
            fast.install(i, make(ops.WRAPPERS[name]), result if isinstance(result, type) and issubclass(result, tuple) else None)
    install(counting)
    try:
        yield calls
    finally:
        install(lambda wrapper: wrapper)


def test_keyword_calls_stay_on_the_binding(wrapper_calls):
    x, w, acc = torch.randn(4, 3), torch.randn(5, 3), torch.zeros(5)
    out = torch.empty(4, 3)
    assert ops.addmv_(acc, w, torch.ones(3), beta=0.5, alpha=2) is acc  # keyword-only Scalars
    assert ops.myadd_out(x, x, out=out) is out and torch.equal(out, x + x)
    torch.testing.assert_close(ops.myadd(other=x, self=x), x + x)
    torch.testing.assert_close(ops.linear(x, weight=w, bias=None), x @ w.T)
    assert wrapper_calls == []
    # What the binding cannot take goes to the wrapper: its own out=, a name it does not know,
    # an argument given twice, a value of another type.
    ops.myadd(x, x, out=out)
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        ops.myadd(x, x, bogus=1)
    with pytest.raises(TypeError, match="multiple values for argument 'self'"):
        ops.myadd(x, self=x)
    with pytest.raises(RuntimeError, match="Expected a value of type 'number' for argument 'beta'"):
        ops.addmv_(acc, w, torch.ones(3), beta="half")
    assert wrapper_calls == ["myadd", "myadd", "myadd", "addmv_"]


def test_binding_errors_are_the_ops_errors():
    with pytest.raises(RuntimeError, match="opwrap::myadd: argument 'other' has shape \\[4\\], which does not broadcast"):
        ops.myadd(torch.randn(3), torch.randn(4))
    # Anything the binding does not take goes to the wrapper and torch.ops, which say what is wrong.
    with pytest.raises(RuntimeError, match="Expected a value of type 'float' for argument 'constant'"):
        ops.mul_constant(torch.randn(3), "two")
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'other'"):
        ops.myadd(torch.randn(3))


def test_binding_keeps_autograd():
    x = torch.randn(3, requires_grad=True)
    ops.mul_constant(ops.myadd(x, x), 3.0).sum().backward()
    torch.testing.assert_close(x.grad, torch.full((3,), 6.0))


# ------------------------------------------------------------------ any name, every kind of return

NAMES_DECLARATIONS = """\
- func: delete(Tensor from, int lambda, Tensor? options=None, *, float default=1.0, int kOp=0) -> Tensor
  doc: from * lambda + default + kOp (+ options)
  dtypes: [float32]
  kernels: {CPU: delete_kernel}
  header: names.h
  shape: {from: [N], options: [N], result: [N]}
- func: new(Tensor dtype, Tensor result, int m) -> (Tensor out, Tensor from)
  dtypes: [float32]
  kernels: {CPU: new_kernel}
  header: names.h
  like: dtype
- func: int(Tensor self, Tensor out, *, int from=2, int lambda=3) -> Tensor
  dtypes: [float32]
  kernels: {CPU: int_kernel}
  header: names.h
  like: self
- func: count_nonneg(Tensor self) -> SymInt
  dtypes: [float32]
  kernels: {CPU: count_nonneg}
  header: names.h
- func: positives(Tensor self) -> Tensor
  dtypes: [float32]
  kernels: {CPU: positives}
  header: names.h
- func: split_signs(Tensor self) -> (Tensor[] parts, int count)
  dtypes: [float32]
  kernels: {CPU: split_signs}
  header: names.h
- func: check_finite(Tensor self) -> ()
  dtypes: [float32]
  kernels: {CPU: check_finite}
  header: names.h
- func: mix(Tensor self, int? i, float? f, bool? b, Scalar? s, str name, str? tag, ScalarType? st, float[] fs, SymInt[] sz, Tensor[] ts, Device? dev, Layout? lay, MemoryFormat mf=contiguous_format, Generator? g=None) -> (int, float, bool)
  dtypes: [float32]
  kernels: {CPU: mix}
  header: names.h
"""

NAMES_KERNELS = """\
#pragma once
#include <ATen/core/Tensor.h>
#include <ATen/ops/clamp_max.h>
#include <ATen/ops/clamp_min.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/isfinite.h>
#include <optional>
#include <tuple>
#include <vector>

namespace pynames::kernels {

template <typename scalar_t>
void delete_kernel(const at::Tensor& from, int64_t lambda, const std::optional<at::Tensor>& options, double default_,
                   int64_t kOp, at::Tensor& result) {
  const scalar_t* x = from.const_data_ptr<scalar_t>();
  const scalar_t* o = options.has_value() ? options->const_data_ptr<scalar_t>() : nullptr;
  scalar_t* y = result.mutable_data_ptr<scalar_t>();
  for (int64_t k = 0; k < from.numel(); ++k) y[k] = x[k] * lambda + default_ + kOp + (o ? o[k] : 0);
}

template <typename scalar_t>
void new_kernel(const at::Tensor& dtype, const at::Tensor& result, int64_t m, at::Tensor& out, at::Tensor& from) {
  const scalar_t* a = dtype.const_data_ptr<scalar_t>();
  const scalar_t* b = result.const_data_ptr<scalar_t>();
  scalar_t* p = out.mutable_data_ptr<scalar_t>();
  scalar_t* q = from.mutable_data_ptr<scalar_t>();
  for (int64_t k = 0; k < dtype.numel(); ++k) {
    p[k] = a[k] + b[k] * m;
    q[k] = a[k] - b[k];
  }
}

template <typename scalar_t>
void int_kernel(const at::Tensor& self, const at::Tensor& out, int64_t from, int64_t lambda, at::Tensor& result) {
  const scalar_t* x = self.const_data_ptr<scalar_t>();
  const scalar_t* o = out.const_data_ptr<scalar_t>();
  scalar_t* y = result.mutable_data_ptr<scalar_t>();
  for (int64_t k = 0; k < self.numel(); ++k) y[k] = x[k] * from + lambda + o[k];
}

template <typename scalar_t>
int64_t count_nonneg(const at::Tensor& self) {
  const scalar_t* x = self.const_data_ptr<scalar_t>();
  int64_t n = 0;
  for (int64_t k = 0; k < self.numel(); ++k) n += x[k] >= 0;
  return n;
}

template <typename scalar_t>
at::Tensor positives(const at::Tensor& self) {
  const scalar_t* x = self.const_data_ptr<scalar_t>();
  int64_t n = 0;
  for (int64_t k = 0; k < self.numel(); ++k) n += x[k] > 0;
  at::Tensor out = at::empty({n}, self.options());
  scalar_t* y = out.mutable_data_ptr<scalar_t>();
  for (int64_t k = 0, j = 0; k < self.numel(); ++k) if (x[k] > 0) y[j++] = x[k];
  return out;
}

template <typename scalar_t>
std::tuple<std::vector<at::Tensor>, int64_t> split_signs(const at::Tensor& self) {
  at::Tensor neg = self.clamp_max(0), pos = self.clamp_min(0);
  return {{neg, pos}, 2};
}

template <typename scalar_t>
void check_finite(const at::Tensor& self) {
  TORCH_CHECK(self.isfinite().all().item<bool>(), "pynames::check_finite: not finite");
}

template <typename scalar_t>
std::tuple<int64_t, double, bool> mix(const at::Tensor& self, std::optional<int64_t> i, std::optional<double> f,
                                      std::optional<bool> b, const std::optional<at::Scalar>& s, c10::string_view name,
                                      std::optional<c10::string_view> tag, std::optional<at::ScalarType> st,
                                      at::ArrayRef<double> fs, at::IntArrayRef sz, at::TensorList ts,
                                      std::optional<at::Device> dev, std::optional<at::Layout> lay, at::MemoryFormat mf,
                                      std::optional<at::Generator> g) {
  int64_t n = i.value_or(-1) + static_cast<int64_t>(name.size()) * 10 +
              (tag.has_value() ? static_cast<int64_t>(tag->size()) * 100 : 0) +
              (st.has_value() ? static_cast<int64_t>(*st) * 1000 : 0) + static_cast<int64_t>(ts.size()) * 10000 +
              (g.has_value() ? 100000 : 0) + (dev.has_value() && dev->is_cpu() ? 1000000 : 0) +
              (mf == at::MemoryFormat::ChannelsLast ? 10000000 : 0) + (lay.has_value() ? 100000000 : 0);
  for (int64_t v : sz) n += v;
  double x = f.value_or(0.5) + (s.has_value() ? s->toDouble() : 0.0);
  for (double v : fs) x += v;
  return {n, x, b.value_or(true) && self.numel() > 0};
}

}  // namespace pynames::kernels
"""

# Runs in a fresh interpreter beside the built library; prints one JSON line.
NAMES_SCRIPT = r'''
import inspect, json, torch, pynames
from torch.library import opcheck
ops, out = pynames.ops, {}
x = torch.tensor([1.0, -2.0, 3.0])
out["fast"] = [type(getattr(ops, n)).__name__ for n in ("delete", "new", "int_", "count_nonneg", "positives",
                                                        "split_signs", "check_finite", "mix")]
out["delete"] = [ops.delete(x, 2).tolist(), ops.delete(x, 2, x, default=0.0, kOp=1).tolist(),
                 ops.delete(from_=x, lambda_=1, default=0.5).tolist(),
                 torch.ops.pynames.delete(**{"from": x, "lambda": 3}).tolist()]
r = ops.new(x, torch.ones(3), 10)
out["new"] = [type(r).__name__, r.out.tolist(), r.from_.tolist(), r._fields == ("out", "from_")]
out["int"] = [ops.int_(x, x).tolist(), ops.int_(x, x, from_=1, lambda_=0).tolist(),
              torch.ops.pynames.int(x, x, **{"from": 0}).tolist(), list(inspect.signature(ops.WRAPPERS["int_"]).parameters)]
out["count"] = [ops.count_nonneg(x), type(ops.count_nonneg(x)).__name__, ops.positives(x).tolist()]
r = ops.split_signs(x)
out["split"] = [type(r).__name__, [p.tolist() for p in r.parts], r.count_, type(r.parts).__name__,
                ops.check_finite(x) is None, ops.WRAPPERS["check_finite"](x) is None]
try:
    ops.check_finite(x / 0)
except RuntimeError as e:
    out["split"].append(str(e).splitlines()[0])
mixed = (x, 3, None, False, 2.5, "nm", None, torch.float64, [0.25, 1], [5, 6], [x, x], torch.device("cpu"), None)
out["mix"] = [list(ops.mix(*mixed)), list(ops.WRAPPERS["mix"](*mixed)), type(ops.mix(*mixed)).__name__,
              list(ops.mix(*mixed[:-2], "cpu", None)),  # a str device: the wrapper takes the call
              list(ops.mix(x, None, 1.0, None, None, "", "tag", None, [], [], [], None, torch.strided,
                           torch.channels_last, torch.Generator()))]
# torch (2.14) itself cannot check or compile an op with an argument named like a Python
# keyword: torch.fx makes a Python signature of the schema (opcheck's test_schema, inductor)
# and writes keyword arguments as `from=...`.  Everything else of opcheck passes.
def passed(op, args, kwargs, tests):
    return all(v == "SUCCESS" for v in opcheck(op, args, kwargs, test_utils=tests).values())
out["opcheck"] = [
    passed(torch.ops.pynames.delete.default, (x, 2), {"default": 0.5, "kOp": 3},
           ("test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")),
    passed(torch.ops.pynames.new.default, (x, torch.ones(3), 2), {},
           ("test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")),
    passed(torch.ops.pynames.int.default, (x, x), {"from": 4}, ("test_autograd_registration", "test_faketensor"))]
compiled = torch.compile(lambda t: ops.new(t, t, 1).from_ + ops.new(t, t, 2).out, fullgraph=True, dynamic=True)
eager = torch.compile(lambda t: ops.delete(t, 2, default=0.0) * 2, fullgraph=True, dynamic=True, backend="aot_eager")
out["compiled"] = [compiled(x).tolist(), compiled(torch.ones(5)).tolist(), eager(x).tolist(), eager(torch.ones(5)).tolist()]
torch._dynamo.config.capture_scalar_outputs = True
out["compiled_symint"] = torch.compile(lambda t: t * ops.count_nonneg(t), fullgraph=True)(x).tolist()
try:
    torch.compile(lambda t: ops.positives(t) * 2, fullgraph=True)(x)
    out["no_rule"] = None
except Exception as e:
    out["no_rule"] = ["pynames::positives: torch.compile and torch.export cannot trace this op: its return 'result' "
                      "is made by the kernel, and no rule gives its shape: add a 'shape:' rule for 'result' (or "
                      "'like:') to the declaration" in str(e)]
out["no_rule"].append(torch.compile(lambda t: ops.positives(t) * 2)(x).tolist())  # a graph break: it runs eagerly
out["tags"] = [torch.Tag.pt2_compliant_tag in getattr(torch.ops.pynames, n).default.tags
               for n in ("delete", "new", "int", "count_nonneg", "positives")]
print(json.dumps(out))
'''


@pytest.mark.slow(150)
@pytest.mark.xdist_group("pynames")
def test_keyword_names_and_kernel_made_returns_in_python(tmp_path, mypy_cache, pynames):
    """Ops named `delete`, `new` and `int`, with arguments and returns named `from`, `lambda`,
    `dtype`, `result`, `out`, `options`, `default`, `kOp` and `m`, plus a SymInt return and a
    tensor return without a shape rule, made by their kernels: generated, compiled and called
    through the typed wrappers, the fast bindings, torch.ops, opcheck and torch.compile."""
    # conftest.py's `pynames` fixture made the library: `codegen init`, the ops above (and
    # test_stubs.py's, whose kernels `codegen stubs` wrote), `codegen build`.
    lib, made = pynames.path, pynames.record
    assert made["init"][0] == 0, made["init"][1]
    assert made["build"][0] == 0, made["build"][1][-6000:]
    stub = (lib / "generated" / "python" / "ops.pyi").read_text()
    assert "def delete(from_: Tensor, lambda_: int, options: Optional[Tensor] = None, *, default: float = 1.0, " \
           "kOp: int = 0) -> Tensor: ..." in stub
    assert "def int_(self: Tensor, out: Tensor, *, from_: int = 2, lambda_: int = 3) -> Tensor: ..." in stub
    assert "def count_nonneg(self: Tensor) -> Union[int, torch.SymInt]: ..." in stub
    assert "def check_finite(self: Tensor) -> None: ..." in stub
    assert "    def parts(self) -> List[Tensor]: ..." in stub
    (tmp_path / "pynames_ops.pyi").write_text(stub)  # no name in the stub hides another (`int`, `torch`...)
    m = run_mypy(["pynames_ops.pyi"], tmp_path, mypy_cache)
    assert m.returncode == 0, m.stdout + m.stderr
    res = run_python(["-c", NAMES_SCRIPT], cwd=lib, env={**CLEAN_ENV, "PYTHONPATH": str(lib)})
    assert res.returncode == 0, res.stderr[-4000:]
    out = json.loads(res.stdout.splitlines()[-1])
    assert out["fast"] == ["builtin_function_or_method"] * 8  # every op has a compiled binding
    assert out["delete"] == [[3, -3, 7], [4, -5, 10], [1.5, -1.5, 3.5], [4, -5, 10]]
    assert out["new"] == ["NewResult", [11, 8, 13], [0, -3, 2], True]
    assert out["int"] == [[6, -3, 12], [2, -4, 6], [4, 1, 6], ["self", "out", "from_", "lambda_"]]
    assert out["count"] == [2, "int", [1, 3]]
    assert out["split"] == ["SplitSignsResult", [[0, -2, 0], [1, 0, 3]], 2, "list", True, True,
                            "pynames::check_finite: not finite"]
    assert out["mix"] == [[1027034, 4.25, False], [1027034, 4.25, False], "tuple", [1027034, 4.25, False],
                          [110100299, 1.0, True]]
    assert out["opcheck"] == [True, True, True]
    assert out["compiled"] == [[3, -6, 9], [3] * 5, [4, -8, 12], [4] * 5]
    assert out["compiled_symint"] == [2, -4, 6]
    assert out["no_rule"] == [True, [2, 6]]
    assert out["tags"] == [False, True, False, False, False]
