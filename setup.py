"""Wheels: `pip wheel .` / `pip install .` compile with the same ninja build as `codegen build`
(codegen.build.build, over torch.utils.cpp_extension) and package what it made.

One build graph for development and wheels: the sources and flags cannot drift apart, and a
wheel made after `make build` compiles nothing.  The two modules are declared as setuptools
extensions (so the wheel is a platform wheel with the right file names); `build_ext` runs the
build once and copies each result to where setuptools wants it.  CUDA is compiled whenever
torch and the toolkit can (`OPWRAP_CUDA=1/0` forces the choice), GPU or not.

Editable development installs (`make venv`) set OPWRAP_NO_EXTENSION=1 and leave the library
to `codegen build`, which compiles into build/.
"""

import dataclasses
import os
import shutil
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


class BuildWithCodegen(build_ext):
    """Builds the library and its fast Python bindings with codegen.build, then copies them."""

    def run(self):
        sys.path.insert(0, ROOT)  # codegen itself, also in an isolated build environment
        from codegen import build
        from codegen.config import load_config

        config = load_config(ROOT)
        config = dataclasses.replace(config, build=str(build.wheel_build_dir(config)))
        library = build.build(config, cuda=build.wheel_cuda(), need_gpu=False)
        self.built = {f"{config.python_package}.{config.library}": library}
        fast = library.parent / "python" / f"{build.FAST_MODULE}.so"
        if fast.is_file():
            self.built[f"{config.python_package}._generated.{build.FAST_MODULE}"] = fast
        super().run()

    def build_extension(self, ext):
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(self.built[ext.name], target)


ext_modules = []
if os.environ.get("OPWRAP_NO_EXTENSION") != "1":
    ext_modules = [Extension("opwrap._C", sources=[]), Extension("opwrap._generated._fast", sources=[])]
setup(ext_modules=ext_modules, cmdclass={"build_ext": BuildWithCodegen})
