"""The generalization survey: every schema of torch's own ``native_functions.yaml``, declared
as an op of a throwaway library and pushed through the toolchain as a new user would.

Each schema becomes one declaration -- its name and overload kept, no ``aten::`` prefix, one
dtype (float32), a CPU kernel, no shape rule -- in a library made by ``codegen init``;
``codegen stubs`` writes the kernel skeletons; the pipeline validates and generates; the
generated sources are compiled with the project's build, in a few large translation units.
Every schema ends in exactly one outcome, with the reason for the ones that do not compile:

- ``not declared``: the schema could not be made into a declaration (it does not parse, or
  an earlier schema has the same name and overload);
- ``refused``: ``codegen generate`` reported a declaration error for it (its first error);
- ``crashed``: the generator raised a Python exception on it (type, message, where);
- ``no stub``: ``codegen stubs`` could not decide its kernel's signature;
- ``not compiled``: the compiler reported an error in one of its sources (its first error);
- ``compiled``: none of the above, and the library of all compiled ops built, linked and loaded.

Reasons are normalized (names of the op, its kernel and its arguments, line numbers and
quoted names replaced) and grouped, so that each group is one thing to fix in the generator.

Why here, in the toolchain package: it drives the toolchain's own API (the schema parser,
``codegen init``'s scaffold, ``codegen stubs``, the pipeline, the build), so it moves with
it; the tests import it (``tests/test_native_functions.py`` compiles a fixed sample in CI),
and ``make survey`` runs it on every schema: ``python -m opwrap_codegen.survey``.
"""

from __future__ import annotations

import argparse
import bisect
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

_TOOLCHAIN = Path(__file__).resolve().parent  # this package's folder: frames inside it are the toolchain's

NAMESPACE = "survey"
OUTCOMES = ("not declared", "refused", "crashed", "no stub", "not compiled", "compiled")

# The CI sample (tests/test_native_functions.py): schemas that between them use every
# argument type and every return kind of native_functions.yaml (the test checks that).
SAMPLE = (
    # everyday ops: functional, in place, out=, views, reductions, factories, random
    "add.Tensor", "add_.Tensor", "add.out", "sum.dim_IntList", "div.Tensor_mode", "transpose.int", "arange.start_step",
    "empty.memory_format", "randn.generator", "bernoulli_.float", "einsum", "upsample_nearest2d.vec", "cummax",
    "__and__.Scalar", "to.device", "to.dtype_layout", "max.dim", "sort.stable", "index.Tensor", "index_put_",
    # lists, no returns, non-Tensor returns
    "cat", "split.Tensor", "unbind.int", "_foreach_add.Scalar", "_foreach_add_.Scalar", "_assert_async", "is_nonzero",
    "sym_size.int", "sym_is_contiguous", "result_type.Tensor", "item", "q_scale", "qscheme", "set_.source_Storage",
    "record_stream", "gradient.scalarrayint",
    # the rest of the argument types and return kinds, chosen greedily
    "_efficient_attention_forward", "fft_fft2", "_segment_reduce_backward", "_batch_norm_impl_index",
    "_batch_norm_impl_index_backward", "_histogramdd_bin_edges", "_nested_sum_backward",
    "_validate_sparse_compressed_tensor_args",
)


# ---------------------------------------------------------------------------- the schemas

def native_functions_yaml() -> Path:
    """torch's own native_functions.yaml, as the installed torch ships it (torchgen/packaged)."""
    import torchgen
    return Path(torchgen.__file__).resolve().parent / "packaged" / "ATen" / "native" / "native_functions.yaml"


@dataclass(frozen=True)
class Op:
    """One schema of native_functions.yaml and the declaration the survey makes of it."""

    index: int  # its position in native_functions.yaml
    schema: str  # as written there
    name: str  # name.overload (no namespace)
    ident: str  # a C++ identifier unique among the survey's ops
    kernel: str  # the CPU kernel template's name


