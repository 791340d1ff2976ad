// The CUDA loop of generated pointwise kernels (templates/pointwise/cuda.cu.j2) for one layout
// that aten's gpu_kernel runs slowly: every tensor contiguous except inputs broadcast along
// the leading dimensions, as a bias [C] against x [R, C] (or [B, T, C]).
//
// TensorIterator coalesces such an iterator into two dimensions, [C, R], in which the bias's
// outer stride is 0.  It is then not is_contiguous(), so gpu_kernel takes its general path:
// an OffsetCalculator (a division per dimension) for every element and element-wise loads,
// no 16-byte vectors.  launch_broadcast_rows runs it as one flat range of R * C elements
// instead, with the loop both targets share (opwrap/shared/pointwise_flat.cuh: 16-byte vectors,
// the broadcast inputs by column).  aten has no such loop to reuse: its vectorized kernel takes
// contiguous operands only and its offset calculators compute an offset per element.
//
// It refuses (returns false, and the caller runs gpu_kernel) any other layout, a dtype other
// than scalar_t on any operand (gpu_kernel casts those), misaligned data, and more than 2^31
// elements (gpu_kernel splits those into 32-bit pieces).
//
// Of internal linkage, as pointwise.h.
#pragma once

#include <ATen/TensorIterator.h>
#include <ATen/OpMathType.h>
#include <c10/core/ScalarType.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>

#include <cstdint>

#include <opwrap/runtime/pointwise.h>
#include <opwrap/shared/pointwise_flat.cuh>

namespace opwrap::pw::cuda {
namespace {

// Runs `f(const opmath_t* inputs)` (returning opmath_t, or Values<opmath_t, kOut>) over `iter`
// when its layout is the one above, and says whether it did.
template <typename scalar_t, int kOut, int kIn, typename func_t>
bool launch_broadcast_rows(at::TensorIteratorBase& iter, const func_t& f) {
  constexpr int N = kOut + kIn;
  constexpr int64_t kSize = sizeof(scalar_t);
  if (iter.ndim() != 2 || iter.noutputs() != kOut || iter.ninputs() != kIn) return false;
  char* data[N];
  int64_t inner[N], outer[N];  // element strides along a row and across rows
  for (int k = 0; k < N; ++k) {
    if (iter.dtype(k) != c10::CppTypeToScalarType<scalar_t>::value) return false;
    const auto strides = iter.strides(k);  // in bytes, the inner dimension first
    if (strides[0] % kSize != 0 || strides[1] % kSize != 0) return false;
    data[k] = static_cast<char*>(iter.data_ptr(k));
    inner[k] = strides[0] / kSize;
    outer[k] = strides[1] / kSize;
  }
  flat::Operands<N> a{};
  if (!flat::plan<scalar_t, kOut, kIn>(a, data, inner, outer, iter.numel(), iter.shape()[0], /*need_broadcast=*/true)) {
    return false;
  }
  C10_CUDA_CHECK((flat::launch<scalar_t, at::opmath_type<scalar_t>, kOut, kIn>(
      a, iter.numel(), iter.shape()[0], f, c10::cuda::getCurrentCUDAStream())));
  return true;
}

}  // namespace
}  // namespace opwrap::pw::cuda
