"""Per-argument dtypes and return dtype rules, on a library made with `codegen init` outside
this repository and declared as a user would from the README: index tensors of their own
dtypes beside float data, a return typed by a `ScalarType` argument (a template parameter of
its own), `ScalarType?` arguments falling back to a tensor's dtype or the default dtype, and
the promotion of two tensors.  The real and the fake kernel agree (opcheck), and the errors
name the op, the argument and what was allowed.  The ops live in conftest's `sharedlib`
(namespace `sharedlib`), built once per run with the ops of other test files."""

import sys

import pytest
import torch
from torch.library import opcheck

pytestmark = [pytest.mark.xdist_group("sharedlib")]

DECLARATIONS = """\
- func: gather_rows(Tensor data, Tensor index) -> Tensor
  dtypes: {data: [float32, float64, int64], index: [int32, int64]}
  kernels: {CPU: gather_rows}
  index: {index: data.size(0)}
  shape: {data: [V, D], index: [N], result: [N, D]}

- func: convert(Tensor self, ScalarType dtype) -> Tensor
  dtypes: {self: [float32, int32, float8_e5m2], result: [float64, int64, bfloat16, float8, uint16, uint32, uint64, complex32]}
  dtype: {result: dtype}
  like: self
  kernels: {CPU: convert}

- func: scaled(Tensor self, Tensor scale, ScalarType? dtype=None) -> Tensor
  dtypes: {self: [float32, float64], scale: [float32, float64]}
  dtype: {result: dtype or scale}
  shape: {self: [N], scale: [N], result: [N]}
  kernels: {CPU: scaled}

- func: ones_like_rows(Tensor self, ScalarType? dtype=None) -> Tensor
  dtypes: [float32, float64]
  dtype: {result: dtype or default}
  shape: {self: [N, _], result: [N]}
  kernels: {CPU: ones_like_rows}

- func: weighted(Tensor self, Tensor? weights=None) -> Tensor
  dtypes: {self: [int32, int64], weights: {dtypes: [float32, float64, bfloat16], absent: float64}}
  dtype: {result: weights or default}
  shape: {self: [N], weights: [N], result: [N]}
  kernels: {CPU: weighted}

- func: add_promoted(Tensor a, Tensor b) -> Tensor
  dtypes: {a: [float32, float64, int64], b: [float32, float64, int64]}
  dtype: {result: "promote(a, b)"}
  shape: {a: [N], b: [N], result: [N]}
  kernels: {CPU: add_promoted}

- func: sum_over(Tensor self, int? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor
  dtypes: [float32, int32, bool]
  dtype: {result: dtype or promote_integers(self)}
  shape: {result: "reduce(self, dim, keepdim)"}
  kernels: {CPU: sum_over}

- func: sum_kept(Tensor self, int dim) -> Tensor
  dtypes: [float32, int32]
  dtype: {result: promote_integers(self)}
  shape: {result: "reduce(self, dim, True)"}
  kernels: {CPU: sum_kept}
"""

