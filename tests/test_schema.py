"""opwrap_codegen.schema against torch's own parser: every registered schema, thousands of
mutations of them, and hand-written cases for each feature of the language."""

import random
import re

import pytest
import torch

from opwrap_codegen.schema import (Argument, BaseType, FunctionSchema, ListType, OptionalType,
                            SchemaError)

CORPUS = sorted({str(s) for s in torch._C._jit_get_all_schemas()})


def _norm(text):
    # Alias sets like (a|b) are an unordered set in torch; it prints them in hash order.
    return re.sub(r"\(([\w*$]+(?:\|[\w*$]+)+)", lambda m: "(" + "|".join(sorted(m.group(1).split("|"))), text)


def _torch(text):
    try:
        return str(torch._C.parse_schema(text))
    except (RuntimeError, ValueError) as e:  # ValueError: torch's std::stoll on a huge number
        if "Unknown custom class" in str(e) or "Unknown builtin op" in str(e):
            return "UNKNOWN-CLASS"
        return None


def _ours(text):
    try:
        return str(FunctionSchema.parse(text))
    except SchemaError:
        return None


def test_corpus_is_large():
    assert len(CORPUS) > 2000


def test_every_registered_schema_round_trips_like_torch():
    mismatches = []
    for text in CORPUS:
        ref = _torch(text)
        if ref in (None, "UNKNOWN-CLASS"):
            continue
        mine = _ours(text)
        if mine is None or _norm(mine) != _norm(ref):
            mismatches.append((text, ref, mine))
    assert not mismatches, mismatches[:5]


def test_canonical_text_is_a_fixed_point():
    for text in CORPUS[::7]:
        once = _ours(text)
        if once is not None:
            assert _ours(once) == once


def test_mutated_schemas_agree_with_torch():
    """Random edits of real schemas: torch and we accept and reject the same texts, and
    print the accepted ones identically.  (Class types are not checked: torch requires
    the class to be registered in the process, we accept any well-formed class name.)
    The corpus is every schema this process has registered, so which edits are drawn depends
    on the torch release and on the libraries loaded before: the agreement must hold for any.
    Printing is compared where torch reads its own text back: its printer writes a string
    default of another type unquoted (`Scalar alpha="x"` -> `alpha=x`, which it then refuses)
    and `Scalar??` as `Union(Scalar)?` (read back as `Scalar?`)."""
    rng = random.Random(1234)
    pieces = ["(", ")", "[", "]", ",", "?", "!", "*", "=", ".", "::", "->", "...", "Tensor", "int", "1",
              "1.5", "None", '"x"', "a", "|", " ", "-", "[2]", "(a!)", "in"]
    checked = 0
    for _ in range(6000):
        s = rng.choice(CORPUS)
        k = rng.randrange(len(s) + 1)
        op = rng.randrange(3)
        m = s[:k] + s[k + 1:] if op == 0 else s[:k] + rng.choice(pieces) + s[k + (op == 2):]
        if "__torch__" in m:
            continue
        ref = _torch(m)
        if ref == "UNKNOWN-CLASS":
            continue
        mine = _ours(m)
        assert (ref is None) == (mine is None), (m, ref, mine)
        if ref is not None and _norm(_torch(ref) or "") == _norm(ref):
            assert _norm(mine) == _norm(ref), m
        checked += 1
    assert checked > 5000


@pytest.mark.parametrize("text", [
    "myadd(Tensor self, Tensor other) -> Tensor",
    "add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)",
    "addmv_(Tensor(a!) self, Tensor mat, Tensor vec, *, Scalar beta=1, Scalar alpha=1) -> Tensor(a!)",
    "f(Tensor[] xs, Tensor?[] ys, int[2] stride=1, int[1] d=[0], SymInt[] s, float eps=1e-6, bool b=True) -> ()",
    "f(str mode=\"mean\", ScalarType? dtype=None, Layout? layout=None, Device? device=None, MemoryFormat? m=None) -> Tensor",
    "f(Tensor self) -> (Tensor values, Tensor indices)",
    "f(Tensor(a) self) -> Tensor(a)",
    "f(Tensor(a -> *) self) -> Tensor(*)",
    "f(Tensor(a!)[] out) -> ()",
    "f(__torch__.torch.classes.opwrap.TensorQueue foo, Tensor inc) -> ()",
    "f(int[]? size=None, complex c=1j) -> ((int, int))",
])
def test_hand_written_cases_match_torch(text):
    ref = _torch(text)
    mine = _ours(text)
    if ref == "UNKNOWN-CLASS":
        assert mine == text
    else:
        assert mine == ref


def test_model_is_typed():
    s = FunctionSchema.parse("linear(Tensor input, Tensor weight, Tensor? bias=None, *, int[2] k=1) -> Tensor")
    assert s.name == "linear" and s.overload_name == ""
    assert s.arguments[2] == Argument("bias", OptionalType(BaseType("Tensor")), s.arguments[2].default)
    assert s.arguments[2].default.value is None
    assert s.arguments[3].kwarg_only and s.arguments[3].type == ListType(BaseType("int"), 2)
    assert s.arguments[3].default.value == (1, 1)
    inplace = FunctionSchema.parse("addmv_(Tensor(a!) self, Tensor mat) -> Tensor(a!)")
    assert inplace.is_inplace and inplace.arguments[0].is_write
    assert inplace.aliased_argument(inplace.returns[0]).name == "self"


@pytest.mark.parametrize("text, column, message", [
    ("myadd(Tensor self, Tensor other -> Tensor", 33, "expected ',' or ')'"),
    ("myadd(Tensr self) -> Tensor", 7, "unknown type 'Tensr'"),
    ("myadd(Tensor self) Tensor", 20, "expected '->'"),
    ("myadd(Tensor self=1) -> Tensor", 19, "expected None"),
    ("myadd(Tensor self, int a=1, int b) -> Tensor", 29, "non-default argument 'b'"),
    ("myadd.default(Tensor self) -> Tensor", 7, "not a legal overload name"),
    ("myadd(Tensor self) -> Tensor extra junk", 36, "expected end of schema"),
    ("myadd(int in) -> Tensor", 11, "expected an argument name"),
    ("myadd(str s=\"abc) -> Tensor", 13, "unterminated string"),
    ("myadd(Tensor(a self) -> Tensor", 16, "expected ')'"),
    ("", 1, "expected an operator name"),
])
def test_malformed_schemas_report_column_and_expectation(text, column, message):
    with pytest.raises(SchemaError) as e:
        FunctionSchema.parse(text)
    assert e.value.offset + 1 == column, str(e.value)
    assert message in e.value.message
