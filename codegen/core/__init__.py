"""The lowest layer: what every other layer speaks.  Positioned errors (diagnostics,
yaml_nodes), the project's configuration (config), string literals of generated code
(literals), and the tables of facts: dtypes, devices and build targets (targets), torch
releases (torch_compat), CUDA architectures (cuda_archs).  It imports nothing of the toolchain
but `opwrap_codegen.pyruntime` (torch_compat asks it the running torch's release)."""