KERNELS = """\
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/util/TypeCast.h>
#include <optional>

namespace sharedlib::kernels {

template <typename scalar_t, typename index_t>
void gather_rows(const at::Tensor& data, const at::Tensor& index, at::Tensor& result) {
  const int64_t D = data.size(1);
  const scalar_t* in = data.const_data_ptr<scalar_t>();
  const index_t* idx = index.const_data_ptr<index_t>();
  scalar_t* out = result.mutable_data_ptr<scalar_t>();
  for (int64_t n = 0; n < index.size(0); ++n)
    for (int64_t d = 0; d < D; ++d) out[n * D + d] = in[static_cast<int64_t>(idx[n]) * D + d];
}

template <typename scalar_t, typename result_t>
void convert(const at::Tensor& self, at::ScalarType, at::Tensor& result) {
  const scalar_t* in = self.const_data_ptr<scalar_t>();
  result_t* out = result.mutable_data_ptr<result_t>();
  for (int64_t i = 0; i < self.numel(); ++i) out[i] = c10::static_cast_with_inter_type<result_t, scalar_t>::apply(in[i]);
}

// The result's dtype is not a template parameter: the kernel reads it from the tensor.
template <typename scalar_t, typename scale_t>
void scaled(const at::Tensor& self, const at::Tensor& scale, std::optional<at::ScalarType>, at::Tensor& result) {
  result.copy_(self.to(at::kDouble).mul(scale.to(at::kDouble)));
}

template <typename scalar_t>
void ones_like_rows(const at::Tensor& self, std::optional<at::ScalarType>, at::Tensor& result) {
  result.fill_(1);
}

// weights_t is double when no weights are given (absent: float64); the result's dtype is the
// weights', else the default dtype.
template <typename scalar_t, typename weights_t>
void weighted(const at::Tensor& self, const std::optional<at::Tensor>& weights, at::Tensor& result) {
  if (!weights.has_value() || !weights->defined()) {
    result.copy_(self);
    return;
  }
  const scalar_t* in = self.const_data_ptr<scalar_t>();
  const weights_t* w = weights->const_data_ptr<weights_t>();
  weights_t* out = result.mutable_data_ptr<weights_t>();
  for (int64_t i = 0; i < self.numel(); ++i) out[i] = static_cast<weights_t>(static_cast<float>(in[i]) * static_cast<float>(w[i]));
}

template <typename scalar_t, typename b_t>
void add_promoted(const at::Tensor& a, const at::Tensor& b, at::Tensor& result) {
  result.copy_(a.to(result.scalar_type()) + b.to(result.scalar_type()));
}

// The wrapper allocated the result (shape reduce(...), dtype from the rule): aten fills it.
template <typename scalar_t>
void sum_over(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim, std::optional<at::ScalarType>,
              at::Tensor& result) {
  result.copy_(dim.has_value() ? self.sum(*dim, keepdim, result.scalar_type()) : self.sum(result.scalar_type()));
}

template <typename scalar_t>
void sum_kept(const at::Tensor& self, int64_t dim, at::Tensor& result) {
  result.copy_(self.sum(dim, /*keepdim=*/true, result.scalar_type()));
}

}  // namespace sharedlib::kernels
"""


def add_to_sharedlib(lib):
    """The declarations above, into conftest's `sharedlib`: it runs `codegen generate` before
    the kernel headers exist (its notes say what to write, record["missing"]), then
    add_kernel_headers."""
    (lib / "declarations" / "dtypes.yaml").write_text(DECLARATIONS)


def add_kernel_headers(lib):
    """KERNELS in one header, and each op's header includes it.  Not KERNELS written into each
    op's header: GCC takes two `#pragma once` files of the same text and modification time for
    one file, so whether the second was included again (and its templates defined twice)
    depended on whether the writes fell within one tick of the file system's clock."""
    (lib / "kernels" / "dtype_rules.h").write_text(KERNELS)
    for name in ("gather_rows", "convert", "scaled", "ones_like_rows", "weighted", "add_promoted", "sum_over",
                 "sum_kept"):
        (lib / "kernels" / f"{name}.h").write_text('#pragma once\n#include "dtype_rules.h"\n')


@pytest.fixture(scope="module")
def dtypelib(sharedlib):
    """The library holding the ops above (conftest's `sharedlib`, built once per run),
    imported into this process, and what making it printed."""
    made = sharedlib.record
    assert made["init"][0] == 0, made["init"][1]
    assert made["build"][0] == 0, made["build"][1]
    sys.path.insert(0, str(sharedlib.path))
    try:
        import sharedlib as module
    finally:
        sys.path.remove(str(sharedlib.path))
    return module, made


@pytest.fixture
def ops(dtypelib):
    return torch.ops.sharedlib


