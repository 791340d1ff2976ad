"""opwrap's toolchain: declarations in, schemas, kernels, autograd, fake kernels and stubs out.

The source folder is `codegen/`; installed, it is the package `opwrap_codegen` (the
distribution `opwrap-codegen`), a name no other project on PyPI uses.  The command line is
`codegen` (cli.py); op libraries name `opwrap_codegen.backend` as their build backend.
"""

__version__ = "0.1.0"
