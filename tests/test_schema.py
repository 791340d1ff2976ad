"""opwrap_codegen.lang.schema against torch's own parser: every registered schema, thousands of
mutations of them and of generated schemas, and hand-written cases for each feature of the
language.  Agreement is checked on the model (name, overload, each argument's type, list size,
default value, kwarg-only flag and alias sets, each return's name, type and alias sets), not
only on the printed text.  Where torch accepts a schema but reads something other than what
is written (`complex c=1.5` is 1j, `int x=1E3` is 1, `Union(str, int)` is reordered), opwrap
refuses it with a located message instead: DELIBERATE lists those messages."""

import random
import re

import pytest
import torch

from opwrap_codegen.lang.schema import (Argument, BaseType, FunctionSchema, ListType, OptionalType,
                            SchemaError)

CORPUS = sorted({str(s) for s in torch._C._jit_get_all_schemas()})

# Messages of the schemas opwrap refuses although torch._C.parse_schema accepts them.
DELIBERATE = (
    "Union types are not supported",             # torch merges and reorders the members
    "'Scalar??' is not supported",               # torch makes it Union(float, complex, int)?
    "a complex default is an imaginary number",  # torch drops the last character: 1.5 is 1j
    "with a lower-case 'e'",                     # torch reads int x=1E3 as 1
    "hexadecimal numbers are not supported",     # torch reads int x=0x10 as 0, float x=0x10 as 16.
    "is not an ASCII character",                 # an octal escape above \177: not UTF-8 any more
    "is too large",                              # a list size beyond int32, a device index beyond int8
    "an element of a",                           # `int[0] x=1.5`: torch drops the value unchecked
)


def _norm(text):
    # Alias sets like (a|b) are an unordered set in torch; it prints them in hash order.
    return re.sub(r"\(([\w*$]+(?:\|[\w*$]+)+)", lambda m: "(" + "|".join(sorted(m.group(1).split("|"))), text)


def _torch(text):
    try:
        return str(torch._C.parse_schema(text))
    except (RuntimeError, ValueError, IndexError) as e:  # std::invalid_argument, std::out_of_range
        if "Unknown custom class" in str(e) or "Unknown builtin op" in str(e):
            return "UNKNOWN-CLASS"
        return None


def _ours(text):
    try:
        return str(FunctionSchema.parse(text))
    except SchemaError:
        return None


# The model, as comparable tuples: torch's FunctionSchema and ours --------------------------

_TORCH_LEAVES = {
    "TensorType": "Tensor", "IntType": "int", "SymIntType": "SymInt", "FloatType": "float", "ComplexType": "complex",
    "BoolType": "bool", "SymBoolType": "SymBool", "StringType": "str", "NumberType": "Scalar",
    "ScalarTypeType": "ScalarType", "LayoutType": "Layout", "MemoryFormatType": "MemoryFormat",
    "DeviceObjType": "Device", "StreamObjType": "Stream", "GeneratorType": "Generator", "StorageType": "Storage",
    "QSchemeType": "QScheme", "QuantizerType": "Quantizer", "NoneType": "NoneType", "CapsuleType": "Capsule",
    "AnyType": "Any", "AnyClassType": "AnyClassType", "AnyEnumType": "AnyEnumType"}


def _torch_type(t):
    """A torch type in the schema language, as our types print (`str` of a SymInt is 'int')."""
    kind, inner = t.kind(), t.containedTypes()
    if kind in _TORCH_LEAVES:
        return _TORCH_LEAVES[kind]
    if kind in ("VarType", "ClassType"):
        return str(t)
    if kind == "ListType":
        return _torch_type(inner[0]) + "[]"
    if kind == "OptionalType":
        return _torch_type(inner[0]) + "?"
    if kind == "TupleType":
        return "(" + ", ".join(map(_torch_type, inner)) + ")"
    return kind[:-len("Type")] + "(" + ", ".join(map(_torch_type, inner)) + ")"  # Dict, Future, ...


def _torch_value(v):
    if isinstance(v, (list, tuple)):
        return ("list", tuple(_torch_value(x) for x in v))
    if isinstance(v, torch.device):
        return ("device", str(v))
    return (type(v).__name__, v)


def _our_value(v, kind):
    if kind == "list":
        return ("list", tuple(_our_value(x, "") for x in v))
    if kind == "device":
        return ("device", v)
    return (type(v).__name__, v)


def _alias(before, after, is_write):
    return (frozenset(before), frozenset(after), is_write)


def torch_model(text):
    s = torch._C.parse_schema(text)
    args = tuple((a.name, _torch_type(a.real_type), a.N,
                  _torch_value(a.default_value) if a.has_default_value() else None, a.kwarg_only,
                  a.alias_info and _alias(a.alias_info.before_set, a.alias_info.after_set, a.alias_info.is_write))
                 for a in s.arguments)
    rets = tuple((r.name, _torch_type(r.real_type),
                  r.alias_info and _alias(r.alias_info.before_set, r.alias_info.after_set, r.alias_info.is_write))
                 for r in s.returns)
    return s.name, s.overload_name, args, rets


