"""opwrap_codegen.build.cuda_env: importing torch.utils.cpp_extension for a build without CUDA prints no
CUDA warning.

A CUDA build of torch, imported where no GPU is usable, guesses CUDA_HOME as
torch.utils.cpp_extension is first imported and logs "No CUDA runtime is found, using
CUDA_HOME=..." on stderr.  Each case runs in a fresh interpreter (the guess happens once per
process), with CUDA_HOME naming an existing folder, so the guess succeeds, and
CUDA_VISIBLE_DEVICES empty, so no GPU is usable even on a machine that has one.  Nothing is
compiled.
"""

import os
import subprocess
import sys

import pytest
import torch

from conftest import ROOT

WARNING = "No CUDA runtime is found"

pytestmark = pytest.mark.skipif(
    not torch.cuda._is_compiled(),
    reason="a CPU-only torch never guesses CUDA_HOME, so its cpp_extension import has nothing to say")


def _python(script, tmp_path):
    env = {**os.environ, "CUDA_HOME": str(tmp_path), "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": str(ROOT)}
    env.pop("CUDA_PATH", None)
    r = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r


def test_a_plain_import_warns_where_no_gpu_is_usable(tmp_path):
    """What import_cpp_extension is for: torch's own import prints the warning here."""
    r = _python("import torch.utils.cpp_extension", tmp_path)
    assert WARNING in r.stderr and f"CUDA_HOME='{tmp_path}'" in r.stderr, r.stderr


def test_the_import_for_a_build_without_cuda_is_quiet(tmp_path):
    """No warning, nothing at all on stderr; and the logger is as before afterwards: a later
    warning from the module still shows."""
    r = _python("import logging\n"
                "from opwrap_codegen.build.cuda_env import import_cpp_extension\n"
                "m = import_cpp_extension(cuda_built=False)\n"
                "assert m.__name__ == 'torch.utils.cpp_extension' and callable(m.load), m\n"
                "assert import_cpp_extension(cuda_built=False) is m\n"
                "logger = logging.getLogger('torch.utils.cpp_extension')\n"
                "assert not logger.filters, logger.filters\n"
                "logger.warning('a later warning')\n", tmp_path)
    assert WARNING not in r.stderr, r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].endswith("a later warning"), r.stderr


def test_the_import_for_a_cuda_build_keeps_torchs_message(tmp_path):
    """Building CUDA where no GPU is usable: the message is true (the kernels compile but
    cannot run here), so it is left alone."""
    r = _python("from opwrap_codegen.build.cuda_env import import_cpp_extension\n"
                "import_cpp_extension(cuda_built=True)\n", tmp_path)
    assert WARNING in r.stderr, r.stderr


def test_builds_and_wheels_without_cuda_are_quiet(tmp_path):
    """The build's own entry points: deciding on no CUDA (no GPU here, --no-cuda, or
    OPWRAP_CUDA=0 for a wheel) and preparing the build prints no warning."""
    r = _python("import os\n"
                "from opwrap_codegen import build\n"
                "from opwrap_codegen.core.config import load_config\n"
                f"config = load_config({str(ROOT)!r})\n"
                "os.environ['OPWRAP_CUDA'] = '0'\n"
                "assert build.resolve_cuda(config, build.wheel_cuda(), log=lambda m: None, need_gpu=False) is None\n"
                "build.import_cpp_extension(cuda_built=False)\n"
                "build.wheel_build_dir(config)\n"
                "assert build.resolve_cuda(config, None, log=print) is None\n", tmp_path)
    assert WARNING not in r.stderr, r.stderr
    assert "no GPU here to run them" in r.stdout, r.stdout
