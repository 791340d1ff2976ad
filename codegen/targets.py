"""What opwrap builds for, as data: the CPU capabilities each generated CPU loop is compiled
for besides the default build (chosen at run time by ATen's CPU dispatch, as its own
kernels are).  The build (opwrap_codegen.build), the generated-kernel plugins and the survey
read this one table."""

from __future__ import annotations

# Translation units `<group>.<CAPABILITY>.<n>.cpp`, each compiled with that capability's flags
# (ATen's: DEFAULT is the group without a suffix).
CPU_CAPABILITIES = ("AVX2", "AVX512")
