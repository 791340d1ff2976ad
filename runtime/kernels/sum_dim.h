// Hand-written kernel of opwrap::sum_dim, aten's sum.dim_IntList: the sum of self over the
// dimensions `dim` names, each element first converted to the result's dtype (as torch.sum
// with dtype= converts its input), accumulated in at::acc_type (double for float32 on the
// CPU, int64 for int64).  The wrapper has checked `dim` and allocated the result from the
// shape rule reduce(self, dim, keepdim), so the kernel only sums.
//
// Not a TensorIterator reduction: aten's CPU reduction loops (binary_kernel_reduce_vec,
// ATen/native/cpu/Reduce.h) are internal headers compiled per CPU capability inside aten, and
// an extension compiling them gets neither the dispatch nor a stable API.  Instead self is
// laid out as a contiguous (kept, reduced) matrix (a view when the reduced dimensions are
// already the last of a contiguous self, one copy otherwise) and each row is summed with
// eight independent accumulators, parallel over rows (or, for one row, over its chunks).
#pragma once

#include <ATen/AccumulateType.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <c10/core/SymIntArrayRef.h>
#include <c10/util/TypeCast.h>

#include <opwrap/runtime/shape_checks.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

namespace opwrap::kernels {

// self as a contiguous (outer, inner) matrix: the kept dimensions first, in order (so row i
// is element i of the contiguous result), then the reduced ones.
inline at::Tensor rows_to_sum(const at::Tensor& self, at::OptionalIntArrayRef dim) {
  const std::vector<int64_t> reduced = opwrap::rt::reduced_dims(self.dim(), dim);
  std::vector<bool> is_reduced(static_cast<size_t>(self.dim()), false);
  for (const int64_t d : reduced) is_reduced[static_cast<size_t>(d)] = true;
  std::vector<int64_t> perm;
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < self.dim(); ++i) {
    if (!is_reduced[static_cast<size_t>(i)]) {
      perm.push_back(i);
      outer *= self.size(i);
    }
  }
  for (int64_t i = 0; i < self.dim(); ++i) {
    if (is_reduced[static_cast<size_t>(i)]) {
      perm.push_back(i);
      inner *= self.size(i);
    }
  }
  return self.permute(perm).reshape({outer, inner}).contiguous();
}

// The sum of n elements converted to result_t, in acc_t, with eight accumulators.
template <typename acc_t, typename result_t, typename scalar_t>
acc_t sum_converted(const scalar_t* p, int64_t n) {
  acc_t acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) {
      acc[k] += static_cast<acc_t>(c10::static_cast_with_inter_type<result_t, scalar_t>::apply(p[i + k]));
    }
  }
  for (; i < n; ++i) acc[0] += static_cast<acc_t>(c10::static_cast_with_inter_type<result_t, scalar_t>::apply(p[i]));
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

template <typename scalar_t, typename result_t>
void sum_dim_cpu(const at::Tensor& self, at::OptionalIntArrayRef dim, bool /*keepdim*/,
                 std::optional<at::ScalarType> /*dtype*/, at::Tensor& result) {
  using acc_t = at::acc_type<result_t, /*is_cuda=*/false>;
  const at::Tensor rows = rows_to_sum(self, dim);
  const int64_t outer = rows.size(0), inner = rows.size(1);
  const scalar_t* in = rows.const_data_ptr<scalar_t>();
  result_t* out = result.mutable_data_ptr<result_t>();
  constexpr int64_t kGrain = 32768;  // elements a task, as aten's internal grain size
  if (outer == 1) {
    const acc_t total = at::parallel_reduce(0, inner, kGrain, acc_t(0), [&](int64_t begin, int64_t end, acc_t) {
      return sum_converted<acc_t, result_t>(in + begin, end - begin);
    }, std::plus<acc_t>());
    out[0] = static_cast<result_t>(total);  // one row: the result's one element
    return;
  }
  at::parallel_for(0, outer, std::max<int64_t>(1, kGrain / std::max<int64_t>(inner, 1)), [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) out[o] = static_cast<result_t>(sum_converted<acc_t, result_t>(in + o * inner, inner));
  });
}

// The gradient of sum_dim: grad, with the dimensions that keepdim=False dropped put back as
// 1s, expanded to self's sizes (torchgen's sum_backward).
inline at::Tensor sum_dim_backward(const at::Tensor& grad, c10::SymIntArrayRef sizes, at::OptionalIntArrayRef dim,
                                   bool keepdim) {
  at::Tensor g = grad;
  if (!keepdim) {
    std::vector<int64_t> reduced = opwrap::rt::reduced_dims(static_cast<int64_t>(sizes.size()), dim);
    std::sort(reduced.begin(), reduced.end());
    for (const int64_t d : reduced) g = g.unsqueeze(d);
  }
  return g.expand_symint(sizes);
}

}  // namespace opwrap::kernels