def our_model(text):
    s = FunctionSchema.parse(text)

    def size(t):
        t = t.elem if isinstance(t, OptionalType) else t
        return t.size if isinstance(t, ListType) else None

    args = tuple((a.name, str(a.type), size(a.type), a.default and _our_value(a.default.value, a.default.kind),
                  a.kwarg_only, a.alias and _alias(a.alias.before, a.alias.after, a.alias.is_write))
                 for a in s.arguments)
    rets = tuple((r.name or "", str(r.type), r.alias and _alias(r.alias.before, r.alias.after, r.alias.is_write))
                 for r in s.returns)
    return s.name, s.overload_name, args, rets


def compare(text):
    """'same' (both accept, same model), 'rejected' (both refuse), 'deliberate' (torch accepts,
    opwrap refuses on purpose), 'class' (torch knows no such custom class), or a mismatch."""
    try:
        ref = torch_model(text)
    except (RuntimeError, ValueError, IndexError) as e:
        if "Unknown custom class" in str(e) or "Unknown builtin op" in str(e):
            return "class"
        ref = None
    try:
        mine = our_model(text)
    except SchemaError as e:
        if ref is None:
            return "rejected"
        if any(m in e.message for m in DELIBERATE):
            return "deliberate"
        return f"MISMATCH: torch accepts {text!r} ({ref}), we refuse it: {e.message}"
    if ref is None:
        return f"MISMATCH: we accept {text!r} ({mine}), torch refuses it"
    return "same" if mine == ref else f"MISMATCH on {text!r}:\n  torch {ref}\n  ours  {mine}"


def test_corpus_is_large():
    assert len(CORPUS) > 2000


def test_every_registered_schema_parses_to_torchs_model():
    # Which ops are registered depends on what the process imported (torch.distributed adds
    # `_dtensor::mesh_get_process_group(PyObject mesh, ...)`, which torch's parser refuses as
    # well: 'rejected' is agreement too).
    results = {text: compare(text) for text in CORPUS}
    assert {t: r for t, r in results.items() if r not in ("same", "class", "rejected")} == {}
    assert list(results.values()).count("same") > 2000


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
    """Random edits of real schemas: torch and we accept and reject the same texts (but for
    DELIBERATE refusals), read the accepted ones to the same model and print them
    identically.  (Class types are not checked: torch requires the class to be registered in
    the process, we accept any well-formed class name.)  The corpus is every schema this
    process has registered, so which edits are drawn depends on the torch release and on the
    libraries loaded before: the agreement must hold for any.  Printing is compared where
    torch reads its own text back: its printer writes a string default of another type
    unquoted (`Scalar alpha="x"` -> `alpha=x`, which it then refuses)."""
    rng = random.Random(1234)
    pieces = ["(", ")", "[", "]", ",", "?", "!", "*", "=", ".", "::", "->", "...", "Tensor", "int", "1",
              "1.5", "None", '"x"', "a", "|", " ", "-", "[2]", "(a!)", "in", "\n", "#", "1j", "1E3", "True",
              "Ellipsis", "NoneType", "\\", "float32", "[]", "=[1.5]"]
    checked, bad = 0, []
    for _ in range(6000):
        s = rng.choice(CORPUS)
        for _ in range(rng.choice((1, 1, 2))):
            k = rng.randrange(len(s) + 1)
            op = rng.randrange(3)
            s = s[:k] + s[k + 1:] if op == 0 else s[:k] + rng.choice(pieces) + s[k + (op == 2):]
        if "__torch__" in s:
            continue
        result = compare(s)
        if result == "class":
            continue
        if result not in ("same", "rejected", "deliberate"):
            bad.append(result)
        elif result == "same":
            ref = _torch(s)
            if _norm(_torch(ref) or "") == _norm(ref) and _norm(_ours(s)) != _norm(ref):
                bad.append(f"printed differently: {s!r}\n  torch {ref}\n  ours  {_ours(s)}")
        checked += 1
    assert bad == []
    assert checked > 5000


# Generated schemas: types, alias annotations and defaults drawn at random -------------------

_BASES = ["Tensor", "int", "SymInt", "float", "complex", "bool", "SymBool", "str", "Scalar", "ScalarType", "Layout",
          "MemoryFormat", "Device", "Generator", "Stream", "Storage", "Any", "t", "t.x", "NoneType", "None",
          "DeviceIndex", "Quantizer", "QScheme", "int.x", "Capsule"]
_ALIASES = ["", "", "", "(a)", "(a!)", "(a|b)", "(a -> *)", "(*)", "(b!)", "!", "(a|a)", "(*|*)", "(a|*)",
            "(a! -> a|b)", "(*|)", "(a -> b|*)", "(*|a)", "(a.b)"]
_VALUES = ["0", "1", "-1", "2", "1.5", "-2.5", "1e3", "1e-5", "2.", ".5", "1j", "-2j", "1.5j", "True", "False", "None",
           '"x"', "'y'", "long", "float", "complex", "float32", "int64", "strided", "Mean", "contiguous_format",
           "1e400", "1e-320", '"cpu"', '"cuda:1"', '"cuda:01"', '"bogus"', "9223372036854775807",
           "9223372036854775808", "-0", "0j", "1E3", "bar"]