@pytest.mark.slow(100)
def test_the_kernel_gets_one_template_parameter_per_dtype_variable(dtypelib):
    _, made = dtypelib
    status, notes = made["missing"]
    assert status == 2, notes
    for signature in ("template <typename scalar_t, typename index_t> void gather_rows(const at::Tensor& data, "
                      "const at::Tensor& index, at::Tensor& result)",
                      "template <typename scalar_t, typename result_t> void convert(const at::Tensor& self, "
                      "at::ScalarType dtype, at::Tensor& result)",
                      "template <typename scalar_t, typename scale_t> void scaled(",
                      "template <typename scalar_t> void ones_like_rows(",
                      "template <typename scalar_t, typename weights_t> void weighted(const at::Tensor& self, "
                      "const std::optional<at::Tensor>& weights, at::Tensor& result)",
                      "template <typename scalar_t, typename b_t> void add_promoted("):
        assert f"note: write there: `{signature}" in notes, notes


@pytest.mark.parametrize("data_dtype", [torch.float32, torch.float64, torch.int64])
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_index_tensors_of_their_own_dtypes(ops, data_dtype, index_dtype):
    data = torch.arange(12).reshape(6, 2).to(data_dtype)
    index = torch.tensor([5, 0, 3, 3], dtype=index_dtype)
    out = ops.gather_rows(data, index)
    assert out.dtype == data_dtype
    torch.testing.assert_close(out, data[index.long()])
    opcheck(ops.gather_rows, (data, index))


def test_errors_name_the_argument_and_the_allowed_dtypes(ops):
    data = torch.randn(6, 2)
    with pytest.raises(RuntimeError, match=r"sharedlib::gather_rows: argument 'index' has dtype Float, but expected "
                                           r"one of: int32, int64"):
        ops.gather_rows(data, torch.zeros(3))
    with pytest.raises(RuntimeError, match=r"sharedlib::gather_rows: argument 'data' has dtype Int, but expected one "
                                           r"of: float32, float64, int64"):
        ops.gather_rows(data.int(), torch.zeros(3, dtype=torch.int64))
    with pytest.raises(RuntimeError, match=r"sharedlib::gather_rows: argument 'index' holds 6, out of range: its values must lie "
                                           r"in \[0, 6\) \(index: data.size\(0\)\)"):
        ops.gather_rows(data, torch.tensor([1, 6]))
    with torch._subclasses.fake_tensor.FakeTensorMode():  # the fake kernel says the same
        with pytest.raises(RuntimeError, match=r"argument 'index' has dtype torch.float32, but expected one of: "
                                               r"int32, int64"):
            ops.gather_rows(torch.empty(6, 2), torch.empty(3))


@pytest.mark.parametrize("dtype", [torch.float64, torch.int64, torch.bfloat16])
@pytest.mark.parametrize("source", [torch.float32, torch.int32])
def test_a_scalar_type_argument_types_the_result(ops, source, dtype):
    x = (torch.randn(3, 4) * 10).to(source)
    out = ops.convert(x, dtype)
    assert out.dtype == dtype
    torch.testing.assert_close(out, x.to(dtype))
    opcheck(ops.convert, (x, dtype))


NEW_DTYPES = [torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz,
              torch.float8_e8m0fnu, torch.uint16, torch.uint32, torch.uint64, torch.complex32]


def test_every_dtype_torch_names_for_kernels_converts_as_torch_does(ops):
    """The kernel is instantiated for the float8 formats (c10::Float8_e4m3fn, ...), the wider
    unsigned dtypes and complex32, as results and as a float8 input; each conversion is
    torch's, bit for bit, and opcheck passes (test_schema left out for a float8 input: torch
    has no allclose for float8)."""
    import warnings
    warnings.filterwarnings("ignore", message="ComplexHalf support is experimental")
    for source in (torch.float32, torch.int32, torch.float8_e5m2):
        x = (torch.randn(3, 4, generator=torch.Generator().manual_seed(0)) * 4).abs().to(source)
        for dtype in NEW_DTYPES:
            out = ops.convert(x, dtype)
            assert out.dtype == dtype
            torch.testing.assert_close(out, x.to(dtype), rtol=0, atol=0, equal_nan=True)
    opcheck(ops.convert, (torch.randn(5), torch.float8_e4m3fn))
    opcheck(ops.convert, (torch.randn(5).to(torch.float8_e5m2), torch.float64),
            test_utils=("test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic"))


