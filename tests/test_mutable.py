"""Mutable arguments and out= overloads, on a library made with `codegen init` outside this
repository and declared as a user would from the README: vLLM's ops that write output
buffers and caches (`silu_and_mul`, `rms_norm`, `reshape_and_cache`, an optional mutable
`residual`), an in-place op that returns what it writes, and aten-style out= overloads with
one and with two outputs (`scale.out` sharing `scale`'s kernel, `rowmax.out` with an int64
output).  Each is checked eagerly (results, non-contiguous and resized outputs, the errors),
under torch.compile(fullgraph=True) with mutated graph inputs, torch.export,
torch.library.opcheck and torch.vmap, with no tag written by hand."""

import contextlib
import inspect
import warnings

import pytest
import torch
from torch._dynamo.utils import counters

from conftest import import_library, made_once, one_unit_a_group, run_codegen, torch_feature
from opwrap_codegen.core import torch_compat
from opwrap_codegen.testing import returns_written

pytestmark = [pytest.mark.xdist_group("mutlib")]

DECLARATIONS = """\
- func: scale.out(Tensor self, float factor, *, Tensor(a!) out) -> Tensor(a!)
  doc: scale, written into out (the kernel of scale).

# vLLM's csrc/torch_bindings.cpp
- func: silu_and_mul(Tensor! result, Tensor input) -> ()  # spelled as vLLM spells it
  dtypes: floating
  kernels: {CPU: silu_and_mul_cpu}
  shape: {result: ['*B', D], input: ['*B', 2 * D]}

- func: rms_norm(Tensor(a!) result, Tensor input, Tensor weight, float epsilon) -> ()
  dtypes: [float32, float64]
  kernels: {CPU: rms_norm_cpu}
  shape: {result: ['*B', H], input: ['*B', H], weight: [H]}

- func: add_rms_norm(Tensor(a!) result, Tensor input, Tensor(b!)? residual, Tensor weight, float epsilon) -> ()
  doc: With a residual, residual += input and result = rms_norm(residual), as vLLM's fused_add_rms_norm.
  dtypes: [float32, float64]
  kernels: {CPU: add_rms_norm_cpu}
  header: rms_norm.h
  shape: {result: ['*B', H], input: ['*B', H], residual: ['*B', H], weight: [H]}

- func: reshape_and_cache(Tensor key, Tensor value, Tensor(a!) key_cache, Tensor(b!) value_cache, Tensor slot_mapping, str kv_cache_dtype, Tensor k_scale, Tensor v_scale) -> ()
  dtypes: {key: [float32, float64], slot_mapping: [int64], k_scale: [float32], v_scale: k_scale}
  kernels: {CPU: reshape_and_cache_cpu}
  shape:
    key: [T, H, D]
    value: [T, H, D]
    key_cache: [NB, BS, H, D]
    value_cache: [NB, BS, H, D]
    slot_mapping: [T]
    k_scale: []
    v_scale: []
  index: {slot_mapping: [-1, "key_cache.size(0) * key_cache.size(1)"]}

# Written in place and returned: torch's in-place form, whatever its name.
- func: mul_into(Tensor(a!) dst, Tensor src, float factor) -> Tensor(a!)
  dtypes: [float32, float64]
  kernels: {CPU: mul_into_cpu}
  shape: {dst: ['*S'], src: ['*S']}

- func: rowmax(Tensor self) -> (Tensor values, Tensor indices)
  dtypes: [float32, float64]
  kernels: {CPU: rowmax_cpu}
  shape: {self: [N, M], values: [N], indices: [N]}
  dtype: {indices: int64}

- func: rowmax.out(Tensor self, *, Tensor(a!) values, Tensor(b!) indices) -> (Tensor(a!) values, Tensor(b!) indices)

# A keyword-only written tensor no return aliases is a written argument, not an out= one:
# batch norm's running statistics, updated beside a new result.
- func: center(Tensor x, float momentum, *, Tensor(a!) running_mean) -> Tensor
  dtypes: [float32, float64]
  kernels: {CPU: center_cpu}
  shape: {x: [N, D], running_mean: [D], result: [N, D]}
"""

