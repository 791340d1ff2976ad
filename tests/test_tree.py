"""The generated tree: a killed `codegen generate` leaves each file old or new, never partial;
the drift check sees any one-byte change, added or deleted file; nothing is written outside
generated/; two builds at once in one tree serialize on a lock."""

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from opwrap_codegen.core.config import load_config
from opwrap_codegen.pipeline.passes import generate
from opwrap_codegen.pipeline.writer import diff_tree, existing_files, unsafe_path, write_tree
from conftest import ROOT, run_codegen, run_python

N_OPS = 150


def make_project(root: Path, namespace: str, doc: str = "") -> None:
    (root / "declarations").mkdir(parents=True, exist_ok=True)
    (root / "kernels").mkdir(exist_ok=True)
    (root / "pyproject.toml").write_text(f'[tool.codegen]\nnamespace = "{namespace}"\nkernels = "kernels"\n')
    decls = "".join(f"- func: op{i}(Tensor self, Tensor other, float alpha=1) -> Tensor\n"
                    f"  doc: op {i}{doc}\n  dtypes: floating\n  pointwise: self + alpha * other * {i}\n"
                    f"  derivatives: {{self: grad, other: grad * alpha * {i}}}\n" for i in range(N_OPS))
    (root / "declarations" / "ops.yaml").write_text(decls)


def files_of(root: Path) -> dict[str, str]:
    return generate(load_config(root)).files