def test_an_optional_tensor_with_dtypes_of_its_own(ops):
    """`weights: {dtypes: [...], absent: float64}`: the kernel is instantiated for the weights'
    dtype where given (checked against its list, by the fake kernel too), for float64 where
    not; the result's dtype is the weights' where given, else the default (`weights or
    default`)."""
    x = torch.tensor([1, -2, 3])
    for index in (torch.int32, torch.int64):
        assert ops.weighted(x.to(index)).dtype == torch.get_default_dtype()
        torch.testing.assert_close(ops.weighted(x.to(index)), x.float())
        for wt in (torch.float32, torch.float64, torch.bfloat16):
            w = torch.tensor([0.5, 2.0, -1.0], dtype=wt)
            out = ops.weighted(x.to(index), w)
            assert out.dtype == wt
            torch.testing.assert_close(out, (x * w.float()).to(wt))
        opcheck(ops.weighted, (x.to(index), torch.rand(3, dtype=torch.float64)))
        opcheck(ops.weighted, (x.to(index),))
    with pytest.raises(RuntimeError, match=r"sharedlib::weighted: argument 'weights' has dtype Half, but expected "
                                           r"one of: float32, float64, bfloat16"):
        ops.weighted(x, torch.rand(3).half())
    with torch._subclasses.fake_tensor.FakeTensorMode():
        assert ops.weighted(torch.empty(3, dtype=torch.int64), torch.empty(3, dtype=torch.bfloat16)).dtype == \
            torch.bfloat16
        with pytest.raises(RuntimeError, match=r"argument 'weights' has dtype torch.float16, but expected one of"):
            ops.weighted(torch.empty(3, dtype=torch.int64), torch.empty(3, dtype=torch.float16))


def test_the_testing_library_samples_and_checks_the_new_dtypes(sharedlib, ops):
    """opwrap_codegen.testing, as a library's own tests use it, on the new dtypes: samples of
    a float8 input, results of every new dtype against the reference, and opcheck (which
    leaves test_schema out for float8 samples)."""
    from opwrap_codegen import testing
    decl = next(d for d in testing.declared_ops(sharedlib.path) if d.name == "convert")
    checked = 0
    for combo in testing.dtype_combinations(decl):
        source, result = combo["scalar_t"], combo["result_t"]
        if source.name == "int32" or (source.name == "float32" and result.vectorized):
            continue
        for sample in testing.sample_inputs(decl, testing.torch_dtype(source), dtypes=combo):
            testing.check_reference(decl, ops.convert.default, sample, lambda self, dtype: self.to(dtype))
            if result.name in ("float64", "float8_e4m3fn", "float8_e8m0fnu", "uint64", "complex32"):  # opcheck: 0.15 s
                testing.check_opcheck(ops.convert.default, sample)
            checked += 1
    assert checked == 9 + 12, checked  # float32 to each new dtype, float8_e5m2 to every result dtype


def test_a_result_dtype_outside_its_list_is_refused(ops):
    with pytest.raises(RuntimeError, match=r"sharedlib::convert: output 'result' would have dtype Float \(dtype: "
                                           r"dtype\), but expected one of: float64, int64, bfloat16, "
                                           r"float8_e4m3fn, float8_e5m2"):
        ops.convert(torch.randn(3), torch.float32)


def test_optional_scalar_type_falls_back_to_a_tensor_or_the_default(ops):
    x, s = torch.randn(4), torch.randn(4, dtype=torch.float64)
    assert ops.scaled(x, s).dtype == torch.float64  # dtype or scale
    assert ops.scaled(x, s, torch.float32).dtype == torch.float32
    torch.testing.assert_close(ops.scaled(x, s), x.double() * s)
    assert ops.ones_like_rows(torch.randn(3, 2, dtype=torch.float64)).dtype == torch.get_default_dtype()
    assert ops.ones_like_rows(torch.randn(3, 2), torch.int64).dtype == torch.int64
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        assert ops.ones_like_rows(torch.randn(3, 2)).dtype == torch.float64
    finally:
        torch.set_default_dtype(previous)
    for args in ((x, s), (x, s, torch.float32)):
        opcheck(ops.scaled, args)
    for args in ((torch.randn(3, 2),), (torch.randn(3, 2), torch.float64)):
        opcheck(ops.ones_like_rows, args)