@dataclass
class Survey:
    """Every schema's outcome; `reasons` holds why, for every outcome but "compiled"."""

    source: str
    outcomes: dict[str, str] = field(default_factory=dict)  # op name (or "#<index>") -> outcome
    reasons: dict[str, str] = field(default_factory=dict)  # op name -> normalized reason
    details: dict[str, str] = field(default_factory=dict)  # op name -> the first error as reported
    timings: dict[str, float] = field(default_factory=dict)
    library: str = ""  # the built library when it loaded; else why not

    def count(self, outcome: str) -> int:
        return sum(1 for o in self.outcomes.values() if o == outcome)

    @property
    def total(self) -> int:
        return len(self.outcomes)

    @property
    def accepted(self) -> int:
        """Schemas that `codegen generate` accepted (and generated without crashing)."""
        return sum(1 for o in self.outcomes.values() if o in ("no stub", "not compiled", "compiled", "generated"))

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def read_schemas(path: Path) -> list[tuple[int, object]]:
    """(position, the `func:` value) of every entry of native_functions.yaml."""
    import yaml
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    entries = yaml.load(path.read_text(encoding="utf-8"), Loader=loader)
    return [(i, e.get("func") if isinstance(e, dict) else None) for i, e in enumerate(entries)]


def make_ops(entries, survey: Survey) -> list[Op]:
    """The declarable schemas; every other entry gets its "not declared" reason in `survey`."""
    from .lang.schema import FunctionSchema
    ops, names, idents = [], set(), set()
    for index, func in entries:
        if not isinstance(func, str):
            _record(survey, f"#{index}", "not declared", "entry has no 'func:' string", repr(func))
            continue
        try:
            schema = FunctionSchema.parse(func)
        except Exception as e:  # the parser's error, whatever it is: counted, never skipped
            key = func.split("(", 1)[0]
            _record(survey, key if key not in names else f"#{index}", "not declared",
                    f"schema does not parse: {_normalize(str(e))}", str(e))
            continue
        name = schema.qualified_name
        if name in names:
            _record(survey, f"#{index}", "not declared", "name and overload repeat an earlier schema", func)
            continue
        names.add(name)
        ident = schema.ident
        while ident in idents:  # `a_b` and `a.b`: both would be `a_b`
            ident += "_"
        idents.add(ident)
        ops.append(Op(index, func, name, ident, f"{ident}_cpu"))
    return ops


def _record(survey: Survey, key: str, outcome: str, reason: str = "", detail: str = "") -> None:
    survey.outcomes[key] = outcome
    if outcome != "compiled":
        survey.reasons[key] = reason
        survey.details[key] = detail or reason


def kinds(schema) -> set[str]:
    """The argument types and return kinds a schema uses (list sizes dropped; `!` written,
    `@` a returned view of an argument): what the CI sample must cover between its schemas."""
    def name(t) -> str:
        return re.sub(r"\[\d+\]", "[]", str(t))
    out = {f"arg {name(a.type)}{'!' if a.is_write else ''}" for a in schema.arguments}
    for r in schema.returns:
        view = schema.aliased_argument(r) is not None and not r.is_write
        out.add(f"return {name(r.type)}{'!' if r.is_write else '@' if view else ''}")
    out.add("returns ()" if not schema.returns else "returns one" if len(schema.returns) == 1 else "returns a tuple")
    return out


# ---------------------------------------------------------------------------- the project

DECLARATIONS = "declarations/native.yaml"


def make_project(root: Path, unity: int = 1000, scope: str = "group") -> None:
    """A library made by `codegen init`, with its example op removed, whose sources share
    units of `unity` within `scope` ([tool.codegen] unity_scope)."""
    from .scaffold import scaffold
    scaffold(root, NAMESPACE)
    (root / "declarations" / "scale.yaml").unlink()
    (root / "kernels" / "scale.h").unlink()
    pyproject = root / "pyproject.toml"  # [tool.codegen] is its last table
    pyproject.write_text(pyproject.read_text(encoding="utf-8") + f'unity = {unity}\nunity_scope = "{scope}"\n',
                         encoding="utf-8")


def write_declarations(root: Path, ops: list[Op]) -> list[int]:
    """One entry per op; returns the line each entry starts on (1-based, in op order)."""
    lines: list[str] = []
    starts: list[int] = []
    for op in ops:
        starts.append(len(lines) + 1)
        lines += [f"- func: {json.dumps(op.schema)}", "  dtypes: [float32]", f"  kernels: {{CPU: {op.kernel}}}"]
    (root / DECLARATIONS).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return starts


