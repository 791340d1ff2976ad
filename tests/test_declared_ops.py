"""Per-op tests collected from the declarations: for every op and declared dtype, the
results against an eager reference, torch.library.opcheck with and without requires_grad,
and gradcheck / gradgradcheck in float64 for ops with derivatives.  Adding a declaration
adds its tests; an op without a reference fails here."""

import pytest
import torch

import opwrap  # noqa: F401  (loads the library)
from codegen import testing
from conftest import ROOT
from references import PREPARE, REFERENCES

DECLS = [d for d in testing.declared_ops(ROOT) if d.kernels]  # ops with kernels (not class-method ops)


def op_of(decl):
    return getattr(getattr(torch.ops.opwrap, decl.name), decl.overload or "default")


def cases(filter=lambda decl, dtype: True):
    return [pytest.param(d, dt, id=f"{d.op_name}-{dt.name}") for d in DECLS for dt in d.dtypes if filter(d, dt)]


def samples(decl, dtype, requires_grad=False):
    return testing.sample_inputs(decl, testing.torch_dtype(dtype), requires_grad=requires_grad,
                                 prepare=PREPARE.get(decl.op_name))


def test_every_op_has_a_reference():
    assert sorted(REFERENCES) == sorted(d.op_name for d in DECLS)


@pytest.mark.parametrize("decl, dtype", cases())
def test_matches_reference(decl, dtype):
    for sample in samples(decl, dtype):
        testing.check_reference(decl, op_of(decl), sample, REFERENCES[decl.op_name])


@pytest.mark.parametrize("decl, dtype", cases())
def test_opcheck(decl, dtype):
    for sample in samples(decl, dtype):
        testing.check_opcheck(op_of(decl), sample)


@pytest.mark.parametrize("decl, dtype", cases(lambda d, dt: dt.differentiable and testing.differentiable_inputs(d)))
def test_opcheck_requires_grad(decl, dtype):
    for sample in samples(decl, dtype, requires_grad=True):
        testing.check_opcheck(op_of(decl), sample)


@pytest.mark.parametrize("decl, dtype", cases(lambda d, dt: dt.name == "float64" and testing.differentiable_inputs(d)))
def test_gradients(decl, dtype):
    for sample in samples(decl, dtype, requires_grad=True):
        testing.check_gradients(decl, op_of(decl), sample)


def test_every_op_is_tagged_pt2_compliant():
    for d in DECLS:
        assert torch.Tag.pt2_compliant_tag in op_of(d).tags, d.op_name


def test_a_wrong_result_dtype_fails_the_reference_check():
    """check_reference holds each result to its declared dtype: sincos giving float64 for
    float32 inputs, or a rule-following op whose fake kernel disagrees, fails, although the
    values match the reference."""
    decl = next(d for d in DECLS if d.op_name == "sincos")
    (sample,) = samples(decl, next(dt for dt in decl.dtypes if dt.name == "float32"))[:1]
    testing.check_reference(decl, op_of(decl), sample, REFERENCES["sincos"])
    as_float64 = lambda *a, **k: tuple(r.double() for r in op_of(decl)(*a, **k))  # noqa: E731
    with pytest.raises(AssertionError, match=r"result dtype torch.float64, but its dtype rule gives torch.float32"):
        testing.check_reference(decl, as_float64, sample, REFERENCES["sincos"])
    counts = next(d for d in DECLS if d.op_name == "bucketize_count")  # indices: int64 by the rule `dtype:`
    assert testing.expected_dtypes(counts, samples(counts, counts.dtypes[0])[0]) == [torch.int64, torch.int64]