def _generated_schema(rng):
    def typ(depth=0):
        r = rng.random()
        if depth < 2 and r < 0.08:
            return "(" + ", ".join(typ(depth + 1) for _ in range(rng.randint(1, 3))) + ")"
        if depth < 2 and r < 0.14:
            g = rng.choice(["Dict", "Future", "RRef", "Await"])
            if g == "Dict":
                key = rng.choice(["str", "int", "SymInt", "ScalarType", "Tensor", "bool", "float", "Device", "Scalar"])
                return f"Dict({key}, {typ(depth + 1)})" + rng.choice(["", "", "(a!)"])
            return f"{g}({typ(depth + 1)})"
        t = rng.choice(_BASES)
        if t == "Tensor" or rng.random() < 0.1:
            t += rng.choice(_ALIASES)
        for _ in range(rng.choice((0, 0, 0, 1, 1, 2))):
            t += rng.choice(["[]", "?", "[]" + rng.choice(_ALIASES)])
        return t

    def default():
        if rng.random() < 0.3:
            return "[" + ", ".join(rng.choice(_VALUES) for _ in range(rng.randint(0, 3))) + "]"
        return rng.choice(_VALUES)

    args = []
    for i in range(rng.randint(0, 4)):
        t = typ()
        if rng.random() < 0.25:
            t += f"[{rng.choice((0, 1, 2, 3))}]" + rng.choice(["", "", "?", "(a!)"])
        args.append(f"{t} a{i}" + ("=" + default() if rng.random() < 0.4 else ""))
    if args and rng.random() < 0.3:
        args.insert(rng.randint(0, len(args)), "*")
    rets = [typ() + rng.choice(["", "", " r"]) for _ in range(rng.randint(0, 3))]
    ret = rets[0] if len(rets) == 1 and rng.random() < 0.5 else "(" + ", ".join(rets) + ")"
    return f"f{rng.choice(['', '.ov'])}(" + ", ".join(args) + ") -> " + ret


def test_generated_schemas_agree_with_torch():
    rng = random.Random(2024)
    results = [compare(_generated_schema(rng)) for _ in range(4000)]
    assert [r for r in results if r not in ("same", "rejected", "deliberate")] == []
    assert results.count("same") > 1500 and results.count("rejected") > 1500


# Hand-written cases -------------------------------------------------------------------------