def generate(root: Path, ops: list[Op], survey: Survey, log=print):
    """Write the kernel skeletons (`codegen stubs`), validate and generate, taking out the ops
    with declaration errors (each with its first error) or that crash the generator, until
    the rest generate.  Returns (ops, files)."""
    from .core.config import load_config
    from .core.diagnostics import CodegenError, Diagnostic
    from .pipeline.passes import generate as pipeline_generate
    from .scaffold import load_declarations, write_stubs
    config = load_config(root)
    no_stub: dict[str, str] = {}
    for round_ in range(1, 100):
        if not ops:
            return ops, {}
        starts = write_declarations(root, ops)
        try:
            _, _, failed = write_stubs(load_declarations(config))  # never overwrites a header
            no_stub.update((d.op_name, why) for d, why in failed)
            result = pipeline_generate(config)
        except CodegenError as e:
            first: dict[str, Diagnostic] = {}
            for d in e.diagnostics:  # sorted by position: the first of each op is its first error
                if d.loc.path != DECLARATIONS:
                    log(f"survey: an error not in a declaration: {d}")
                    raise
                op = ops[bisect.bisect_right(starts, d.loc.line) - 1]
                first.setdefault(op.name, d)
            for name, d in first.items():
                if name in no_stub and "kernel header" in d.message:  # the header is missing for that reason
                    _record(survey, name, "no stub", _normalize(no_stub[name], _op_words(ops, name)), no_stub[name])
                else:
                    _record(survey, name, "refused", _normalize(d.message, _op_words(ops, name)), str(d))
            ops = [op for op in ops if op.name not in first]
            log(f"survey: generate round {round_}: {len(first)} ops refused, {len(ops)} left")
            continue
        except Exception:
            crashed = _find_crashes(root, ops, survey, log)
            if not crashed or len(crashed) == len(ops) > 1:  # not one op's crash: the toolchain is broken
                raise
            ops = [op for op in ops if op.name not in crashed]
            log(f"survey: generate round {round_}: {len(crashed)} ops crash the generator, {len(ops)} left")
            continue
        return ops, result.files
    raise RuntimeError("generate did not settle")


def _find_crashes(root: Path, ops: list[Op], survey: Survey, log) -> set[str]:
    """The ops on which the pipeline raises: each op alone, in chunks first (most generate)."""
    from .core.config import load_config
    from .core.diagnostics import CodegenError
    from .pipeline.passes import generate as pipeline_generate
    config = load_config(root)

    def crash(group: list[Op]) -> tuple[str, str] | None:
        write_declarations(root, group)
        try:
            pipeline_generate(config)
        except CodegenError:
            return None  # errors that depend on the other ops are found in the next round
        except Exception as e:
            return _exception_reason(e)
        return None

    found: set[str] = set()
    chunk = 64
    for start in range(0, len(ops), chunk):
        group = ops[start:start + chunk]
        if crash(group) is None:
            continue
        for op in group:
            why = crash([op])
            if why is not None:
                reason, detail = why
                _record(survey, op.name, "crashed", _normalize(reason, _op_words(ops, op.name)), detail)
                found.add(op.name)
    return found


def _exception_reason(e: BaseException) -> tuple[str, str]:
    """`Type: message in file:function`, the innermost frame in codegen/."""
    frames = [f for f in traceback.extract_tb(e.__traceback__) if _TOOLCHAIN in Path(f.filename).resolve().parents]
    where = f" in {Path(frames[-1].filename).name}:{frames[-1].name}" if frames else ""
    first = str(e).splitlines()[0] if str(e) else ""
    return f"{type(e).__name__}: {first}{where}", "".join(traceback.format_exception(e))[-2000:]


# ---------------------------------------------------------------------------- units



