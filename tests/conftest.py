import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CODEGEN = [sys.executable, "-m", "codegen.cli"]


def run_codegen(*args, cwd=ROOT, env=None):
    """Run the CLI in a subprocess, as a user would; returns the CompletedProcess."""
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    e.update(env or {})
    return subprocess.run([*CODEGEN, *args], cwd=cwd, env=e, capture_output=True, text=True)


@pytest.fixture
def project(tmp_path):
    """A fresh op-library project (pyproject + declarations dir) in a temp directory."""
    (tmp_path / "declarations").mkdir()
    (tmp_path / "kernels").mkdir()
    (tmp_path / "pyproject.toml").write_text(
        '[tool.codegen]\nnamespace = "testlib"\nkernels = "kernels"\n', encoding="utf-8")
    return tmp_path