KERNELS = {
    "silu_and_mul.h": """\
#pragma once
#include <ATen/core/Tensor.h>
#include <cmath>

namespace mutlib::kernels {

// result[..., j] = silu(input[..., j]) * input[..., D + j]
template <typename scalar_t>
void silu_and_mul_cpu(at::Tensor& result, const at::Tensor& input) {
  const int64_t d = result.size(-1), rows = d ? result.numel() / d : 0;
  const scalar_t* in = input.const_data_ptr<scalar_t>();
  scalar_t* out = result.mutable_data_ptr<scalar_t>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < d; ++j) {
      const double x = static_cast<double>(in[r * 2 * d + j]), y = static_cast<double>(in[r * 2 * d + d + j]);
      out[r * d + j] = static_cast<scalar_t>(x / (1.0 + std::exp(-x)) * y);
    }
}

}  // namespace mutlib::kernels
""",
    "rms_norm.h": """\
#pragma once
#include <ATen/core/Tensor.h>
#include <cmath>
#include <optional>

namespace mutlib::kernels {

template <typename scalar_t>
void rms_norm_rows(scalar_t* out, const scalar_t* x, const scalar_t* w, int64_t rows, int64_t h, double eps) {
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t j = 0; j < h; ++j) ss += static_cast<double>(x[r * h + j]) * static_cast<double>(x[r * h + j]);
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(h) + eps);
    for (int64_t j = 0; j < h; ++j)
      out[r * h + j] = static_cast<scalar_t>(static_cast<double>(x[r * h + j]) * inv * static_cast<double>(w[j]));
  }
}

template <typename scalar_t>
void rms_norm_cpu(at::Tensor& result, const at::Tensor& input, const at::Tensor& weight, double epsilon) {
  const int64_t h = result.size(-1), rows = h ? result.numel() / h : 0;
  rms_norm_rows(result.mutable_data_ptr<scalar_t>(), input.const_data_ptr<scalar_t>(),
                weight.const_data_ptr<scalar_t>(), rows, h, epsilon);
}

template <typename scalar_t>
void add_rms_norm_cpu(at::Tensor& result, const at::Tensor& input, const std::optional<at::Tensor>& residual,
                      const at::Tensor& weight, double epsilon) {
  const int64_t h = result.size(-1), rows = h ? result.numel() / h : 0;
  const scalar_t* x = input.const_data_ptr<scalar_t>();
  if (residual) {
    scalar_t* res = residual->mutable_data_ptr<scalar_t>();
    for (int64_t i = 0; i < rows * h; ++i) res[i] = static_cast<scalar_t>(res[i] + x[i]);
    x = res;
  }
  rms_norm_rows(result.mutable_data_ptr<scalar_t>(), x, weight.const_data_ptr<scalar_t>(), rows, h, epsilon);
}

}  // namespace mutlib::kernels
""",
    "reshape_and_cache.h": """\
#pragma once
#include <ATen/core/Tensor.h>

namespace mutlib::kernels {

// key_cache[slot / BS, slot % BS] = key[t] for every token t with slot = slot_mapping[t] >= 0
// (a negative slot is padding), the same for values; kv_cache_dtype "auto" stores them as they are.
template <typename scalar_t, typename slot_mapping_t, typename k_scale_t>
void reshape_and_cache_cpu(const at::Tensor& key, const at::Tensor& value, at::Tensor& key_cache,
                           at::Tensor& value_cache, const at::Tensor& slot_mapping, c10::string_view kv_cache_dtype,
                           const at::Tensor& k_scale, const at::Tensor& v_scale) {
  TORCH_CHECK(kv_cache_dtype == "auto", "mutlib::reshape_and_cache: only kv_cache_dtype 'auto' is implemented");
  const int64_t tokens = key.size(0), row = key.size(1) * key.size(2);
  const slot_mapping_t* slots = slot_mapping.const_data_ptr<slot_mapping_t>();
  const scalar_t* k = key.const_data_ptr<scalar_t>();
  const scalar_t* v = value.const_data_ptr<scalar_t>();
  scalar_t* kc = key_cache.mutable_data_ptr<scalar_t>();
  scalar_t* vc = value_cache.mutable_data_ptr<scalar_t>();
  for (int64_t t = 0; t < tokens; ++t) {
    const int64_t slot = static_cast<int64_t>(slots[t]);
    if (slot < 0) continue;
    for (int64_t i = 0; i < row; ++i) {
      kc[slot * row + i] = k[t * row + i];
      vc[slot * row + i] = v[t * row + i];
    }
  }
}

}  // namespace mutlib::kernels
""",
    "mul_into.h": """\
#pragma once
#include <ATen/core/Tensor.h>

namespace mutlib::kernels {

// dst += src * factor
template <typename scalar_t>
void mul_into_cpu(at::Tensor& dst, const at::Tensor& src, double factor) {
  scalar_t* d = dst.mutable_data_ptr<scalar_t>();
  const scalar_t* s = src.const_data_ptr<scalar_t>();
  for (int64_t i = 0; i < dst.numel(); ++i) d[i] = static_cast<scalar_t>(d[i] + s[i] * factor);
}

}  // namespace mutlib::kernels
""",
    "rowmax.h": """\
#pragma once
#include <ATen/core/Tensor.h>

namespace mutlib::kernels {

// The largest value of each row and its first index.
template <typename scalar_t>
void rowmax_cpu(const at::Tensor& self, at::Tensor& values, at::Tensor& indices) {
  const int64_t n = self.size(0), m = self.size(1);
  TORCH_CHECK(m > 0 || n == 0, "mutlib::rowmax: rows are empty");
  const scalar_t* in = self.const_data_ptr<scalar_t>();
  scalar_t* v = values.mutable_data_ptr<scalar_t>();
  int64_t* ix = indices.mutable_data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    int64_t best = 0;
    for (int64_t j = 1; j < m; ++j) if (in[i * m + j] > in[i * m + best]) best = j;
    v[i] = in[i * m + best];
    ix[i] = best;
  }
}

}  // namespace mutlib::kernels
""",
    "center.h": """\
#pragma once
#include <ATen/core/Tensor.h>

namespace mutlib::kernels {

// result = x - mean(x, 0); running_mean = (1 - momentum) * running_mean + momentum * mean(x, 0)
template <typename scalar_t>
void center_cpu(const at::Tensor& x, double momentum, at::Tensor& running_mean, at::Tensor& result) {
  const int64_t n = x.size(0), d = x.size(1);
  const scalar_t* in = x.const_data_ptr<scalar_t>();
  scalar_t* rm = running_mean.mutable_data_ptr<scalar_t>();
  scalar_t* out = result.mutable_data_ptr<scalar_t>();
  for (int64_t j = 0; j < d; ++j) {
    double mean = 0;
    for (int64_t i = 0; i < n; ++i) mean += static_cast<double>(in[i * d + j]);
    mean = n ? mean / static_cast<double>(n) : 0.0;
    for (int64_t i = 0; i < n; ++i) out[i * d + j] = static_cast<scalar_t>(in[i * d + j] - mean);
    rm[j] = static_cast<scalar_t>((1.0 - momentum) * static_cast<double>(rm[j]) + momentum * mean);
  }
}

}  // namespace mutlib::kernels
""",
}


