import importlib
import json
import os
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pytest
from filelock import FileLock  # a dependency of torch

ROOT = Path(__file__).resolve().parent.parent
CODEGEN = [sys.executable, "-m", "opwrap_codegen.cli"]

# torch.compile with inductor compiles its C++ in this process, not in a pool of worker
# processes that each import torch (set before any test imports torch, and inherited by the
# scripts tests run): each process that first compiles a graph started a pool, about 5 s of
# CPU, to compile a few small kernels, on a machine whose cores xdist's workers already use.
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")


@contextmanager
def torch_feature(name: str):
    """The block needs the torch feature `name` (opwrap_codegen.core.torch_compat.FEATURES): on a
    release that has it, the block must pass; on an older one, it must fail with the error
    that FEATURES records for it there, and nothing else (a test of what degrades, not a skip)."""
    from opwrap_codegen.core import torch_compat
    feature = torch_compat.FEATURE[name]
    if torch_compat.supports(name):
        yield
        return
    assert feature.error is not None, f"{name}: FEATURES records no error for releases before {feature.since}"
    with pytest.raises(Exception, match=feature.error):  # torch's own type: RuntimeError, a dynamo or opcheck error
        yield


def bundled_build() -> dict:
    """How build/ was last built (its manifest, build/_C.json): `make build`'s -O3, or whatever
    a developer built there since (`codegen build -O0`, ...).  A test that builds build/ again
    and expects nothing to compile asks for the same."""
    path = ROOT / "build" / "_C.json"
    if not path.is_file():
        pytest.fail("build/_C.so missing: run `make build` first")
    from opwrap_codegen.build import DEFAULT_OPTIMIZE, capability_units_built
    built = json.loads(path.read_text())
    optimize = built.get("optimize", DEFAULT_OPTIMIZE)
    return {"optimize": optimize,
            "cpu_capabilities": built.get("cpu_capabilities", capability_units_built(optimize, None)),
            "fast_bindings": built.get("fast_bindings", True)}


def run_codegen(*args, cwd=ROOT, env=None):
    """Run the CLI in a process of its own, as a user would; returns the CompletedProcess.
    The process is forked from the test zygote (tests/zygote.py), which has imported torch
    already: `codegen build` imports torch, about 2 s of CPU each time otherwise."""
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    e.update(env or {})
    return run_python([*CODEGEN[1:], *args], cwd=cwd, env=e)


def run_python(args, cwd=None, env=None, input=None, timeout=None):
    """`subprocess.run([sys.executable, *args], capture_output=True, text=True, ...)` for
    `-c CODE` and `-m MODULE`, forked from the test zygote, which has imported torch already
    (tests/zygote.py): for a script that imports torch and a test library, a command that
    needs a process of its own but not a fresh interpreter."""
    from zygote import Zygote
    return Zygote.get().run(args, cwd=cwd, env=env, input=input, timeout=timeout)