def relayout_units(files: dict[str, str], size: int, previous: dict[str, list[str]] | None = None):
    """The generated files with every unity group cut into units of `size` sources (the
    plugins' own caps, such as autograd's 4, lifted): fewer, larger translation units.
    With `previous` (unit -> members, from an earlier layout), each unit keeps its members
    that are still generated, so a unit that lost no member is not compiled again.
    Returns (files, the layout)."""
    from .pipeline import units
    groups: dict[str, list[str]] = {}
    out = {}
    for path, text in files.items():
        if path.startswith(f"{units.UNITS_DIR}/"):
            group = Path(path).name.rsplit(".", 2)[0]
            groups.setdefault(group, []).extend(re.findall(r'^#include "(.+)"$', text, re.M))
        else:
            out[path] = text
    if previous is None:
        layout = {path: members for path, (_, members) in units.layout(groups, size).items()}
    else:
        present = {m for members in groups.values() for m in members}
        layout = {path: kept for path, members in previous.items() if (kept := [m for m in members if m in present])}
        placed = {m for members in layout.values() for m in members}
        for path, (_, members) in units.layout({g: [m for m in ms if m not in placed] for g, ms in groups.items()},
                                               size).items():
            if [m for m in members if m not in placed]:
                layout[path.replace(".", ".new.", 1)] = members
    for path, members in layout.items():
        out[path] = units.text(Path(path).name.split(".")[0], members)
    return out, layout


# ---------------------------------------------------------------------------- compiling

# `path:line:col: error: message` as GCC and Clang print it
_DIAG = re.compile(r"^(?P<path>[^:\s][^:]*):(?P<line>\d+):(?:(?P<col>\d+):)? (?P<kind>fatal error|error|note|warning): ?(?P<msg>.*)$")
_LOCATION = re.compile(r"^(?:In file included from |\s+from )?(?P<path>[^:\s][^:]*):(?P<line>\d+)(?::\d+)?[:,]")
# markers naming an op in a file shared by several ops: `// <schema>` comments, `m.def("<schema>"`,
# and the skeletons' `// survey::<op>: <schema>`
_MARKER = re.compile(r'(?://\s*(?:' + NAMESPACE + r'::)?|m\.def\(")([A-Za-z_][\w.]*)[(:]')


class Attribution:
    """Which op a compiler message is about: per-op sources by their name; shared files
    (registration, bindings, kernel headers) by the nearest op marker above the line."""

    def __init__(self, root: Path, ops: list[Op], files: dict[str, str]):
        self.root = root.resolve()
        self.by_ident = {op.ident: op.name for op in ops}
        names = {op.name for op in ops}
        self.markers: dict[str, tuple[list[int], list[str]]] = {}
        texts = {f"generated/{p}": t for p, t in files.items()}
        kernels = root / "kernels"
        for h in kernels.glob("*.h"):
            texts[f"kernels/{h.name}"] = h.read_text(encoding="utf-8")
        for rel, text in texts.items():
            lines, found = [], []
            for i, line in enumerate(text.splitlines(), 1):
                m = _MARKER.search(line)
                if m and m.group(1) in names:
                    lines.append(i)
                    found.append(m.group(1))
            self.markers[rel] = (lines, found)

    def relative(self, path: str) -> str | None:
        p = Path(path)
        p = (self.root / "build" / p).resolve() if not p.is_absolute() else p.resolve()
        try:
            return p.relative_to(self.root).as_posix()
        except ValueError:
            return None

    def op(self, path: str, line: int) -> str | None:
        rel = self.relative(path)
        if rel is None:
            return None
        parts = rel.split("/")
        if len(parts) == 3 and parts[0] == "generated" and parts[1] in ("cpu", "autograd", "cuda", "autocast"):
            stem = parts[2].split(".")[0]
            if stem in self.by_ident:
                return self.by_ident[stem]
        lines, found = self.markers.get(rel, ([], []))
        k = bisect.bisect_right(lines, line) - 1
        return found[k] if k >= 0 else None


def compiler_errors(output: str, attribution: Attribution) -> tuple[dict[str, str], list[str]]:
    """(op -> its first error line, errors about no op) from a build's output.  An error in a
    header outside the project (an instantiation deep in torch) is about the last project
    location of the context GCC printed before it ("required from here", "In file included")."""
    first: dict[str, str] = {}
    unattributed: list[str] = []
    context: list[tuple[str, int]] = []
    for line in output.splitlines():
        m = _DIAG.match(line)
        if m and m.group("kind") in ("error", "fatal error"):
            op = attribution.op(m.group("path"), int(m.group("line")))
            if op is None:
                for path, ln in reversed(context):
                    op = attribution.op(path, ln)
                    if op is not None:
                        break
            text = f"{attribution.relative(m.group('path')) or Path(m.group('path')).name}:{m.group('line')}: {m.group('msg')}"
            if op is None:
                unattributed.append(text)
            else:
                first.setdefault(op, text)
            context = []
            continue
        loc = _LOCATION.match(line)
        if loc and not (m and m.group("kind") == "note" and "required from" not in line and "In instantiation" not in line):
            context.append((loc.group("path"), int(loc.group("line"))))
        if line.startswith("[") or line.startswith("FAILED:") or line.startswith("ninja"):
            context = []
    return first, unattributed