# A library of its own, not conftest's `sharedlib`: its `scale` is pointwise and its `scale.out`
# and `silu_and_mul` are not test_autograd.py's ops of those names, and `make torch-matrix` builds
# it on every claimed torch release (test_mutable.py is one of its core tests), where the ops of
# `sharedlib` would add their compile to every release.
def _make_mutlib(lib) -> dict:
    """`codegen init`, `pointwise: true` added to its `scale` (an elementwise op: vmap batches
    it, and `scale.out` through it), the ops above, one unit a group, `codegen build -O0`.  Returns the exit
    statuses and outputs; asserts nothing itself."""
    record = {}
    r = run_codegen("init", str(lib))
    record["init"] = [r.returncode, r.stdout + r.stderr]
    if r.returncode != 0:
        return record
    one_unit_a_group(lib)
    scale = lib / "declarations" / "scale.yaml"
    scale.write_text(scale.read_text() + "  pointwise: true\n")
    (lib / "declarations" / "mutable.yaml").write_text(DECLARATIONS)
    for name, text in KERNELS.items():
        (lib / "kernels" / name).write_text(text)
    r = run_codegen("build", "--no-cuda", "-O0", cwd=lib)
    record["build"] = [r.returncode, r.stdout + r.stderr]
    return record


@pytest.fixture(scope="module")
def mutlib(tmp_path_factory):
    """The library, made and built once per run, imported into this process."""
    root, made = made_once(tmp_path_factory, "mutlib", _make_mutlib)
    assert made["init"][0] == 0, made["init"][1]
    assert made["build"][0] == 0, made["build"][1]
    module = import_library(root / "mutlib")
    return module


@pytest.fixture
def ops(mutlib):
    return torch.ops.mutlib


def overload(ops, name):
    """The OpOverload `name` ("op" or "op.overload") of torch.ops.mutlib."""
    base, _, overload_name = name.partition(".")
    return getattr(getattr(ops, base), overload_name or "default")


# ----------------------------------------------------------------------------- references