ACCEPTED = [
    "myadd(Tensor self, Tensor other) -> Tensor",
    "add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)",
    "addmv_(Tensor(a!) self, Tensor mat, Tensor vec, *, Scalar beta=1, Scalar alpha=1) -> Tensor(a!)",
    "f(Tensor[] xs, Tensor?[] ys, int[2] stride=1, int[1] d=[0], SymInt[] s, float eps=1e-6, bool b=True) -> ()",
    "f(str mode=\"mean\", ScalarType? dtype=None, Layout? layout=None, Device? device=None, MemoryFormat? m=None) -> Tensor",
    "f(Tensor self) -> (Tensor values, Tensor indices)",
    "f(Tensor(a) self) -> Tensor(a)",
    "f(Tensor(a -> *) self) -> Tensor(*)",
    "f(Tensor(a!)[] out) -> ()",
    "f(int[]? size=None, complex c=1j) -> ((int, int))",
    # list defaults: elements read as the element type, a scalar fills a sized list
    "f(int[2] x=[1, 2]) -> ()",
    "f(int[2] x=[1, 1]) -> ()",
    "f(int[2] x=[1, 2, 3]) -> ()",            # torch does not check the length
    "f(int[] x=[]) -> ()",
    "f(int[2] x=[]) -> ()",
    "f(float[] x=[1.0]) -> ()",
    "f(float[] x=[1, -2.5, 1e3]) -> ()",      # an int in a float[] is a float
    "f(bool[] x=[True, False]) -> ()",
    "f(SymInt[] x=[1]) -> ()",
    "f(SymInt[2] x=1) -> ()",
    "f(int[2] x=1) -> ()",
    "f(int[3] x=-1) -> ()",
    "f(int[1] x=1) -> ()",
    "f(int[0] x=1) -> ()",
    "f(float[2] x=1.5) -> ()",
    "f(float[2] x=1) -> ()",
    "f(bool[3] x=True) -> ()",
    "f(complex[] x=[1j, -2.5j]) -> ()",
    "f(complex[2] x=1j) -> ()",
    "f(int[] x=[long, Mean]) -> ()",          # named constants are ints
    "f(ScalarType[] x=[float32, long]) -> ()",
    "f(Layout[] x=[0], MemoryFormat[] y=[0]) -> ()",
    "f(int[2]? x=None) -> ()",
    "f(int[2]? x=1) -> ()",                   # an optional's default is one value, not a list
    "f(int[2.5] x) -> ()",                    # torch reads a size up to its first non-digit
    # complex and other numbers
    "f(complex c=1j) -> ()",
    "f(complex c=-1.5j, complex d=0j, complex e=-0j, complex g=1e3j) -> ()",
    "f(complex? c=1) -> ()",                  # the optional reads 1 as an int
    "f(Scalar s=2j, Scalar? t=-1j) -> ()",
    "f(float x=1j) -> ()",                    # a 'j' makes any number complex
    "f(float x=1E3, float y=1.5E3, int z=1e3, Scalar w=2.5E1) -> ()",
    "f(float x=2.2250738585072014e-308, float y=0e-500, float z=1.7976931348623157e308) -> ()",
    "f(int x=-9223372036854775808, int y=9223372036854775807, int z=-0) -> ()",
    "f(float x=.5, float y=5., float z=1.e5, int w=010) -> ()",
    "f(int x=True, bool y=1, str z=1, int w=\"a\", Tensor? t=1) -> ()",  # torch does not check the kind
    "f(ScalarType x=float32, ScalarType? y=complex, Layout z=strided, MemoryFormat m=contiguous_format) -> ()",
    # alias annotations
    "f(Tensor(a|b) x) -> Tensor(b|a)",
    "f(Tensor(a|a) x) -> ()",
    "f(Tensor(a|b|a) x) -> ()",
    "f(Tensor(*) x) -> Tensor(*)",
    "f(Tensor(a|*) x) -> ()",
    "f(Tensor(*|*) x) -> ()",
    "f(Tensor(*|) x) -> ()",                  # torch reads nothing after '*|'
    "f(Tensor(a!) x) -> Tensor(a!)",
    "f(Tensor(a|b!) x) -> ()",
    "f(Tensor(*!) x) -> ()",
    "f(Tensor(a! -> a|b) x) -> ()",
    "f(Tensor(a|b -> b|a) x) -> ()",
    "f(Tensor(a -> b|*) x) -> ()",
    "f(Tensor(A) x, Tensor(_b1) y, Tensor(alias) z) -> ()",
    "f(Tensor! x, Tensor! y) -> (Tensor!, Tensor!)",
    "f(Tensor(a)? x) -> ()",
    "f(Tensor(a!)?[] x) -> ()",
    "f(Tensor(a)[](b) x) -> ()",
    "f(Tensor(a)[2](b!) x) -> ()",
    "f(Tensor[2](a) x) -> ()",
    "f(Dict(str, Tensor)(a!) d) -> ()",
    "f(t(a -> *) x, bool(b -> *) y, int(c) z) -> t(*)",
    "f(Tensor(a) x) -> (Tensor(a) y, Tensor(b!))",
    # type variables and other types
    "f(t x) -> t",
    "f(t[] x) -> t[]",
    "f(t? x=None) -> ()",
    "f(t?? x) -> ()",
    "f(Any x, Any? y=None, Any[] z) -> Any",
    "f(t.x y, t.x.y z, foo.Bar w) -> ()",     # torch reads a dotted name as one type variable
    "f(double x, int64_t y) -> ()",           # type variables too: torch's hints for them need allow_typevars=False
    "f(int.x y, str.foo z) -> ()",            # ... after any base type but Tensor
    "f(int?? x, Tensor??? y, int[]?? z) -> ()",
    "f(NoneType x, None y, None[] z, Capsule c, Storage s, Stream t, QScheme q, AnyClassType a, AnyEnumType e) -> ()",
    "f(DeviceIndex x, ConstQuantizerPtr y, SymBool z, Quantizer? q=None, Generator? g=None) -> SymBool",
    "f(Dict(str, SymInt) d, Dict(ScalarType, Tensor) e, Dict(SymInt, t) g, Dict(bool, Tensor) h) -> ()",
    "f((SymInt, ScalarType) x, Future(SymInt) y, RRef(Layout) z, Await(MemoryFormat) w) -> (SymInt, ScalarType)",
    "f(SymInt[][] x, ScalarType?[] y, (int, (float, str))[] z) -> ((SymInt, int))",
    # devices
    "f(Device d=\"cuda:1\", Device e=\"meta\", Device g=\"cpu:0\", Device h=\"xla:127\") -> ()",
    "f(Device? d=\"cpu\") -> ()",             # an optional Device's default stays a string
    # the lexer: line breaks in brackets, comments, continuations, strings
    "\n  f(int a) -> int\n\n",
    "f(\n  int a,\n  int b\n) -> (\n  int,\n  int\n)",
    "f(int a) -> int  # a comment",
    "f(int a, # a comment\n int b) -> int",
    "# a comment\nf(int a) -> int",
    "f(int a) \\\n-> int",
    "f(int a)\f->\vint\r",
    "f(str a=\"\\101\\n\", str b='\\'', str c=\"\\\\\", str d=\"x#y\") -> ()",
    "f(str a='''x\"y''', str b=\"\"\"\"\"\") -> ()",
    "f(str a=\"a\\\nb\") -> ()",
    "f(str a=\"\\000\\177\\a\\b\\f\\t\\v\") -> ()",
    "f(str a=\"é\") -> ()",
    "aten : : f . ov ( int a ) -> int",
]