def compile_library(root: Path, jobs: int, log=print, optimize: int = 0) -> tuple[bool, str]:
    """`codegen build --no-generate --no-cuda` in the project, at low priority; when a unit
    fails, ninja goes on with the others (-k 0) so every unit reports its errors.  Returns
    (whether the library built and loaded, everything the compilers printed)."""
    env = dict(os.environ, MAX_JOBS=str(jobs))
    nice = ["nice", "-n", "10"] if shutil.which("nice") else []
    # --fast-bindings: the fast Python bindings of every schema must compile too (-O0 leaves them out)
    cmd = [*nice, sys.executable, "-m", "opwrap_codegen.cli", "build", "--no-generate", "--no-cuda", "--no-ccache",
           f"-O{optimize}", "--fast-bindings"]
    r = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    output = r.stdout + r.stderr
    if r.returncode == 0:
        return True, output
    from .build import ninja_beside_python
    ninja = ninja_beside_python() or shutil.which("ninja") or "ninja"  # the ninja codegen build ran
    for build_dir in (root / "build", root / "build" / "python"):
        if (build_dir / "build.ninja").exists():
            r2 = subprocess.run([*nice, ninja, "-k", "0", "-j", str(jobs)], cwd=build_dir, env=env,
                                capture_output=True, text=True)
            output += r2.stdout + r2.stderr
    return False, output


# ---------------------------------------------------------------------------- normalizing

def _op_words(ops: list[Op], name: str) -> set[str]:
    op = next((o for o in ops if o.name == name), None)
    if op is None:
        return set()
    return {op.name, op.ident, op.kernel, f"{NAMESPACE}::{op.name}"}


def _normalize(message: str, words: Iterable[str] = ()) -> str:
    """A reason with what is particular to one op taken out, so that equal causes group."""
    text = message.strip()
    for w in sorted(words, key=len, reverse=True):
        if w:
            text = re.sub(rf"(?<![\w.]){re.escape(w)}(?![\w])", "<op>", text)
    text = re.sub(r"'[^']*'", "'_'", text)  # names and hints quoted by codegen
    text = re.sub(r"(?<=[:\s(])\d+(?=[:\s)])", "N", text)
    return text[:240]


# ---------------------------------------------------------------------------- the run