def silu_and_mul_ref(x):
    d = x.shape[-1] // 2
    return torch.nn.functional.silu(x[..., :d]) * x[..., d:]


def rms_norm_ref(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def cache_args(dtype=torch.float32, nb=3, bs=4, h=2, d=5, slots=(5, -1, 0, 11)):
    t = len(slots)
    return (torch.randn(t, h, d, dtype=dtype), torch.randn(t, h, d, dtype=dtype),
            torch.zeros(nb, bs, h, d, dtype=dtype), torch.zeros(nb, bs, h, d, dtype=dtype),
            torch.tensor(slots, dtype=torch.int64), "auto", torch.tensor(1.0), torch.tensor(1.0))


def reshape_and_cache_ref(key, value, key_cache, value_cache, slots):
    kc, vc = key_cache.clone(), value_cache.clone()
    flat_k, flat_v = kc.view(-1, *kc.shape[2:]), vc.view(-1, *vc.shape[2:])
    for t, s in enumerate(slots.tolist()):
        if s >= 0:
            flat_k[s], flat_v[s] = key[t], value[t]
    return kc, vc


# ----------------------------------------------------------------------------- import, tags

@pytest.mark.slow(150)  # makes the library: about 150 s of one core at -O0
def test_library_imports_with_tags_torch_needs(mutlib, ops):
    # The generated vmap module registers a kernel for out= overloads instead of
    # register_vmap (which refuses keyword-only tensors and used to break the import).
    tags = {name: {t.name for t in overload(ops, name).tags}
            for name in ("scale.out", "rowmax.out", "mul_into", "silu_and_mul", "add_rms_norm", "reshape_and_cache",
                         "center")}
    if torch_compat.supports("inplace_out_tags"):
        assert "out" in tags["scale.out"] and "out" in tags["rowmax.out"]
        assert "inplace" in tags["mul_into"]
    else:  # registered without them, as torch_compat.h defines the tags away
        assert not {"out", "inplace"} & set().union(*tags.values()), tags
    # return nothing, or (center) a new tensor beside what they write: no tag needed
    for name in ("silu_and_mul", "add_rms_norm", "reshape_and_cache", "center"):
        assert not {"out", "inplace"} & tags[name], name
    assert all("pt2_compliant_tag" in t for t in tags.values())
    for op in ("mutlib::scale.out", "mutlib::rowmax.out", "mutlib::silu_and_mul"):
        assert torch._C._dispatch_has_kernel_for_dispatch_key(op, "FuncTorchBatched"), op
    # `Tensor!` (a fresh write set) is registered as torch's parser reads it, not as torch
    # prints it (`Tensor($0! -> )`, which the parser refuses: the import used to abort)
    declared = torch._C.parse_schema("mutlib::silu_and_mul(Tensor! result, Tensor input) -> ()")
    assert str(overload(ops, "silu_and_mul")._schema) == str(declared) == \
        "mutlib::silu_and_mul(Tensor($0! -> ) result, Tensor input) -> ()"


def test_python_names_of_overloads(mutlib):
    x, o = torch.randn(3, 4), torch.empty(3, 4)
    assert mutlib.ops.scale(x, 2.0, out=o) is o and torch.equal(o, x * 2)  # torch's out= keyword
    o2 = torch.empty(0)
    assert mutlib.ops.scale_out(x, 3.0, out=o2) is o2 and torch.equal(o2, x * 3)  # the overload's own function
    assert torch.ops.mutlib.scale.out(x, 0.5, out=o) is o and torch.equal(o, x * 0.5)
    v, i = torch.empty(3), torch.empty(3, dtype=torch.int64)
    r = mutlib.ops.rowmax(x, out=(v, i))  # several outputs: a tuple, as torch.max(x, 1, out=(v, i))
    assert r.values is v and r.indices is i
    assert torch.equal(v, x.max(1).values) and torch.equal(i, x.max(1).indices)
    r = mutlib.ops.rowmax_out(x, values=torch.empty(3), indices=torch.empty(3, dtype=torch.int64))
    assert torch.equal(r[0], x.max(1).values)
    assert "out: Optional[Tensor] = None" in open(mutlib.ops.__file__ + "i").read()
    assert "out" in inspect.signature(mutlib.ops.scale).parameters  # the compiled binding says so too


# ----------------------------------------------------------------------------- eager

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_results(ops, dtype):
    x = torch.randn(2, 3, 8, dtype=dtype)
    r = torch.empty(2, 3, 4, dtype=dtype)
    assert ops.silu_and_mul(r, x) is None
    torch.testing.assert_close(r, silu_and_mul_ref(x))
    w = torch.randn(8, dtype=dtype)
    r = torch.empty_like(x)
    ops.rms_norm(r, x, w, 1e-6)
    torch.testing.assert_close(r, rms_norm_ref(x, w, 1e-6))
    res = torch.randn_like(x)
    expected_res = res + x
    ops.add_rms_norm(r, x, res, w, 1e-6)
    torch.testing.assert_close(res, expected_res)
    torch.testing.assert_close(r, rms_norm_ref(expected_res, w, 1e-6))
    ops.add_rms_norm(r, x, None, w, 1e-6)  # the optional mutable argument left out
    torch.testing.assert_close(r, rms_norm_ref(x, w, 1e-6))
    args = cache_args(dtype)
    kc, vc = reshape_and_cache_ref(args[0], args[1], args[2], args[3], args[4])
    ops.reshape_and_cache(*args)
    assert torch.equal(args[2], kc) and torch.equal(args[3], vc)
    d, s = torch.ones(5, dtype=dtype), torch.arange(5, dtype=dtype)
    assert ops.mul_into(d, s, 2.0) is d and torch.equal(d, 1 + 2 * s)
    x, running = torch.randn(6, 3, dtype=dtype), torch.randn(3, dtype=dtype)
    expected_running = 0.9 * running + 0.1 * x.mean(0)
    torch.testing.assert_close(ops.center(x, 0.1, running_mean=running), x - x.mean(0))
    torch.testing.assert_close(running, expected_running)


def test_non_contiguous_mutated_arguments(ops):
    x = torch.randn(4, 8)
    big = torch.zeros(4, 8)
    r = big[:, ::2]  # every other column: written in place through its strides
    ops.silu_and_mul(r, x)
    torch.testing.assert_close(big[:, ::2], silu_and_mul_ref(x))
    assert torch.equal(big[:, 1::2], torch.zeros(4, 4))
    w = torch.randn(4)
    res_big = torch.randn(4, 4).t()  # transposed
    res = res_big.clone()
    ops.add_rms_norm(r, x[:, :4], res_big, w, 1e-5)
    torch.testing.assert_close(res_big, res + x[:, :4])
    torch.testing.assert_close(r, rms_norm_ref(res + x[:, :4], w, 1e-5))
    key, value, kc, vc, slots, *rest = cache_args()
    wide = torch.zeros(kc.shape[0], kc.shape[1] * 2, *kc.shape[2:])
    kc_strided = wide[:, ::2]
    expected, _ = reshape_and_cache_ref(key, value, kc, vc, slots)
    ops.reshape_and_cache(key, value, kc_strided, vc, slots, *rest)
    assert torch.equal(kc_strided, expected) and torch.equal(wide[:, 1::2], torch.zeros_like(kc))
    out = torch.zeros(4, 6)[:, ::2]  # out= with the right shape keeps its strides
    x = torch.randn(4, 3)
    assert ops.scale.out(x, 2.0, out=out) is out and out.stride() == (6, 2)
    torch.testing.assert_close(out, x * 2)


def test_out_is_resized_as_aten_resizes_it(ops, capfd):
    x = torch.randn(3, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an empty out is resized silently
        o = torch.empty(0)
        ops.scale.out(x, 2.0, out=o)
        assert o.shape == (3, 5) and torch.equal(o, x * 2)
        v, i = torch.empty(0), torch.empty(0, dtype=torch.int64)
        ops.rowmax.out(x, values=v, indices=i)
        assert v.shape == (3,) and i.shape == (3,) and torch.equal(i, x.max(1).indices)
    capfd.readouterr()
    o = torch.empty(2, 2)
    resized = "An output with one or more elements was resized since it had shape [2, 2]"
    with warnings.catch_warnings(record=True) as caught:  # aten's TORCH_WARN, as for aten's own out= ops
        warnings.simplefilter("always")
        ops.scale.out(x, 2.0, out=o)
    assert o.shape == (3, 5) and torch.equal(o, x * 2)
    if torch_compat.supports("python_warnings_from_ops"):
        assert any(resized in str(w.message) for w in caught), [str(w.message) for w in caught]
    else:
        assert resized in capfd.readouterr().err and not caught
    # the same in the fake kernel
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        o = torch.empty(0)
        ops.scale.out(torch.empty(7, 2), 2.0, out=o)
        assert o.shape == (7, 2)
        with pytest.warns(UserWarning, match=r"An output with one or more elements was resized since it had shape \[7, 2\]"):
            ops.scale.out(torch.empty(3, 3), 2.0, out=o)
        assert o.shape == (3, 3)
        v, i = torch.empty(0), torch.empty(0, dtype=torch.int64)
        ops.rowmax.out(torch.empty(6, 2), values=v, indices=i)
        assert v.shape == (6,) and i.shape == (6,)


def test_dtype_and_device_errors(ops):
    x = torch.randn(3, 4)
    with pytest.raises(RuntimeError, match=r"mutlib::scale\.out: out= argument 'out' has dtype"):
        ops.scale.out(x, 2.0, out=torch.empty(3, 4, dtype=torch.float64))
    with pytest.raises(RuntimeError, match=r"mutlib::rowmax\.out: out= argument 'indices' has dtype"):
        ops.rowmax.out(x, values=torch.empty(3), indices=torch.empty(3))
    with pytest.raises(RuntimeError, match="mutlib::silu_and_mul: argument 'input' has dtype"):
        ops.silu_and_mul(torch.empty(3, 2), x.double())
    args = list(cache_args())
    args[4] = args[4].int()
    with pytest.raises(RuntimeError, match="mutlib::reshape_and_cache: argument 'slot_mapping' has dtype"):
        ops.reshape_and_cache(*args)
    # a written keyword-only argument no return aliases is checked as an input, not as an out=
    with pytest.raises(RuntimeError, match="mutlib::center: argument 'running_mean' has dtype"):
        ops.center(x, 0.1, running_mean=torch.zeros(4, dtype=torch.float64))
    with pytest.raises(RuntimeError, match="mutlib::center: argument 'running_mean' has size 3 at dimension 0"):
        ops.center(x, 0.1, running_mean=torch.zeros(3))
    with pytest.raises(RuntimeError, match=r"mutlib::scale\.out: .*argument 'out' .*meta"):
        ops.scale.out(x, 2.0, out=torch.empty(3, 4, device="meta"))
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        with pytest.raises(RuntimeError, match=r"mutlib::scale\.out: out= argument 'out' has dtype"):
            ops.scale.out(torch.empty(3, 4), 2.0, out=torch.empty(3, 4, dtype=torch.float64))
        with pytest.raises(RuntimeError, match=r"mutlib::rowmax\.out: out= argument 'indices' has dtype"):
            ops.rowmax.out(torch.empty(3, 4), values=torch.empty(3), indices=torch.empty(3))


def test_shape_and_index_errors(ops):
    with pytest.raises(RuntimeError, match="mutlib::silu_and_mul: argument 'input' has size 6 at dimension 1, but "
                                           "expected 2 \\* D = 4"):
        ops.silu_and_mul(torch.empty(3, 2), torch.empty(3, 6))
    args = list(cache_args(slots=(0, 12)))  # 3 blocks of 4 slots: 12 is past the end
    with pytest.raises(RuntimeError, match="mutlib::reshape_and_cache: .*slot_mapping"):
        ops.reshape_and_cache(*args)


def test_same_memory_errors(ops):
    x = torch.randn(3, 8)
    with pytest.raises(RuntimeError, match="mutlib::silu_and_mul: .*'result'"):
        ops.silu_and_mul(x.view(-1)[:12].view(3, 4), x)  # the output overlaps the input it reads
    key, value, kc, vc, slots, *rest = cache_args()
    with pytest.raises(RuntimeError, match="mutlib::reshape_and_cache: "):
        ops.reshape_and_cache(key, value, kc, kc, slots, *rest)  # both caches one tensor
    storage = torch.empty(6)  # two out= arguments in one storage
    values = storage[:3]
    indices = torch.empty(0, dtype=torch.int64).set_(storage.untyped_storage(), 0, (3,))
    with pytest.raises(RuntimeError, match=r"mutlib::rowmax\.out: "):
        ops.rowmax.out(x, values=values, indices=indices)


# ----------------------------------------------------------------------------- PT2

def model(ops, x, w, res, key, value, kc, vc, slots, k_scale, v_scale):
    """Every op, with graph inputs mutated (res, kc, vc) and buffers made in the graph."""
    r = torch.empty_like(x)
    ops.add_rms_norm(r, x, res, w, 1e-6)
    h = torch.empty(*x.shape[:-1], x.shape[-1] // 2)
    ops.silu_and_mul(h, r)
    n = torch.empty_like(h)
    ops.rms_norm(n, h, w[: h.shape[-1]], 1e-6)
    ops.reshape_and_cache(key, value, kc, vc, slots, "auto", k_scale, v_scale)
    # Dynamo breaks the graph where an argument named `out` must be resized (for aten's ops too),
    # so this one has the result's shape; rowmax.out's are resized inside the graph.
    s = ops.scale.out(n, 2.0, out=torch.empty_like(n))
    values, indices = ops.rowmax.out(s, values=torch.empty(0), indices=torch.empty(0, dtype=torch.int64))
    acc = torch.zeros_like(values)
    ops.mul_into(acc, values, 3.0)
    return acc + indices, s


def model_args():
    return (torch.randn(5, 8), torch.randn(8), torch.randn(5, 8), *cache_args()[:5], torch.tensor(1.0), torch.tensor(1.0))


def clone_args(args):
    return tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compile_fullgraph_with_mutated_inputs(ops, backend):
    torch._dynamo.reset()
    counters.clear()
    args = model_args()
    eager_args, compiled_args = clone_args(args), clone_args(args)
    expected = model(ops, *eager_args)
    compiled = torch.compile(lambda *a: model(ops, *a), fullgraph=True, backend=backend)
    got = None
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the outs given are empty: no resize warning
        # torch 2.13's inductor, imported on the first compile, imports torch.utils.mkldnn, whose
        # torch.jit.script_method decorators warn that torch.jit is deprecated
        warnings.filterwarnings("ignore", r"`torch\.jit\.script_method` is deprecated", DeprecationWarning,
                                r"torch\.jit\._script")
        with torch_feature("mutable_returns"):  # the model calls scale.out and mul_into
            got = compiled(*compiled_args)
    if got is None:
        return  # an older torch refused, as recorded
    torch.testing.assert_close(got, expected)
    for name, a, b in zip(("res", "kc", "vc"), (compiled_args[2], compiled_args[5], compiled_args[6]),
                          (eager_args[2], eager_args[5], eager_args[6])):
        torch.testing.assert_close(a, b, msg=f"mutated input {name}")
    assert not torch.equal(compiled_args[2], args[2])  # res was written
    assert sum(counters["graph_break"].values()) == 0


def functional_model(ops, x):
    """The functional ops of the out= overloads (one result and two), which inductor may lower
    to those overloads, and an out= overload called directly."""
    s = ops.scale(x.relu(), 2.0)
    values, indices = ops.rowmax(s - x)
    o = ops.scale.out(values, 0.5, out=torch.empty_like(values))
    return o + indices, s


@pytest.mark.parametrize("dynamic", [False, True])
def test_inductor_compiles_the_functional_ops_of_out_overloads(ops, dynamic):
    # Inductor (torch >= 2.13) lowers a functional custom op to its out= overload and calls that
    # with buffers of its own; with dynamic shapes it fails so for ops with one result on torch
    # 2.13 (pytorch#185503) and with two on 2.14.1, unless the runtime's
    # keep_inductor_from_out_variants keeps it from them.  Inductor's caches are off, so that a
    # graph compiled by an earlier run cannot stand in for the lowering.
    import torch._inductor.config

    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(lambda x: functional_model(ops, x), fullgraph=True, dynamic=dynamic, backend="inductor")
    with torch._inductor.config.patch(force_disable_caches=True), torch_feature("mutable_returns"):  # scale.out
        for rows in (4, 7):
            x = torch.randn(rows, 5)
            torch.testing.assert_close(compiled(x), functional_model(ops, x))
        assert sum(counters["graph_break"].values()) == 0


def test_inductor_is_kept_only_from_the_out_overloads_it_mislowers(ops):
    import importlib

    from torch._library import _out_variant

    rt = importlib.import_module("mutlib._generated._runtime")
    lookup = _out_variant.to_out_variant
    assert lookup(ops.rowmax.default) is None  # two results: kept from rowmax.out on every release
    assert lookup(ops.scale.default) == (None if rt.torch_before((2, 14)) else ops.scale.out)
    # other namespaces: torch's answer (none before torch lowered to out= overloads)
    lowers = torch_compat.supports("out_variant_lowering")
    assert lookup(torch.ops.aten.sin.default) == (torch.ops.aten.sin.out if lowers else None)
    rt.keep_inductor_from_out_variants("mutlib")  # as loading the library did: wraps nothing again
    assert _out_variant.to_out_variant is lookup


def test_export(ops):
    class M(torch.nn.Module):
        def forward(self, *a):
            return model(ops, *a)

    args = model_args()
    ep = torch.export.export(M(), clone_args(args))
    targets = {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
    assert any("mutlib.reshape_and_cache" in t for t in targets), targets
    eager_args, exported_args = clone_args(args), clone_args(args)
    torch.testing.assert_close(ep.module()(*exported_args), model(ops, *eager_args))
    torch.testing.assert_close(exported_args[5], eager_args[5])  # the key cache, written by the exported program


def opcheck_cases():
    # out= arguments of the result's shape: opcheck's test_aot_dispatch_dynamic cannot resize a
    # graph input (aten's own sin.out fails it with an empty out, as of torch 2.14).
    x = torch.randn(3, 8)
    return [
        ("scale.out", (x, 2.0), {"out": torch.empty(3, 8)}),
        ("rowmax.out", (x,), {"values": torch.empty(3), "indices": torch.empty(3, dtype=torch.int64)}),
        ("silu_and_mul", (torch.empty(3, 4), x), {}),
        ("rms_norm", (torch.empty(3, 8), x, torch.randn(8), 1e-6), {}),
        ("add_rms_norm", (torch.empty(3, 8), x, torch.randn(3, 8), torch.randn(8), 1e-6), {}),
        ("add_rms_norm", (torch.empty(3, 8), x, None, torch.randn(8), 1e-6), {}),
        ("reshape_and_cache", cache_args(), {}),
        ("mul_into", (torch.randn(4), torch.randn(4), 0.5), {}),
        ("center", (x, 0.1), {"running_mean": torch.randn(8)}),
    ]


@pytest.mark.parametrize("case", range(len(opcheck_cases())))
def test_opcheck(ops, case):
    name, args, kwargs = opcheck_cases()[case]
    op = overload(ops, name)
    with torch_feature("mutable_returns") if returns_written(op) else contextlib.nullcontext():
        torch.library.opcheck(op, args, kwargs)


# ----------------------------------------------------------------------------- vmap

def test_vmap(ops, mutlib):
    x = torch.randn(4, 3)
    out = torch.empty(4, 3)
    got = torch.vmap(lambda a, o: ops.scale.out(a, 2.0, out=o))(x, out)  # through scale's pointwise rule
    torch.testing.assert_close(got, x * 2)
    torch.testing.assert_close(out, x * 2)
    with pytest.raises(RuntimeError, match=r"mutlib::scale\.out: under torch\.vmap, argument 'out' must have the "
                                           r"result's shape \[3\]"):
        torch.vmap(lambda a, o: ops.scale.out(a, 2.0, out=o))(x, torch.empty(4, 0))
    with pytest.raises(RuntimeError, match="mutlib::rowmax: no batching rule"):  # its functional op has none
        torch.vmap(lambda a: ops.rowmax.out(a.view(1, 3), values=torch.empty(1), indices=torch.empty(1, dtype=torch.int64)))(x)
    with pytest.raises(RuntimeError, match="mutlib::silu_and_mul: no batching rule"):
        torch.vmap(lambda r, a: ops.silu_and_mul(r, a))(torch.empty(4, 1, 2), torch.randn(4, 1, 4))


def test_vmap_rule_refused_on_an_out_overload(project):
    (project / "declarations" / "f.yaml").write_text(
        "- func: f(Tensor self) -> Tensor\n  kernels: {CPU: f}\n  like: self\n"
        "- func: f.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)\n  vmap: pkg.rules:f\n")
    r = run_codegen("generate", cwd=project)
    assert r.returncode == 2
    assert "f.yaml:5:9: error: an op with keyword-only tensor arguments takes no 'vmap' rule" in r.stderr, r.stderr


def test_hand_written_tags_are_checked(project):
    (project / "declarations" / "g.yaml").write_text(
        "- func: g(Tensor(a!) self, Tensor(b!) other) -> Tensor(a!)\n  kernels: {CPU: g}\n  tags: [inplace]\n"
        "- func: h(Tensor self, Tensor(a!) out) -> Tensor(a!)\n  kernels: {CPU: h}\n  tags: [out]\n")
    r = run_codegen("generate", cwd=project)
    assert r.returncode == 2
    assert ("g.yaml:3:9: error: the 'inplace' tag does not fit this op: it may write only its first argument, "
            "but also writes 'other'") in r.stderr, r.stderr
    assert ("g.yaml:6:9: error: the 'out' tag does not fit this op: every written argument must be keyword-only "
            "(after '*'), but 'out' is not") in r.stderr, r.stderr