@pytest.mark.parametrize("text", ACCEPTED)
def test_accepted_schemas_read_like_torch(text):
    assert compare(text) == "same"
    ref, once = _torch(text), _ours(text)
    if _norm(_torch(ref) or "") == _norm(ref):
        # where torch reads its own text back (not `complex c=0.+1.j`, `Device d=cpu`, `Tensor($0! -> )`)
        assert _norm(once) == _norm(ref)
        assert _ours(once) == once


def test_hand_written_class_type_is_kept():
    # A class no library registers (opwrap's TensorQueue is, once opwrap is imported).
    text = "f(__torch__.torch.classes.nolib.NoSuchQueue foo, Tensor inc) -> ()"
    assert _torch(text) == "UNKNOWN-CLASS"  # torch wants the class registered; we take the name
    assert _ours(text) == text


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


def test_defaults_are_normalised_to_the_element_type():
    s = FunctionSchema.parse("f(Tensor(a|a|*) e, float[] a=[1, 2], SymInt[2] b=3, complex[] c=[2j], "
                             "ScalarType[] d=[float32], float g=1) -> ()")
    e, a, b, c, d, g = s.arguments
    assert a.default.value == (1.0, 2.0) and all(type(v) is float for v in a.default.value)
    assert b.default.value == (3, 3)
    assert c.default.value == (2j,)
    assert d.default.value == (6,)
    assert e.alias.before == ("a", "*")
    assert g.default.value == 1.0 and type(g.default.value) is float
    assert str(FunctionSchema.parse("f(complex c=-2.5j) -> ()")) == "f(complex c=0.-2.5j) -> ()"