@pytest.mark.slow(7)
def test_killed_generate_leaves_old_or_new_files(tmp_path):
    make_project(tmp_path, "before")
    old = files_of(tmp_path)
    write_tree(tmp_path / "generated", old)
    make_project(tmp_path, "after", doc=" (changed)")  # a new namespace changes nearly every file
    new = files_of(tmp_path)
    assert sum(old.get(k) != v for k, v in new.items()) > N_OPS
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    gen = tmp_path / "generated"
    dirs = [gen, *sorted(p for p in gen.rglob("*") if p.is_dir())]

    def run(kill_at: float | None) -> float:
        """Run `codegen generate`; return how long it wrote (from its first write to its exit).
        With `kill_at`, SIGKILL it that fraction of `writing` seconds after its first write: each
        write makes a temporary file beside its target, which changes that directory's time.
        (Kill points timed from the start instead miss the writing on a loaded machine, where
        starting up takes a varying time: a parallel test run is one.)"""
        before = [d.stat().st_mtime_ns for d in dirs]
        p = subprocess.Popen([sys.executable, "-m", "opwrap_codegen.cli", "generate"], cwd=tmp_path, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while p.poll() is None and [d.stat().st_mtime_ns for d in dirs] == before:
            time.sleep(0.001)
        t0 = time.perf_counter()
        if kill_at is None:
            assert p.wait() == 0
            return time.perf_counter() - t0
        time.sleep(kill_at * writing)
        p.send_signal(signal.SIGKILL)
        p.wait()
        return time.perf_counter() - t0

    writing = run(None)  # to learn how long writing takes; then back to the old tree
    kills = 0  # kills that landed while files were being written (some old, some new)
    # Kill points over the writing, on a fine grid, until three have landed mid-write: timing
    # on a loaded machine varies from run to run.
    for attempt in range(40):
        if kills >= 3:
            break
        write_tree(gen, old)
        run((((attempt * 7) % 40) + 0.5) / 40)
        on_disk, text = existing_files(gen), {}
        for rel, path in on_disk.items():
            if rel.endswith(".tmp"):  # a killed write's temporary file: hidden, removed next run
                assert Path(rel).name.startswith(".")
                continue
            text[rel] = path.read_text()
            assert text[rel] in (old.get(rel), new.get(rel)), f"{rel} is neither the old nor the new version"
        to_change = [rel for rel in new if old.get(rel) != new[rel]]
        done = sum(text.get(rel) == new[rel] for rel in to_change)
        kills += 0 < done < len(to_change)
    assert kills, "no kill landed while files were being written; the run is faster than expected"
    run(None)  # the next run completes the tree and removes the leftovers
    assert diff_tree(gen, new, "generated") == []


@pytest.fixture(scope="module")
def small_tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("drift")
    make_project(root, "drift")
    files = files_of(root)
    write_tree(root / "generated", files)
    return root, files


def _edits(files: dict[str, str], rng: random.Random):
    """(description, function editing the tree) for sampled one-byte edits, insertions and
    deletions, added files and removed files."""
    names = sorted(files)
    for _ in range(40):
        rel = rng.choice(names)
        size = len(files[rel].encode())
        pos = rng.randrange(size)
        kind = rng.choice(("flip", "insert", "delete"))

        def edit(root, rel=rel, pos=pos, kind=kind):
            p = root / "generated" / rel
            b = bytearray(p.read_bytes())
            if kind == "flip":
                b[pos] ^= 1 << rng.randrange(8)
            elif kind == "insert":
                b[pos:pos] = b" "
            else:
                del b[pos]
            p.write_bytes(bytes(b))
        yield f"{kind} at byte {pos} of {rel}", edit
    for rel in ("extra.h", "cpu/extra.cpp", ".hidden", "python/__pycache__/notes.txt", "new_dir/x"):
        def add(root, rel=rel):
            p = root / "generated" / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text("")
        yield f"add {rel}", add
    for rel in rng.sample(names, 5):
        yield f"delete {rel}", lambda root, rel=rel: (root / "generated" / rel).unlink()
    rel = rng.choice(names)

    def symlink(root, rel=rel):
        p = root / "generated" / rel
        (root / "copy").write_bytes(p.read_bytes())
        p.unlink()
        p.symlink_to(root / "copy")
    yield f"replace {rel} by a symbolic link to an identical file", symlink


@pytest.mark.slow(7)
@pytest.mark.xdist_group("small_tree")
def test_drift_check_sees_every_single_change(small_tree):
    root, files = small_tree
    assert diff_tree(root / "generated", files, "generated") == []
    for what, edit in _edits(files, random.Random(8)):
        edit(root)
        assert diff_tree(root / "generated", files, "generated"), f"drift check missed: {what}"
        write_tree(root / "generated", files)  # repair
        assert diff_tree(root / "generated", files, "generated") == [], f"not repaired after: {what}"


@pytest.mark.slow(2)
@pytest.mark.xdist_group("small_tree")
def test_drift_check_exit_status(small_tree):
    root, files = small_tree
    assert run_codegen("check", cwd=root).returncode == 0
    p = root / "generated" / "registration.cpp"
    p.write_bytes(p.read_bytes()[:-1])
    r = run_codegen("check", cwd=root)
    assert r.returncode == 1 and "registration.cpp" in r.stdout and "Traceback" not in r.stderr
    assert run_codegen("generate", cwd=root).returncode == 0
    assert run_codegen("check", cwd=root).returncode == 0


@pytest.mark.parametrize("rel", ["../x.h", "/etc/x.h", "a/../../x.h", ".hidden.h", "a//b.h", "x.h.tmp", "a b.h", "a\\b.h", ""])
def test_unsafe_generated_paths_are_refused(tmp_path, rel):
    assert unsafe_path(rel)
    with pytest.raises(ValueError, match="refusing to write"):
        write_tree(tmp_path / "generated", {rel: "x"})
    assert not (tmp_path / "x.h").exists()


def test_generated_directory_reaching_outside_through_a_link_is_refused(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "generated").mkdir()
    (tmp_path / "generated" / "cpu").symlink_to(outside)
    with pytest.raises(ValueError, match="leads outside"):
        write_tree(tmp_path / "generated", {"cpu/a.cpp": "x"})
    assert not any(outside.iterdir())
    # through the CLI: a positioned error, exit status 2, no traceback
    (tmp_path / "pyproject.toml").write_text('[tool.codegen]\nnamespace = "x"\nkernels = "k"\n')
    (tmp_path / "declarations").mkdir()
    (tmp_path / "declarations" / "a.yaml").write_text("- func: f(Tensor self) -> Tensor\n  dtypes: [float32]\n  pointwise: self\n")
    r = run_codegen("generate", cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.startswith("generated: error: refusing to write 'cpu/f.")
    assert not any(outside.iterdir()) and [p.name for p in (tmp_path / "generated").iterdir()] == ["cpu"]  # nothing written


@pytest.mark.parametrize("setting, message", [
    ('generated = "."', "generated must be a directory inside the project"),
    ('generated = "../elsewhere"', "generated must be a directory inside the project"),
    ('generated = "/tmp/gen"', "generated must be a directory inside the project"),
    ('generated = "src"\ndeclarations = "src/decls"', "generated ('src') must not hold declarations"),
    ('build = 3', "build must be a string"),
    ('plugins = "mod:attr"', "plugins must be a list of strings"),
    ('library = "lib/_C"', "library must be a Python identifier"),
])
def test_config_cannot_point_codegen_outside_the_project(tmp_path, setting, message):
    (tmp_path / "pyproject.toml").write_text(f'[tool.codegen]\nnamespace = "x"\n{setting}\n')
    r = run_codegen("generate", cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert f"pyproject.toml:1:1: error: [tool.codegen] {message}" in r.stderr


def test_plugin_emitting_an_unsafe_path_is_an_error(project):
    (project / "evil_plugin.py").write_text(
        "from opwrap_codegen.plugins.base import Output, Plugin\n"
        "class Evil(Plugin):\n    name = 'evil'\n"
        "    def emit(self, lib, ctx):\n        yield Output('../../escaped.txt', 'x')\n")
    with open(project / "pyproject.toml", "a") as f:
        f.write('plugins = ["evil_plugin:Evil"]\n')
    (project / "declarations" / "ops.yaml").write_text("- func: f(Tensor self) -> Tensor\n  dtypes: [float32]\n  pointwise: self\n")
    r = run_codegen("generate", cwd=project, env={"PYTHONPATH": f"{ROOT}{os.pathsep}{project}"})
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "error: plugin 'evil' emits '../../escaped.txt'" in r.stderr
    assert not (project.parent / "escaped.txt").exists() and not (project / "generated").exists()


@pytest.mark.slow(60)
@pytest.mark.xdist_group("mylib")
def test_concurrent_builds_in_one_tree_serialize(mylib):
    # conftest.py's `mylib` fixture started two `codegen build --no-cuda` at once in a fresh
    # `codegen init` project (the library test_build.py then checks): each generates, then
    # compiles, and one waits for the other's lock.
    lib = mylib.path
    assert mylib.record["init"][0] == 0, mylib.record["init"][1]
    returncodes, outputs = mylib.record["builds"]
    assert returncodes == [0, 0], outputs
    assert any("waiting for another codegen process" in o for o in outputs), outputs
    check = mylib.record["check"]  # run right after the two builds
    assert check[0] == 0, check[1]
    with mylib.locked():  # test_build.py changes a declaration for a while, under this lock
        r = run_python(["-c", "import torch, mylib; print(mylib.ops.scale(torch.ones(3), 2.0).tolist())"],
                       cwd=lib, env=dict(os.environ, PYTHONPATH=str(lib)))
    assert r.returncode == 0 and "[2.0, 2.0, 2.0]" in r.stdout, r.stderr