@pytest.mark.parametrize("a_dtype, b_dtype", [(torch.int64, torch.float32), (torch.float32, torch.float64),
                                              (torch.int64, torch.int64), (torch.float64, torch.int64)])
def test_promotion_of_two_tensors_as_torch_result_type(ops, a_dtype, b_dtype):
    a, b = (torch.randn(5) * 5).to(a_dtype), (torch.randn(5) * 5).to(b_dtype)
    out = ops.add_promoted(a, b)
    assert out.dtype == torch.result_type(a, b)
    torch.testing.assert_close(out, a + b)
    opcheck(ops.add_promoted, (a, b))


def test_dtype_rules_compile(ops):
    # One sum per op, each compared at its own dtype's tolerance: added together, the float32
    # sums (whose order of summation inductor may change) would be held to float64's.
    def f(x, s, idx):
        return ops.scaled(x, s).sum(), ops.convert(x, torch.float64).sum(), ops.gather_rows(x.view(-1, 1), idx).sum()
    from torch._dynamo.utils import counters
    torch._dynamo.reset()
    counters.clear()
    x, s, idx = torch.randn(4), torch.randn(4), torch.tensor([0, 3], dtype=torch.int32)
    torch.testing.assert_close(torch.compile(f, fullgraph=True)(x, s, idx), f(x, s, idx))
    assert sum(counters["graph_break"].values()) == 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.bool])
def test_a_reduction_over_an_optional_dim_types_and_shapes_its_result_as_torch_sum(ops, dtype):
    """`dtype or promote_integers(self)` and `reduce(self, dim, keepdim)` over an `int?`:
    integral and bool inputs sum to int64, a given dtype wins, None reduces every dimension;
    `reduce(self, dim, True)` over an `int` keeps it, as `promote_integers(self)` types it."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    x = (torch.randn(3, 4) * 4).to(dtype)
    for args, kwargs in [((x,), {}), ((x, 1), {}), ((x, -2, True), {}), ((x, None, True), {"dtype": torch.float64})]:
        out = ops.sum_over(*args, **kwargs)
        want = torch.sum(x, dim=args[1] if len(args) > 1 else None, keepdim=len(args) > 2 and args[2], **kwargs)
        assert out.dtype == want.dtype and out.shape == want.shape, (args, kwargs, out, want)
        torch.testing.assert_close(out, want)
        opcheck(ops.sum_over, args, kwargs)
    if dtype != torch.bool:
        out = ops.sum_kept(x, -1)
        torch.testing.assert_close(out, torch.sum(x, -1, keepdim=True))
        opcheck(ops.sum_kept, (x, 0))
    for f, args, expected in [
            (ops.sum_over, lambda: (torch.ones(3, 4), 2), "sharedlib::sum_over: argument 'dim' holds 2, out of range: "
                                                          "expected a dimension of 'self' in [-2, 1] ('self' has 2 "
                                                          "dimensions)"),
            (ops.sum_kept, lambda: (torch.ones(3), -2), "sharedlib::sum_kept: argument 'dim' holds -2, out of range")]:
        for mode in (None, FakeTensorMode()):  # the real and the fake kernel
            with mode or torch.no_grad(), pytest.raises(RuntimeError) as e:
                f(*args())
            assert str(e.value).startswith(expected), str(e.value)
    g = torch.compile(lambda t: ops.sum_over(t, 0, True) + ops.sum_kept(t, 0), fullgraph=True, dynamic=True)
    y = torch.randn(5, 2)
    torch.testing.assert_close(g(y), 2 * torch.sum(y, 0, keepdim=True))
