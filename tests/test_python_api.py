"""The typed Python surface `opwrap.ops`: signatures, docstrings, named results,
`__torch_function__` (seed 002's ScalarTensor and MetadataTensor, a Tensor subclass, a
TorchFunctionMode), torch.compile over the wrappers, and `mypy --strict` on a user script."""

import functools
import inspect
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
from conftest import ROOT, run_codegen

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


@pytest.fixture(scope="module")
def mypy_cache(tmp_path_factory):
    """One mypy cache for this module's runs: torch's stubs are analysed once (about 20 s)."""
    return tmp_path_factory.mktemp("mypy-cache")


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
    return subprocess.run([str(python), "-m", "mypy", "--strict", "--cache-dir", str(cache), "user.py"], cwd=cwd,
                          capture_output=True, text=True, env=CLEAN_ENV)


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
def test_mypy_strict_reads_an_editable_install_of_a_codegen_init_library(tmp_path, mypy_cache):
    """`pip install -e` of a library made by `codegen init` (strict mode, from its setup.cfg),
    into a throwaway venv layered over this one (torch, pip and mypy come from here)."""
    lib = tmp_path / "mylib"
    assert run_codegen("init", str(lib)).returncode == 0
    assert run_codegen("generate", cwd=lib).returncode == 0
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    parent = [p for p in sys.path if Path(p).name in ("site-packages", "dist-packages")]  # this venv's
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
    lambda f, x, w: f["linear"](x, w, bias=torch.ones(5)),  # a keyword: the wrapper takes it
    lambda f, x, w: f["linear"](input=x, weight=w),
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