# Schemas both torch and we refuse: where the problem is and what is wrong there.  `at` is the
# text our message points at (its first occurrence), or the 1-based column.
REJECTED = [
    ("myadd(Tensor self, Tensor other -> Tensor", "->", "expected ',' or ')'"),
    ("myadd(Tensr self) -> Tensor", "Tensr", "unknown type 'Tensr'"),
    ("myadd(Tensor self) Tensor", 20, "expected '->'"),
    ("myadd(Tensor self=1) -> Tensor", "1", "expected None"),
    ("myadd(Tensor self, int a=1, int b) -> Tensor", "int b", "non-default argument 'b'"),
    ("myadd.default(Tensor self) -> Tensor", "default", "not a legal overload name"),
    ("myadd(Tensor self) -> Tensor extra junk", "junk", "expected end of schema"),
    ("myadd(int in) -> Tensor", "in)", "expected an argument name"),
    ("myadd(str s=\"abc) -> Tensor", "\"", "unterminated string"),
    ("myadd(Tensor(a self) -> Tensor", "self", "expected ')'"),
    ("", 1, "expected an operator name"),
    # list defaults hold values of the element's kind only
    ("f(int[] x=[1.0]) -> ()", "1.0", "an element of a int[] default must be an integer, not 1.0"),
    ("f(int[] x=[1, 1e3]) -> ()", "1e3", "an element of a int[] default must be an integer, not 1e3"),
    ("f(int[] x=[True]) -> ()", "True", "an element of a int[] default must be an integer, not True"),
    ("f(int[] x=[1j]) -> ()", "1j", "must be an integer, not 1j"),
    ("f(int[] x=[None]) -> ()", "None", "must be an integer, not None"),
    ("f(SymInt[] x=[1.5]) -> ()", "1.5", "an element of a SymInt[] default must be an integer, not 1.5"),
    ("f(SymInt[2] x=1.5) -> ()", "1.5", "an element of a SymInt[] default must be an integer, not 1.5"),
    ("f(int[2] x=True) -> ()", "True", "must be an integer, not True"),
    ("f(int[1] dim=None) -> ()", "None", "an element of a int[] default must be an integer, not None"),
    ("f(ScalarType[] x=[1.5]) -> ()", "1.5", "an element of a ScalarType[] default must be an integer"),
    ("f(float[] x=[True]) -> ()", "True", "an element of a float[] default must be a number, not True"),
    ("f(float[] x=[long]) -> ()", "long", "an element of a float[] default must be a number, not long"),
    ("f(float[] x=[1, 2j]) -> ()", "2j", "must be a number, not 2j"),
    ("f(float[] x=[\"a\"]) -> ()", "\"a\"", "must be a number, not \"a\""),
    ("f(bool[] x=[1, 0]) -> ()", "1", "an element of a bool[] default must be True or False, not 1"),
    ("f(bool[2] x=1) -> ()", "1", "must be True or False, not 1"),
    ("f(complex[] x=[True]) -> ()", "True", "an element of a complex[] default must be an imaginary number"),
    ("f(complex[] x=[1]) -> ()", "1", "a complex default is an imaginary number like 1j, not 1"),
    ("f(int[] x=1) -> ()", "1", "expected '[' to open a list default"),
    ("f(int[] x=None) -> ()", "None", "expected '[' to open a list default"),
    ("f(int[2] x=foo) -> ()", "foo", "invalid default value 'foo' for a list"),
    ("f(int[]? x=[1]) -> ()", "[1", "expected a default value but found '['"),
    ("f(int[2] x=[1,]) -> ()", "])", "expected a default value but found ']'"),
    ("f(Tensor[] x=[]) -> ()", 14, "a Tensor[] cannot have a default value"),
    ("f(str[] x=[\"a\"]) -> ()", 11, "a str[] cannot have a default value"),
    ("f(Scalar[] x=[1]) -> ()", 14, "a Scalar[] cannot have a default value"),
    ("f(SymBool[] x=[True]) -> ()", 15, "a SymBool[] cannot have a default value"),
    ("f(t[] x=[1]) -> ()", 9, "a t[] cannot have a default value"),
    # numbers
    ("f(complex c=1) -> ()", "1", "a complex default is an imaginary number like 1j, not 1"),
    ("f(float x=1e400) -> ()", "1e400", "default value 1e400 is out of range"),
    ("f(complex x=1e400j) -> ()", "1e400j", "default value 1e400 is out of range"),
    ("f(float x=1e-400) -> ()", "1e-400", "default value 1e-400 is too small"),
    ("f(float x=-2.225073858507201e-308) -> ()", "2.", "too small"),
    ("f(int x=9223372036854775808) -> ()", "9223372036854775808", "does not fit in int64"),
    ("f(int x=-9223372036854775809) -> ()", "9223", "does not fit in int64"),
    ("f(float x=inf) -> ()", "inf", "invalid default value 'inf'"),
    ("f(int x=float32) -> ()", "float32", "invalid default value 'float32'"),
    ("f(int x=1.5.3) -> ()", ".3", "expected ',' or ')'"),
    ("f(int x=--1) -> ()", "-1", "expected a default value"),
    ("f(int x=+1) -> ()", "+", "unexpected character '+'"),
    ("f(int x=1abc) -> ()", "1abc", "malformed number '1a'"),
    ("f(SymBool x=True) -> ()", "True", "type 'SymBool' cannot have a default value"),
    ("f(Any x=None) -> ()", "None", "type 'Any' cannot have a default value"),
    ("f(None x=None) -> ()", "None)", "type 'NoneType' cannot have a default value"),
    # devices, as c10::Device reads them
    ("f(Device d=\"bogus\") -> ()", "\"bogus", "unknown device type 'bogus' in \"bogus\""),
    ("f(Device d=\"CUDA\") -> ()", "\"CUDA", "unknown device type 'CUDA'"),
    ("f(Device d=\"cuda:01\") -> ()", "\"cuda", "invalid device string \"cuda:01\""),
    ("f(Device d=\"cuda:\") -> ()", "\"cuda", "invalid device string"),
    ("f(Device d=\"cuda:-1\") -> ()", "\"cuda", "invalid device string"),
    ("f(Device d=\"\") -> ()", "\"\"", "invalid device string"),
    ("f(Device d=cpu) -> ()", "cpu", "expected a device string"),
    # alias annotations
    ("f(Tensor(*|a) x) -> ()", "a)", "nothing may follow '*' in an alias set: '*' already includes 'a'"),
    ("f(Tensor(a|*|b) x) -> ()", "b)", "nothing may follow '*' in an alias set"),
    ("f(Tensor(a -> *|b) x) -> ()", "b)", "nothing may follow '*' in an alias set"),
    ("f(Tensor(a.b) x) -> ()", ".", "expected ')' to close the alias annotation but found '.'"),
    ("f(Tensor(a::b) x) -> ()", ":", "expected ')' to close the alias annotation"),
    ("f(Tensor() x) -> ()", ")", "expected an alias set name or '*' but found ')'"),
    ("f(Tensor(a|) x) -> ()", ")", "expected an alias set name or '*'"),
    ("f(Tensor(!) x) -> ()", "!", "expected an alias set name or '*'"),
    ("f(Tensor(a -> ) x) -> ()", ")", "expected an alias set name or '*'"),
    ("f(Tensor(a!!) x) -> ()", "!)", "expected ')' to close the alias annotation"),
    ("f(Tensor(in) x) -> ()", "in", "expected an alias set name or '*' but found 'in'"),
    ("f(Tensor(None) x) -> ()", "None", "expected an alias set name or '*' but found 'None'"),
    ("f(Tensor(NoneType) x) -> ()", "NoneType", "expected an alias set name or '*' but found 'NoneType'"),
    ("f(Tensor(Ellipsis!) x) -> ()", "Ellipsis", "expected an alias set name or '*' but found 'Ellipsis'"),
    ("f(Tensor(a)(b) x) -> ()", "(b", "expected an argument name but found '('"),
    ("f(Tensor?(a) x) -> ()", "(a", "expected an argument name but found '('"),
    ("f(Tensor.x y) -> ()", ".", "expected an argument name but found '.'"),
    # types
    ("f(NoneType? x) -> ()", "?", "'NoneType?' is not a type"),
    ("f(None? x=None) -> ()", "?", "'NoneType?' is not a type"),
    ("f(Union(int) x) -> ()", "Union", "Union types are not supported"),
    ("f(Dict(Scalar, Tensor) x) -> ()", "Dict", "cannot create a Dict with key type 'Scalar'"),
    ("f(Dict(str) x) -> ()", "Dict", "Dict takes 2 type parameter(s), got 1"),
    ("f(Future() x) -> ()", "Future", "Future takes 1 type parameter(s), got 0"),
    ("f(Foo.bar x) -> ()", "Foo", "unknown type 'Foo.bar'"),
    ("f(None.x x) -> ()", "None", "unknown type 'None.x'"),
    ("f(Dimname x) -> ()", "Dimname", "unknown type 'Dimname'"),
    ("f(int[-1] x) -> ()", "-", "expected a list size but found '-'"),
    ("f(int[.5] x) -> ()", ".5", "list size must be a non-negative integer, not '.5'"),
    # words torch's lexer reserves, and its identifiers: ASCII only
    ("f(int Ellipsis) -> ()", "Ellipsis", "expected an argument name but found 'Ellipsis'"),
    ("f(int NoneType) -> ()", "NoneType)", "expected an argument name but found 'NoneType'"),
    ("f(int a) -> int NoneType", "NoneType", "expected end of schema but found 'NoneType'"),
    ("NoneType(int a) -> ()", "NoneType", "expected an operator name"),
    ("f.Ellipsis(int a) -> ()", "Ellipsis", "expected an overload name after '.'"),
    ("f(int def) -> ()", "def", "expected an argument name"),
    ("f(int é) -> ()", "é", "unexpected character 'é'"),
    ("f(int a²) -> ()", "²", "unexpected character '²'"),
    # line breaks: only inside brackets, or before and after the schema
    ("f(int a)\n-> int", "\n", "expected '->' before the returns but found a line break"),
    ("f(int a) ->\n int", "\n", "expected a type but found a line break"),
    ("aten\n::f(int a) -> int", "\n", "expected '(' to open the argument list but found a line break"),
    ("f(int a) -> int\nf(int a) -> int", "\n", "expected end of schema but found a line break"),
    ("f(str a=\"x\ny\") -> ()", "\ny", "a line break inside a string literal"),
    ("f(int a) -> () # type: int", "#", "a '# type:' comment cannot appear in a schema"),
    # string literals, as torch's parseStringLiteral reads them
    ("f(str a=\"\\r\") -> ()", "\\r", "unsupported escape sequence \\r"),
    ("f(str a=\"\\x41\") -> ()", "\\x", "unsupported escape sequence \\x"),
    ("f(str a=\"\\u0041\") -> ()", "\\u", "unsupported escape sequence \\u"),
    ("f(str a=\"\\0\") -> ()", "\\0", "unsupported escape sequence \\0"),
    ("f(str a=\"\\10\") -> ()", "\\1", "unsupported escape sequence \\1"),
    ("f(str a=\"\\400\") -> ()", "\\4", "unsupported escape sequence \\4"),
    ("f(str a=\"a\" \"b\") -> ()", "\"b", "expected ',' or ')'"),
    ("f(str a=\"\"\"x) -> ()", "\"", "unterminated string literal"),
]



