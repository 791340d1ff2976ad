// The one place where opwrap's C++ (runtime headers and generated sources) differs between the
// torch releases it supports (2.11 to 2.15, README "Torch releases"), keyed on torch's own
// version macros.  Generated code and the other runtime headers use the names below and never
// test TORCH_VERSION_* themselves; the Python side of the same table is
// opwrap_codegen.pyruntime.TORCH_FEATURES.
#pragma once

#include <torch/headeronly/version.h>  // TORCH_VERSION_MAJOR / _MINOR, in every supported release

#include <memory>
#include <utility>

#include <c10/util/intrusive_ptr.h>

// Whether the torch compiled against is release major.minor or newer.
#define OPWRAP_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

#if !OPWRAP_TORCH_AT_LEAST(2, 11)
#error "opwrap supports torch 2.11 and newer"
#endif

// ---- at::Tag values that older releases lack --------------------------------------------------
// `inplace` and `out` came with torch 2.13's support for tagged in-place and out= custom ops
// (pytorch#180851).  Before it, an op is defined without the tag: eager calls, autograd and
// opcheck's eager checks work; torch.compile / torch.export of the op's written arguments do
// not (README "Torch releases").
#if OPWRAP_TORCH_AT_LEAST(2, 13)
#define OPWRAP_TAG_INPLACE at::Tag::inplace
#define OPWRAP_TAG_OUT at::Tag::out
#else
#define OPWRAP_TAG_INPLACE
#define OPWRAP_TAG_OUT
#endif

namespace opwrap::rt {

// ---- autograd Node ownership ------------------------------------------------------------------
// torch 2.13 moved autograd's Node from std::shared_ptr to c10::intrusive_ptr (Edge, set_history
// and collect_next_edges take the new pointer).  NodePtr<T> is whichever the release uses, and
// make_node<T>() makes one as torchgen's VariableType kernels of that release do.
#if OPWRAP_TORCH_AT_LEAST(2, 13)
template <typename T>
using NodePtr = c10::intrusive_ptr<T>;

template <typename T>
NodePtr<T> make_node() {
  return c10::make_intrusive<T>();
}
#else
template <typename T>
using NodePtr = std::shared_ptr<T>;

template <typename T>
NodePtr<T> make_node() {
  // torch::autograd::deleteNode (autograd/function.h, which the caller includes) frees a chain
  // of Nodes without recursion; found by argument-dependent lookup when T is instantiated.
  return std::shared_ptr<T>(new T(), [](T* node) { deleteNode(node); });
}
#endif

}  // namespace opwrap::rt

// ---- TensorIteratorBase::set_output_raw_strided ----------------------------------------------
// Before torch 2.13 the hook also took the outputs' dimension names (always empty for the
// iterators opwrap builds).  Spliced after the TensorOptions parameter of an override.
#if OPWRAP_TORCH_AT_LEAST(2, 13)
#define OPWRAP_SET_OUTPUT_NAMES_PARAM
#else
#define OPWRAP_SET_OUTPUT_NAMES_PARAM , at::DimnameList /*names*/
#endif
