"""The generalization survey (codegen/survey.py) in CI: a fixed sample of torch's own
native_functions.yaml, declared with stub kernels, generated and compiled in a library made
by `codegen init`.  `make survey` runs every schema and prints the figures."""

import pytest

from opwrap_codegen import survey
from opwrap_codegen.lang.schema import FunctionSchema

# Sample schemas known not to compile, with why (the survey's reason, abridged): none since
# edfdd71, all 44 compile.  An entry here must fail; once it compiles, the test below says
# to take it off.
NOT_YET: dict[str, str] = {}


def _native():
    return {FunctionSchema.parse(f).qualified_name: FunctionSchema.parse(f)
            for _, f in survey.read_schemas(survey.native_functions_yaml())}


def test_sample_covers_every_argument_type_and_return_kind():
    native = _native()
    assert set(survey.SAMPLE) <= set(native), set(survey.SAMPLE) - set(native)
    everything = set().union(*(survey.kinds(s) for s in native.values()))
    sampled = set().union(*(survey.kinds(native[n]) for n in survey.SAMPLE))
    assert everything - sampled == set()
    assert {"arg Tensor[]", "return Tensor[]", "returns ()", "arg Generator?", "return SymInt"} <= sampled


def test_normalized_reasons_group_equal_causes():
    a = survey._normalize("return 'values' needs a shape rule: add 'shape: {values: [...]}' or 'like: <input>'")
    b = survey._normalize("return 'result' needs a shape rule: add 'shape: {result: [...]}' or 'like: <input>'")
    assert a == b == "return '_' needs a shape rule: add '_' or '_'"
    words = {"add.Tensor", "add_Tensor", "add_Tensor_cpu", "survey::add.Tensor"}
    assert survey._normalize("‘add_Tensor_cpu’ is not a member of ‘survey::kernels’", words) == \
        "‘<op>’ is not a member of ‘survey::kernels’"


def test_compiler_errors_are_attributed_to_their_op(tmp_path):
    ops = [survey.Op(0, "f(Tensor self) -> Tensor", "f", "f", "f_cpu"),
           survey.Op(1, "g.x(Tensor self) -> Tensor", "g.x", "g_x", "g_x_cpu")]
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "g.h").write_text("// survey::g.x: g.x(Tensor self) -> Tensor\nvoid g_x_cpu();\n")
    files = {"registration.cpp": 'TORCH_LIBRARY(survey, m) {\n  m.def("f(Tensor self) -> Tensor");\n'
                                 '  m.def("g.x(Tensor self) -> Tensor");\n}\n', "cpu/f.cpp": "\n"}
    at = survey.Attribution(tmp_path, ops, files)
    gen = tmp_path / "generated"
    output = "\n".join([
        f"{gen}/cpu/f.cpp:3:5: error: no match for ‘operator*’",
        f"{gen}/cpu/f.cpp:4:5: error: a second error of f",
        f"In file included from {gen}/units/all.0.cpp:4:",
        f"{tmp_path}/kernels/g.h: In function ‘void g_x_cpu()’:",
        f"{tmp_path}/kernels/g.h:2:1: error: ‘x’ was not declared in this scope",
        f"{gen}/registration.cpp:3:3: error: a registration error",
        "/usr/include/c++/vector:10:1: error: an error outside the project, about no op",
        f"{gen}/cpu/f.cpp:9:1:   required from here",
        "/usr/include/c++/tuple:10:1: error: static assertion failed",
    ])
    first, unattributed = survey.compiler_errors(output, at)
    assert first == {"f": "generated/cpu/f.cpp:3: no match for ‘operator*’",
                     "g.x": "kernels/g.h:2: ‘x’ was not declared in this scope"}
    assert unattributed == ["vector:10: an error outside the project, about no op"]
    assert at.op(str(gen / "registration.cpp"), 2) == "f" and at.op(str(gen / "registration.cpp"), 3) == "g.x"


# A library of its own: the survey (codegen/survey.py) makes and compiles it as `make survey`
# does (stub kernels, one unit), which is what this test checks.
@pytest.mark.slow(60)
@pytest.mark.xdist_group("native_functions")
def test_sample_of_native_functions_compiles(tmp_path):
    # Every per-op source and the registration in one translation unit, the fast Python
    # bindings in a second; one compiler at a time.
    result = survey.run(tmp_path / "lib", list(survey.SAMPLE), unit_size=1000, jobs=1, merge=True, log=lambda m: None)
    report = survey.report(result)
    assert result.total == len(survey.SAMPLE), report
    compiled = {n for n, o in result.outcomes.items() if o == "compiled"}
    assert compiled, report
    assert result.library.endswith("_C.so"), report  # the compiled ops built, linked and loaded
    expected = set(survey.SAMPLE) - set(NOT_YET)
    assert expected - compiled == set(), report
    assert compiled & set(NOT_YET) == set(), f"these compile now: take them off NOT_YET\n{report}"