def _offset(text, at):
    return at - 1 if isinstance(at, int) else text.index(at)


@pytest.mark.parametrize("text, at, message", REJECTED)
def test_rejected_schemas_report_column_and_reason(text, at, message):
    assert _torch(text) is None, "torch accepts it"
    with pytest.raises(SchemaError) as e:
        FunctionSchema.parse(text)
    assert message in e.value.message
    assert e.value.offset == _offset(text, at), str(e.value)


# Schemas torch accepts but reads otherwise than written (or in ways this model does not
# follow): opwrap refuses them, saying why, at the problem.
REFUSED_ON_PURPOSE = [
    ("f(Union(int, str) x) -> ()", "Union", "Union types are not supported in opwrap schemas"),
    ("f(int x) -> Union(int, str)", "Union", "Union types are not supported"),
    ("f(Scalar?? x) -> ()", "? x", "'Scalar??' is not supported; write 'Scalar?'"),
    ("f(complex c=1.5) -> ()", "1.5", "a complex default is an imaginary number like 1.5j, not 1.5"),
    ("f(complex c=12) -> ()", "12", "like 12j, not 12"),
    ("f(complex[] c=[2.5]) -> ()", "2.5", "a complex default is an imaginary number like 2.5j, not 2.5"),
    ("f(int x=1E3) -> ()", "1E3", "write the exponent of 1E3 with a lower-case 'e': torch reads 1E3 as the integer 1"),
    ("f(Scalar x=-12E+2) -> ()", "12E", "torch reads -12E+2 as the integer -12"),
    ("f(float? x=1E3) -> ()", "1E3", "with a lower-case 'e'"),
    ("f(int[] x=[1E3]) -> ()", "1E3", "with a lower-case 'e'"),
    ("f(int x=0x10) -> ()", "0x10", "hexadecimal numbers are not supported"),
    ("f(float x=0x1p3) -> ()", "0x1p3", "hexadecimal numbers are not supported"),
    ("f(int[0x3] x) -> ()", "0x3", "hexadecimal numbers are not supported"),
    ("f(int[4294967298] x) -> ()", "4294967298", "list size 4294967298 is too large (at most 2147483647)"),
    ("f(Device d=\"cuda:200\") -> ()", "\"cuda", "device index 200 is too large (at most 127)"),
    ("f(int[0] x=1.5) -> ()", "1.5", "an element of a int[] default must be an integer, not 1.5"),
    ("f(bool[0] x=\"a\") -> ()", "\"a\"", "an element of a bool[] default must be True or False"),
    # torch keeps the byte 0x80, and its Python binding then fails to decode the default
    ("f(str a=\"\\200\") -> ()", "\\2", "the octal escape \\200 is not an ASCII character"),
]


