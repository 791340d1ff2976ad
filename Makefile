# opwrap: `make demo` sets up, builds and runs a short demo; `make test` sets up and runs
# the drift check, the build and the test suite.  Everything lives in .venv.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
CODEGEN := $(VENV)/bin/codegen
PHASE  := scripts/phase
STAMP  := $(VENV)/.installed-stamp

.PHONY: venv generate check build build-stable demo test docs ci cuda-check pytest test-asan test-fast torch-matrix bench gpu-test gpu-prep clean clean-test-tmp survey

venv: $(STAMP)

# Two editable installs: the toolchain (opwrap-codegen, toolchain/pyproject.toml) and the op
# library opwrap, whose editable install compiles nothing: `make build` compiles it with ninja
# into build/, rebuilding only what changed.  Both are setuptools' strict mode, so that mypy
# and pyright find `opwrap` and `opwrap_codegen` (the default mode's import hook they cannot
# follow): trees of links, one per file, in build/__editable__.opwrap-* and
# toolchain/build/__editable__.opwrap_codegen-*.  The stamp lists the modules linked; when one
# is added or removed, a tree is gone (`make clean`), or pip installed either since (a plain
# `pip install -e .`), the install runs again.
# scripts/venv-install installs with uv when it can (a fresh venv: 35 s with a cold uv cache
# against pip's 70 s here), with pip otherwise (OPWRAP_INSTALLER=pip).  Both byte-compile every module.  Keep that:
# with PYTHONDONTWRITEBYTECODE=1 in the environment (as on this project's machines) Python
# never caches what pip did not compile, and every `import torch` compiles torch again (+4 s).
EDITABLE_FILES := $(sort $(wildcard codegen/*.py codegen/*/*.py runtime/opwrap/*.py generated/python/*.py generated/python/*.pyi))
EDITABLE_TREES := $(wildcard build/__editable__.opwrap-*/opwrap/__init__.py toolchain/build/__editable__.opwrap_codegen-*/opwrap_codegen/__init__.py)
EDITABLE_STALE := $(if $(filter 2,$(words $(EDITABLE_TREES))),$(filter-out $(EDITABLE_FILES),$(file <$(STAMP)))$(filter-out $(file <$(STAMP)),$(EDITABLE_FILES)),missing)
$(STAMP): pyproject.toml toolchain/pyproject.toml $(wildcard $(VENV)/lib/python*/site-packages/__editable__.opwrap*.pth) $(if $(EDITABLE_STALE),$(VENV)/.relink)
	@$(PHASE) venv sh -c '\
	  { [ -x $(PY) ] || $(PYTHON) -m venv $(VENV); } && \
	  $(PY) scripts/venv-install'
	@printf '%s\n' $(EDITABLE_FILES) > $(STAMP)

$(VENV)/.relink:  # never made: a prerequisite that is always newer

generate: venv
	@$(PHASE) generate $(CODEGEN) generate

check: venv
	@$(PHASE) drift-check $(CODEGEN) check

build: venv
	@$(PHASE) build $(CODEGEN) build

# The bundled library in the stable-ABI target (docs/stable-abi.md), into build/stable: the ops
# that target can express, each other one a note saying why.
build-stable: venv
	@$(PHASE) build-stable $(CODEGEN) build --target stable --leave-out-unsupported --no-generate

demo: build
	@$(PHASE) demo $(PY) examples/demo.py

# The README's test command: drift check first (against the committed generated/), then
# the build of exactly what is committed, then the tests.
test: venv
	@$(PHASE) drift-check $(CODEGEN) check
	@$(PHASE) build $(CODEGEN) build --no-generate
	@$(MAKE) --no-print-directory pytest

# The documentation site (mkdocs.yml, docs/) into build/site, every warning an error.  Its
# hook (docs/hooks.py) writes the field, type and torch-release tables and the CLI page from
# the code.  NO_MKDOCS_2_WARNING: Material's notice about MkDocs 2, printed on every build.
docs: venv
	@$(PHASE) docs env NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet --site-dir build/site

# Everything CI runs (.ci/run): `make test`, then the docs, the CUDA compile check, the
# sanitizer run and the core tests on every other claimed torch release, one after another:
# side by side they only took turns on the two cores (the CUDA check and the sanitizer run
# together 428 s, one after another 396 s half an hour later; with the CUDA check in the
# background at the lowest priority 414 s, the sanitizer build, which keeps both cores busy,
# slowed by a third).  The matrix overlaps its own steps, the background ones at the lowest
# priority, where its tests leave a core idle (scripts/torch-matrix).
ci: test
	@$(MAKE) --no-print-directory docs
	@$(MAKE) --no-print-directory cuda-check
	@$(MAKE) --no-print-directory test-asan
	@$(MAKE) --no-print-directory torch-matrix

# Every torch release opwrap claims (codegen/core/torch_compat.py: 2.11 to 2.15) other than the
# venv's, each in a venv of its own under build/torch-matrix (scripts/torch-matrix): the bundled
# library built against it, then the core tests on it: registration, reference values and
# misuse (test_ops, test_misuse), opcheck (test_declared_ops), autograd of the bundled ops,
# torch.compile(fullgraph=True) and torch.export (test_pt2), mutable and out= ops (test_mutable's
# library), vmap, the typed Python surface
# (test_pyruntime, test_stubs), and a `codegen init` library built there and checked with
# values, errors, gradcheck, opcheck and compile (test_build's `mylib` tests).  What a release
# lacks is expected by the tests (torch_compat.FEATURES).  Left to the default torch: the tests
# of conftest's `sharedlib` (the `sharedlib` mark; the generator's every argument kind, a third
# library to compile on each release) and mylib's selective and failing builds.  Last, one
# stable-ABI wheel built with the venv's torch is installed into each release's venv and run
# there (tests/test_stable_target.py, scripts/torch-matrix's STABLE_WHEEL_TEST).  TORCH_MATRIX="2.11 2.15" picks releases;
# TORCH_MATRIX_CUDA=1 also compiles every CUDA source against each (not in CI: ~2 min a release).
TORCH_MATRIX ?=
TORCH_MATRIX_TESTS ?= -m "(not slow or torch_matrix) and not sharedlib" tests/test_ops.py tests/test_misuse.py tests/test_declared_ops.py \
  tests/test_autograd.py tests/test_pt2.py tests/test_mutable.py tests/test_vmap.py tests/test_pyruntime.py tests/test_stubs.py \
  tests/test_build.py::test_init_library_passes_opcheck_and_compiles_with_no_graph_break \
  tests/test_build.py::test_init_makes_a_separate_library_that_builds_and_loads
torch-matrix: venv
	@$(PHASE) torch-matrix env TORCH_MATRIX_TESTS='$(TORCH_MATRIX_TESTS)' $(PY) scripts/torch-matrix --keep-going $(if $(TORCH_MATRIX_CUDA),--cuda) $(TORCH_MATRIX)

# Every CUDA source compiled (for one architecture, CUDA_CHECK_ARCH) and linked into
# build/cuda, and the CUDA registration tests run on that library; the kernels themselves
# run only where a GPU is (make gpu-test).  A plain `make build` compiles CUDA only there.
CUDA_CHECK_ARCH ?= 9.0
cuda-check: venv
	@$(PHASE) cuda-build env TORCH_CUDA_ARCH_LIST="$(CUDA_CHECK_ARCH)" $(CODEGEN) build --cuda --no-generate --build-dir build/cuda
	@$(PHASE) cuda-pytest sh -c 'OPWRAP_LIBRARY=build/cuda/_C.so $(PY) -m pytest -q -p no:cacheprovider tests/test_cuda.py; rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "pytest collected no tests" >&2; exit 1; fi; exit $$rc'

# The CPU kernels built with AddressSanitizer and UndefinedBehaviorSanitizer (build/sanitize),
# and the op tests run on them: any report aborts the run, so passing means zero reports.
# The sanitizer runtime is preloaded into python; leak checking is off (CPython and torch
# keep allocations until exit) and a failed huge allocation returns NULL as malloc does
# (the misuse tests ask for terabytes and expect torch's out-of-memory error).  The tests of
# conftest's `sharedlib` are left out: that library is a test library built without the
# sanitizers, so running it here would only compile it again.
ASAN_TESTS ?= -m "not sharedlib" tests/test_ops.py tests/test_misuse.py tests/test_pointwise.py tests/test_declared_ops.py \
  tests/test_autograd.py tests/test_classes.py tests/test_vmap.py tests/test_autocast.py tests/test_pt2.py
test-asan: venv
	@$(PHASE) asan-build $(CODEGEN) build --sanitize --no-generate
	@$(PHASE) asan-pytest sh -c 'runtime=$$($(PY) -c "from opwrap_codegen.build import sanitizer_runtime; print(sanitizer_runtime() or \"\")"); \
	  [ -n "$$runtime" ] || { echo "no AddressSanitizer runtime (libasan.so) for this compiler" >&2; exit 1; }; \
	  LD_PRELOAD=$$runtime ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 OPWRAP_LIBRARY=build/sanitize/_C.so \
	  $(PY) -m pytest -q -p no:cacheprovider -n logical --dist loadgroup --basetemp=$(PYTEST_TMP)-asan $(ASAN_TESTS); rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "pytest collected no tests" >&2; exit 1; fi; exit $$rc'

# pytest exits 5 when it collected no tests: that is a failure here, not a pass.  The suite
# runs on every core (pytest-xdist, `-n logical`; PYTEST_ARGS=-n0 runs it in one process):
# --dist loadgroup hands out one test at a time, in collection order, which tests/conftest.py
# starts with the slowest (`slow` marks), and keeps each `xdist_group` on one worker.
# Each checkout's runs keep their temporary directories apart (pytest's default, one
# /tmp/pytest-of-<user>, keeps the last 3 runs of any checkout, and deletes the directories
# of a run still going in another).
PYTEST_TMP ?= $(or $(TMPDIR),/tmp)/opwrap-pytest-$(shell printf '%s' '$(CURDIR)' | cksum | cut -d' ' -f1)
# Each run ends with the pytest phase against its budget, PYTEST_BUDGET seconds, the CPU
# seconds it took (all its processes: on a shared machine the steadier figure; 2 cores x 280 s
# is its ceiling) and its ten slowest items (tests/conftest.py).  The budget is `make test`'s 420 s on a fresh clone of a
# 2-core machine less what comes before pytest there (venv, drift check, build: ~140 s).
PYTEST_BUDGET ?= 280
pytest: venv
	@$(PHASE) pytest sh -c 'OPWRAP_PYTEST_BUDGET=$(PYTEST_BUDGET) $(PY) -m pytest -q -n logical --dist loadgroup --basetemp=$(PYTEST_TMP) $(PYTEST_ARGS); rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "pytest collected no tests" >&2; exit 1; fi; exit $$rc'

# The tests that compile no library of their own (`-m "not slow"`), on the library `make build`
# compiled: one area in seconds, e.g. `make test-fast PYTEST_ARGS=tests/test_pointwise.py`.
test-fast: build
	@$(PHASE) pytest-fast sh -c '$(PY) -m pytest -q -n logical --dist loadgroup -m "not slow" --basetemp=$(PYTEST_TMP)-fast $(PYTEST_ARGS); rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "pytest collected no tests" >&2; exit 1; fi; exit $$rc'

# Speed, side by side with what opwrap replaces, as ratios (benchmarks/bench.py).
bench: build
	@$(PHASE) bench $(PY) benchmarks/bench.py

# The generalization survey (codegen/survey.py): every schema of torch's own
# native_functions.yaml declared with a stub kernel in a throwaway `codegen init` library,
# generated and compiled (large units, at low priority); prints how many are accepted and
# compile, and the reasons for the rest, grouped.  SURVEY_ARGS, e.g. `--sample` or `--json FILE`.
survey: venv
	@$(PHASE) survey $(PY) -m opwrap_codegen.survey $(SURVEY_ARGS)

# On a machine with a GPU: build with CUDA (an error if it cannot be built), run the CUDA
# tests (every op and dtype against the CPU kernel) and the CUDA benchmark against aten
# (scripts/gpu-test), then the same for the bundled library's stable-target build (the CUDA
# tests of the ops it holds, and the benchmark).  With no .venv it uses the machine's python3
# and its torch, offline: the lent GPU machines (torch 2.11, no network, no Rust) take a copy
# of the working tree with build/gpu-prep (`make gpu-prep` here: the toolchain's wheel, the
# crates' static libraries and the stable build).
GPU_PYTHON ?= $(if $(wildcard $(PY)),$(abspath $(PY)),python3)
gpu-test:
	@PYTHON=$(GPU_PYTHON) scripts/gpu-test

# What a machine without network or Rust needs for `make gpu-test`: build/gpu-prep/ with the
# toolchain's wheel, crates/ (the crates' static libraries: $$OPWRAP_PREBUILT_CRATES) and stable/,
# the bundled library's stable-target CUDA build made here, against this venv's torch, for
# $$TORCH_CUDA_ARCH_LIST (default 9.0: the lent H100 and H200): the one binary that the GPU
# machine's other torch release then loads and tests (gpu-test's stable half).
GPU_ARCHS ?= 9.0
gpu-prep: build
	@rm -rf build/gpu-prep && mkdir -p build/gpu-prep/crates build/gpu-prep/stable && \
	  cp build/cargo/release/lib*.a build/gpu-prep/crates/ && \
	  $(PY) -m pip wheel -q --no-deps --no-build-isolation -w build/gpu-prep ./toolchain && \
	  TORCH_CUDA_ARCH_LIST="$${TORCH_CUDA_ARCH_LIST:-$(GPU_ARCHS)}" $(CODEGEN) build --target stable \
	    --leave-out-unsupported --cuda --no-generate --build-dir build/stable-gpu && \
	  cp -r build/stable-gpu/stable/_C.so build/stable-gpu/stable/_C.json build/stable-gpu/stable/generated \
	    build/gpu-prep/stable/ && ls build/gpu-prep build/gpu-prep/stable

# `make clean` also removes this checkout's test folders (PYTEST_TMP and its -asan and -fast
# siblings: about 6 GB after `make test`, most of it the shipping test's venvs, whose torch is
# hard links into uv's cache); `make clean-test-tmp` those alone (.ci/run, when it ends).
clean: clean-test-tmp
	rm -rf build toolchain/build

clean-test-tmp:
	rm -rf $(PYTEST_TMP) $(PYTEST_TMP)-asan $(PYTEST_TMP)-fast
