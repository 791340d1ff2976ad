"""TorchBind classes from declarations: seed 000's TensorQueue examples, as tests."""

import copy
import io

import pytest
import torch

import opwrap

TensorQueue = torch.classes.opwrap.TensorQueue


def empty_tensor_queue():
    return TensorQueue(torch.empty(0).fill_(-1))


class Mod(torch.nn.Module):
    """The seed's module without its `assert torch.allclose(poped_t, x.sin())`: on torch 2.14
    both dynamo (fullgraph) and non-strict export refuse a data-dependent Python bool
    (DataDependentOutputException on aten.allclose), which has nothing to do with the class.
    The tests check that value instead."""

    def forward(self, tq, x):
        tq.push(x.sin())
        tq.push(x.cos())
        return tq, tq.pop()


def test_methods_run_in_eager():
    tq = empty_tensor_queue()
    assert tq.size() == 0 and torch.equal(tq.pop(), torch.empty(0))  # the init tensor
    tq.push(torch.ones(2))
    tq.push(torch.zeros(2))
    assert tq.size() == 2 and torch.equal(tq.top(), torch.ones(2))
    clone = tq.clone_queue()
    opwrap.ops.for_each_add_(tq, torch.ones(2))
    assert [t.tolist() for t in tq.get_raw_queue()] == [[2.0, 2.0], [1.0, 1.0]]
    assert [t.tolist() for t in clone.get_raw_queue()] == [[1.0, 1.0], [0.0, 0.0]]  # a deep copy
    names, values = zip(*tq.__obj_flatten__())
    assert names == ("queue", "init_tensor_") and len(values[0]) == 2


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_compile_fullgraph(backend):
    torch._dynamo.reset()
    tq = empty_tensor_queue()
    x = torch.randn(2, 3)
    tq, poped = torch.compile(Mod(), backend=backend, fullgraph=True)(tq, x)
    assert tq.size() == 1
    torch.testing.assert_close(poped, x.sin())
    torch.testing.assert_close(tq.top(), x.cos())


def test_export_and_run():
    tq = empty_tensor_queue()
    ep = torch.export.export(Mod(), (tq, torch.randn(2, 3)), strict=False)
    x = torch.randn(2, 3)
    out_tq, poped = ep.module()(tq, x)
    torch.testing.assert_close(poped, x.sin())
    assert out_tq.size() == 1


class ForEachAdd(torch.nn.Module):
    def forward(self, tq: torch.ScriptObject, a: torch.Tensor) -> torch.ScriptObject:
        torch.ops.opwrap.for_each_add_(tq, a)
        return tq


def test_export_keeps_the_effectful_op():
    tq = empty_tensor_queue()
    qlen = 10
    for _ in range(qlen):
        tq.push(torch.zeros(1))
    ep = torch.export.export(ForEachAdd(), (tq, torch.ones(1)), strict=False)
    calls = [n for n in ep.graph.nodes if n.op == "call_function"]
    assert any("for_each_add_" in str(n.target) or "for_each_add_" in str(n.args) for n in calls), ep.graph
    output_tq = ep.module()(tq, torch.ones(1))
    assert output_tq.size() == qlen
    torch.testing.assert_close(output_tq.top(), torch.ones(1))


class Holder(torch.nn.Module):
    def __init__(self, tq):
        super().__init__()
        self.tq = tq


def test_pickle_round_trip_keeps_the_contents():
    tq = empty_tensor_queue()
    tq.push(torch.arange(3.0))
    tq.push(torch.ones(2))
    copied = copy.deepcopy(tq)
    assert [t.tolist() for t in copied.get_raw_queue()] == [[0.0, 1.0, 2.0], [1.0, 1.0]]
    buf = io.BytesIO()
    torch.save(Holder(tq), buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=False).tq
    assert loaded.size() == 2 and torch.equal(loaded.top(), torch.arange(3.0))
    assert torch.equal(loaded.pop(), torch.arange(3.0)) and torch.equal(loaded.pop(), torch.ones(2))


def test_declared_methods_match_the_cpp_class_and_all_have_fakes():
    from opwrap_codegen.core.config import load_config
    from opwrap_codegen.pipeline.passes import generate
    from conftest import ROOT

    (decl,) = generate(load_config(ROOT)).library.classes
    tq = empty_tensor_queue()
    special = {"__init__", "__obj_flatten__", "__getstate__", "__setstate__"}
    assert set(tq._method_names()) - special == {m.name for m in decl.methods}
    fake = torch._library.fake_class_registry.find_fake_class("__torch__.torch.classes.opwrap.TensorQueue")
    for m in decl.methods:
        cpp = tq._get_method(m.name).schema
        declared = torch._C.parse_schema(str(m.schema))  # the same type printer on both sides
        assert [str(a.type) for a in cpp.arguments[1:]] == [str(a.type) for a in declared.arguments], m.name
        want = [str(r.type) for r in declared.returns] or ["NoneType"]
        assert [str(r.type) for r in cpp.returns] == want, m.name
        assert callable(getattr(fake, m.name)), m.name


def test_errors_from_a_method_op_name_the_op():
    tq = empty_tensor_queue()
    tq.push(torch.ones(3))
    with pytest.raises(RuntimeError, match=r"(?s)must match the size.*opwrap::for_each_add_: while calling the "
                                           r"for_each_add_ method of 'foo'"):
        torch.ops.opwrap.for_each_add_(tq, torch.ones(4))
    assert torch.equal(tq.pop(), torch.ones(3))  # nothing was changed