@pytest.mark.parametrize("text, at, message", REFUSED_ON_PURPOSE)
def test_schemas_torch_misreads_are_refused(text, at, message):
    assert _torch(text) is not None, "torch refuses it: move the case to REJECTED"
    with pytest.raises(SchemaError) as e:
        FunctionSchema.parse(text)
    assert message in e.value.message
    assert any(m in e.value.message for m in DELIBERATE)
    assert e.value.offset == _offset(text, at), str(e.value)


# Schemas as third-party libraries register them, in their authors' spelling (vLLM's
# csrc/torch_bindings.cpp writes mutable arguments `Tensor!`).
THIRD_PARTY = [
    "silu_and_mul(Tensor! result, Tensor input) -> ()",
    "rms_norm(Tensor! result, Tensor input, Tensor weight, float epsilon) -> ()",
    "fused_add_rms_norm(Tensor! input, Tensor! residual, Tensor weight, float epsilon) -> ()",
    "reshape_and_cache(Tensor key, Tensor value, Tensor! key_cache, Tensor! value_cache, Tensor slot_mapping, "
    "str kv_cache_dtype, Tensor k_scale, Tensor v_scale) -> ()",
    "copy_blocks(Tensor(a!)[] key_caches, Tensor[](b!) value_caches, Tensor block_mapping) -> ()",
    "all_reduce(int fa, Tensor inp, Tensor! out, int reg_buffer, int reg_buffer_sz_bytes) -> ()",
    "optional_out(Tensor x, Tensor!? maybe) -> ()",
    "lists(Tensor![] xs, Tensor(a -> *) y) -> Tensor",
    # torchvision 0.29.1's registrations, as its libraries hold them (`strings` of
    # torchvision/_C_stable.so and image_stable.so): SymInt sizes, five returns, a Device,
    # Tensor[] in and out, str, a default.
    "roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width, "
    "int sampling_ratio, bool aligned) -> Tensor",
    "_deform_conv2d_backward(Tensor grad, Tensor input, Tensor weight, Tensor offset, Tensor mask, Tensor bias, "
    "SymInt stride_h, SymInt stride_w, SymInt pad_h, SymInt pad_w, SymInt dilation_h, SymInt dilation_w, "
    "SymInt groups, SymInt offset_groups, bool use_mask) -> (Tensor, Tensor, Tensor, Tensor, Tensor)",
    "ps_roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width, "
    "int sampling_ratio) -> (Tensor, Tensor)",
    "qroi_align(Tensor input, Tensor rois, float input_scale, int input_zero_point, float rois_scale, "
    "int rois_zero_point, float spatial_scale, SymInt pooled_height, SymInt pooled_width, int sampling_ratio, "
    "bool aligned) -> Tensor",
    "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "decode_jpegs_cuda(Tensor[] encoded_images, int mode, Device device) -> Tensor[]",
    "decode_image(Tensor data, int mode, bool apply_exif_orientation=False) -> Tensor",
    "read_file(str filename) -> Tensor",
    "write_file(str filename, Tensor data) -> Tensor",
    "_cuda_version() -> int",
]


def test_what_a_library_registers_parses_to_the_schema_declared():
    """What the generated registration writes (FunctionSchema.text(parseable=True)) is read by
    torch's parser to the schema torch reads from the declared text, for every registered
    schema and the third-party spellings above: torch prints `Tensor!` as `Tensor($0! -> )`,
    which its parser refuses, so that text cannot be the registration."""
    bad = []
    for text in CORPUS + THIRD_PARTY:
        ref = _torch(text)
        if ref in (None, "UNKNOWN-CLASS"):
            continue
        registered = FunctionSchema.parse(text).text(parseable=True)
        if _norm(_torch(registered) or "refused") != _norm(ref):
            bad.append((text, registered))
    assert not bad, bad[:5]
    assert FunctionSchema.parse(THIRD_PARTY[0]).text(parseable=True) == THIRD_PARTY[0]
    assert str(FunctionSchema.parse(THIRD_PARTY[0])) == "silu_and_mul(Tensor($0! -> ) result, Tensor input) -> ()"