def run(work: Path, names: list[str] | None = None, compile: bool = True, unit_size: int = 500, jobs: int = 2,
        merge: bool = False, log=print, optimize: int = 0) -> Survey:
    """The survey of native_functions.yaml (or only the schemas `names`) in the project `work`
    (made here; it must not exist).  `merge`: the library's groups that share the precompiled
    header in one group of units (unity_scope = "library"): the fewest units.  `optimize`: the -O level;
    0 by default, since the survey asks whether the code compiles, links and loads, which
    optimization does not change, and -O0 compiles in about two thirds of -O3's time."""
    path = native_functions_yaml()
    survey = Survey(str(path))
    t0 = time.perf_counter()
    entries = read_schemas(path)
    if names is not None:
        wanted = set(names)
        found: dict[str, tuple[int, object]] = {}
        for i, f in entries:
            if isinstance(f, str) and f.split("(", 1)[0] in wanted:
                found.setdefault(f.split("(", 1)[0], (i, f))
        entries = sorted(found.values(), key=lambda e: e[0])
        missing = wanted - set(found)
        if missing:
            raise ValueError(f"not in {path.name}: {', '.join(sorted(missing))}")
    ops = make_ops(entries, survey)
    make_project(work, unity=min(unit_size, 1000), scope="library" if merge else "group")
    ops, files = generate(work, ops, survey, log)
    survey.timings["generate"] = time.perf_counter() - t0
    files, layout = relayout_units(files, unit_size)
    from .pipeline.writer import write_tree
    write_tree(work / "generated", files)
    if not compile:
        for op in ops:
            survey.outcomes[op.name] = "generated"
        return survey
    t1 = time.perf_counter()
    for round_ in range(1, 4):
        attribution = Attribution(work, ops, files)
        ok, output = compile_library(work, jobs, log, optimize)
        (work / f"build-round{round_}.log").write_text(output, encoding="utf-8")
        if ok:
            survey.library = str(work / "build" / "_C.so")
            break
        errors, unattributed = compiler_errors(output, attribution)
        for name, text in errors.items():
            _record(survey, name, "not compiled", _normalize(text.split(": ", 1)[1], _op_words(ops, name)), text)
        log(f"survey: compile round {round_}: {len(errors)} ops do not compile, {len(unattributed)} errors about no op")
        if not errors:
            tail = unattributed[:5] or output.strip().splitlines()[-5:]
            survey.library = "the build failed with errors about no op: " + " | ".join(tail)
            break
        # The rest, built again (linked and loaded this time): the units that lost no op are
        # unchanged, and so not compiled again.
        ops = [op for op in ops if op.name not in errors]
        ops, files = generate(work, ops, survey, log)
        files, layout = relayout_units(files, unit_size, layout)
        write_tree(work / "generated", files)
    survey.timings["compile"] = time.perf_counter() - t1
    for op in ops:
        if survey.library.endswith("_C.so"):
            survey.outcomes[op.name] = "compiled"
        elif op.name not in survey.outcomes:
            _record(survey, op.name, "not compiled", "the library did not build", survey.library)
    return survey


def report(survey: Survey, top: int = 40) -> str:
    """The figures and the reasons, grouped and counted, largest group first."""
    total = survey.total
    lines = [f"native_functions.yaml: {total} schemas ({survey.source})"]
    pct = (lambda n: f"{100 * n / total:5.1f}%") if total else (lambda n: "")
    lines.append(f"  accepted by codegen generate: {survey.accepted:5d} {pct(survey.accepted)}")
    for outcome in (*OUTCOMES, "generated"):
        n = survey.count(outcome)
        if n or outcome in OUTCOMES:
            lines.append(f"  {outcome + ':':<28}  {n:5d} {pct(n)}")
    for outcome in OUTCOMES[:-1]:
        groups = Counter(survey.reasons[k] for k, o in survey.outcomes.items() if o == outcome)
        if not groups:
            continue
        lines.append(f"\n{outcome} ({sum(groups.values())}), by reason:")
        for reason, n in groups.most_common(top):
            example = next(k for k, o in survey.outcomes.items() if o == outcome and survey.reasons[k] == reason)
            lines.append(f"  {n:5d}  {reason}   [e.g. {example}]")
        if len(groups) > top:
            lines.append(f"  {sum(n for _, n in groups.most_common()[top:]):5d}  ({len(groups) - top} other reasons)")
    if survey.timings:
        lines.append("\n" + ", ".join(f"{k} {v:.0f}s" for k, v in survey.timings.items()))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m opwrap_codegen.survey", description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, help="project directory to make (default: a new temporary one, kept)")
    parser.add_argument("--ops", nargs="*", help="only these schemas (name.overload); --sample: the CI sample")
    parser.add_argument("--sample", action="store_true", help="only the CI sample (SAMPLE)")
    parser.add_argument("--no-compile", action="store_true", help="stop after generate")
    parser.add_argument("--unit-size", type=int, default=500, help="generated sources per translation unit")
    parser.add_argument("--merge", action="store_true", help="one group of units for every per-op source and the "
                        "registration (fewest translation units)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="compilers run at once")
    parser.add_argument("--optimize", "-O", type=int, choices=(0, 1, 2, 3), default=0, help="the compilers' -O level")
    parser.add_argument("--json", type=Path, help="also write every op's outcome and reason here")
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="opwrap-survey-")) / "lib"
    names = list(SAMPLE) if args.sample else args.ops
    survey = run(work, names, compile=not args.no_compile, unit_size=args.unit_size, jobs=args.jobs,
                 merge=args.merge, log=lambda m: print(m, file=sys.stderr, flush=True), optimize=args.optimize)
    print(report(survey))
    print(f"\nproject: {work}", file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps(survey.to_json(), indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
