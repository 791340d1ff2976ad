"""Per-op tests collected from the declarations: for every op and declared dtype, the
results against an eager reference, torch.library.opcheck with and without requires_grad,
and gradcheck / gradgradcheck in float64 for ops with derivatives.  Adding a declaration
adds its tests; an op without a reference fails here."""

import pytest
import torch

import opwrap  # noqa: F401  (loads the library)
from opwrap_codegen import testing
from conftest import ROOT
from references import PREPARE, REFERENCES

DECLS = [d for d in testing.declared_ops(ROOT) if d.devices]  # ops with kernels (not class-method ops)


def op_of(decl):
    return getattr(getattr(torch.ops.opwrap, decl.name), decl.overload or "default")


def cases(filter=lambda decl, dtype: True, gradients=False):
    """(decl, primary DType, the other variables' DTypes) for every combination of the op's
    dtype variables (opwrap_codegen.testing.dtype_combinations); `gradients`: those gradcheck fits."""
    out = []
    for d in DECLS:
        for combo in testing.dtype_combinations(d):
            dt = next(iter(combo.values()))
            if filter(d, dt) and (not gradients or testing.for_gradients(d, combo)):
                out.append(pytest.param(d, dt, combo, id=testing.case_id(d, combo)))
    return out


def samples(decl, dtype, requires_grad=False, dtypes=None):
    return testing.sample_inputs(decl, testing.torch_dtype(dtype), requires_grad=requires_grad,
                                 prepare=PREPARE.get(decl.op_name), dtypes=dtypes)


def test_every_op_has_a_reference():
    assert sorted(REFERENCES) == sorted(d.op_name for d in DECLS)


@pytest.mark.parametrize("decl, dtype, dtypes", cases())
def test_matches_reference(decl, dtype, dtypes):
    for sample in samples(decl, dtype, dtypes=dtypes):
        testing.check_reference(decl, op_of(decl), sample, REFERENCES[decl.op_name])


@pytest.mark.parametrize("decl, dtype, dtypes", cases())
def test_opcheck(decl, dtype, dtypes):
    for sample in samples(decl, dtype, dtypes=dtypes):
        testing.check_opcheck(op_of(decl), sample)


@pytest.mark.parametrize("decl, dtype, dtypes", cases(lambda d, dt: dt.differentiable and testing.differentiable_inputs(d)))
def test_opcheck_requires_grad(decl, dtype, dtypes):
    for sample in samples(decl, dtype, requires_grad=True, dtypes=dtypes):
        testing.check_opcheck(op_of(decl), sample)


@pytest.mark.parametrize("decl, dtype, dtypes", cases(lambda d, dt: testing.differentiable_inputs(d), gradients=True))
def test_gradients(decl, dtype, dtypes):
    for sample in samples(decl, dtype, requires_grad=True, dtypes=dtypes):
        testing.check_gradients(decl, op_of(decl), sample)


def test_every_op_is_tagged_pt2_compliant():
    for d in DECLS:
        assert torch.Tag.pt2_compliant_tag in op_of(d).tags, d.op_name


def test_a_wrong_result_dtype_fails_the_reference_check():
    """check_reference holds each result to its declared dtype: sincos giving float64 for
    float32 inputs fails, although the values match the reference."""
    decl = next(d for d in DECLS if d.op_name == "sincos")
    (sample,) = samples(decl, next(dt for dt in decl.dtypes if dt.name == "float32"))[:1]
    testing.check_reference(decl, op_of(decl), sample, REFERENCES["sincos"])
    as_float64 = lambda *a, **k: tuple(r.double() for r in op_of(decl)(*a, **k))  # noqa: E731
    with pytest.raises(AssertionError, match=r"result dtype torch.float64, but its dtype rule gives torch.float32"):
        testing.check_reference(decl, as_float64, sample, REFERENCES["sincos"])
    counts = next(d for d in DECLS if d.op_name == "bucketize_count")  # indices: int64 by the rule `dtype:`
    assert testing.expected_dtypes(counts, samples(counts, counts.dtypes[0])[0]) == [torch.int64, torch.int64]


