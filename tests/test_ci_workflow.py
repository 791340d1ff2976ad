"""The CI workflow `codegen init` writes (.github/workflows/wheels.yml; docs/shipping.md, "CI of an
op library"): it parses, its matrix names what the library claims (the torch releases its sdist
requires, the Pythons its requires-python admits, CPU and CUDA), and each wheel is built through
the compiler cache and repaired to manylinux_2_28."""

import tomllib

import pytest
import yaml
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from conftest import run_codegen

from codegen.scaffold import CI_CUDA, CI_PYTHONS
from codegen.core.torch_compat import RELEASES, release_name, requirement


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    lib = tmp_path_factory.mktemp("ci") / "cilib"
    r = run_codegen("init", str(lib))
    assert r.returncode == 0, r.stderr
    return lib


def steps_text(job) -> str:
    return "\n".join(yaml.safe_dump(step) for step in job["steps"])


def test_the_workflow_parses_and_its_matrix_is_what_the_library_claims(library):
    workflow = yaml.safe_load((library / ".github" / "workflows" / "wheels.yml").read_text())
    on = workflow.get("on", workflow.get(True))  # YAML 1.1 reads the key `on` as true
    assert {"push", "pull_request", "workflow_dispatch"} <= set(on)
    job = workflow["jobs"]["wheel"]
    matrix = job["strategy"]["matrix"]
    assert set(matrix) == {"torch", "cuda", "python"}
    # torch: every release the library's sdist (and opwrap) claims, each wheel built against one
    claimed = SpecifierSet(requirement().removeprefix("torch"))
    assert matrix["torch"] == [release_name(r) for r in RELEASES]
    assert all(Version(f"{t}.0") in claimed for t in matrix["torch"])
    assert not Version(f"{RELEASES[-1][0]}.{RELEASES[-1][1] + 1}.0") in claimed
    # Python: what the library's requires-python admits
    project = tomllib.loads((library / "pyproject.toml").read_text())["project"]
    assert matrix["python"] == list(CI_PYTHONS)
    assert all(Version(p) in SpecifierSet(project["requires-python"]) for p in matrix["python"])
    # CPU and the CUDA versions of PyTorch's wheel indexes
    assert matrix["cuda"] == list(CI_CUDA) and matrix["cuda"][0] == "cpu"
    text = steps_text(job)
    for name in ("torch", "cuda", "python"):
        assert "${{ matrix.%s }}" % name in text, name
    assert "https://download.pytorch.org/whl/$index" in text


def test_each_wheel_is_built_through_the_compiler_cache_and_repaired(library):
    workflow = yaml.safe_load((library / ".github" / "workflows" / "wheels.yml").read_text())
    job = workflow["jobs"]["wheel"]
    assert job["env"]["OPWRAP_COMPILER_CACHE"] == "sccache" and job["env"]["SCCACHE_GHA_ENABLED"] == "true"
    uses = [s.get("uses", "") for s in job["steps"]]
    assert any(u.startswith("mozilla-actions/sccache-action@") for u in uses)
    wheel = next(s["run"] for s in job["steps"] if s.get("name") == "wheel")
    assert "pip wheel ." in wheel and "-C manylinux=manylinux_2_28" in wheel and "-C wheel-size-budget=" in wheel
    upload = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact@"))
    assert all("${{ matrix.%s }}" % n in upload["with"]["name"] for n in ("torch", "cuda", "python"))
    assert job["env"]["TORCH_CUDA_ARCH_LIST"]
