"""Tensors that break an op's contract, for every declared op and dtype (derived from the
declarations by codegen.testing.misuse_cases): each call raises a RuntimeError naming the op
and the argument, or, where the call is valid (zero-size, non-contiguous and expanded inputs),
gives the reference's result.  Nothing crashes; the sanitizer build (make test-asan) runs
these too."""

import pytest
import torch

import opwrap  # noqa: F401  (loads the library)
from codegen import testing
from conftest import ROOT
from references import PREPARE, REFERENCES

DECLS = [d for d in testing.declared_ops(ROOT) if d.kernels]


def cases():
    out = []
    for d in DECLS:
        for dt in d.dtypes:
            for m in testing.misuse_cases(d, testing.torch_dtype(dt), prepare=PREPARE.get(d.op_name)):
                out.append(pytest.param(d, m, id=f"{d.op_name}-{dt.name}-{m.case}"))
    return out


@pytest.mark.parametrize("decl, misuse", cases())
def test_misuse(decl, misuse):
    op = getattr(getattr(torch.ops.opwrap, decl.name), decl.overload or "default")
    testing.check_misuse(decl, op, misuse, REFERENCES[decl.op_name], "opwrap")


def test_every_kind_of_misuse_is_generated():
    generated = " | ".join(m.case for d in DECLS for m in
                           testing.misuse_cases(d, testing.torch_dtype(d.dtypes[0]), prepare=PREPARE.get(d.op_name)))
    for kind in ("as torch.complex64", "on meta", "of rank", "with size", "not broadcastable", "zero-size", "= 0",
                 "non-contiguous", "expanded inputs", "self expanded", "self overlapping vec", "expanded to 2**40 rows",
                 "expanded by 2**40", "size = [2**62, 2**62]"):
        assert kind in generated, kind