# ------------------------------------------------------------------ samples for the declaration features
# Declarations only (nothing is built): what opwrap_codegen.testing makes of per-argument dtypes,
# index bounds, ScalarType arguments, out= overloads, Tensor[] and Generator? arguments.
FEATURES = """\
- func: ebag(Tensor weight, Tensor indices, Tensor offsets) -> Tensor
  dtypes: {weight: floating, indices: [int32, int64], offsets: indices}
  kernels: {CPU: ebag_cpu}
  shape: {weight: [V, D], indices: [L], offsets: [B], result: [B, D]}
  index: {indices: weight.size(0), offsets: [0, "indices.size(0) + 1"]}
- func: to_dtype(Tensor self, ScalarType dtype) -> Tensor
  dtypes: {self: floating, result: [float32, float64, int64]}
  kernels: {CPU: to_dtype_cpu}
  dtype: {result: dtype}
  shape: {self: ['*B'], result: ['*B']}
- func: scale(Tensor self, Tensor other) -> Tensor
  dtypes: [float32, int64]
  kernels: {CPU: scale_cpu}
  shape: {self: [N, M], other: [N, M], result: [N, M]}
- func: scale.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)
- func: cat_rows(Tensor[] tensors) -> Tensor
  dtypes: [float32, float64]
  kernels: {CPU: cat_rows_cpu}
  shape: {tensors: [_, D], result: ["sum(t.size(0) for t in tensors)", D]}
- func: pairs(Tensor x, int heads) -> Tensor
  dtypes: [float32]
  kernels: {CPU: pairs_cpu}
  shape: {x: [N, "2 * heads * H"], result: [N, H]}
- func: dropout_like(Tensor self, float p=0.5, Generator? generator=None) -> Tensor
  dtypes: [float32]
  kernels: {CPU: dropout_like_cpu}
  like: self
"""


@pytest.fixture(scope="module")
def features(tmp_path_factory):
    root = tmp_path_factory.mktemp("features")
    (root / "declarations").mkdir()
    (root / "kernels").mkdir()
    (root / "pyproject.toml").write_text('[tool.codegen]\nnamespace = "features"\nkernels = "kernels"\n')
    (root / "declarations" / "ops.yaml").write_text(FEATURES)
    for name in ("ebag", "to_dtype", "scale", "cat_rows", "pairs", "dropout_like"):
        (root / "kernels" / f"{name}.h").write_text("")
    return {d.op_name: d for d in testing.declared_ops(root)}


def test_samples_give_each_dtype_variable_its_dtype_and_index_values_in_bounds(features):
    ebag = features["ebag"]
    combos = testing.dtype_combinations(ebag)
    assert [{v: d.name for v, d in c.items()} for c in combos][:2] == [
        {"scalar_t": "float32", "indices_t": "int32"}, {"scalar_t": "float32", "indices_t": "int64"}]
    assert len(combos) == 4 * 2 and testing.case_id(ebag, combos[1]) == "ebag-float32-indices_t=int64"
    for combo in combos:
        weight_dtype, index_dtype = (testing.torch_dtype(d) for d in combo.values())
        for seed in range(5):
            for s in testing.sample_inputs(ebag, weight_dtype, dtypes=combo, seed=seed):
                weight, indices, offsets = s.args
                assert (weight.dtype, indices.dtype, offsets.dtype) == (weight_dtype, index_dtype, index_dtype)
                assert indices.numel() and 0 <= indices.min() and indices.max() < weight.size(0)
                assert 0 <= offsets.min() and offsets.max() <= indices.size(0)
    # the primary dtype alone still works: the other variables take their first dtype
    (s,) = testing.sample_inputs(ebag, torch.float64)
    assert [a.dtype for a in s.args] == [torch.float64, torch.int32, torch.int32]


def test_misuse_cases_follow_dtype_variables_and_index_bounds(features):
    ebag = features["ebag"]
    cases = {m.case: m for m in testing.misuse_cases(ebag, torch.float32)}
    # indices may be int32 or int64: the wrong dtype is one its variable does not list
    assert "indices as torch.complex64" in cases and cases["indices as torch.complex64"].names == ("indices",)
    high = [c for c in cases if c.startswith("indices holding ")]
    assert len(high) == 2 and all(cases[c].names == ("indices",) for c in high)
    weight, indices, _ = cases[high[0]].sample.args
    assert indices.max() == weight.size(0) and cases[high[1]].sample.args[1].min() == -1
    # an empty weight leaves no valid index for the non-empty indices: no such case
    assert "L = 0" in cases and "V = 0" not in cases
    pairs = {m.case: m.names for m in testing.misuse_cases(features["pairs"], torch.float32)}
    assert "x with size 1 at dimension 1" not in pairs and not [c for c in pairs if c.startswith("x with size")]
    assert "heads = 2**62" not in pairs  # x would need 2**63 columns
    to_dtype = features["to_dtype"]
    bad = {m.case: m for m in testing.misuse_cases(to_dtype, torch.float32)}["dtype = torch.complex64"]
    assert bad.names == ("dtype", "result") and bad.sample.args[1] is torch.complex64


