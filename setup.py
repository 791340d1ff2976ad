"""Wheel builds: the same sources as `codegen build`, compiled by torch's BuildExtension.

Editable development installs (`make venv`) set OPWRAP_NO_EXTENSION=1 and compile with
`codegen build` into build/ instead, where ninja rebuilds only what changed.
"""

import os

from setuptools import setup

ext_modules, cmdclass = [], {}
if os.environ.get("OPWRAP_NO_EXTENSION") != "1":
    from codegen.build import extension, fast_extension
    from codegen.config import load_config

    config = load_config(os.path.dirname(os.path.abspath(__file__)))
    ext_modules = [e for e in (extension(config), fast_extension(config)) if e is not None]
    # After extension() has decided on CUDA and imported cpp_extension (quietly, without CUDA).
    from torch.utils.cpp_extension import BuildExtension
    cmdclass = {"build_ext": BuildExtension.with_options(use_ninja=True)}

setup(ext_modules=ext_modules, cmdclass=cmdclass)