def codegen_in_process(command, *args, cwd):
    """The CLI's `command` run in this process (click's CliRunner) on the project in `cwd`:
    for the hundreds of declaration-error cases, each of which would otherwise start Python
    and import the toolchain (about 0.2 s of CPU).  The exit status and both streams are the
    command's; an exception the CLI does not turn into its exit status 2 fails the test with
    its traceback, as a traceback in a subprocess's stderr would.  run_codegen's subprocess
    stays for what needs a real process (exit statuses of the program, no traceback printed)."""
    from click.testing import CliRunner

    from opwrap_codegen.cli import main
    result = CliRunner().invoke(main, [command, "--project", str(cwd), *args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return subprocess.CompletedProcess([command, *args], result.exit_code, result.stdout, result.stderr)


@pytest.fixture
def project(tmp_path):
    """A fresh op-library project (pyproject + declarations dir) in a temp directory."""
    (tmp_path / "declarations").mkdir()
    (tmp_path / "kernels").mkdir()
    (tmp_path / "pyproject.toml").write_text(
        '[tool.codegen]\nnamespace = "testlib"\nkernels = "kernels"\n', encoding="utf-8")
    return tmp_path


# ------------------------------------------------------------------ parallel runs (pytest -n, xdist)
# `make test` runs the suite with pytest-xdist, one worker per core, `--dist loadgroup`.  The
# tests that compile a library of their own take most of the time, so they carry
# `@pytest.mark.slow(seconds)` and come first, the slowest first: the scheduler hands tests out
# in collection order, one at a time, and the rest of the suite then runs beside them.  Tests
# that should share one worker (one built library, one mypy cache) carry
# `@pytest.mark.xdist_group(name)`.

def _seconds(item) -> float:
    mark = item.get_closest_marker("slow")
    if mark is None:
        return 0
    return mark.args[0] if mark.args else mark.kwargs["seconds"]


def pytest_itemcollected(item):
    # A test of conftest's `sharedlib` (asked for directly or through a fixture such as
    # test_autograd's `gradlib`) carries the `sharedlib` mark, which `make torch-matrix` and
    # `make test-asan` leave out: one such test would compile the whole library again on every
    # release, and under ASan (Makefile).
    if "sharedlib" in getattr(item, "fixturenames", ()):
        item.add_marker(pytest.mark.sharedlib)


_GROUPS = "OPWRAP_TEST_XDIST_GROUPS"  # where workers write {node id: xdist_group} for the scheduler


@pytest.hookimpl(trylast=True)  # after xdist's own hook, which would change node ids
def pytest_collection_modifyitems(config, items):
    items.sort(key=lambda item: -_seconds(item))  # stable: everything else keeps its order
    table, worker = os.environ.get(_GROUPS), os.environ.get("PYTEST_XDIST_WORKER")
    if table and worker:
        groups = {item.nodeid: str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
                  for item in items if (mark := item.get_closest_marker("xdist_group"))}
        tmp = f"{table}.{worker}"
        Path(tmp).write_text(json.dumps(groups))
        os.replace(tmp, table)  # every worker writes the same table


def pytest_configure(config):
    # In the controller of an xdist run (workers run with dist "no"): a file for the table,
    # named in the environment that the workers, started after this, inherit.
    if getattr(config.option, "dist", "no") == "loadgroup" and not os.environ.get("PYTEST_XDIST_WORKER"):
        fd, table = tempfile.mkstemp(prefix="xdist-groups-", suffix=".json")
        os.close(fd)
        os.environ[_GROUPS] = table
        config.add_cleanup(lambda: os.unlink(table))
    _hypothesis_seed(config)


# ------------------------------------------------------------------ hypothesis (tests/test_fuzz.py)
# Profiles: "ci" (the default, what `make test` and CI run) explores new inputs on every run,
# from a seed drawn here and printed with every failure ("replay: ... --hypothesis-seed=N"),
# each test within the max_examples its @settings give; nothing is read from or written to
# an example database, so a run depends on its seed alone.  "replay" is the old
# deterministic run (derandomize: the same inputs every time).  Choose one with
# `pytest --hypothesis-profile=replay`; replay a CI failure with `--hypothesis-seed=N`.
try:
    from hypothesis import settings as _hypothesis_settings
except ImportError:  # hypothesis is a dev dependency
    _hypothesis_settings = None
else:
    _hypothesis_settings.register_profile("ci", derandomize=False, database=None, print_blob=True)
    _hypothesis_settings.register_profile("replay", derandomize=True, database=None, print_blob=True)
    _hypothesis_settings.load_profile("ci")

_SEED = "OPWRAP_HYPOTHESIS_SEED"  # the run's seed, drawn by the controller, inherited by xdist workers


def _hypothesis_seed(config) -> None:
    """Unless --hypothesis-seed gave one, draw the run's seed (the controller of an xdist run
    draws it, its workers inherit it) and make hypothesis use it, as --hypothesis-seed does."""
    if _hypothesis_settings is None:
        return
    from hypothesis import core
    if config.getoption("hypothesis_seed", None) is not None:
        return  # hypothesis' own plugin set it
    if not os.environ.get(_SEED):
        import random
        os.environ[_SEED] = str(random.SystemRandom().randrange(2**32))
    core.global_force_seed = int(os.environ[_SEED])


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed hypothesis test says how to replay its inputs."""
    outcome = yield
    report = outcome.get_result()
    if report.failed and _hypothesis_settings is not None and getattr(getattr(item, "obj", None), "is_hypothesis_test",
                                                                       False):
        from hypothesis import core
        profile = _hypothesis_settings.get_current_profile_name()
        seed = core.global_force_seed
        how = ("its inputs do not depend on a seed (derandomize)" if _hypothesis_settings.default.derandomize
               else f"replay: pytest --hypothesis-profile={profile} --hypothesis-seed={seed} '{item.nodeid}'")
        report.sections.append(("hypothesis", f"profile {profile!r}, seed {seed}; {how}"))


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadgroup` as pytest-xdist means it: xdist (3.8) finds a test's group in a suffix
    it appends to the node id (`...::test@group`), which pytest 9's node ids no longer take, so
    every test ends up a group of its own.  This scheduler reads the groups from the table the
    workers wrote as they collected; everything else is xdist's LoadScopeScheduling, with each
    test not in a group its own scope."""
    if config.getvalue("dist") != "loadgroup" or not os.environ.get(_GROUPS):
        return None
    from xdist.scheduler import LoadScopeScheduling
    config.option.loadscopereorder = False  # keep the collection order (slowest first), not the largest group first

    class GroupScheduling(LoadScopeScheduling):
        groups = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:  # first called once every worker has collected
                self.groups = json.loads(Path(os.environ[_GROUPS]).read_text() or "{}")
            group = self.groups.get(nodeid)
            return f"xdist_group:{group}" if group else nodeid

    return GroupScheduling(config, log)


def shared_dir(tmp_path_factory, name: str) -> Path:
    """A directory that every worker of this run sees under the same path: the run's base
    temporary directory under xdist (each worker's own is below it), this process's without."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    path = base / name
    path.mkdir(exist_ok=True)
    return path


@contextmanager
def locked(directory: Path):
    """Hold an exclusive lock on `directory` (a lock file beside it) for the block: across
    threads, processes and xdist workers."""
    with FileLock(str(directory) + ".lock"):
        yield


def made_once(tmp_path_factory, name: str, make) -> tuple[Path, dict]:
    """Library `name`, made once per run by `make(<its directory>)` (whichever worker asks
    first; the others wait on the lock): the run's shared directory holding it, and what `make`
    recorded (exit statuses and outputs, for the tests to check)."""
    root = shared_dir(tmp_path_factory, f"shared-{name}")
    record = root / "record.json"
    with locked(root):
        if not record.exists():
            record.write_text(json.dumps(make(root / name)))
    return root, json.loads(record.read_text())


def import_library(project: Path):
    """The Python package `project.name` of a built test library in `project`, imported with
    that folder on sys.path only for the import."""
    sys.path.insert(0, str(project))
    try:
        return importlib.import_module(project.name)
    finally:
        sys.path.remove(str(project))


def run_script(lib: Path, code: str) -> str:
    """Run `code`, a script that imports the built test library in `lib`, in this process (the
    library imported first, with `lib` on sys.path for that), in a namespace of its own, and
    return what it printed; an exception fails the test with its traceback.  A fresh
    interpreter for each such script cost 2.5-3 s of CPU, 2.3 of them torch's import.  For a
    library that no test rebuilds while this worker has it loaded."""
    import contextlib
    import io
    import_library(lib)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, f"<{lib.name} script>", "exec"), {"__name__": "__script__"})
    return out.getvalue()


def one_unit_a_group(lib: Path) -> None:
    """Compile test library `lib` in the fewest translation units: `[tool.codegen] unity`
    as large as it goes, and `unity_scope = "library"`, so the groups that share the
    precompiled header (cpu, autograd, pointwise) are one unit (a group its plugin caps keeps
    its cap).  A unit's fixed cost (loading the precompiled header, the torch templates every
    unit instantiates again) is 1.5 to 3 s of CPU at -O0 on this project's 2-core machine, and
    nobody edits a test library one op at a time: sharedlib's build took 50 s of CPU in 8
    units, 40 s in 5; its three groups' units 22.1 s of compiler time, one unit 19.2 s."""
    pyproject = lib / "pyproject.toml"
    text = pyproject.read_text()
    table = "\n[tool.codegen]\n"
    settings = 'unity = 1000\nunity_scope = "library"\n'
    pyproject.write_text(text.replace(table, table + settings, 1) if table in text else text + table + settings)


class SharedLibrary:
    """A library built once per run for several tests (see `mylib`): its project directory,
    what making it printed (`record`), and `locked()` for a test that changes the project."""

    def __init__(self, root: Path, record: dict, name: str = "mylib"):
        self.root, self.path, self.record = root, root / name, record

    def locked(self):
        return locked(self.root)


# `mylib`: a library made with `codegen init` plus three ops (cwrap-style split_types, a shape
# rule with a run of dimensions and an expression, a pointwise expression, a formula that saves
# only sizes).  test_build.py checks what it generates and how it runs; test_tree.py that its
# two builds, started at once, serialized.  Making it is what those two tests did each with a
# library of its own (init, generate, build), now done once.
MYLIB_FILES = {
    "declarations/tile.yaml":
        "- func: tile_last(Tensor self, int times) -> Tensor\n"
        "  dtypes: [float32]\n"
        "  kernels: {CPU: tile_last_cpu}\n"
        "  shape:\n"
        "    self: ['*B', N]\n"
        "    result: ['*B', N * times]\n",
    "kernels/tile_last.h":
        "#pragma once\n#include <ATen/core/Tensor.h>\nnamespace mylib::kernels {\n"
        "template <typename T> void tile_last_cpu(const at::Tensor& self, int64_t times, at::Tensor& out) {\n"
        "  const int64_t n = self.size(-1), rows = self.numel() / (n ? n : 1);\n"
        "  const T* in = self.const_data_ptr<T>(); T* o = out.mutable_data_ptr<T>();\n"
        "  for (int64_t r = 0; r < rows; ++r) for (int64_t j = 0; j < n * times; ++j) o[r * n * times + j] = in[r * n + j % n];\n"
        "}\n}\n",
    # A pointwise expression: generated kernels for every CPU capability.
    "declarations/axpy.yaml":
        "- func: axpy(Tensor x, Tensor y, Scalar a=2) -> Tensor\n"
        "  dtypes: [float32, float64, int64]\n"
        "  pointwise: a * x + y\n"
        "  derivatives: {x: grad * a, y: grad}\n",
    # A third whose formula needs only the input's sizes, so only they are saved.
    "declarations/row_sum.yaml":
        "- func: row_sum(Tensor self) -> Tensor\n"
        "  dtypes: [float64]\n"
        "  kernels: {CPU: row_sum_cpu}\n"
        "  shape: {self: [N, M], result: [N]}\n"
        "  derivatives:\n"
        "    self: grad.unsqueeze(1).expand_symint(self.sym_sizes())\n",
    "kernels/row_sum.h":
        "#pragma once\n#include <ATen/core/Tensor.h>\nnamespace mylib::kernels {\n"
        "template <typename T> void row_sum_cpu(const at::Tensor& self, at::Tensor& out) {\n"
        "  const int64_t n = self.size(0), m = self.size(1); const T* in = self.const_data_ptr<T>();\n"
        "  T* o = out.mutable_data_ptr<T>();\n"
        "  for (int64_t i = 0; i < n; ++i) { T acc = 0; for (int64_t j = 0; j < m; ++j) acc += in[i * m + j]; o[i] = acc; }\n"
        "}\n}\n",
}


def _make_mylib(lib: Path) -> dict:
    """`codegen init`, the ops above, then two `codegen build`s started at once (each
    generates, then compiles; one waits for the other's lock), `codegen check`, then `codegen
    generate`.  Returns
    the exit statuses and outputs, for the tests to check; asserts nothing itself."""
    record = {}
    r = run_codegen("init", str(lib))
    record["init"] = [r.returncode, r.stderr]
    r = run_codegen("init", str(lib))  # a second time: it must refuse to overwrite
    record["init_again"] = [r.returncode, r.stderr]
    if record["init"][0] != 0:
        return record
    decl = lib / "declarations" / "scale.yaml"
    decl.write_text(decl.read_text() + "  split_types: true\n")
    for rel, text in MYLIB_FILES.items():
        (lib / rel).write_text(text)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    # CPU only, -O0: less to compile; with the fast Python bindings, whose use of the units'
    # precompiled header test_build.py checks (an -O0 build leaves them out unless asked)
    procs = [subprocess.Popen([*CODEGEN, "build", "--no-cuda", "-O0", "--fast-bindings"], cwd=lib, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for _ in range(2)]
    outputs = [p.communicate()[0] for p in procs]
    record["builds"] = [[p.returncode for p in procs], outputs]
    r = run_codegen("check", cwd=lib)  # the tree the two builds generated at once is exact
    record["check"] = [r.returncode, r.stdout + r.stderr]
    r = run_codegen("generate", cwd=lib)
    record["generate"] = [r.returncode, r.stderr]
    return record


def _make_pynames(lib: Path) -> dict:
    """`codegen init` (its op `scale`; one unit a group), the ops of test_python_api.py's NAMES_DECLARATIONS
    (keyword names, returns the kernels make) with their kernels, and test_stubs.py's OPS
    without kernel headers; `codegen stubs` writes those, then `codegen build`.  Returns the
    exit statuses and outputs; asserts nothing itself."""
    from test_python_api import NAMES_DECLARATIONS, NAMES_KERNELS
    from test_stubs import OPS
    record = {}
    r = run_codegen("init", str(lib))
    record["init"] = [r.returncode, r.stderr]
    if r.returncode != 0:
        return record
    one_unit_a_group(lib)
    (lib / "declarations" / "names.yaml").write_text(NAMES_DECLARATIONS)
    (lib / "kernels" / "names.h").write_text(NAMES_KERNELS)
    (lib / "declarations" / "blend.yaml").write_text(OPS)
    # --fast-bindings: the tests call the ops through the fast Python bindings as well as their wrappers
    for step, args in (("stubs", ["stubs"]), ("build", ["build", "--no-cuda", "-O0", "--fast-bindings"])):
        r = run_codegen(*args, cwd=lib)
        record[step] = [r.returncode, r.stdout + r.stderr]
    return record


@pytest.fixture(scope="session")
def pynames(tmp_path_factory):
    """The `pynames` library (see _make_pynames), made and built once per run for the tests
    of test_python_api.py and test_stubs.py that call its ops (xdist_group "pynames"): one
    library's compile instead of two."""
    return SharedLibrary(*made_once(tmp_path_factory, "pynames", _make_pynames), "pynames")


# `sharedlib`: one library made with `codegen init` holding the ops of several test files,
# each declared in its own file next to its tests: test_kernel_types.py (every schema type and
# name), test_autograd.py (Tensor[] formulas, out= and mutable ops), test_shapes.py (the shape
# rules end to end), test_dtype_rules.py (per-argument dtypes), test_rowwise.py (row-wise
# programs; it checks that a second build compiles nothing) and test_pointwise.py (an
# expression whose arguments have any names).  Each had a library of its
# own, compiled from nothing in every run; one library pays the fixed cost of a library (its
# registration and Python bindings, the headers of each unit, the link) once.  Each module adds
# its files with `add_to_sharedlib(lib)`; test_dtype_rules.py's kernel headers come after a
# first `codegen generate`, whose notes say what to write (its test reads them).  The ops
# share the namespace `sharedlib`; where two files declared the same op, test_shapes.py's
# `cat_rows` is `concat_rows` here.  Tests that use it carry the xdist_group "sharedlib".
SHAREDLIB_MODULES = ("test_kernel_types", "test_autograd", "test_shapes", "test_dtype_rules", "test_rowwise",
                     "test_pointwise")


def _make_sharedlib(lib: Path) -> dict:
    """`codegen init` (its op `scale`; one unit a group), the files of SHAREDLIB_MODULES, `codegen generate`
    without test_dtype_rules.py's kernel headers, then those headers and `codegen build
    --no-cuda -O0`, twice (the second compiles nothing).  Returns the exit statuses and
    outputs; asserts nothing itself."""
    import importlib
    record = {}
    r = run_codegen("init", str(lib))
    record["init"] = [r.returncode, r.stdout + r.stderr]
    if r.returncode != 0:
        return record
    one_unit_a_group(lib)
    modules = [importlib.import_module(name) for name in SHAREDLIB_MODULES]
    for module in modules:
        module.add_to_sharedlib(lib)
    r = run_codegen("generate", cwd=lib)  # no kernel headers of test_dtype_rules.py yet
    record["missing"] = [r.returncode, r.stdout + r.stderr]
    importlib.import_module("test_dtype_rules").add_kernel_headers(lib)
    # CPU only, -O0: less to compile; --fast-bindings: test_kernel_types.py calls every type
    # through the fast Python bindings too
    r = run_codegen("build", "--no-cuda", "-O0", "--fast-bindings", cwd=lib)
    record["build"] = [r.returncode, r.stdout + r.stderr]
    r = run_codegen("build", "--no-cuda", "-O0", "--fast-bindings", cwd=lib)  # a second time: nothing to compile
    record["noop"] = [r.returncode, r.stdout + r.stderr]
    return record


@pytest.fixture(scope="session")
def sharedlib(tmp_path_factory):
    """The `sharedlib` library (see _make_sharedlib), made and built once per run."""
    return SharedLibrary(*made_once(tmp_path_factory, "sharedlib", _make_sharedlib), "sharedlib")


@pytest.fixture(scope="session")
def mylib(tmp_path_factory):
    """The `mylib` library, made and built once per run: by whichever worker asks first, while
    the others wait on the lock (tests using it share the xdist_group "mylib", so they wait
    little)."""
    return SharedLibrary(*made_once(tmp_path_factory, "mylib", _make_mylib))


# ------------------------------------------------------------------ the time budget (make test)
# `make test` must finish in minutes on a fresh clone of a 2-core machine (README "Two
# commands").  Each run reports the pytest phase against its budget (OPWRAP_PYTEST_BUDGET
# seconds, set by the Makefile) and its ten slowest items: a report, not a failing test (these
# machines are noisy).  A new test that needs a library of its own adds its ops to a shared one
# (conftest's `mylib`, `pynames`, `sharedlib`) unless it cannot, and says why.
_STARTED = []


def _cpu_seconds() -> float:
    """CPU seconds of this process and of its children that have ended (xdist's workers,
    once the run shuts them down, with the compilers and tests they waited for), and of the
    commands its zygote ran (tests/zygote.py; the zygote itself ends, and counts as a child,
    only when this process does)."""
    import resource

    from zygote import Zygote
    return Zygote.cpu_seconds + sum(getattr(resource.getrusage(who), field)
                                    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
                                    for field in ("ru_utime", "ru_stime"))


def _measure_cpu(item, phase):
    """Around one phase of an item: add its CPU seconds (this process and the children it
    waited for: compilers under ninja, codegen subprocesses) to the item's user_properties,
    which its reports carry to the controller of an xdist run."""
    start = _cpu_seconds()
    yield
    item.user_properties.append(("cpu", phase, _cpu_seconds() - start))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    return (yield from _measure_cpu(item, "setup"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    return (yield from _measure_cpu(item, "call"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    return (yield from _measure_cpu(item, "teardown"))


def pytest_sessionstart(session):
    import time
    _STARTED.append((time.monotonic(), _cpu_seconds()))


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    import time
    budget = os.environ.get("OPWRAP_PYTEST_BUDGET")
    if not budget or not _STARTED or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    took, cpu = time.monotonic() - _STARTED[0][0], _cpu_seconds() - _STARTED[0][1]
    # every phase of every item (passing setups and teardowns are filed under ""): a fixture
    # that builds a library counts against the first test that asked for it
    reports = [r for reports in terminalreporter.stats.values() for r in reports
               if hasattr(r, "duration") and hasattr(r, "nodeid")]
    per_item: dict[str, float] = {}
    cpu_of: dict[str, dict[str, float]] = {}  # node id: {phase: CPU seconds} (_measure_cpu)
    for r in reports:
        per_item[r.nodeid] = per_item.get(r.nodeid, 0.0) + r.duration
        for prop in r.user_properties:
            if prop[0] == "cpu":
                cpu_of.setdefault(r.nodeid, {})[prop[1]] = prop[2]
    slowest = sorted(per_item.items(), key=lambda kv: -kv[1])[:10]
    verdict = "within" if took <= float(budget) else "OVER"
    # CPU seconds too: wall time on a shared machine says as much about the neighbours
    terminalreporter.write_sep("=", f"pytest phase: {took:.0f}s ({cpu:.0f}s of CPU), {verdict} its budget of "
                                    f"{float(budget):.0f}s")
    for nodeid, secs in slowest:
        terminalreporter.write_line(f"{secs:8.1f}s  {nodeid}")
    # The same by CPU seconds: what a test costs whatever ran beside it
    terminalreporter.write_line("the ten that took the most CPU (seconds of CPU, with the children they waited for):")
    cpu = sorted(((sum(phases.values()), nodeid) for nodeid, phases in cpu_of.items()), reverse=True)
    for secs, nodeid in cpu[:10]:
        terminalreporter.write_line(f"{secs:8.1f}s  {nodeid}")
    if os.environ.get("OPWRAP_PYTEST_CPU_REPORT"):  # every item's CPU seconds, as JSON, for measuring
        Path(os.environ["OPWRAP_PYTEST_CPU_REPORT"]).write_text(json.dumps(cpu_of, indent=1, sort_keys=True))