def test_scalar_type_arguments_take_a_dtype_the_return_may_have(features):
    to_dtype = features["to_dtype"]
    seen = set()
    for combo in testing.dtype_combinations(to_dtype):
        (s,) = testing.sample_inputs(to_dtype, testing.torch_dtype(combo["scalar_t"]), dtypes=combo)
        assert s.args[1] == testing.torch_dtype(combo["result_t"])
        assert testing.expected_dtypes(to_dtype, s) == [s.args[1]]
        seen.add(s.args[1])
    assert seen == {torch.float32, torch.float64, torch.int64}


def test_out_samples_are_right_empty_and_wrong_sized(features):
    out_op = features["scale.out"]
    assert [a.name for a in out_op.out_arguments] == ["out"]
    samples_ = {s.name: s for s in testing.sample_inputs(out_op, torch.int64)}
    assert list(samples_) == ["defaults", "out_empty", "out_wrong_size"]
    for name, s in samples_.items():
        self, other = s.args
        out = s.kwargs["out"]
        assert out.dtype == torch.int64
        if name == "defaults":
            assert out.shape == self.shape
        elif name == "out_empty":
            assert out.numel() == 0
        else:
            assert out.numel() and out.shape != self.shape
    cases = {m.case: m.names for m in testing.misuse_cases(out_op, torch.float32)}
    assert cases["out as torch.bool"] == ("out",)  # float32 cannot be cast to it
    assert not [c for c in cases if c.startswith("out of rank") or c.startswith("out with size")]  # resized
    assert cases["out expanded"] == ("out",) and cases["out overlapping self"] == ("out",)


def test_tensor_list_and_generator_samples(features):
    rows = set()
    for seed in range(6):
        for s in testing.sample_inputs(features["cat_rows"], torch.float64, seed=seed):
            (tensors,) = s.args
            assert isinstance(tensors, list) and 1 <= len(tensors) <= 3
            assert all(t.dtype == torch.float64 and t.dim() == 2 and t.size(1) == tensors[0].size(1) for t in tensors)
            rows |= {t.size(0) for t in tensors}
    assert len(rows) > 1  # `_`: each element its own size
    for seed in range(4):  # a dimension binding H through 2 * heads * H
        for s in testing.sample_inputs(features["pairs"], torch.float32, seed=seed):
            x, heads = s.args
            assert x.size(1) % (2 * heads) == 0 and x.size(1) > 0
    drop = features["dropout_like"]
    defaults, given = testing.sample_inputs(drop, torch.float32)
    assert defaults.args[1:] == () and not defaults.kwargs  # generator=None: the default
    g = given.args[2]
    assert isinstance(g, torch.Generator)
    a, b = given.clone(), given.clone()  # each copy draws what the original would
    assert torch.equal(torch.rand(4, generator=a.args[2]), torch.rand(4, generator=b.args[2]))
    assert g.get_state().equal(given.args[2].get_state())


@pytest.mark.parametrize("decl", DECLS, ids=lambda d: d.op_name)
def test_device_comparison_covers_returns_lists_and_written_arguments(decl):
    """testing.check_same_as_cpu, which `make gpu-test` runs for every op on CUDA, run here with
    the CPU as the other device: every sample goes through it (Tensor[] arguments and returns,
    ops that return nothing and are compared by what they write), and it finds a difference."""
    dtype = testing.torch_dtype(decl.dtypes[0])
    for sample in testing.sample_inputs(decl, dtype, prepare=PREPARE.get(decl.op_name)):
        testing.check_same_as_cpu(decl, op_of(decl), sample, "cpu")
    if decl.op_name == "reshape_and_cache":  # returns nothing: a wrong write on the other device shows
        calls = []

        def miswritten(*args, **kwargs):
            op_of(decl)(*args, **kwargs)
            calls.append(1)
            if len(calls) == 2:
                args[2].add_(1)

        sample = testing.sample_inputs(decl, dtype, prepare=PREPARE.get(decl.op_name))[0]
        with pytest.raises(AssertionError, match=r"argument 'key_cache', differs from CPU"):
            testing.check_same_as_cpu(decl, miswritten, sample, "cpu")
