"""Tensors that break an op's contract, for every declared op and dtype (derived from the
declarations by opwrap_codegen.testing.misuse_cases): each call raises a RuntimeError naming the op
and the argument, or, where the call is valid (zero-size, non-contiguous and expanded inputs),
gives the reference's result; a spy on the op (testing.LayoutSpy) checks that non-contiguous
and expanded inputs reach it so.  Every combination of an op's dtype variables is a case.
Nothing crashes; the sanitizer build (make test-asan) runs these too."""

import pytest
import torch

import opwrap  # noqa: F401  (loads the library)
from opwrap_codegen import testing
from conftest import ROOT
from references import PREPARE, REFERENCES

DECLS = [d for d in testing.declared_ops(ROOT) if d.devices]


def cases():
    out = []
    for d in DECLS:
        for combo in testing.dtype_combinations(d):  # every combination of the op's dtype variables
            dt = next(iter(combo.values()))
            for m in testing.misuse_cases(d, testing.torch_dtype(dt), prepare=PREPARE.get(d.op_name), dtypes=combo):
                out.append(pytest.param(d, m, id=f"{testing.case_id(d, combo)}-{m.case}"))
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


def _layout_case(op_name, case):
    decl = next(d for d in DECLS if d.op_name == op_name)
    misuse = next(m for m in testing.misuse_cases(decl, testing.torch_dtype(decl.dtypes[0]),
                                                  prepare=PREPARE.get(op_name)) if m.case == case)
    return decl, misuse


def _contiguous_clone(self):
    """SampleInput.clone as it was: every gapped or expanded tensor made contiguous."""
    c = lambda v: v.detach().clone().requires_grad_(v.requires_grad) if isinstance(v, torch.Tensor) else v  # noqa: E731
    return testing.SampleInput(tuple(c(a) for a in self.args), {k: c(v) for k, v in self.kwargs.items()}, self.name)


@pytest.mark.parametrize("op_name, case", [("linear", "non-contiguous"), ("linear", "expanded inputs"),
                                           ("myadd", "non-contiguous"), ("addmv_", "expanded inputs")])
def test_layout_cases_reach_the_op_with_their_strides(monkeypatch, op_name, case):
    """The spy on the op sees the layout the case is for; with the old clone (contiguous
    copies) the same check fails, naming the argument and its strides."""
    decl, misuse = _layout_case(op_name, case)
    op = getattr(getattr(torch.ops.opwrap, decl.name), decl.overload or "default")
    with testing.LayoutSpy(decl) as spy:
        testing.call(op, misuse.sample.clone())
    (received,) = spy.calls
    written = {a.name for a in decl.schema.arguments if a.is_write}
    for name, value in testing.bind(decl, misuse.sample).items():
        if isinstance(value, torch.Tensor) and value.numel() > 1 and name not in written:
            size, stride, _ = received[name]
            assert (0 in stride) if case == "expanded inputs" else not value.is_contiguous(), (name, stride)
    testing.check_misuse(decl, op, misuse, REFERENCES[decl.op_name], "opwrap")
    monkeypatch.setattr(testing.SampleInput, "clone", _contiguous_clone)
    with pytest.raises(AssertionError, match=r"reached the op with \(sizes, strides, offset\)"):
        testing.check_misuse(decl, op, misuse, REFERENCES[decl.op_name], "opwrap")


def test_a_layout_case_that_arrives_contiguous_fails():
    """The case's intent is checked on what reaches the op: a "non-contiguous" case whose
    tensors are contiguous fails even though the sample's layout is kept."""
    decl, misuse = _layout_case("linear", "non-contiguous")
    op = torch.ops.opwrap.linear.default
    plain = testing.SampleInput(tuple(a.contiguous() if isinstance(a, torch.Tensor) else a for a in misuse.sample.args),
                                {k: v.contiguous() for k, v in misuse.sample.kwargs.items()}, misuse.sample.name)
    with pytest.raises(AssertionError, match="contiguous in a non-contiguous case"):
        testing.check_misuse(decl, op, testing.Misuse(misuse.case, plain, None, misuse.layout),
                             REFERENCES["linear"], "opwrap")


def test_clone_keeps_strides_and_shared_memory():
    base = torch.arange(12.0)
    gapped, expanded = base[::2].view(2, 3), base[:1].expand(4, 5)
    a, b = base[:6], base[5:]  # overlapping views of one buffer
    copy = testing.SampleInput((gapped, expanded, a, b), {"t": base.view(3, 4).t()}).clone()
    for x, y in zip((gapped, expanded, a, b, base.view(3, 4).t()), (*copy.args, copy.kwargs["t"])):
        assert (y.shape, y.stride(), y.storage_offset()) == (x.shape, x.stride(), x.storage_offset())
        assert torch.equal(x, y) and y.data_ptr() != x.data_ptr()
    copy.args[2][5] = -1.0
    assert copy.args[3][0] == -1.0 and base[5] == 5.0  # the copies share memory as the originals do
    moved = testing.SampleInput((gapped, expanded)).clone("meta")  # to another device (sample_inputs(device=))
    assert [(t.device.type, t.stride()) for t in moved.args] == [("meta", (6, 2)), ("meta", (0, 0))]
