"""The build backend of opwrap-codegen itself: setuptools, plus a self-contained sdist.

The toolchain's sources sit around this folder (../codegen, ../templates, ../runtime/include,
the layout the project keeps), and pyproject.toml maps them into the package opwrap_codegen.
setuptools builds wheels and editable installs from those paths directly, but an sdist holds
only what is inside its project.  So build_sdist copies each mapped folder in, rewrites the
mapping to the copies and lets setuptools make the sdist of that copy; a wheel built from
the sdist is then an ordinary setuptools build.  (This file is in the copy too: there it
finds nothing outside and stages as is.)
"""

from __future__ import annotations

import os
import shutil
import tempfile
import tomllib
from pathlib import Path

from setuptools import build_meta as _setuptools
from setuptools.build_meta import (build_editable, build_wheel, get_requires_for_build_editable,  # noqa: F401
                                   get_requires_for_build_sdist, get_requires_for_build_wheel,
                                   prepare_metadata_for_build_editable, prepare_metadata_for_build_wheel)

HERE = Path(__file__).resolve().parent


def _inside(rel: str) -> str:
    """A mapped folder's place in the staged copy: '../runtime/include' -> 'runtime/include'."""
    parts = Path(rel).parts
    return Path(*[p for p in parts if p != ".."]).as_posix()


def build_sdist(sdist_directory, config_settings=None):
    text = (HERE / "pyproject.toml").read_text(encoding="utf-8")
    mapping = tomllib.loads(text)["tool"]["setuptools"]["package-dir"]
    with tempfile.TemporaryDirectory() as tmp:
        stage = Path(tmp) / "project"
        shutil.copytree(HERE, stage, ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__"))
        for rel in mapping.values():
            if ".." in Path(rel).parts:
                shutil.copytree(HERE / rel, stage / _inside(rel), ignore=shutil.ignore_patterns("__pycache__"))
                text = text.replace(f'"{rel}"', f'"{_inside(rel)}"')
        (stage / "pyproject.toml").write_text(text, encoding="utf-8")
        cwd = os.getcwd()
        os.chdir(stage)
        try:
            return _setuptools.build_sdist(os.path.abspath(os.path.join(cwd, sdist_directory)), config_settings)
        finally:
            os.chdir(cwd)
