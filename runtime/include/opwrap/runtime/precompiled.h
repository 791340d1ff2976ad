// The torch headers that most generated units include, first in each unit that may share a
// precompiled copy of them (autograd, wrapper and autocast units, the DEFAULT units of the
// pointwise and row-wise loops, and the fast Python bindings, whose Python headers follow it:
// torch's own extensions include Python.h after the standard headers too, which g++'s
// _GNU_SOURCE makes safe; not CPU-capability units, whose instruction set must be set
// before any header).  So it must include neither at::vec nor TensorIterator: the DEFAULT
// units pick their CPU_CAPABILITY namespace (cpu_capability.h) after it.  Parsing these is most of such a
// unit's compile time (docs/architecture.md, "Precompiled torch headers"),
// so `codegen build` precompiles this header once per compiler, torch and flags, in the
// user's cache (opwrap_codegen.build.precompiled_header), shared by every library built
// with them.  Without that (another compiler, OPWRAP_PCH=0) it is an ordinary header.
#pragma once

#include <ATen/ExpandUtils.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/List.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros_like.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/saved_variable.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/library.h>
