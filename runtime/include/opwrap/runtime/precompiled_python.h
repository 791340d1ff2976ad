// The headers of the fast Python bindings (generated/python/_fast.cpp), which start with it:
// CPython's and torch's Python headers are most of that unit's compile time, and `codegen
// build` precompiles this header as it does precompiled.h (opwrap_codegen.build
// .precompiled_header), once per compiler, Python, torch and options, shared by every
// library.  Python.h comes first, as CPython requires.
#pragma once

#include <Python.h>

#include <ATen/PythonTorchFunctionTLS.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/Scalar.h>
#include <torch/csrc/Device.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/Generator.h>
#include <torch/csrc/Layout.h>
#include <torch/csrc/MemoryFormat.h>
#include <torch/csrc/autograd/python_variable.h>
